package store

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/tokenizer"
)

// The helpers below hold the rules every backend applies, so that they apply them alike.

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

// ValidateIDs checks pairs of kind and id, in order.
func ValidateIDs(l Limits, kindsAndIDs ...string) error {
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

// CountedEncodings are the encodings whose counts PrepareMessages caches on each message.
var CountedEncodings = []string{tokenizer.O200KBase, tokenizer.CL100KBase}

// CheckRole returns an error wrapping ErrInvalid unless m's role is one an assembly can use
// (assembler.CheckRole: user, assistant, tool with its tool_call_id, or system).
func CheckRole(m Message) error {
	if err := assembler.CheckRole(m.Role, m.ToolCallID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// CheckToolName returns an error wrapping ErrInvalid, which names the name, unless name is a tool name
// that providers accept (assembler.CheckToolName: ^[a-zA-Z0-9_-]{1,64}$). The tools of an agent, the tool
// calls of a message and the tool of a tool output are checked by it.
func CheckToolName(name string) error {
	if err := assembler.CheckToolName(name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return nil
}

// PrepareMessages validates msgs for appending and returns copies with Time (now, if zero) and
// TokenCounts set: counted for CountedEncodings, whatever counts were given (they are not trusted). Roles are user, assistant, tool and system; a tool
// message needs its tool_call_id; tool calls need an id, a name and JSON arguments; content may be blank only
// in a tool message and in an assistant message with tool calls. Errors wrap ErrInvalid
// or ErrTooLarge.
func PrepareMessages(l Limits, now time.Time, msgs []Message) ([]Message, error) {
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
		if strings.TrimSpace(m.Content) == "" && m.Role != "tool" && len(m.ToolCalls) == 0 {
			return nil, fmt.Errorf("%w: %s: a %s message needs content", ErrInvalid, what, m.Role)
		}
		if err := validateText(l, what+" content", m.Content); err != nil {
			return nil, err
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
		m.ToolCalls = slices.Clone(m.ToolCalls)
		for j := range m.ToolCalls {
			if m.ToolCalls[j].Type == "" {
				m.ToolCalls[j].Type = "function"
			}
		}
		// Always counted here: a count given with the message is not trusted (a wrong one would make
		// every assembly's budget wrong).
		counts := make(map[string]int, len(CountedEncodings))
		for _, name := range CountedEncodings {
			enc, _ := tokenizer.Get(name)
			counts[name] = enc.Count(m.Content)
		}
		m.TokenCounts = counts
		out[i] = m
	}
	return out, nil
}

// PrepareFact validates f and returns it with UpdatedAt set (now, if zero).
func PrepareFact(l Limits, now time.Time, f Fact) (Fact, error) {
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

// PrepareToolOutput validates o (its tool's name by CheckToolName) and returns it with Time set (now, if
// zero) and Seq cleared.
func PrepareToolOutput(l Limits, now time.Time, o ToolOutput) (ToolOutput, error) {
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

// PrepareKnowledge validates a session's knowledge items and returns copies, with the token counts of each
// item's content as the assembler renders it (assembler.RenderedKnowledge) counted for CountedEncodings
// (under assembler.KnowledgeCountKey), whatever counts were given.
func PrepareKnowledge(l Limits, items []Knowledge) ([]Knowledge, error) {
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
		counts := make(map[string]int, len(CountedEncodings))
		rendered := assembler.RenderedKnowledge(k.Content)
		for _, name := range CountedEncodings {
			enc, _ := tokenizer.Get(name)
			counts[assembler.KnowledgeCountKey(name)] = enc.Count(rendered)
		}
		out[i].TokenCounts = counts
	}
	return out, nil
}

// PrepareAgent validates a (its tools' names by CheckToolName) and returns it with UpdatedAt set (now, if
// zero).
func PrepareAgent(l Limits, now time.Time, a Agent) (Agent, error) {
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

// SelectMessages applies q to msgs (oldest first) and returns the selected suffix.
func SelectMessages(msgs []Message, q MessageQuery) []Message {
	if q.Limit > 0 && len(msgs) > q.Limit {
		msgs = msgs[len(msgs)-q.Limit:]
	}
	if q.MaxTokens > 0 {
		enc := q.Encoding
		if enc == "" {
			enc = tokenizer.O200KBase
		}
		total, start := 0, len(msgs)
		for start > 0 {
			m := msgs[start-1]
			n, ok := m.TokenCounts[enc]
			if !ok {
				if e, err := tokenizer.Get(enc); err == nil {
					n = e.Count(m.Content)
				} else {
					n = tokenizer.Estimate(m.Content)
				}
			}
			if total+n+MessageOverhead > q.MaxTokens {
				break
			}
			total += n + MessageOverhead
			start--
		}
		msgs = msgs[start:]
	}
	return msgs
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
