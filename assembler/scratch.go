package assembler

import (
	"sync"

	"github.com/context-loom/loom/tokenizer"
)

// scratch is an assembly's working memory that no Result refers to: the knowledge candidates and their
// parts, the history turns and their contents. Assemblies take it from a pool and give it back emptied
// (see assembly.release), so that a request of the same size allocates none of it again.
type scratch struct {
	items     []ctxItem
	parts     []tokenizer.Part
	order     []ranked
	knowledge []*ctxItem
	contents  []tokenizer.Part
	msgCosts  []int32
	turns     []group
}

// ranked is a knowledge candidate's place in the order by score.
type ranked struct {
	score float64
	item  int32
}

// scratches holds emptied scratches: their slices are zero up to their length, and hold no references.
var scratches = sync.Pool{New: func() any { return new(scratch) }}

// maxPooledItems is the most knowledge items or history messages a scratch may have held and still go
// back to the pool: one that grew for an unusual request is left to the collector.
const maxPooledItems = 1 << 14

func getScratch() *scratch { return scratches.Get().(*scratch) }

// putScratch empties sc and gives it back to the pool; sc must not be used after.
func putScratch(sc *scratch) {
	if cap(sc.items) > maxPooledItems || cap(sc.contents) > maxPooledItems {
		return
	}
	clear(sc.items)
	clear(sc.parts)
	clear(sc.knowledge)
	clear(sc.contents)
	// order, msgCosts and turns hold no references, and are written before they are read.
	sc.items, sc.parts, sc.order, sc.knowledge, sc.contents, sc.msgCosts, sc.turns = sc.items[:0], sc.parts[:0], sc.order[:0], sc.knowledge[:0], sc.contents[:0], sc.msgCosts[:0], sc.turns[:0]
	scratches.Put(sc)
}

// sized returns s with length n: s itself if it has the room (its elements zero if s came emptied from
// the pool), else a new slice.
func sized[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
