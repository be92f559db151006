package assembler

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
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

// CachePart is one stable part of a prompt: its region, the hex of a hash of its bytes, and its tokens.
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

// partHash is the hex of the first 16 bytes of h's sum.
func partHash(h hash.Hash) string {
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:16])
}

// writeField writes s to h prefixed with its length, so that no two sequences of fields hash the same.
func writeField(h hash.Hash, s string) {
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
	h.Write([]byte(s))
}

// cacheState computes the assembly's CacheState from its settled plan, with used the regions' tokens, and,
// when prev is not nil, the CacheReport against it.
func (a *assembly) cacheState(res *Result, used regionTokens, prev *CacheState) (*CacheState, *CacheReport) {
	st := &CacheState{Format: res.Format, Model: res.Model, Parts: make([]CachePart, 0, 4)}
	h := sha256.New()
	part := func(r Region, tokens int, write func()) {
		h.Reset()
		write()
		st.Parts = append(st.Parts, CachePart{Region: r.String(), Hash: partHash(h), Tokens: tokens})
	}
	if a.tools != nil {
		part(RegionTools, used[RegionTools], func() { writeField(h, a.tools.prefixID()) })
	}
	if a.instructions != "" {
		part(RegionInstructions, used[RegionInstructions], func() { writeField(h, a.instructions) })
	}
	pinned, pinnedTokens := false, 0
	for _, it := range a.memory {
		if it.kept && it.pinned {
			pinned = true
			pinnedTokens += max(it.cost, 0)
		}
	}
	if pinned {
		part(RegionMemory, pinnedTokens, func() {
			for _, it := range a.memory {
				if it.kept && it.pinned {
					for _, p := range it.parts {
						writeField(h, p.Text)
					}
				}
			}
		})
	}
	if a.summary != nil {
		part(RegionSummary, used[RegionSummary], func() {
			for _, p := range a.summary {
				writeField(h, p.Text)
			}
		})
	}

	// The history, message by message; the hash of its first prev.History.Messages is kept to compare.
	want := -1
	if prev != nil {
		want = prev.History.Messages
	}
	h.Reset()
	n, prefixHash := 0, ""
	if want == 0 {
		prefixHash = partHash(h)
	}
	for gi := a.keepFrom; gi < len(a.turns); gi++ {
		g := &a.turns[gi]
		msgs, contents := a.msgs(g), a.groupContents(g)
		for i := range msgs {
			m := &msgs[i]
			writeField(h, m.Role)
			writeField(h, m.Name)
			writeField(h, m.ToolCallID)
			writeField(h, contents[i].Text)
			for _, c := range m.ToolCalls {
				writeField(h, c.ID)
				writeField(h, c.Function.Name)
				writeField(h, c.Function.Arguments)
			}
			for _, p := range m.Parts {
				writeField(h, p.Type)
				writeField(h, p.Text)
				if p.Image != nil {
					writeField(h, p.Image.URL)
					writeField(h, string(p.Image.Data))
					writeField(h, p.Image.MediaType)
				}
			}
			n++
			if n == 1 {
				st.History.First = partHash(h)
			}
			if n == want {
				prefixHash = partHash(h)
			}
		}
	}
	st.History.Messages, st.History.Tokens = n, used[RegionHistory]
	if n > 0 {
		st.History.Hash = partHash(h)
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
