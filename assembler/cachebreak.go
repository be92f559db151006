package assembler

import (
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"unsafe"
)

// The reasons of a CacheReport: why the prompt's prefix shared with the previous assembly's ended
// before the end of the previous assembly's history.
const (
	CacheFirstAssembly      = "first_assembly"        // there is no previous assembly to compare with
	CacheFormatChanged      = "format_changed"        // the previous assembly was for another format or model
	CacheToolsChanged       = "tools_changed"         // a tool definition was added, removed or changed
	CacheInstructionsEdited = "instructions_edited"   // the instructions' text changed
	CachePinnedChanged      = "pinned_memory_changed" // a pinned memory fact was set, changed or removed
	CacheCompaction         = "compaction"            // the session's summary changed (or came or went)
	CacheCutMoved           = "history_cut_moved"     // the kept history starts at another message
	CacheHistoryRewritten   = "history_rewritten"     // a kept message reads otherwise (a tool result cleared, say)
)

// CacheReport says how much of an assembly's prompt is byte-identical, from its start, to the previous
// assembly's for the same session (Request.CachePrevious), and, if the shared prefix ends before the end of
// the previous assembly's history, where and why.
//
// The prompt is compared part by part, in the order the providers read it: the tools, the instructions,
// pinned memory, the summary, then the history. SharedTokens adds up the parts that are the same (as the
// report's regions count them; for the history, the previous assembly's history when this one's starts
// with all of it). Region is the first part that differs ("" when none does, or for the first assembly),
// Reason one of the Cache* reasons.
type CacheReport struct {
	SharedTokens int    `json:"shared_tokens"`
	Region       string `json:"region,omitempty"`
	Reason       string `json:"reason,omitempty"`
}

// CacheState is what an assembly leaves for the next one's CacheReport: the format and model, and the
// hash and token count of each stable part of the prompt. It holds no text of the prompt, and its size does
// not grow with the session.
type CacheState struct {
	Format string      `json:"format"`
	Model  string      `json:"model"`
	Parts  []CachePart `json:"parts"` // tools, instructions, memory (pinned), summary: those the prompt has
	// History is the kept history: how many messages, their tokens, the hash of the first one and of all
	// of them.
	History CacheHistory `json:"history"`
}

// CachePart is one stable part of a prompt: its region, the hex of a 64-bit hash of its bytes, and its
// tokens.
type CachePart struct {
	Region string `json:"region"`
	Hash   string `json:"hash"`
	Tokens int    `json:"tokens"`
}

// CacheHistory is the kept history of a CacheState.
type CacheHistory struct {
	Messages int    `json:"messages"`
	Tokens   int    `json:"tokens"`
	First    string `json:"first,omitempty"` // the hash of the first kept message
	Hash     string `json:"hash,omitempty"`  // the hash of all the kept messages, in order
}

// cacheParts maps each stable region to its reason for changing.
var cacheReasons = map[string]string{
	RegionTools.String():        CacheToolsChanged,
	RegionInstructions.String(): CacheInstructionsEdited,
	RegionMemory.String():       CachePinnedChanged,
	RegionSummary.String():      CacheCompaction,
}

// castagnoli is the CRC-32C table, which the CPU's instruction computes where it has one.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fieldWriter hashes fields, each prefixed with its length so that no two sequences of fields hash the
// same, through a buffer of its own (a string is appended to it, not converted). The hash is 64 bits: the
// CRC-32C and the CRC-32 (IEEE) of the bytes, which the CPU computes at several GB/s, for the history is
// hashed on every assembly. It tells a changed part from an unchanged one, which is all it is for: a
// prompt is its caller's own, and a collision would only misreport that caller's own cache break.
type fieldWriter struct {
	c, i uint32
	buf  []byte
}

func (w *fieldWriter) field(s string) {
	w.buf = binary.AppendUvarint(w.buf, uint64(len(s)))
	if len(s) < 256 {
		w.buf = append(w.buf, s...)
		return
	}
	// A long text is hashed where it is, not copied: the CRCs only read it.
	w.flush()
	w.update(unsafe.Slice(unsafe.StringData(s), len(s)))
}

func (w *fieldWriter) update(b []byte) {
	w.c = crc32.Update(w.c, castagnoli, b)
	w.i = crc32.Update(w.i, crc32.IEEETable, b)
}

// flush hashes what is buffered.
func (w *fieldWriter) flush() {
	w.update(w.buf)
	w.buf = w.buf[:0]
}

// sum is the hash of what was written, in hex, the buffer flushed.
func (w *fieldWriter) sum() string {
	w.flush()
	var b [8]byte
	binary.BigEndian.PutUint32(b[:4], w.c)
	binary.BigEndian.PutUint32(b[4:], w.i)
	return hex.EncodeToString(b[:])
}

// reset starts another hash.
func (w *fieldWriter) reset() { w.c, w.i, w.buf = 0, 0, w.buf[:0] }

// cacheState computes the assembly's CacheState from its settled plan, with used the regions' tokens, and,
// when prev is not nil, the CacheReport against it. It hashes each stable part and the kept history once,
// through one buffer.
func (a *assembly) cacheState(res *Result, used regionTokens, prev *CacheState) (*CacheState, *CacheReport) {
	st := &CacheState{Format: res.Format, Model: res.Model, Parts: make([]CachePart, 0, 4)}
	var scratch [1024]byte
	w := fieldWriter{buf: scratch[:0]}
	parts := 0 // which of tools, instructions, pinned memory, summary
	pinnedTokens := 0
	for k, r := range [...]Region{RegionTools, RegionInstructions, RegionMemory, RegionSummary} {
		tokens := used[r]
		switch r {
		case RegionTools:
			if a.tools != nil {
				w.field(a.tools.prefixID())
				parts |= 1 << k
			}
		case RegionInstructions:
			if a.instructions != "" {
				w.field(a.instructions)
				parts |= 1 << k
			}
		case RegionMemory:
			for _, it := range a.memory {
				if it.kept && it.pinned {
					pinnedTokens += max(it.cost, 0)
					for _, p := range it.parts {
						w.field(p.Text)
					}
					parts |= 1 << k
				}
			}
			tokens = pinnedTokens
		case RegionSummary:
			for _, p := range a.summary {
				w.field(p.Text)
			}
			if a.summary != nil {
				parts |= 1 << k
			}
		}
		if parts&(1<<k) != 0 {
			st.Parts = append(st.Parts, CachePart{Region: r.String(), Hash: w.sum(), Tokens: tokens})
			w.reset()
		}
	}

	// The history, message by message; the hash of its first prev.History.Messages is kept to compare.
	want := -1
	if prev != nil {
		want = prev.History.Messages
	}
	n, prefixHash := 0, ""
	if want == 0 {
		prefixHash = w.sum()
	}
	for gi := a.keepFrom; gi < len(a.turns); gi++ {
		g := &a.turns[gi]
		msgs, contents := a.msgs(g), a.groupContents(g)
		for i := range msgs {
			m := &msgs[i]
			w.field(m.Role)
			w.field(m.Name)
			w.field(m.ToolCallID)
			w.field(contents[i].Text)
			for _, c := range m.ToolCalls {
				w.field(c.ID)
				w.field(c.Function.Name)
				w.field(c.Function.Arguments)
			}
			for _, p := range m.Parts {
				w.field(p.Type)
				w.field(p.Text)
				if p.Image != nil {
					w.field(p.Image.URL)
					w.field(string(p.Image.Data))
					w.field(p.Image.MediaType)
				}
			}
			n++
			switch {
			case n == 1:
				st.History.First = w.sum()
				if n == want {
					prefixHash = st.History.First
				}
			case n == want:
				prefixHash = w.sum()
			case len(w.buf) >= len(scratch)-256:
				w.flush()
			}
		}
	}
	st.History.Messages, st.History.Tokens = n, used[RegionHistory]
	if n > 0 {
		st.History.Hash = w.sum()
	}
	if prev == nil {
		return st, nil
	}
	return st, compareCache(prev, st, prefixHash)
}

// compareCache is the CacheReport of cur against prev, with prefixHash the hash of cur's first
// prev.History.Messages history messages ("" when it has fewer).
func compareCache(prev, cur *CacheState, prefixHash string) *CacheReport {
	rep := &CacheReport{}
	if prev.Format == "" {
		rep.Reason = CacheFirstAssembly
		return rep
	}
	if prev.Format != cur.Format || prev.Model != cur.Model {
		rep.Reason = CacheFormatChanged
		return rep
	}
	// The stable parts in order: a part that one has and the other has not is a change at that part.
	i, j := 0, 0
	for i < len(prev.Parts) || j < len(cur.Parts) {
		var p, c *CachePart
		if i < len(prev.Parts) {
			p = &prev.Parts[i]
		}
		if j < len(cur.Parts) {
			c = &cur.Parts[j]
		}
		switch {
		case p != nil && c != nil && p.Region == c.Region && p.Hash == c.Hash:
			rep.SharedTokens += c.Tokens
			i, j = i+1, j+1
			continue
		case p == nil || (c != nil && regionOrder(c.Region) < regionOrder(p.Region)):
			rep.Region = c.Region // cur has a part prev had not
		default:
			rep.Region = p.Region // changed, or removed
		}
		rep.Reason = cacheReasons[rep.Region]
		return rep
	}
	ph, ch := &prev.History, &cur.History
	switch {
	case ph.Messages == 0:
	case prefixHash == ph.Hash:
		rep.SharedTokens += ph.Tokens
	default:
		rep.Region = RegionHistory.String()
		rep.Reason = CacheHistoryRewritten
		if ch.First != ph.First {
			rep.Reason = CacheCutMoved
		}
	}
	return rep
}

// regionOrder is where the stable part of the region named r comes in a prompt.
func regionOrder(r string) int {
	for i, reg := range [...]Region{RegionTools, RegionInstructions, RegionMemory, RegionSummary} {
		if reg.String() == r {
			return i
		}
	}
	return 4 // no stable part: after them all
}
