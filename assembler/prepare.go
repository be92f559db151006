package assembler

import (
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// prepareHistory groups the history into turns that stay or go together (an assistant's tool calls with
// their results), drops orphans, and sets the latest tool exchange apart as required.
func (a *assembly) prepareHistory() {
	h := a.req.History
	answered := map[string]bool{} // call ids that have an assistant call before them
	var groups []*group
	for i := 0; i < len(h); i++ {
		msg := h[i]
		id := "history[" + strconv.Itoa(i) + "]"
		switch {
		case msg.Role == "assistant" && len(msg.ToolCalls) > 0:
			g := &group{msgs: []Message{msg}, ids: []string{id}}
			calls := map[string]bool{}
			for _, c := range msg.ToolCalls {
				calls[c.ID] = true
				answered[c.ID] = true
			}
			for i+1 < len(h) && h[i+1].Role == "tool" && calls[h[i+1].ToolCallID] {
				i++
				g.msgs = append(g.msgs, h[i])
				g.ids = append(g.ids, "history["+strconv.Itoa(i)+"]")
			}
			groups = append(groups, g)
		case msg.Role == "tool":
			// A result whose call is not just before it: an orphan, which providers reject.
			a.dropped[RegionHistory] = append(a.dropped[RegionHistory], Dropped{ID: id, Reason: ReasonOrphan})
		case strings.TrimSpace(msg.Content) == "" && msg.Role != "assistant":
			a.dropped[RegionHistory] = append(a.dropped[RegionHistory], Dropped{ID: id, Reason: ReasonEmpty})
		default:
			groups = append(groups, &group{msgs: []Message{msg}, ids: []string{id}})
		}
	}
	// The latest tool exchange, when the history ends with one, is required: the model is mid-task. So is
	// the user message that asked for it, which a conversation must not start without.
	if n := len(groups); n > 0 && len(groups[n-1].msgs[0].ToolCalls) > 0 {
		k := n - 1
		for k > 0 && groups[k-1].msgs[0].Role != "user" { // the task's earlier steps
			k--
		}
		if k > 0 {
			k-- // the user's request
		} else {
			k = n - 1 // no user message before: the exchange alone
		}
		a.required = groups[k:]
		groups = groups[:k]
	}
	for _, g := range groups {
		g.cost = a.groupCost(g)
	}
	for _, g := range a.required {
		g.cost = a.groupCost(g)
	}
	a.groups = groups
}

// groupCost is what a group's messages cost in the format.
func (a *assembly) groupCost(g *group) int {
	g.contents = make([]part, len(g.msgs))
	n := 0
	for i, msg := range g.msgs {
		g.contents[i] = a.cachedPart(msg.Content, msg.TokenCounts)
		n += a.messageCost(msg.Role, g.contents[i:i+1], msg.Name, msg.ToolCalls, msg.ToolCallID)
	}
	return n
}

// cachedPart is a part for text whose count may be cached under the model's encoding.
func (a *assembly) cachedPart(text string, counts map[string]int) part {
	if n, ok := counts[a.model.Encoding]; ok && a.model.Exact() && n >= 0 {
		return part{text: text, tokens: n}
	}
	return newPart(text)
}

// prepareMemory renders each fact as a line; pinned facts first (they go in the stable prefix), then the
// others, most recently updated first.
func (a *assembly) prepareMemory() {
	facts := slices.Clone(a.req.Memory)
	slices.SortStableFunc(facts, func(x, y MemoryFact) int {
		if x.Pinned != y.Pinned {
			if x.Pinned {
				return -1
			}
			return 1
		}
		return y.UpdatedAt.Compare(x.UpdatedAt)
	})
	for i, f := range facts {
		id := idOf(f.Key, "memory", i)
		if strings.TrimSpace(f.Key) == "" && strings.TrimSpace(f.Value) == "" {
			a.dropped[RegionMemory] = append(a.dropped[RegionMemory], Dropped{ID: id, Reason: ReasonEmpty})
			continue
		}
		it := &ctxItem{id: id, pinned: f.Pinned, order: i}
		it.parts = []part{newPart("- " + escapeText(oneLine(f.Key)) + ": " + escapeText(oneLine(f.Value)) + "\n")}
		it.cost = a.m.join(it.parts)
		a.memory = append(a.memory, it)
	}
}

// prepareToolOutputs renders the session's tool outputs, newest first for selection; one longer than the
// policy's cap keeps its head and tail around a marker.
func (a *assembly) prepareToolOutputs() {
	outs := a.req.ToolOutputs
	for i := len(outs) - 1; i >= 0; i-- {
		o := outs[i]
		id := idOf(o.CallID, "tool_outputs", i)
		result := strings.TrimSpace(o.Result)
		if result == "" {
			result = "(no output)"
		}
		body := escapeText(result)
		if n := a.m.count(body); n > a.policy.MaxToolOutputTokens {
			body = a.cutMiddle(body, n, a.policy.MaxToolOutputTokens)
			a.dropped[RegionToolOutputs] = append(a.dropped[RegionToolOutputs], Dropped{ID: id, Reason: ReasonTruncated})
		}
		open := "<tool_output tool=\"" + escapeAttr(o.Tool) + "\""
		if o.CallID != "" {
			open += " call_id=\"" + escapeAttr(o.CallID) + "\""
		}
		open += " trusted=\"false\">\n"
		it := &ctxItem{id: id, order: i}
		it.parts = []part{newPart(open), newPart(body), newPart(" \n</tool_output>\n\n")}
		it.cost = a.m.join(it.parts)
		a.toolOuts = append(a.toolOuts, it)
	}
}

// cutMiddle keeps the head and tail of text (n tokens) within limit tokens, with a marker between them.
func (a *assembly) cutMiddle(text string, n, limit int) string {
	enc, ok := a.m.counter.(interface{ Truncate(string, int) string })
	keep := (limit - 16) / 2
	if !ok || keep <= 0 {
		r := []rune(text)
		k := len(r) * max(keep, 1) / max(n, 1)
		return string(r[:k]) + "\n[... cut ...]\n" + string(r[len(r)-k:])
	}
	head := enc.Truncate(text, keep)
	// The tail: the shortest suffix within keep tokens, found by halving.
	lo, hi := len(head), len(text) // the suffix text[s:] for s in [lo, hi]
	for lo < hi {
		mid := (lo + hi) / 2
		for mid < hi && !isRuneStart(text, mid) {
			mid++
		}
		if mid < hi && a.m.count(text[mid:]) <= keep {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	omitted := n - a.m.count(head) - a.m.count(text[hi:])
	return head + "\n[... " + strconv.Itoa(max(omitted, 0)) + " tokens cut ...]\n" + text[hi:]
}

func isRuneStart(s string, i int) bool { return i >= len(s) || s[i]&0xC0 != 0x80 }

// prepareKnowledge filters, deduplicates and orders knowledge by score, and renders each item.
func (a *assembly) prepareKnowledge() {
	type cand struct {
		k       Knowledge
		id      string
		index   int
		content string
	}
	var cands []cand
	for i, k := range a.req.Knowledge {
		id := idOf(k.ID, "knowledge", i)
		content := strings.TrimSpace(k.Content)
		switch {
		case content == "":
			a.dropped[RegionKnowledge] = append(a.dropped[RegionKnowledge], Dropped{ID: id, Reason: ReasonEmpty})
		case a.policy.MinScore != 0 && k.Score < a.policy.MinScore:
			a.dropped[RegionKnowledge] = append(a.dropped[RegionKnowledge], Dropped{ID: id, Reason: ReasonMinScore})
		default:
			cands = append(cands, cand{k, id, i, content})
		}
	}
	slices.SortStableFunc(cands, func(x, y cand) int { return cmp.Compare(y.k.Score, x.k.Score) })

	seen := map[[32]byte]bool{}
	var shingles []map[uint64]bool
	for _, c := range cands {
		sum := sha256.Sum256([]byte(normalizeSpace(c.content)))
		if seen[sum] {
			a.dropped[RegionKnowledge] = append(a.dropped[RegionKnowledge], Dropped{ID: c.id, Reason: ReasonDuplicate})
			continue
		}
		seen[sum] = true
		if a.policy.NearDuplicate < 1 {
			sh := shingleSet(c.content)
			near := false
			for _, other := range shingles {
				if jaccard(sh, other) >= a.policy.NearDuplicate {
					near = true
					break
				}
			}
			if near {
				a.dropped[RegionKnowledge] = append(a.dropped[RegionKnowledge], Dropped{ID: c.id, Reason: ReasonNearDuplicate})
				continue
			}
			shingles = append(shingles, sh)
		}
		typ := c.k.Type
		if typ == "" {
			typ = "rag"
		}
		open := " <context type=\"" + escapeAttr(typ) + "\""
		if c.k.Source != "" {
			open += " source=\"" + escapeAttr(c.k.Source) + "\""
		}
		open += " trusted=\"" + strconv.FormatBool(c.k.Trusted) + "\">\n"
		body := part{text: escapeText(c.content), tokens: -1}
		if body.text == c.k.Content { // rendered unchanged: a cached count applies
			body = a.cachedPart(body.text, c.k.TokenCounts)
		}
		it := &ctxItem{id: c.id, order: c.index, ref: &Reference{
			ID: c.k.ID, DocumentID: c.k.DocumentID, Source: c.k.Source, Score: c.k.Score,
			StartOffset: c.k.StartOffset, EndOffset: c.k.EndOffset, Metadata: c.k.Metadata,
		}}
		// The marker "[n]" is a part of its own: it changes with the order, the rest does not.
		it.parts = []part{newPart(""), newPart(open), body, newPart(" \n</context>\n\n")}
		it.cost = a.m.join(it.parts[1:]) + a.markerCost(len(a.knowledge)+1)
		a.knowledge = append(a.knowledge, it)
	}
}

// markerCost is the count of "[n]".
func (a *assembly) markerCost(n int) int {
	return a.m.countShort(marker(n))
}

func marker(n int) string { return "[" + strconv.Itoa(n) + "]" }

// normalizeSpace collapses runs of whitespace, for duplicate detection.
func normalizeSpace(s string) string { return strings.Join(strings.Fields(strings.ToLower(s)), " ") }

// shingleSet returns the hashed word 3-shingles of s.
func shingleSet(s string) map[uint64]bool {
	words := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
	set := map[uint64]bool{}
	if len(words) < 3 {
		set[hashWords(words)] = true
		return set
	}
	for i := 0; i+3 <= len(words); i++ {
		set[hashWords(words[i:i+3])] = true
	}
	return set
}

func hashWords(words []string) uint64 {
	h := uint64(14695981039346656037)
	for _, w := range words {
		for i := 0; i < len(w); i++ {
			h = (h ^ uint64(w[i])) * 1099511628211
		}
		h = (h ^ ' ') * 1099511628211
	}
	return h
}

func jaccard(a, b map[uint64]bool) float64 {
	if len(a) > len(b) {
		a, b = b, a
	}
	inter := 0
	for k := range a {
		if b[k] {
			inter++
		}
	}
	union := len(a) + len(b) - inter
	if union == 0 {
		return 1
	}
	return float64(inter) / float64(union)
}

// toolCallsJSON is the JSON of tool calls as sent, for counting.
func toolCallsJSON(calls []ToolCall) string {
	if len(calls) == 0 {
		return ""
	}
	b, _ := json.Marshal(calls)
	return string(b)
}

// oneLine replaces line breaks so a fact stays on its line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
