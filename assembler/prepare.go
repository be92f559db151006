package assembler

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/internal/xmltext"

	"github.com/context-loom/loom/tokenizer"
)

// prepareMarkup checks a request for a format of Loom's markup (openai, responses, anthropic, gemini, text) and makes its
// candidates: the history's turns, the memory facts, the tool outputs and the knowledge, each in its tag.
func (a *assembly) prepareMarkup() error {
	req := a.req
	if err := validateHistory(req.History); err != nil {
		return err
	}
	if err := a.prepareParts(); err != nil {
		return err
	}
	a.message, a.hasMessage = req.Message, req.Message != ""
	if req.Message != "" && loom.IsBlank(req.Message) { // nothing to send: no message
		a.message, a.hasMessage = "", false
		a.dropped[RegionMessage] = []Dropped{{ID: "message", Reason: ReasonEmpty}}
	}
	if err := a.prepareMessage(); err != nil {
		return err
	}
	// Instructions that are only white space say nothing either, and a provider may refuse them as a
	// system prompt of white space (the Messages API refuses text blocks of white space).
	a.instructions = req.Instructions
	if req.Instructions != "" && loom.IsBlank(req.Instructions) {
		a.instructions = ""
		a.dropped[RegionInstructions] = []Dropped{{ID: "instructions", Reason: ReasonEmpty}}
	}
	var err error
	if a.tools, err = cachedToolSet(req.CacheScope, req.Tools); err != nil { // checked when the set is made
		return err
	}
	if err := req.ToolChoice.check(req.Tools); err != nil {
		return err
	}
	for i, o := range req.ToolOutputs {
		if err := CheckToolName(o.Tool); err != nil {
			return fmt.Errorf("tool_outputs[%d]: %w", i, err)
		}
	}
	for _, msg := range req.History {
		for _, call := range msg.ToolCalls {
			if a.callNames == nil {
				a.callNames = map[string]string{}
			}
			if len(call.Function.Name) > len(a.callNames[call.ID]) { // ids used twice: err high
				a.callNames[call.ID] = call.Function.Name
			}
		}
	}
	if a.instructions != "" {
		a.instructionIDs = []string{"instructions"}
	}
	if err := a.prepareSummary(); err != nil {
		return err
	}
	a.prepareHistory()
	a.clearToolResults()
	if len(a.required) > 0 && a.msgs(&a.required[0])[0].Role != "user" {
		return fmt.Errorf("%w: history[%d] is the assistant's tool call that starts it, and a conversation starts with the user's message",
			ErrNoUserTurn, a.required[0].first)
	}
	a.prepareMemory()
	a.prepareToolOutputs()
	a.prepareKnowledge()
	return nil
}

// conversationSummary is the element of a running summary, always untrusted, with the seqs it covers
// when they are known.
func conversationSummary(s *Summary) elem {
	attrs := make([]string, 0, 6)
	if s.From > 0 && s.To > 0 {
		attrs = append(attrs, "from", strconv.FormatInt(s.From, 10), "to", strconv.FormatInt(s.To, 10))
	}
	return elem{openTag("conversation_summary", append(attrs, "trusted", "false")...), "conversation_summary"}
}

// prepareSummary checks the request's summary and renders it: its element, its text escaped as the
// format writes a tag's text. A summary that covers messages needs a text; a blank one that covers none
// says nothing and is not rendered.
func (a *assembly) prepareSummary() error {
	s := a.req.Summary
	if s == nil {
		return nil
	}
	if s.Covers < 0 || s.Covers > len(a.req.History) {
		return fmt.Errorf("%w: the summary covers %d messages of a history of %d", ErrInvalidRequest, s.Covers, len(a.req.History))
	}
	if s.From < 0 || s.To < s.From {
		return fmt.Errorf("%w: the summary's range %d to %d", ErrInvalidRequest, s.From, s.To)
	}
	if loom.IsBlank(s.Text) {
		if s.Covers > 0 {
			return fmt.Errorf("%w: a summary of %d messages without a text", ErrInvalidRequest, s.Covers)
		}
		a.dropped[RegionSummary] = []Dropped{{ID: "summary", Reason: ReasonEmpty}}
		return nil
	}
	el := conversationSummary(s)
	a.covers = s.Covers
	a.summary = []tokenizer.Part{tokenizer.NewPart(el.itemOpen(a.tagEnd)), tokenizer.NewPart(a.f.body(EscapeText(strings.TrimSpace(s.Text)))),
		tokenizer.NewPart("\n" + el.close())}
	return nil
}

// prepareHistory groups the history into turns that stay or go together (an assistant's tool calls with
// their results), drops orphans, and sets the latest tool exchange apart as required.
func (a *assembly) prepareHistory() {
	h := a.req.History
	sc := a.scratch
	sc.contents, sc.msgCosts = sized(sc.contents, len(h)), sized(sc.msgCosts, len(h))
	a.contents, a.msgCosts = sc.contents, sc.msgCosts // every message's content, counted once, and its cost
	turns := sc.turns[:0]
	newGroup := func(i, j int) group { return group{first: int32(i), n: int32(j - i), cost: -1} }
	for i := range a.covers { // the summary's: not sent
		a.dropMessage(i, ReasonSummarized, -1)
	}
	for i := a.covers; i < len(h); i++ {
		msg := &h[i]
		switch {
		case msg.Role == "assistant" && len(msg.ToolCalls) > 0:
			// The call and one result per call, right after it; a call left unanswered makes the turn an
			// orphan (providers reject calls without results), and a second result for a call is one too.
			answered := map[string]bool{}
			j := i + 1
			for j < len(h) && h[j].Role == "tool" && callsInclude(msg.ToolCalls, h[j].ToolCallID) && !answered[h[j].ToolCallID] {
				answered[h[j].ToolCallID] = true
				j++
			}
			if len(answered) < len(uniqueCalls(msg.ToolCalls)) {
				for k := i; k < j; k++ {
					a.dropMessage(k, ReasonOrphan, -1)
				}
			} else {
				turns = append(turns, newGroup(i, j))
			}
			i = j - 1
		case msg.Role == "tool":
			// A result whose call is not just before it: an orphan, which providers reject.
			a.dropMessage(i, ReasonOrphan, -1)
		case loom.IsBlank(msg.Content) && len(msg.Parts) == 0:
			a.dropMessage(i, ReasonEmpty, 0)
		default:
			turns = append(turns, newGroup(i, i+1))
		}
	}
	// The latest tool exchange, when the history ends with one, is required: the model is mid-task. So is
	// the user message that asked for it, which a conversation must not start without.
	k := len(turns)
	if n := len(turns); n > 0 && len(a.msgs(&turns[n-1])[0].ToolCalls) > 0 {
		k = n - 1
		for k > 0 && a.msgs(&turns[k-1])[0].Role != "user" { // the task's earlier steps
			k--
		}
		if k > 0 {
			k-- // the user's request
		} else {
			k = n - 1 // no user message before: the exchange alone
		}
	}
	a.setTurns(turns, k)
}

// dropMessage reports history message k dropped for reason, with its tokens (-1: not counted yet).
func (a *assembly) dropMessage(k int, reason string, tokens int) {
	a.dropped[RegionHistory] = append(a.dropped[RegionHistory], Dropped{ID: historyID(k), Reason: reason, Tokens: tokens})
	a.droppedMsgs = append(a.droppedMsgs, int32(k))
}

// setTurns sets the history's turns, oldest first, of which turns[required:] are required, and costs those.
// The others are costed when needed (see demand and fill).
func (a *assembly) setTurns(turns []group, required int) {
	a.scratch.turns = turns
	a.turns, a.groups, a.required = turns, turns[:required:required], turns[required:]
	a.keepFrom = len(a.groups)
	for i := range a.required {
		a.groupCost(&a.required[i])
	}
}

// clearToolResults clears the tool results of the history's older exchanges that the policy says to
// clear (see Policy.KeepToolResults and Policy.ClearToolResultsOver): the content of each becomes its
// placeholder (see clearedResult), in a copy of the history that the assembly plans and renders, and the
// message is reported with the reason "cleared" if it is kept. The required exchanges are never cleared,
// nor is a result that its placeholder would not make shorter.
func (a *assembly) clearToolResults() {
	keep, over := a.policy.KeepToolResults, a.policy.ClearToolResultsOver
	if keep == 0 && over == 0 {
		return
	}
	exchanges := 0 // tool exchanges, newest first
	for i := len(a.required) - 1; i >= 0; i-- {
		if len(a.msgs(&a.required[i])[0].ToolCalls) > 0 {
			exchanges++
		}
	}
	var history []Message // the copy, once a result is cleared
	for gi := len(a.groups) - 1; gi >= 0; gi-- {
		g := &a.groups[gi]
		msgs := a.msgs(g)
		if len(msgs[0].ToolCalls) == 0 {
			continue
		}
		if exchanges++; keep > 0 && exchanges <= keep {
			continue
		}
		for i := 1; i < len(msgs); i++ {
			msg := &msgs[i]
			content := a.bodyPart(a.cachedPart(msg.Content, msg.TokenCounts))
			n := a.m.Join([]tokenizer.Part{content})
			if over > 0 && n <= over {
				continue
			}
			placeholder := clearedResult(a.callNames[msg.ToolCallID], msg.ToolCallID, n)
			if a.m.Count(a.f.body(placeholder)) >= n {
				continue
			}
			if history == nil {
				history = slices.Clone(a.req.History)
				req := *a.req
				req.History = history
				a.req = &req
				msgs = a.msgs(g)
			}
			k := int(g.first) + i
			history[k].Content, history[k].TokenCounts = placeholder, nil
			a.cleared = append(a.cleared, clearedResultAt{int32(k), int32(n)})
		}
	}
}

// clearedResult is what a cleared tool result says instead: the tool, the call (its id quoted, so that
// it stays on its line whatever it holds) and how many tokens the result had.
func clearedResult(tool, callID string, tokens int) string {
	return "[tool result cleared: " + tool + ", call " + strconv.Quote(callID) + ", " + strconv.Itoa(tokens) + " tokens]"
}

func uniqueCalls(calls []ToolCall) map[string]bool {
	ids := make(map[string]bool, len(calls))
	for _, c := range calls {
		ids[c.ID] = true
	}
	return ids
}

func callsInclude(calls []ToolCall, id string) bool {
	for _, c := range calls {
		if c.ID == id {
			return true
		}
	}
	return false
}

// indexed makes the strings prefix+"["+i+"]" once, for the first 1024 i, so assemblies do not.
type indexed struct {
	prefix string
	made   []string
}

func newIndexed(prefix string) *indexed {
	x := &indexed{prefix: prefix, made: make([]string, 1024)}
	for i := range x.made {
		x.made[i] = x.make(i)
	}
	return x
}

func (x *indexed) make(i int) string { return x.prefix + "[" + strconv.Itoa(i) + "]" }

func (x *indexed) get(i int) string {
	if i < len(x.made) {
		return x.made[i]
	}
	return x.make(i)
}

var (
	historyIDs = newIndexed("history") // report ids of history messages
	markers    = newIndexed("")        // knowledge markers "[n]"
)

func historyID(i int) string { return historyIDs.get(i) }

// groupCost is what a group's messages cost in the format (see formatter.turnCost), counted the first time
// it is asked for; it writes each message's content as the format does.
func (a *assembly) groupCost(g *group) int {
	if g.cost >= 0 {
		return int(g.cost)
	}
	n := 0
	for k := int(g.first); k < int(g.first+g.n); k++ {
		c := a.messageCost(k)
		a.msgCosts[k] = int32(c)
		n += c
	}
	g.cost = int32(n)
	return n
}

// msgCost is what message k of group g costs, or -1 when the group is not costed yet.
func (a *assembly) msgCost(g *group, k int) int {
	if g.cost < 0 {
		return -1
	}
	return int(a.msgCosts[k])
}

// messageCost is what history message k costs in the format (see formatter.turnCost); it writes the
// message's content as the format does.
func (a *assembly) messageCost(k int) int {
	msg := &a.req.History[k]
	// A cached count is of the content as given; a format may write it otherwise (see bodyPart), or with
	// its parts, which it is not a count of.
	if text := a.messageText(msg); len(text) != len(msg.Content) {
		a.contents[k] = a.bodyPart(tokenizer.NewPart(text))
	} else {
		a.contents[k] = a.bodyPart(a.cachedPart(msg.Content, msg.TokenCounts))
	}
	return a.f.turnCost(a, msg, a.contents[k:k+1]) + a.partCost(k)
}

// cachedPart is a part for text whose count may be cached under the model's count key (its encoding, or
// the estimator's rule).
func (a *assembly) cachedPart(text string, counts map[string]int) tokenizer.Part {
	return a.cachedPartAt(text, counts, a.countKey)
}

// cachedPartAt is a part for text whose count may be cached under key.
func (a *assembly) cachedPartAt(text string, counts map[string]int, key string) tokenizer.Part {
	if n, ok := counts[key]; ok && n >= 0 {
		return tokenizer.Part{Text: text, Tokens: n}
	}
	return tokenizer.NewPart(text)
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
		it.parts = []tokenizer.Part{tokenizer.NewPart("- " + EscapeText(oneLine(f.Key)) + ": " + EscapeText(oneLine(f.Value)) + "\n")}
		it.cost = a.m.Join(it.parts)
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
		body := tokenizer.Part{Text: EscapeText(result)}
		if body.Tokens = a.m.Count(body.Text); body.Tokens > a.policy.MaxToolOutputTokens {
			a.dropped[RegionToolOutputs] = append(a.dropped[RegionToolOutputs], Dropped{ID: id, Reason: ReasonTruncated, Tokens: body.Tokens})
			body = tokenizer.NewPart(a.cutMiddle(body.Text, body.Tokens, a.policy.MaxToolOutputTokens))
		}
		body = a.bodyPart(body) // its lines after the first, as the format writes them, its count kept
		tag := toolOutputElement(o.Tool, o.CallID)
		it := &ctxItem{id: id, order: i}
		it.parts = []tokenizer.Part{tokenizer.NewPart(tag.itemOpen(a.tagEnd)), body, tokenizer.NewPart(tag.itemClose())}
		it.cost = a.m.Join(it.parts)
		a.toolOuts = append(a.toolOuts, it)
	}
}

// cutMiddle keeps the head and tail of text (n tokens) within limit tokens, with a marker between them.
func (a *assembly) cutMiddle(text string, n, limit int) string {
	enc, ok := a.m.Counter().(tokenizer.Truncater)
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
		if mid < hi && a.m.Count(text[mid:]) <= keep {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	omitted := n - a.m.Count(head) - a.m.Count(text[hi:])
	return head + "\n[... " + strconv.Itoa(max(omitted, 0)) + " tokens cut ...]\n" + text[hi:]
}

func isRuneStart(s string, i int) bool { return i >= len(s) || s[i]&0xC0 != 0x80 }

// prepareKnowledge filters, deduplicates and orders knowledge by score, and renders each item.
func (a *assembly) prepareKnowledge() {
	// The candidates, in the request's order, with their text (parts[2]; see cost and settleKnowledge for the rest).
	sc := a.scratch
	items := slices.Grow(sc.items[:0], len(a.req.Knowledge))
	countKey := KnowledgeCountKey(a.countKey)
	a.knowledgeKey = countKey
	bc, _ := a.f.(bodyCounter)
	sc.parts = sized(sc.parts, 4*len(a.req.Knowledge))
	parts := sc.parts
	for i := range a.req.Knowledge {
		k := &a.req.Knowledge[i]
		id := idOf(k.ID, "knowledge", i)
		content := strings.TrimSpace(k.Content)
		switch {
		case content == "":
			a.dropped[RegionKnowledge] = append(a.dropped[RegionKnowledge], Dropped{ID: id, Reason: ReasonEmpty})
		case a.policy.MinScore != 0 && k.Score < a.policy.MinScore:
			a.dropped[RegionKnowledge] = append(a.dropped[RegionKnowledge], Dropped{ID: id, Reason: ReasonMinScore, Tokens: -1})
		default:
			// The text is written as it is rendered (see knowledgeBody) only if the item is costed (see cost)
			// or kept (see settleKnowledge); a cached count is of it so written. (In the text format, a text of
			// more than one line is indented too, and its count derived from the cached one: see writeKnowledge.)
			n := 4 * len(items)
			it := ctxItem{id: id, order: i, know: k, raw: true, cost: -1, parts: parts[n : n+4 : n+4]}
			it.parts[2] = a.cachedPartAt(content, k.TokenCounts, countKey)
			if bc != nil && bc.rewrites(content) { // the format writes it otherwise: the cached count is not of it
				it.parts[2] = tokenizer.NewPart(content)
			}
			items = append(items, it)
		}
	}
	sc.items = items
	// By score, best first, in the request's order among equals (as a stable sort would).
	sc.order = sized(sc.order, len(items))
	order := sc.order
	for i := range items {
		order[i] = ranked{items[i].know.Score, int32(i)}
	}
	slices.SortFunc(order, func(x, y ranked) int {
		if c := cmp.Compare(y.score, x.score); c != 0 {
			return c
		}
		return int(x.item - y.item)
	})

	// The tags, counted once: most items share one.
	tags := map[[3]string]tokenizer.Part{}
	var lastKey [3]string
	var open tokenizer.Part
	closeTag := tokenizer.Part{Text: contextElement.lineClose()} // the text ends with its line break
	closeTag.Tokens = a.m.CountShort(closeTag.Text)
	a.closeAdds = a.m.Adds("\n", closeTag.Text) // as the tokenizer answers for any text before the line break
	a.knowledge = slices.Grow(sc.knowledge[:0], len(items))
	for n, r := range order {
		it := &items[r.item]
		k := it.know
		typ := k.Type
		if typ == "" {
			typ = "rag"
		}
		if key := [3]string{typ, k.Source, strconv.FormatBool(k.Trusted)}; n == 0 || key != lastKey {
			var ok bool
			if open, ok = tags[key]; !ok {
				text := " " + knowledgeElement(typ, k.Source, k.Trusted).itemOpen(a.tagEnd)
				open = tokenizer.Part{Text: text, Tokens: a.m.CountShort(text)}
				tags[key] = open
			}
			lastKey = key
		}
		it.rank = n
		// The marker "[n]" is a part of its own: it changes with the order, the rest does not.
		it.parts[0], it.parts[1], it.parts[3] = tokenizer.NewPart(""), open, closeTag
		a.knowledge = append(a.knowledge, it)
	}
	sc.knowledge = a.knowledge
}

// knowledgeBody is a knowledge item's text, trimmed, as the format renders it: escaped, written as the
// format writes a text in a tag (see formatter.body), and ended by its line break (see RenderedKnowledge).
func (a *assembly) knowledgeBody(content string) string {
	return a.knowledgePart(tokenizer.NewPart(content)).Text
}

// writeKnowledge writes a raw knowledge item's text (see ctxItem.raw) as it is rendered (see
// knowledgeBody), with its count: the one its part holds (a cached count of the text so written), or, for
// a format that writes the text otherwise, one derived from the count cached of its RenderedKnowledge
// text (see bodyPart).
func (a *assembly) writeKnowledge(it *ctxItem) {
	body := &it.parts[2]
	if body.Tokens < 0 {
		if n, ok := it.know.TokenCounts[a.knowledgeKey]; ok && n >= 0 {
			body.Tokens = n
		}
	}
	*body, it.raw = a.knowledgePart(*body), false
}

// knowledgePart is knowledgeBody of p's text, its count derived from p's, which is of the text's
// RenderedKnowledge, when it is known.
func (a *assembly) knowledgePart(p tokenizer.Part) tokenizer.Part {
	text := xmltext.Knowledge(p.Text)
	return a.bodyPartTo(tokenizer.Part{Text: text, Tokens: p.Tokens}, len(text)-1)
}

// RenderedKnowledge is a knowledge item's content as the assembler renders it inside its tag: trimmed of
// surrounding whitespace, escaped (see [EscapeText]), and ended by the line break before the close tag, as
// in "Premium costs $20.\n". Knowledge.TokenCounts caches counts of this text, under [KnowledgeCountKey].
// The content's last character may share a token with the line break ("." does in o200k_base); with the
// line break counted in the text, the close tag's count adds to the text's, and an item whose count is
// cached is costed in its tags without counting its text.
func RenderedKnowledge(content string) string { return xmltext.Knowledge(content) }

// KnowledgeCountKey is the key of Knowledge.TokenCounts under which the count of an item's
// [RenderedKnowledge] text in the named encoding (or the estimate, under [tokenizer.EstimateKey]) is
// cached: the encoding's name and the version of the rendering, as in "o200k_base/3" and "estimate/1/3".
// A count that a store kept for an earlier rendering of the text (or an earlier rule of the estimator) is
// then never taken for this one's: it is not found, and the text is counted.
func KnowledgeCountKey(encoding string) string { return xmltext.KnowledgeCountKey(encoding) }

// KnowledgeCounts returns the counts of content's [RenderedKnowledge] text in o200k_base and cl100k_base,
// and its estimate ([tokenizer.Estimate]), under their [KnowledgeCountKey]s: what a store caches on every
// knowledge item it writes, so that an assembly does not count the items again, whether its counts are
// exact or estimated.
func KnowledgeCounts(content string) map[string]int { return xmltext.KnowledgeCounts(content) }

// markerCost is the count of "[n]".
func (a *assembly) markerCost(n int) int {
	if a.markers == nil {
		a.markers = markerTableFor(a.countKey)
	}
	return a.markers.tokens(n, a.m)
}

func marker(n int) string { return markers.get(n) }

// markerTable caches the counts of the markers markers.made under one encoding, for every assembly: each
// is its count plus one, 0 while it is not counted yet. A marker counted by two assemblies at once is
// stored twice, with the same count.
type markerTable struct {
	cached bool // false: the encoding is not named, counts are not shared
	counts [1024]atomic.Int32
}

// markerCounts holds a *markerTable per encoding.
var markerCounts sync.Map

var uncachedMarkers = &markerTable{}

func markerTableFor(encoding string) *markerTable {
	if encoding == "" {
		return uncachedMarkers
	}
	t, ok := markerCounts.Load(encoding)
	if !ok {
		t, _ = markerCounts.LoadOrStore(encoding, &markerTable{cached: true})
	}
	return t.(*markerTable)
}

func (t *markerTable) tokens(n int, m *tokenizer.Meter) int {
	if !t.cached || n >= len(t.counts) {
		return m.CountShort(marker(n))
	}
	if c := t.counts[n].Load(); c > 0 {
		return int(c - 1)
	}
	c := m.Count(marker(n))
	t.counts[n].Store(int32(c + 1))
	return c
}

// textHash hashes a (trimmed) text, for finding exact duplicates; texts that differ only in spacing or
// punctuation are near-duplicates (see nearIndex).
func textHash(text string) uint64 { return maphash.String(hashSeed, text) }

var hashSeed = maphash.MakeSeed()

// toolCallsJSON is the JSON of tool calls as sent, for counting.
func toolCallsJSON(calls []ToolCall) string {
	if len(calls) == 0 {
		return ""
	}
	b, _ := marshalRaw(calls)
	return string(b)
}

// oneLine replaces line breaks so a fact stays on its line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
