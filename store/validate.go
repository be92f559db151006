package store

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/internal/xmltext"
	"github.com/context-loom/loom/tokenizer"
)

// The rules the Store applies for every backend, before the backend sees a call.

// ValidateID checks an id of the given kind ("tenant", "session", ...): not empty, valid UTF-8, no control
// characters, at most l.MaxIDBytes bytes. It returns an error wrapping ErrInvalid or ErrTooLarge.
func ValidateID(l Limits, kind, id string) error {
	l = l.WithDefaults()
	switch {
	case id == "":
		return fmt.Errorf("%w: empty %s id", ErrInvalid, kind)
	case len(id) > l.MaxIDBytes:
		return fmt.Errorf("%w: %s id is %d bytes, the limit is %d", ErrTooLarge, kind, len(id), l.MaxIDBytes)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: %s id is not valid UTF-8", ErrInvalid, kind)
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: %s id %q has a control character", ErrInvalid, kind, id)
		}
	}
	return nil
}

// validateIDs checks pairs of kind and id, in order.
func validateIDs(l Limits, kindsAndIDs ...string) error {
	for i := 0; i+1 < len(kindsAndIDs); i += 2 {
		if err := ValidateID(l, kindsAndIDs[i], kindsAndIDs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

func validateText(l Limits, what, s string) error {
	if len(s) > l.MaxValueBytes {
		return fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrTooLarge, what, len(s), l.MaxValueBytes)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, what)
	}
	return nil
}

// CountedEncodings are the encodings whose counts prepareMessages caches on each message (see
// MessageCounts).
var CountedEncodings = []string{tokenizer.O200KBase, tokenizer.CL100KBase}

// MessageCounts returns the counts of a message's content that a store caches on it: under each of
// CountedEncodings, and the estimate (tokenizer.Estimate) under tokenizer.EstimateKey, for the models
// and formats whose counts are estimated.
func MessageCounts(content string) map[string]int {
	counts := make(map[string]int, len(CountedEncodings)+1)
	for _, name := range CountedEncodings {
		enc, _ := tokenizer.Get(name)
		counts[name] = enc.Count(content)
	}
	counts[tokenizer.EstimateKey] = tokenizer.Estimate(content)
	return counts
}

// CheckRole returns an error wrapping ErrInvalid unless m's role is one an assembly can use
// (loom.CheckRole: user, assistant, tool with its tool_call_id, or system).
func CheckRole(m Message) error { return invalid(loom.CheckRole(m.Role, m.ToolCallID)) }

// CheckToolName returns an error wrapping ErrInvalid, which names the name, unless name is a tool name
// that providers accept (loom.CheckToolName: ^[a-zA-Z0-9_-]{1,64}$). The tools of an agent, the tool
// calls of a message and the tool of a tool output are checked by it.
func CheckToolName(name string) error { return invalid(loom.CheckToolName(name)) }

// invalid returns err, a loom.ErrInvalid, as an ErrInvalid of the store's; nil for nil.
func invalid(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrInvalid, err)
}

// prepareMessages validates msgs for appending and returns copies with Time (now, if zero) and
// TokenCounts set: MessageCounts, whatever counts were given (they are not trusted); the
// counts are of Content, not of a message's parts, which an assembly counts (their images by its model). Roles
// are user, assistant, tool and system; a tool message needs its tool_call_id; a name is at most
// Limits.MaxIDBytes; content may be blank only in a tool message and in an assistant message with tool
// calls; tool calls need an id, a name that providers accept (CheckToolName) and JSON arguments, and their
// type is "function" (set if empty); content parts are a user message's, as loom.CheckParts allows them
// (at most loom.MaxParts, each text within Limits.MaxValueBytes), and the message needs no Content beside
// them. Errors wrap ErrInvalid or ErrTooLarge.
func prepareMessages(l Limits, now time.Time, msgs []Message) ([]Message, error) {
	l = l.WithDefaults()
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w: no messages to append", ErrInvalid)
	}
	if len(msgs) > l.MaxBatch {
		return nil, fmt.Errorf("%w: %d messages in one append, the limit is %d", ErrTooLarge, len(msgs), l.MaxBatch)
	}
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		what := fmt.Sprintf("message %d", i)
		if err := CheckRole(m); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if len(m.ToolCalls) > 0 && m.Role != "assistant" {
			return nil, fmt.Errorf("%w: %s: only an assistant message has tool calls", ErrInvalid, what)
		}
		// A blank message says nothing a model could use; only a tool's result may be empty, and an
		// assistant message that carries tool calls.
		if strings.TrimSpace(m.Content) == "" && len(m.Parts) == 0 && m.Role != "tool" && len(m.ToolCalls) == 0 {
			return nil, fmt.Errorf("%w: %s: a %s message needs content", ErrInvalid, what, m.Role)
		}
		if err := validateText(l, what+" content", m.Content); err != nil {
			return nil, err
		}
		// Content parts: a user message's, within loom's limits (checked before any image is read), each
		// text within the store's.
		if len(m.Parts) > loom.MaxParts {
			return nil, fmt.Errorf("%w: %s has %d content parts, the limit is %d", ErrTooLarge, what, len(m.Parts), loom.MaxParts)
		}
		for j, p := range m.Parts {
			if err := validateText(l, fmt.Sprintf("%s part %d", what, j), p.Text); err != nil {
				return nil, err
			}
		}
		if err := loom.CheckParts(m.Role, m.Parts); err != nil {
			return nil, fmt.Errorf("%s: %w", what, invalid(err))
		}
		// A name is an identifier (OpenAI's are at most 64 characters), which some formats do not show: a
		// long one could not be bounded by what the message costs (see MessageTokens).
		if len(m.Name) > l.MaxIDBytes {
			return nil, fmt.Errorf("%w: %s name is %d bytes, the limit is %d", ErrTooLarge, what, len(m.Name), l.MaxIDBytes)
		}
		if err := validateText(l, what+" name", m.Name); err != nil {
			return nil, err
		}
		if m.ToolCallID != "" {
			if err := ValidateID(l, "tool call", m.ToolCallID); err != nil {
				return nil, fmt.Errorf("%s: %w", what, err)
			}
		}
		for j, c := range m.ToolCalls {
			if err := ValidateID(l, "tool call", c.ID); err != nil {
				return nil, fmt.Errorf("%s call %d: %w", what, j, err)
			}
			if c.Type != "" && c.Type != "function" {
				return nil, fmt.Errorf("%w: %s call %d: type %q (want function)", ErrInvalid, what, j, c.Type)
			}
			if err := CheckToolName(c.Function.Name); err != nil {
				return nil, fmt.Errorf("%s call %d: %w", what, j, err)
			}
			if err := validateText(l, what+" arguments", c.Function.Arguments); err != nil {
				return nil, err
			}
			if c.Function.Arguments != "" && !json.Valid([]byte(c.Function.Arguments)) {
				return nil, fmt.Errorf("%w: %s call %d: arguments are not JSON", ErrInvalid, what, j)
			}
		}
		m.Seq = 0
		if m.Time.IsZero() {
			m.Time = now
		}
		m.Time = m.Time.UTC()
		m.Parts = CloneParts(m.Parts)
		m.ToolCalls = slices.Clone(m.ToolCalls)
		for j := range m.ToolCalls {
			if m.ToolCalls[j].Type == "" {
				m.ToolCalls[j].Type = "function"
			}
		}
		// Always counted here: a count given with the message is not trusted (a wrong one would make
		// every assembly's budget wrong).
		m.TokenCounts = MessageCounts(m.Content)
		out[i] = m
	}
	return out, nil
}

// CloneParts returns a copy of parts that shares no memory with them (an image's data is copied too), so
// that a store keeps what was appended whatever the caller does with its slices afterwards, and a caller
// what it read. Backends that keep messages in memory copy them with it.
func CloneParts(parts []loom.Part) []loom.Part {
	if parts == nil {
		return nil
	}
	out := slices.Clone(parts)
	for i := range out {
		if im := out[i].Image; im != nil {
			c := *im
			c.Data = slices.Clone(im.Data)
			out[i].Image = &c
		}
	}
	return out
}

// prepareFact validates f and returns it with UpdatedAt set (now, if zero).
func prepareFact(l Limits, now time.Time, f Fact) (Fact, error) {
	l = l.WithDefaults()
	if err := ValidateID(l, "fact key", f.Key); err != nil {
		return Fact{}, err
	}
	if err := validateText(l, "fact value", f.Value); err != nil {
		return Fact{}, err
	}
	if err := validateText(l, "fact source", f.Source); err != nil {
		return Fact{}, err
	}
	if f.UpdatedAt.IsZero() {
		f.UpdatedAt = now
	}
	f.UpdatedAt = f.UpdatedAt.UTC()
	return f, nil
}

// prepareToolOutput validates o (its tool's name by CheckToolName) and returns it with Time set (now, if
// zero) and Seq cleared.
func prepareToolOutput(l Limits, now time.Time, o ToolOutput) (ToolOutput, error) {
	l = l.WithDefaults()
	if err := CheckToolName(o.Tool); err != nil {
		return ToolOutput{}, fmt.Errorf("tool output: %w", err)
	}
	for _, f := range []struct{ what, s string }{{"tool name", o.Tool}, {"call id", o.CallID}, {"tool args", o.Args}, {"tool result", o.Result}} {
		if err := validateText(l, f.what, f.s); err != nil {
			return ToolOutput{}, err
		}
	}
	o.Seq = 0
	if o.Time.IsZero() {
		o.Time = now
	}
	o.Time = o.Time.UTC()
	return o, nil
}

// prepareKnowledge validates a session's knowledge items and returns copies whose token counts are those
// of each item's content as the assembler renders it, whatever counts were given.
func prepareKnowledge(l Limits, items []Knowledge) ([]Knowledge, error) {
	l = l.WithDefaults()
	if len(items) > l.MaxBatch {
		return nil, fmt.Errorf("%w: %d knowledge items, the limit is %d", ErrTooLarge, len(items), l.MaxBatch)
	}
	out := slices.Clone(items)
	for i, k := range out {
		if err := validateText(l, fmt.Sprintf("knowledge %d", i), k.Content); err != nil {
			return nil, err
		}
		for _, s := range []string{k.ID, k.DocumentID, k.Source, k.Type} {
			if err := validateText(l, fmt.Sprintf("knowledge %d field", i), s); err != nil {
				return nil, err
			}
		}
		out[i].Metadata = maps.Clone(k.Metadata)
		// Always counted here, as messages are: given counts are not trusted.
		out[i].TokenCounts = xmltext.KnowledgeCounts(k.Content)
	}
	return out, nil
}

// prepareAgent validates a (its tools' names by CheckToolName) and returns it with UpdatedAt set (now, if
// zero).
func prepareAgent(l Limits, now time.Time, a Agent) (Agent, error) {
	l = l.WithDefaults()
	if err := ValidateID(l, "agent", a.ID); err != nil {
		return Agent{}, err
	}
	for _, f := range []struct{ what, s string }{{"instructions", a.Instructions}, {"constraints", a.Constraints}, {"output format", a.OutputFormat}, {"model", a.Model}} {
		if err := validateText(l, "agent "+f.what, f.s); err != nil {
			return Agent{}, err
		}
	}
	if a.MaxTokens < 0 {
		return Agent{}, fmt.Errorf("%w: agent max_tokens is negative", ErrInvalid)
	}
	// A budget larger than its own model's whole window could never be met: refused when stored. (Whether
	// it leaves room for the output depends on the request's reserve_output, or the request may name
	// another model: that is the assembly's to judge. An unknown model is left to the request too.)
	if m, err := tokenizer.ForModel(a.Model); a.Model != "" && err == nil && m.ContextWindow > 0 && a.MaxTokens > m.ContextWindow {
		return Agent{}, fmt.Errorf("%w: agent max_tokens %d is more than %s's window of %d", ErrInvalid, a.MaxTokens, m.Name, m.ContextWindow)
	}
	if err := loom.CheckCacheOptions(a.CacheBreakpoints, a.CacheTTL); err != nil {
		return Agent{}, fmt.Errorf("%w: agent: %w", ErrInvalid, err)
	}
	for i, t := range a.Tools {
		if err := CheckToolName(t.Function.Name); err != nil {
			return Agent{}, fmt.Errorf("agent tool %d: %w", i, err)
		}
		if len(t.Function.Parameters) > 0 && !json.Valid(t.Function.Parameters) {
			return Agent{}, fmt.Errorf("%w: agent tool %q: parameters are not JSON", ErrInvalid, t.Function.Name)
		}
	}
	if a.UpdatedAt.IsZero() {
		a.UpdatedAt = now
	}
	a.UpdatedAt = a.UpdatedAt.UTC()
	a.Tools = slices.Clone(a.Tools)
	return a, nil
}

// CheckMessageQuery returns an error wrapping ErrInvalid unless q is a query a backend can answer: no
// negative field, and an Encoding that names an encoding of package tokenizer or EstimateEncoding.
func CheckMessageQuery(q MessageQuery) error {
	switch {
	case q.Before < 0 || q.Limit < 0 || q.MaxTokens < 0:
		return fmt.Errorf("%w: a message query's before, limit and max tokens must not be negative", ErrInvalid)
	case q.Encoding == "" || q.Encoding == EstimateEncoding:
		return nil
	}
	if _, err := tokenizer.Get(q.Encoding); err != nil {
		return fmt.Errorf("%w: message query: %w", ErrInvalid, err)
	}
	return nil
}

// MessageTokens is what MessageQuery.MaxTokens counts for m in encoding (see MessageQuery.Encoding;
// "" is o200k_base): its content's count, MessageOverhead, and with calls, in an exact encoding, its tool
// calls' share, len(JSON of m.ToolCalls)/ToolCallBytesPerToken (an estimate has no such floor: it prices
// a run of spaces of any length at a token or two). The content's count is the cached one; a message
// without one (or with a negative one) is counted now. Every chat format costs at least this for m (the
// cookbook preset, which shows no tool calls, without calls), so a history that reads no more than its
// budget's worth of it reads every message that can be kept.
func MessageTokens(m Message, encoding string, calls bool) int {
	n := contentTokens(m, encoding) + MessageOverhead
	if calls && len(m.ToolCalls) > 0 && encoding != EstimateEncoding {
		n += ToolCallsLen(m.ToolCalls) / ToolCallBytesPerToken
	}
	return n
}

// ToolCallsLen is the length of calls as JSON (json.Marshal), which the backends store.
func ToolCallsLen(calls []loom.ToolCall) int {
	b, err := json.Marshal(calls)
	if err != nil { // cannot happen: strings only
		return 0
	}
	return len(b)
}

func contentTokens(m Message, encoding string) int {
	key := encoding
	switch encoding {
	case "":
		encoding, key = tokenizer.O200KBase, tokenizer.O200KBase
	case EstimateEncoding:
		key = tokenizer.EstimateKey
	}
	if n, ok := m.TokenCounts[key]; ok && n >= 0 {
		return n
	}
	if e, err := tokenizer.Get(encoding); err == nil {
		return e.Count(m.Content)
	}
	return tokenizer.Estimate(m.Content)
}

// SelectMessages applies q to msgs (oldest first, by Seq) and returns the selected run: of the messages
// whose Seq is less than q.Before (if it is positive), the newest q.Limit (if positive), of which the newest
// whose MessageTokens add up to at most q.MaxTokens (if positive). It counts only the messages it selects,
// and one more.
func SelectMessages(msgs []Message, q MessageQuery) []Message {
	sel, _ := SelectPage(msgs, q)
	return sel
}

// SelectPage is SelectMessages, and the before of the messages that q left out (the Seq after the newest of
// them; 0 if there are none): what a Load reports as Snapshot.NextBefore.
func SelectPage(msgs []Message, q MessageQuery) (_ []Message, next int64) {
	if q.Before > 0 {
		i, _ := slices.BinarySearchFunc(msgs, q.Before, func(m Message, seq int64) int { return cmp.Compare(m.Seq, seq) })
		msgs = msgs[:i]
	}
	start := 0
	if q.Limit > 0 && len(msgs) > q.Limit {
		start = len(msgs) - q.Limit
	}
	if q.MaxTokens > 0 {
		total, i := 0, len(msgs)
		for i > start {
			n := MessageTokens(msgs[i-1], q.Encoding, q.CountToolCalls)
			if total+n > q.MaxTokens {
				break
			}
			total += n
			i--
		}
		start = i
	}
	if start > 0 {
		next = msgs[start-1].Seq + 1
	}
	return msgs[start:], next
}

// PageReader reads a page of a session's stored messages for ReadNewest: up to n of the newest messages
// whose Seq is less than before (0: the newest), oldest first, and the before of the page older than it
// (0 when there is none). A page may hold fewer than n messages while older ones remain (entries it could
// not decode); n is at least 1, and math.MaxInt for all of them.
type PageReader func(before int64, n int) (page []Message, next int64, err error)

// Page sizes of ReadNewest: it reads more a page as it goes, so that a query that selects few messages
// reads few, and one that selects many, few pages.
const (
	firstPage = 16
	maxPage   = 128
)

// FirstPageSize is the n that ReadNewest asks of its PageReader first, so that a backend may read that
// page beside other reads (in a Load's round trip).
func FirstPageSize(q MessageQuery) int {
	n := firstPage
	if q.MaxTokens == 0 {
		n = math.MaxInt
	}
	if q.Limit > 0 {
		n = min(n, q.Limit)
	}
	return n
}

// ReadNewest answers q with pages of read, for a backend that must read a message to count it: it reads
// newest first and stops as soon as q is answered, and returns what SelectMessages(all, q) would, and the
// before of the messages it left out (0 when it reached the session's first). A query without MaxTokens
// reads its Limit in one page.
func ReadNewest(q MessageQuery, read PageReader) (_ []Message, next int64, _ error) {
	var pages [][]Message // newest first
	before, size, kept, total := q.Before, FirstPageSize(q), 0, 0
	for {
		n := size
		if q.Limit > 0 {
			n = min(n, q.Limit-kept)
		}
		page, older, err := read(before, n)
		if err != nil {
			return nil, 0, err
		}
		from := len(page)
		for from > 0 && (q.Limit == 0 || kept < q.Limit) {
			if q.MaxTokens > 0 {
				c := MessageTokens(page[from-1], q.Encoding, q.CountToolCalls)
				if total+c > q.MaxTokens {
					break
				}
				total += c
			}
			from--
			kept++
		}
		pages = append(pages, page[from:])
		switch {
		case from > 0: // stopped inside the page: it begins after the message that did not fit
			next = page[from-1].Seq + 1
		case older == 0:
			next = 0
		default:
			next = older
		}
		if from > 0 || older == 0 || (q.Limit > 0 && kept >= q.Limit) {
			break
		}
		before = older
		if size < maxPage {
			size = min(size*2, maxPage)
		}
	}
	out := make([]Message, 0, kept)
	for i := len(pages) - 1; i >= 0; i-- {
		out = append(out, pages[i]...)
	}
	if len(out) == 0 {
		out = nil
	}
	return out, next, nil
}

// SortFacts orders facts by key, the order Facts returns.
func SortFacts(facts []Fact) {
	slices.SortFunc(facts, func(a, b Fact) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
}
