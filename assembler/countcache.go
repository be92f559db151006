package assembler

import (
	"hash/maphash"
	"strconv"
	"sync"
)

// renderedCounts is the cache of the counts of texts that the text format writes otherwise than they are
// stored (a text of more than one line, indented: see textFormat.bodyPart), so that the history an
// assembly meets again at the next turn is not counted again: for each cache scope (Request.CacheScope:
// the tenant's and the agent's in the engine) its own, as the tool sets' (see toolSets), so that no tenant
// can learn by a lookup's speed whether another has assembled a text. An entry is keyed by a 128-bit hash
// of the count key, the count that the store cached of the text as given (a count given wrong is then
// only ever taken for itself) and the text as rendered, and holds the rendered text's exact count.
//
// A scope holds at most maxScopeRenderedCounts counts; when one more would not fit, the scope starts again
// empty. The cache holds at most maxRenderedCounts; when one more would not fit, the scope holding the
// most is dropped whole (what another scope can tell from that is only that someone filled the cache).
// An entry is about 40 bytes: the cache stays under 12 MB.
var renderedCounts = struct {
	sync.RWMutex
	scopes map[string]map[countHash]int32
	n      int
}{scopes: map[string]map[countHash]int32{}}

const maxRenderedCounts, maxScopeRenderedCounts = 1 << 18, 1 << 16

// countHash is a 128-bit hash of a rendered text and what its count is derived from.
type countHash [2]uint64

var countSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

// renderedHash hashes the count key, the count of the text as stored and the text as rendered.
func renderedHash(key string, stored int, rendered string) countHash {
	var h countHash
	var num [20]byte
	n := strconv.AppendInt(num[:0], int64(stored), 10)
	for i, seed := range countSeeds {
		var mh maphash.Hash
		mh.SetSeed(seed)
		mh.WriteString(key)
		mh.WriteByte(0)
		mh.Write(n)
		mh.WriteByte(0)
		mh.WriteString(rendered)
		h[i] = mh.Sum64()
	}
	return h
}

// cachedRenderedCount returns the count kept under h in scope.
func cachedRenderedCount(scope string, h countHash) (int, bool) {
	renderedCounts.RLock()
	defer renderedCounts.RUnlock()
	n, ok := renderedCounts.scopes[scope][h]
	return int(n), ok
}

// keepRenderedCount keeps n under h in scope (see renderedCounts for the bounds).
func keepRenderedCount(scope string, h countHash, n int) {
	renderedCounts.Lock()
	defer renderedCounts.Unlock()
	sc := renderedCounts.scopes[scope]
	if _, ok := sc[h]; ok {
		return
	}
	if len(sc) >= maxScopeRenderedCounts {
		renderedCounts.n -= len(sc)
		sc = nil
	}
	if sc == nil {
		sc = map[countHash]int32{}
		renderedCounts.scopes[scope] = sc
	}
	for renderedCounts.n >= maxRenderedCounts {
		var largest string
		var drop map[countHash]int32
		for name, other := range renderedCounts.scopes {
			if drop == nil || len(other) > len(drop) {
				largest, drop = name, other
			}
		}
		renderedCounts.n -= len(drop)
		if largest == scope {
			sc = map[countHash]int32{}
			renderedCounts.scopes[scope] = sc
			continue
		}
		delete(renderedCounts.scopes, largest)
	}
	sc[h] = int32(n)
	renderedCounts.n++
}
