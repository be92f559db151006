package assembler

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/context-loom/loom/internal/xmltext"

	"github.com/context-loom/loom/tokenizer"

	"github.com/context-loom/loom"
)

// AssembleRequest fits req into its budget and renders it in its format. Required items (instructions,
// tools, the current message, the latest tool exchange and the user message that asked for it) are always
// kept, or the call fails with a *[BudgetError]; a latest tool exchange with no user message before it is
// [ErrNoUserTurn], in every format, for a conversation starts with the user; a request with no message to
// send in the openai or anthropic format is [ErrNoMessages], and an output that would break another rule
// of the format's provider is [ErrProviderRule] (see [Format]); all of these wrap ErrInvalidRequest and
// loom.ErrInvalid. The optional regions share the rest by req.Policy: memory by pinned, then recency; tool
// outputs newest first, long ones cut head and tail; history kept as a contiguous suffix of whole turns (a
// tool call stays with its results), cut in cache-stable steps or a turn at a time (Policy.HistoryTrim),
// its older tool results cleared to placeholders as the policy says (Policy.KeepToolResults,
// Policy.ClearToolResultsOver); knowledge by score, first fit, without duplicates.
//
// The result's TotalTokens is the exact count of what it returns (estimated for models without a public
// tokenizer), per-message overhead included, and never exceeds the budget. The planner costs each item
// alone; once the plan is rendered, its count is taken again from what the rendering holds: each text
// returned (a message's content, the system prompt, the tools) is counted from its parts, the
// counts of the parts added where the tokenizer vouches that counts add up at their join
// ([tokenizer.Splitter]) and the texts around every other join counted, plus the format's framing of each
// message. While that count exceeds the budget (framing and joins the planner did not see), the least
// valuable optional item is dropped and the plan rendered and counted again. A part's count is counted
// once per assembly, or taken from the cache that a store keeps (Message.TokenCounts,
// Knowledge.TokenCounts; see [Request.DropTokenCounts]): a cached count is trusted, not counted again.
//
// Tools count as the model's provider bills them (see tokenizer.ToolRule): in the openai format, the
// definitions as the function namespace that OpenAI's models read, with its overhead, and each tool call
// and result by the rule. Where a count is an estimate (a model without a public tokenizer, a rule known
// only from published counts), it errs high, and the result's report says so per region
// (RegionReport.Exact).
func AssembleRequest(ctx context.Context, req *Request) (*Result, error) {
	a, err := newAssembly(req)
	if err != nil {
		return nil, err
	}
	return a.run(ctx)
}

// assembly is one call's state.
type assembly struct {
	req        *Request
	f          Format
	message    string // the current message as the format renders it
	hasMessage bool   // the message is rendered (a blank one is not, in Loom's formats)
	model      tokenizer.Model
	policy     Policy
	m          *tokenizer.Meter
	budget     int
	tagEnd     string // what ends an open tag of the context: a line break, written as the format writes it
	// reserve is what the planner keeps back of the budget, past what the required items cost, for the
	// framing that the optional items bring (the openai format's system message of the context).
	reserve        int
	instructionIDs []string // the instructions' items, for the report
	// instructionTokens is what each of instructionIDs costs when there are more than one (the cookbook
	// format's agent and instructions); one item's is the region's.
	instructionTokens []int
	instructions      string // the instructions as Loom's formats render them: none when they are blank
	// The request's summary, rendered (nil: none), and how many of the history's first messages it
	// stands for, which are not sent.
	summary []tokenizer.Part
	covers  int

	// Candidates per optional region, best first, and the chosen ones.
	memory    []*ctxItem
	toolOuts  []*ctxItem
	knowledge []*ctxItem
	turns     []group          // history turns, oldest first: groups, then required
	groups    []group          // the optional turns
	required  []group          // the latest tool exchange, kept whatever it costs
	contents  []tokenizer.Part // each history message's content, counted once
	msgCosts  []int32          // what each history message of a costed group costs (see groupCost)
	// droppedMsgs is the history message of each of dropped[RegionHistory] (see dropMessage).
	droppedMsgs []int32

	keepFrom int // history: groups[keepFrom:] are kept
	// History cut in steps: groups[stepFrom:stepTo] would have fitted, and were cut to keep the start of
	// the history where the next turns find it (see stepCut).
	stepFrom, stepTo int
	cleared          []clearedResultAt // the history's tool results cleared to a placeholder, newest first (see clearToolResults)
	cited            []*ctxItem        // the kept knowledge, in the order it is rendered (see settleKnowledge)
	// Knowledge kept so far, for finding duplicates: only items about to be kept are compared, so an
	// assembly does not read every candidate's text.
	dedup   *dedup   // from a pool: see release
	scratch *scratch // from a pool: see release
	dropped [numRegions][]Dropped
	alloc   regionTokens
	roles   [4]int // counts of the roles, plus one (see roleTokens)
	markers *markerTable
	// closeAdds: the counts of a knowledge item's text, which ends with a line break, and of the close tag
	// after it add up, whatever the text (see cost).
	closeAdds bool
	// countKey is the key under which a count in the model's counter is cached (Message.TokenCounts,
	// and Knowledge.TokenCounts under its KnowledgeCountKey): the encoding's name, or for a model whose
	// counts are estimated, tokenizer.EstimateKey, which names the estimator's rule.
	countKey string
	// knowledgeKey is KnowledgeCountKey(countKey).
	knowledgeKey string

	// memoryWrap is what the wrapper of a block of memory costs, plus one (0: not counted yet; see
	// memoryWrapCost): [0] the context's, [1] pinned memory's in the stable prefix.
	memoryWrap [2]int
	wraps      [numWraps]tokenizer.Part // the wrappers' parts, each counted once (see wrap)

	tools     *toolSet          // the request's tools, rendered (nil: none)
	callNames map[string]string // the function each tool call of the history calls, by call id
	pad       padCount          // the openai format's last count of the line break after the first system message
	// The history's content parts, for a format that sends them (see prepareParts): what each message's
	// parts cost and their rendering, by the message's index; nil when no message has parts.
	partTokens    []int
	rendered      []renderedParts
	imageEstimate bool // an image is counted by an estimated rule
	// The current message's parts (Request.MessageParts) for a format that sends them: their count and
	// rendering (nil: none).
	messageParts    int
	messageRendered *renderedParts
	urlTypes        map[string]string // the media type of each image by URL that has one
}

// ctxItem is one rendered item of the memory, tool output or knowledge region.
type ctxItem struct {
	id       string
	dup      string           // knowledge: why it duplicates a kept item
	rank     int              // knowledge: position by score; it is costed with the marker [rank+1]
	parts    []tokenizer.Part // rendered, with its trailing separator
	cost     int              // -1: not known yet (knowledge, see cost)
	lower    int              // knowledge whose cost is not known: a lower bound, counted up to a limit
	raw      bool             // knowledge: parts[2] holds the content, trimmed, until it is costed or kept (see knowledgeBody)
	kept     bool
	pinned   bool
	order    int        // position for rendering
	required bool       // kept whatever it costs: the cookbook format keeps every item but the history's
	know     *Knowledge // knowledge: the request's item
	ref      *Reference // knowledge: its citation, once it is kept (see settleKnowledge)
}

// clearedResultAt is a history message whose tool result was cleared, and the tokens of its content before.
type clearedResultAt struct {
	msg, tokens int32
}

// group is one or more history messages that stay or go together: history[first:first+n].
type group struct {
	first, n int32
	cost     int32 // -1: not known yet (see groupCost)
	orphaned bool  // dropped, and reported, for starting the kept history mid-turn
}

// msgs returns the group's messages, a slice of the request's history.
func (a *assembly) msgs(g *group) []Message { return a.req.History[g.first : g.first+g.n] }

// groupContents returns the contents of the group's messages (see groupCost).
func (a *assembly) groupContents(g *group) []tokenizer.Part { return a.contents[g.first : g.first+g.n] }

func newAssembly(req *Request) (*assembly, error) {
	if req == nil {
		return nil, fmt.Errorf("%w: nil request", ErrInvalidRequest)
	}
	f, err := requestFormat(req)
	if err != nil {
		return nil, err
	}
	if err := checkCache(req, f); err != nil {
		return nil, err
	}
	a := &assembly{req: req, f: f, tagEnd: f.body("\n")}
	name := req.Model
	if name == "" {
		name = DefaultModel
	}
	model, err := tokenizer.ForModel(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if _, ok := f.(interface{ estimates() }); ok {
		// The format's provider (Gemini) counts with a tokenizer that is not public: its counts are the
		// estimator's whatever the model, its rule for tools their JSON (without another provider's
		// overhead), and its images cost what Gemini bills for them.
		model.Encoding, model.Tools, model.Image = "", tokenizer.ToolRule{}, tokenizer.GeminiImageRule()
	}
	a.model, a.countKey = model, model.Encoding
	if !model.Exact() { // model.Counter() is the estimator
		a.countKey = tokenizer.EstimateKey
	}
	a.m = tokenizer.NewMeter(model.Counter())
	if a.policy, err = f.policy(req.Policy); err != nil {
		return nil, err
	}
	if a.budget, err = PromptBudget(model, req.MaxTokens, req.ReserveOutput, a.policy.Margin); err != nil {
		return nil, err
	}
	return a, nil
}

// MaxToolName is the longest tool name providers accept, in bytes.
const MaxToolName = loom.MaxToolName

// CheckToolName returns an error wrapping ErrInvalidRequest (and loom.ErrInvalid) unless name is one that
// providers accept for a tool (see [loom.CheckToolName]).
func CheckToolName(name string) error { return invalidRequest(loom.CheckToolName(name)) }

// CheckRole returns an error wrapping ErrInvalidRequest (and loom.ErrInvalid) unless role is one a
// history's message may have (see [loom.CheckRole]).
func CheckRole(role, toolCallID string) error {
	return invalidRequest(loom.CheckRole(role, toolCallID))
}

func isToolNameByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// invalidRequest returns err, a loom.ErrInvalid, as the assembler's ErrInvalidRequest; nil for nil.
func invalidRequest(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
}

func validateHistory(h []Message) error {
	for i, msg := range h {
		if err := CheckRole(msg.Role, msg.ToolCallID); err != nil {
			return fmt.Errorf("history[%d]: %w", i, err)
		}
		if len(msg.ToolCalls) > 1 && len(uniqueCalls(msg.ToolCalls)) != len(msg.ToolCalls) {
			return fmt.Errorf("%w: history[%d] has two tool calls with one id", ErrInvalidRequest, i)
		}
		for j, call := range msg.ToolCalls {
			if msg.Role != "assistant" {
				return fmt.Errorf("%w: history[%d] is a %s message with tool calls", ErrInvalidRequest, i, msg.Role)
			}
			if call.ID == "" {
				return fmt.Errorf("%w: history[%d].tool_calls[%d] needs an id", ErrInvalidRequest, i, j)
			}
			if err := CheckToolName(call.Function.Name); err != nil {
				return fmt.Errorf("history[%d].tool_calls[%d]: %w", i, j, err)
			}
		}
	}
	return nil
}

func (a *assembly) run(ctx context.Context) (*Result, error) {
	a.scratch = getScratch()
	defer a.release()
	out, err := a.plan(ctx)
	if err != nil {
		return nil, err
	}
	return a.result(out), nil
}

// plan makes the plan and returns its verified rendering: the candidates as the format writes them, the
// required items' cost, the shares, the items chosen within them, then the items dropped while the
// rendering is over the budget. Planning ends before each rendering, which does not change the plan.
func (a *assembly) plan(ctx context.Context) (*output, error) {
	out, err := a.choose(ctx)
	if err != nil {
		return nil, err
	}
	// Verify: count what would be returned; while it is over the budget (counts that did not add up, the
	// context message's overhead), drop the least valuable optional item.
	for out.total > a.budget {
		if !a.dropOne() {
			return nil, &BudgetError{Required: out.total, Available: a.budget}
		}
		a.render(out)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if f, ok := a.f.(finisher); ok {
		f.finish(a, out)
	}
	// Last, the format holds what it rendered to its provider's rules: an output the provider would
	// refuse is an error here, not a request sent.
	if err := a.f.check(a, out); err != nil {
		return nil, err
	}
	return out, nil
}

// choose makes the plan (see plan) up to its verification: it returns the rendering of the items chosen
// within the shares, which the planner costs so that it is within the budget but for counts that do not
// add up when joined.
func (a *assembly) choose(ctx context.Context) (*output, error) {
	if err := a.f.prepare(a); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	// What the required items cost, rendered alone (nothing optional is chosen yet), and what that leaves.
	out := &output{}
	a.render(out)
	required := out.total
	if required > a.budget {
		return nil, &BudgetError{Required: required, Available: a.budget}
	}
	available := a.budget - required - a.reserve
	// Shares need a region's demand only up to what is available, so candidates are costed lazily, in the
	// order fill takes them: what can never fit is not counted.
	a.alloc = allocate(a.policy, max(available, 0), func(region Region, upTo int) int {
		return a.demand(region, upTo, max(available, 0))
	})

	// Fill each region within its share, then offer what is left to them again, by priority. No region is
	// ever offered more than what is left of available (room), which only shrinks: a count stopped at the
	// room is never needed again.
	// A history cut in steps is filled once, within its share, and cut there (see stepCut): the rest of
	// what is left goes to the other regions, and what the cut frees is there for the regions filled after
	// it.
	steps := a.policy.HistoryTrim == HistoryTrimSteps
	var used regionTokens
	for pass := range 2 {
		for _, r := range a.policy.Regions {
			room := max(available-sumValues(used), 0)
			limit := a.alloc[r.Name]
			if pass == 1 {
				if steps && r.Name == RegionHistory {
					continue
				}
				limit = used[r.Name] + room
			}
			used[r.Name] = a.fill(r.Name, limit, used[r.Name], room)
			if steps && r.Name == RegionHistory {
				used[r.Name] = a.stepCut(used[r.Name])
			}
		}
	}

	a.render(out)
	return out, nil
}

// render settles the plan as it stands and lays it out in out, counted.
func (a *assembly) render(out *output) {
	a.f.settle(a)
	out.reset(a)
	a.f.render(a, out)
}

// release gives back what the assembly borrowed from pools; the Result keeps none of it.
func (a *assembly) release() {
	if a.dedup != nil {
		putDedup(a.dedup)
		a.dedup = nil
	}
	if a.scratch != nil {
		putScratch(a.scratch)
		a.scratch = nil
		a.knowledge, a.turns, a.groups, a.required, a.contents = nil, nil, nil, nil, nil
	}
}

// fill keeps items of region within limit tokens (used already kept) and returns what it uses. Room is
// the most that any region can still be offered, now or later (what is left of the budget); candidates are
// counted up to it, no further.
func (a *assembly) fill(region Region, limit, used, room int) int {
	start := used
	switch region {
	case RegionHistory:
		for a.keepFrom > 0 {
			cost := a.groupCost(&a.groups[a.keepFrom-1])
			if used+cost > limit {
				break
			}
			a.keepFrom--
			used += cost
		}
		return used
	default:
		wrapped := a.wrappedMemory(region)
		for _, it := range a.items(region) {
			if it.kept || it.dup != "" {
				continue
			}
			cost, exact := a.cost(it, max(room-(used-start), limit-used))
			// The first memory item of a block brings the block's wrapper.
			wrap := region == RegionMemory && !wrapped[b2i(it.pinned)]
			if wrap {
				cost += a.memoryWrapCost(it.pinned)
			}
			if !exact || used+cost > limit {
				continue
			}
			if wrap {
				wrapped[b2i(it.pinned)] = true
			}
			if region == RegionKnowledge {
				if it.dup = a.duplicate(it); it.dup != "" {
					continue
				}
			}
			it.kept = true
			used += cost
		}
		return used
	}
}

// stepCut moves the start of the kept history (keepFrom, set by fill: the oldest turn that fits) on to
// the roundest position past it (see loom.HistoryTrimSteps) that keeps at least the policy's floor of
// used, what the history that fits costs, and returns what the history then costs. The floor is a share
// of what fits rather than of the history's share of the budget, which depends on how much history the
// request holds: a store's window of the newest messages, which holds all that fits, gets the cut the
// whole session would. The cut starts a turn (a user message, or system notes before one), so that the history starts as a
// provider takes it; with none that keeps the floor, keepFrom stays where it is.
//
// A position is the message's Seq, or one more than the message's before it when its Seq is not more
// than that (a history given inline has none): the same message has the same position on every turn of
// a session, so the next turns find the same cut until the oldest message kept no longer fits. A history
// whose first message has a Seq over 1 is the newest part of a session whose older messages were left
// out (a store's window): it is cut in steps even when all of it fits, so that the start of what is
// kept does not move with the window.
func (a *assembly) stepCut(used int) int {
	from := a.keepFrom
	a.stepFrom, a.stepTo = from, from
	h := a.req.History
	if from >= len(a.groups) || from == 0 && (len(h) == 0 || h[0].Seq <= 1) {
		return used // nothing optional is kept, or all the session's history fits
	}
	floor := int(a.policy.HistoryFloor * float64(used))
	var pos int64 // the position of h[i-1] as the walk reaches i
	i := 0
	position := func(to int) int64 { // the position of h[to], to >= i
		for ; i <= to; i++ {
			if h[i].Seq > pos {
				pos = h[i].Seq
			} else {
				pos++
			}
		}
		return pos
	}
	// startsTurn reports whether groups[j] starts a turn: a user's message, or system notes before one
	// (see trimKeptStart). The walk asks it of j in increasing order, and a run of notes has one answer,
	// so the end of the last run read and its answer are kept: a history of many notes is read once.
	runEnd, runStarts := -1, false
	startsTurn := func(j int) bool {
		if j <= runEnd {
			return runStarts
		}
		runEnd = j
		for ; runEnd < len(a.groups) && a.msgs(&a.groups[runEnd])[0].Role == "system"; runEnd++ {
		}
		runStarts = runEnd == len(a.groups) || a.msgs(&a.groups[runEnd])[0].Role == "user" // notes before the required turns start one too
		return runStarts
	}
	first := position(int(a.groups[from].first))
	best, bestKept := -1, 0
	// For steps P = 1, 2, 4, ...: the cut at the first turn at or after the first multiple of P from
	// first. The larger P, the later the cut, and the less it keeps.
	j, kept := from, used // the walk: groups[j] and what keeping from it costs
	jPos := first
	for step := int64(1); step > 0; step <<= 1 {
		bound := (first + step - 1) / step * step
		for j < len(a.groups) && (jPos < bound || !startsTurn(j)) {
			kept -= a.groupCost(&a.groups[j])
			j++
			if j < len(a.groups) {
				jPos = position(int(a.groups[j].first))
			}
		}
		if j >= len(a.groups) || kept < floor {
			break
		}
		best, bestKept = j, kept
	}
	if best < 0 {
		return used
	}
	a.keepFrom, a.stepTo = best, best
	return bestKept
}

// groupOf returns the index in groups of the optional group that holds history[k], len(groups) for none.
func (a *assembly) groupOf(k int) int {
	i, _ := slices.BinarySearchFunc(a.groups, int32(k), func(g group, k int32) int {
		if g.first+g.n <= k {
			return -1
		}
		if g.first > k {
			return 1
		}
		return 0
	})
	return i
}

// demand returns what region's candidates cost, but at most upTo (at most room): it costs them in the
// order fill takes them, only until they cost upTo.
func (a *assembly) demand(region Region, upTo, room int) int {
	n := 0
	switch region {
	case RegionHistory:
		for i := len(a.groups) - 1; i >= 0 && n < upTo; i-- {
			n += a.groupCost(&a.groups[i])
		}
	default:
		wrapped := a.wrappedMemory(region)
		for _, it := range a.items(region) {
			if n >= upTo {
				break
			}
			if it.kept { // required: not the region's to share
				continue
			}
			cost, _ := a.cost(it, max(room, upTo)) // when not exact, more than upTo
			if region == RegionMemory && !wrapped[b2i(it.pinned)] {
				wrapped[b2i(it.pinned)] = true
				cost += a.memoryWrapCost(it.pinned)
			}
			n += cost
		}
	}
	return min(n, upTo)
}

// cost returns what item it costs: exactly (exact true) if that is at most limit, else a count greater
// than limit. A knowledge item is counted only here, the first time it is asked for, and only up to
// limit; since later limits are never larger, it is never counted again.
func (a *assembly) cost(it *ctxItem, limit int) (n int, exact bool) {
	if it.cost >= 0 {
		return it.cost, true
	}
	if it.lower > limit {
		return it.lower, false
	}
	body := &it.parts[2]
	marker := a.markerCost(it.rank + 1)
	// Text not counted yet that is plainly too long is neither counted nor escaped: the meter's lower bound
	// (the model's encoding's, tokenizer.Encoding.LowerBound) says so from a byte scan. The text may not be
	// escaped yet, and its bound still bounds the text as it is rendered: escaping (and the text format's
	// indentation, and the line break that ends the text) writes & < > " ' as references that start and
	// end with a separator, and inserts separators, which never lowers the bound.
	if room := limit - marker; body.Tokens < 0 && room >= 0 {
		if runs := a.m.LowerBound(it.parts[1:], room); runs > room {
			it.lower = runs + marker
			return it.lower, false
		}
	}
	if closeTag := &it.parts[3]; it.raw && body.Tokens >= 0 && a.closeAdds && startsAsRendered(body.Text) {
		// A count that a store cached is of the text as it is rendered: escaped, and ended by its line break
		// (see RenderedKnowledge), after which the close tag's count adds (see closeAdds). The text is costed
		// with its open tag as it stands, not yet written so, which would copy every candidate's text: the
		// meter asks about its first character alone, which escaping leaves as it is, whether their counts
		// add up; where they may not, it counts texts of the two joined, and the text is written as it is
		// rendered first.
		n, exact = a.m.JoinUpTo(it.parts[1:3], max(limit-marker-closeTag.Tokens, 0), func() bool {
			a.writeKnowledge(it)
			return true
		})
		n += closeTag.Tokens
	} else {
		// The text is counted as it is rendered, which the raw text is not.
		if it.raw {
			a.writeKnowledge(it)
		}
		n, exact = a.m.JoinUpTo(it.parts[1:], max(limit-marker, 0), nil)
	}
	if !exact {
		it.lower = n + marker
		return it.lower, false
	}
	it.cost = n + marker
	return it.cost, true
}

// wrappedMemory says, for region memory, which of its blocks (see memoryWrap) already hold a kept item,
// and so cost their wrapper already; none for another region.
func (a *assembly) wrappedMemory(region Region) (wrapped [2]bool) {
	if region != RegionMemory {
		return wrapped
	}
	for _, it := range a.memory {
		if it.kept {
			wrapped[b2i(it.pinned)] = true
		}
	}
	return wrapped
}

// memoryWrapCost is what a block of memory costs besides its items (see markupLayout): the open and close
// tags of <user_memory>, and for pinned memory the blank line that parts it from the rest of the stable
// prefix, or when there is none the frame of the message it is then; the context's blank line after its block is left to the reserve, as its framing is. Each is
// counted alone, which errs high of a count of the text they are in; the verified rendering has the last
// word.
func (a *assembly) memoryWrapCost(pinned bool) int {
	i := b2i(pinned)
	if a.memoryWrap[i] == 0 {
		var n int
		if pinned {
			n = a.wrap(wrapPinnedOpen).Tokens + a.wrap(wrapPinnedClose).Tokens
			if a.instructions != "" || a.summary != nil {
				n += a.wrap(wrapBlank).Tokens
			} else { // the stable prefix is pinned memory's alone: its message's frame (a system message's, which errs high of a system prompt's)
				n += a.model.TokensPerMessage + a.roleTokens("system")
			}
		} else {
			n = a.wrap(wrapMemoryOpen).Tokens + a.wrap(wrapMemoryClose).Tokens
		}
		a.memoryWrap[i] = n + 1
	}
	return a.memoryWrap[i] - 1
}

// The wrappers of Loom's markup that the planner costs (see wrap).
const (
	wrapPinnedOpen = iota
	wrapPinnedClose
	wrapMemoryOpen
	wrapMemoryClose
	wrapBlank
	numWraps
)

var wrapTexts = [numWraps]string{pinnedOpen, strings.TrimSuffix(memoryClose, "\n\n"), memoryOpen, memoryClose, "\n\n"}

// wrap returns a wrapper's part, counted: once in an assembly, for the planner and every rendering.
func (a *assembly) wrap(i int) tokenizer.Part {
	if p := a.wraps[i]; p.Text != "" {
		return p
	}
	p := tokenizer.Part{Text: wrapTexts[i], Tokens: a.m.CountShort(wrapTexts[i])} // remembered: the meter meets it again
	a.wraps[i] = p
	return p
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// startsAsRendered reports whether s starts with a character that EscapeText leaves as it is.
func startsAsRendered(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	return !(r == utf8.RuneError && n <= 1) && !xmltext.HasMarkup(s[:n])
}

func (a *assembly) items(region Region) []*ctxItem {
	switch region {
	case RegionMemory:
		return a.memory
	case RegionToolOutputs:
		return a.toolOuts
	case RegionKnowledge:
		return a.knowledge
	}
	return nil
}

// duplicate returns why knowledge item it duplicates one kept before (whitespace aside, or nearly, by
// the policy's threshold), or "".
func (a *assembly) duplicate(it *ctxItem) string {
	if a.dedup == nil {
		a.dedup = getDedup()
	}
	d := a.dedup
	content := strings.TrimSpace(it.know.Content) // as prepareKnowledge rendered it, unescaped
	h := textHash(content)
	if d.exact[h] {
		return ReasonDuplicate
	}
	if a.policy.NearDuplicate < 1 && d.near.addUnlessNear(content, a.policy.NearDuplicate) {
		return ReasonNearDuplicate
	}
	d.exact[h] = true
	return ""
}

// dropOne drops the least valuable kept optional item: from the region last in priority order that has
// one, its last choice (the oldest history turn). It reports whether there was one.
func (a *assembly) dropOne() bool {
	for i := len(a.policy.Regions) - 1; i >= 0; i-- {
		region := a.policy.Regions[i].Name
		if region == RegionHistory {
			if a.keepFrom < len(a.groups) {
				a.keepFrom++
				return true
			}
			continue
		}
		items := a.items(region)
		for j := len(items) - 1; j >= 0; j-- {
			if items[j].kept && !items[j].required {
				items[j].kept = false
				return true
			}
		}
	}
	return false
}

// regionTokens is a count of tokens per region.
type regionTokens [numRegions]int

func sumValues(m regionTokens) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// result builds the Result of a verified rendering.
func (a *assembly) result(out *output) *Result {
	res := &Result{
		Format:            wireName(a.f),
		Model:             a.model.Name,
		Encoding:          a.model.Encoding,
		Budget:            a.budget,
		TotalTokens:       out.total,
		Exact:             a.model.Exact(),
		Messages:          out.messages,
		System:            out.system,
		SystemBlocks:      out.systemBlocks,
		Tools:             slices.Clone(out.tools), // the bytes are the tool set's: see Result.Tools
		Text:              out.text,
		Instructions:      out.instructions,
		Input:             out.input,
		SystemInstruction: out.systemInstruction,
		Contents:          out.contents,
		Context:           out.context,
		Citations:         []Reference{},
	}
	if !a.model.Exact() {
		res.Encoding = "estimate"
	}
	sum := sha256.Sum256([]byte(out.prefix))
	res.PrefixHash = hex.EncodeToString(sum[:16])
	if res.Format == FormatOpenAI || res.Format == FormatResponses {
		res.PromptCacheKey = promptCacheKey(a.req.CacheScope, sum)
	}
	res.Citations = make([]Reference, len(a.cited))
	for i, it := range a.cited {
		res.Citations[i] = *it.ref
	}
	res.Report.Regions = make([]RegionReport, 0, 3+len(a.policy.Regions))

	// An image counted by an estimated rule makes its region's count an estimate.
	if a.keptEstimatedImages() {
		out.estimate(RegionHistory)
	}
	if a.messageRendered != nil && a.model.Image.Estimate && hasImage(a.req.MessageParts) {
		out.estimate(RegionMessage)
	}
	// The report: required regions, then the optional ones in priority order.
	used := out.regionsUsed()
	if a.req.CacheReport || a.req.CachePrevious != nil {
		res.CacheState, res.Cache = a.cacheState(res, used, a.req.CachePrevious)
	}
	add := func(name Region, budget, used int, included []string, tokens []int, dropped []Dropped) {
		exact := a.model.Exact() && !out.estimated[name]
		res.Exact = res.Exact && exact
		if tokens == nil { // a region of one item at most: the item's tokens are the region's
			tokens = make([]int, len(included))
			for i := range tokens {
				tokens[i] = used
			}
		}
		res.Report.Regions = append(res.Report.Regions, RegionReport{
			Name: name, Budget: budget, Used: used, Exact: exact,
			Included: nonNil(included), IncludedTokens: tokens, Dropped: nonNilDropped(dropped),
		})
	}
	add(RegionInstructions, used[RegionInstructions], used[RegionInstructions], a.instructionIDs, a.instructionTokens, a.dropped[RegionInstructions])
	toolNames := make([]string, 0, len(a.req.Tools))
	var tools []Tool // in the order they are rendered
	if a.tools != nil {
		tools = a.tools.canonical
	}
	for _, t := range tools {
		toolNames = append(toolNames, t.Function.Name)
	}
	add(RegionTools, used[RegionTools], used[RegionTools], toolNames, a.toolItemTokens(), a.dropped[RegionTools])
	add(RegionMessage, used[RegionMessage], used[RegionMessage], idsIf(a.hasMessage, "message"), nil, a.dropped[RegionMessage])
	if s := a.req.Summary; s != nil { // reported only when there is one, so that a report without is as it was
		add(RegionSummary, used[RegionSummary], used[RegionSummary], idsIf(a.summary != nil, "summary"), nil, a.dropped[RegionSummary])
		res.Report.Summary = &SummaryRange{From: s.From, To: s.To, Covers: a.covers}
	}
	for _, r := range a.policy.Regions {
		var included []string
		var tokens []int
		var drops []Dropped
		if r.Name == RegionHistory {
			included, tokens, drops = a.historyReport()
		} else {
			items := a.items(r.Name)
			included, tokens = make([]string, 0, len(items)), make([]int, 0, len(items))
			drops = slices.Grow(slices.Clip(a.dropped[r.Name]), len(items))
			for _, it := range items {
				if it.kept {
					included, tokens = append(included, it.id), append(tokens, it.cost)
					continue
				}
				reason := ReasonBudget
				if it.dup != "" {
					reason = it.dup
				}
				drops = append(drops, Dropped{ID: it.id, Reason: reason, Tokens: a.droppedCost(it)})
			}
		}
		// A region that took leftover tokens past its share was allotted what it used.
		n := used[r.Name]
		add(r.Name, max(a.alloc[r.Name], n), n, included, tokens, drops)
	}
	return res
}

// historyReport is the history region's items: the kept messages, oldest first, with their tokens, and
// the dropped ones (see Dropped.Tokens).
func (a *assembly) historyReport() (included []string, tokens []int, drops []Dropped) {
	kept, dropped := 0, 0
	for i, g := range a.groups {
		if i >= a.keepFrom {
			kept += int(g.n)
		} else if !g.orphaned {
			dropped += int(g.n)
		}
	}
	for _, g := range a.required {
		kept += int(g.n)
	}
	included, tokens = make([]string, 0, kept), make([]int, 0, kept)
	keep := func(g *group) {
		for k := int(g.first); k < int(g.first+g.n); k++ {
			included, tokens = append(included, historyID(k)), append(tokens, int(a.msgCosts[k]))
		}
	}
	drops = slices.Grow(slices.Clip(a.dropped[RegionHistory]), dropped)
	if a.req.CountDropped {
		for i, k := range a.droppedMsgs { // summarized and orphaned messages, which no group holds
			if d := &drops[i]; d.Tokens < 0 {
				d.Tokens = a.messageCost(int(k))
			}
		}
	}
	for i := range a.groups {
		g := &a.groups[i]
		switch {
		case i >= a.keepFrom:
			keep(g)
		case !g.orphaned: // an orphaned turn is reported so already
			reason := ReasonBudget
			if i >= a.stepFrom && i < a.stepTo {
				reason = ReasonStep
			}
			if g.cost < 0 && a.req.CountDropped {
				a.groupCost(g)
			}
			for k := int(g.first); k < int(g.first+g.n); k++ {
				drops = append(drops, Dropped{ID: historyID(k), Reason: reason, Tokens: a.msgCost(g, k)})
			}
		}
	}
	for i := range a.required {
		keep(&a.required[i])
	}
	for _, c := range slices.Backward(a.cleared) { // the kept ones, oldest first
		if i := a.groupOf(int(c.msg)); i >= a.keepFrom {
			drops = append(drops, Dropped{ID: historyID(int(c.msg)), Reason: ReasonCleared, Tokens: int(c.tokens)})
		}
	}
	return included, tokens, drops
}

// droppedCost is what a candidate left out of its region costs: its cost if the planner counted it, else
// -1, or its count when the request counts every dropped item.
func (a *assembly) droppedCost(it *ctxItem) int {
	switch {
	case it.cost >= 0:
		return it.cost
	case a.req.CountDropped:
		n, _ := a.cost(it, math.MaxInt)
		return n
	}
	return -1
}

func idsIf(cond bool, id string) []string {
	if cond {
		return []string{id}
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilInts(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}

func nonNilDropped(s []Dropped) []Dropped {
	if s == nil {
		return []Dropped{}
	}
	return s
}

// idOf returns an item's id, or a positional one.
func idOf(id, prefix string, i int) string {
	if id != "" {
		return id
	}
	return prefix + "[" + strconv.Itoa(i) + "]"
}

// PromptBudget is the most tokens a prompt for model may have: maxTokens when it is positive; otherwise the
// model's window less reserveOutput (0: the model's output limit, capped at a quarter of the window) and
// margin (0: 1% of the window). It returns an error wrapping ErrInvalidRequest for negative values, for a
// reservation that leaves no room, and for a maxTokens more than the model's window leaves after the
// reserved output (reserveOutput, or its default as above): a prompt that large could never be sent. A
// model without a window (ContextWindow 0: not from the registry) takes any positive maxTokens.
func PromptBudget(model tokenizer.Model, maxTokens, reserveOutput, margin int) (int, error) {
	if maxTokens < 0 || reserveOutput < 0 {
		return 0, fmt.Errorf("%w: max_tokens and reserve_output must not be negative", ErrInvalidRequest)
	}
	if maxTokens > 0 && model.ContextWindow <= 0 {
		return maxTokens, nil
	}
	if reserveOutput == 0 {
		reserveOutput = min(model.MaxOutputTokens, model.ContextWindow/4)
	}
	if maxTokens > 0 {
		if limit := model.ContextWindow - reserveOutput; maxTokens > limit {
			return 0, fmt.Errorf("%w: max_tokens %d is more than %s's window of %d leaves after %d reserved for output: at most %d",
				ErrInvalidRequest, maxTokens, model.Name, model.ContextWindow, reserveOutput, max(limit, 0))
		}
		return maxTokens, nil
	}
	if margin == 0 {
		margin = model.ContextWindow / 100
	}
	budget := model.ContextWindow - reserveOutput - margin
	if budget <= 0 {
		return 0, fmt.Errorf("%w: reserve_output %d leaves no room in %s's window of %d", ErrInvalidRequest, reserveOutput, model.Name, model.ContextWindow)
	}
	return budget, nil
}

// promptCacheKey is Result.PromptCacheKey of the scope and the stable prefix's SHA-256.
func promptCacheKey(scope string, prefix [sha256.Size]byte) string {
	h := sha256.New()
	h.Write([]byte("loom prompt_cache_key 1\x00"))
	h.Write([]byte(strconv.Itoa(len(scope)) + ":" + scope))
	h.Write(prefix[:])
	return "loom-" + hex.EncodeToString(h.Sum(nil)[:16])
}
