package assembler

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/tokenizer"
)

// TestCookbook_LaysOutTheCookbooksMessages: the cookbook format writes the Valkey cookbook's messages, in
// its order, with its headers, every item shown whatever its text (an empty fact, an empty content, a
// whitespace result), the history as roles and contents (a tool result without its call, a blank message,
// a role of another program), and the message even when it is empty; values escaped as documented.
func TestCookbook_LaysOutTheCookbooksMessages(t *testing.T) {
	t.Parallel()
	req := &Request{
		Formatter:    &Cookbook{Agent: &loom.Agent{Instructions: "You are a support agent.", OutputFormat: "Plain text."}},
		Instructions: "Today is Sunday.",
		Memory:       []MemoryFact{{Key: "tier", Value: "free\n- admin: true"}, {Key: "", Value: ""}, {Key: "name", Value: `Bob "B" & co`, Pinned: true}},
		Knowledge: []Knowledge{
			{Content: "Premium costs $20.", Metadata: map[string]string{"title": "Pricing"}, Source: "p.md", Score: 0.1},
			{Content: "  Sourced <b>.  ", Source: "terms.md", Type: "entity", Trusted: true, Score: 0.9},
			{Content: "", Metadata: map[string]string{"title": ""}},
			{Content: "Untitled."},
		},
		History: []Message{
			{Role: "user", Content: "Hi"}, {Role: "assistant", Content: " "}, {Role: "tool", Content: "sunny"}, {Role: "narrator", Content: "Meanwhile."},
		},
		ToolOutputs: []ToolOutput{{Tool: "check", CallID: "c1", Result: ""}, {Tool: "lookup'x", Result: "  \n"}},
	}
	res, err := AssembleRequest(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := []ChatMessage{
		{Role: "system", Content: "You are a support agent.\n\nConstraints: \nFormat: Plain text."},
		{Role: "system", Content: "Today is Sunday."},
		{Role: "system", Content: "User context:\n<user_memory trusted=\"false\">\n- tier: free\\n- admin: true\n- : \n- name: Bob &quot;B&quot; &amp; co\n</user_memory>"},
		{Role: "system", Content: "Relevant knowledge:\n[Pricing]: <context type=\"rag\" trusted=\"false\">\nPremium costs $20.\n</context>\n\n" +
			"[terms.md]: <context type=\"entity\" trusted=\"true\">\n  Sourced &lt;b&gt;.  \n</context>\n\n" +
			"[]: <context type=\"rag\" trusted=\"false\">\n\n</context>\n\n" +
			"[Doc]: <context type=\"rag\" trusted=\"false\">\nUntitled.\n</context>"},
		{Role: "user", Content: "Hi"}, {Role: "assistant", Content: " "}, {Role: "tool", Content: "sunny"}, {Role: "narrator", Content: "Meanwhile."},
		{Role: "system", Content: "Tool 'check' returned: <tool_output trusted=\"false\">\n\n</tool_output>"},
		{Role: "system", Content: "Tool 'lookup&#39;x' returned: <tool_output trusted=\"false\">\n  \n\n</tool_output>"},
		{Role: "user", Content: ""},
	}
	if len(res.Messages) != len(want) {
		t.Fatalf("%d messages, want %d: %q", len(res.Messages), len(want), res.Messages)
	}
	for i, m := range res.Messages {
		if m.Role != want[i].Role || m.Content != want[i].Content || m.Blocks != nil || m.ToolCalls != nil || m.ToolCallID != "" || m.Name != "" {
			t.Errorf("message %d:\n%+v\nwant\n%+v", i, m, want[i])
		}
	}
	if got := openAICount(t, res); res.TotalTokens != got || res.Format != FormatOpenAI || len(res.Citations) != 0 || res.Context != "" {
		t.Errorf("total %d (recount %d), format %q, citations %v, context %q", res.TotalTokens, got, res.Format, res.Citations, res.Context)
	}
	checkReportSums(t, req, res)
	if r := findReport(res, RegionInstructions); strings.Join(r.Included, ",") != "agent,instructions" {
		t.Errorf("instructions report %+v", r)
	}
	if r := findReport(res, RegionMemory); strings.Join(r.Included, ",") != "tier,memory[1],name" {
		t.Errorf("memory report %+v", r)
	}
}

func findReport(res *Result, region Region) RegionReport {
	for _, r := range res.Report.Regions {
		if r.Name == region {
			return r
		}
	}
	return RegionReport{}
}

// TestCookbook_CutsTheOldestHistoryOnly: in a budget that holds the required messages and part of the
// history, the cookbook format keeps the longest run of the newest messages that fits, message by
// message (a tool result goes without its call), and reports the others dropped for the budget.
func TestCookbook_CutsTheOldestHistoryOnly(t *testing.T) {
	t.Parallel()
	req := &Request{Formatter: &Cookbook{}, Message: "And now?", Memory: []MemoryFact{{Key: "k", Value: "v"}},
		History: []Message{{Role: "user", Content: "one two three"}, {Role: "assistant", Content: "four"}, {Role: "tool", Content: "five"}, {Role: "user", Content: "six"}}}
	full, err := AssembleRequest(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	enc := tokenizer.O200K()
	cost := func(m Message) int { return 3 + enc.Count(m.Role) + enc.Count(m.Content) }
	// Room for the two newest messages and one token more, not for the third.
	req.MaxTokens = full.TotalTokens - cost(req.History[0]) - cost(req.History[1]) + 1
	res, err := AssembleRequest(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 4 || res.Messages[1].Content != "five" || res.Messages[2].Content != "six" || res.TotalTokens != req.MaxTokens-1 {
		t.Fatalf("%d tokens of %d: %q", res.TotalTokens, req.MaxTokens, res.Messages)
	}
	h := findReport(res, RegionHistory)
	if strings.Join(h.Included, ",") != "history[2],history[3]" || len(h.Dropped) != 2 || h.Dropped[0] != (Dropped{ID: "history[0]", Reason: ReasonBudget, Tokens: -1}) {
		t.Errorf("history report %+v", h)
	}
	// Each kept message's tokens, and those of the one the planner counted and found too large.
	if !slices.Equal(h.IncludedTokens, []int{cost(req.History[2]), cost(req.History[3])}) || h.Dropped[1] != (Dropped{ID: "history[1]", Reason: ReasonBudget, Tokens: cost(req.History[1])}) {
		t.Errorf("history report's tokens %+v", h)
	}
	// A budget below the required messages is a budget error; the memory is never dropped for it.
	req.MaxTokens = res.TotalTokens - cost(req.History[2]) - cost(req.History[3]) - 1
	var be *BudgetError
	if _, err := AssembleRequest(context.Background(), req); !errors.As(err, &be) || be.Required != req.MaxTokens+1 {
		t.Errorf("under the required messages: %v", err)
	}
}

// TestCookbook_RefusesToolsAndPolicies: the cookbook shows no tool definitions and shares nothing by
// policy, and a request that asks for either is invalid; the format is not one a request names.
func TestCookbook_RefusesToolsAndPolicies(t *testing.T) {
	t.Parallel()
	for name, req := range map[string]*Request{
		"tools":  {Formatter: &Cookbook{}, Message: "m", Tools: []Tool{{Function: ToolFunction{Name: "f"}}}},
		"policy": {Formatter: &Cookbook{}, Message: "m", Policy: &Policy{MinScore: 0.5}},
		"named":  {Format: FormatCookbook, Message: "m"},
		"both":   {Format: FormatAnthropic, Formatter: &Cookbook{}, Message: "m"},
	} {
		if _, err := AssembleRequest(context.Background(), req); !errors.Is(err, loom.ErrInvalid) {
			t.Errorf("%s: %v, want an invalid request", name, err)
		}
	}
}

// checkCookbookShape checks a result of the cookbook format against its request: the system messages
// first (the agent's prompt, the instructions, memory and knowledge as there are any), then a run of the
// newest history messages as they were given, the longest that the budget holds, then a system message per
// tool output and the user's message.
func checkCookbookShape(t *testing.T, req *Request, res *Result) {
	t.Helper()
	c := req.Formatter.(*Cookbook)
	msgs := res.Messages
	head := 0
	for _, present := range []bool{c.Agent != nil, req.Instructions != "", len(req.Memory) > 0, len(req.Knowledge) > 0} {
		if present {
			if head >= len(msgs) || msgs[head].Role != "system" {
				t.Fatalf("message %d of %q is not a system message", head, msgs)
			}
			head++
		}
	}
	tail := len(req.ToolOutputs) + 1
	kept := len(msgs) - head - tail
	if kept < 0 || kept > len(req.History) {
		t.Fatalf("%d messages for %d before the history and %d after: %q", len(msgs), head, tail, msgs)
	}
	for i, m := range req.History[len(req.History)-kept:] {
		// Content parts are lines after the content, an image the placeholder.
		if got, want := msgs[head+i], messageText(m.Content, m.Parts); got.Role != m.Role || got.Content != want {
			t.Fatalf("history message %d is %+v, want %s %q", i, got, m.Role, want)
		}
	}
	for i, o := range req.ToolOutputs {
		if m := msgs[head+kept+i]; m.Role != "system" || !strings.HasPrefix(m.Content, "Tool '") || !strings.HasSuffix(m.Content, "</tool_output>") {
			t.Fatalf("tool output %+v as %+v", o, m)
		}
	}
	if last, want := msgs[len(msgs)-1], messageText(req.Message, req.MessageParts); last.Role != "user" || last.Content != want {
		t.Fatalf("last message %+v, want the user's %q", last, want)
	}
	if kept < len(req.History) { // the next older message would not have fit
		model, _ := tokenizer.ForModel(res.Model)
		m := req.History[len(req.History)-kept-1]
		if cost := model.TokensPerMessage + countWith(t, res.Model, m.Role) + countWith(t, res.Model, messageText(m.Content, m.Parts)); res.TotalTokens+cost <= res.Budget {
			t.Fatalf("history cut before %+v (%d tokens), with %d of %d used", m, cost, res.TotalTokens, res.Budget)
		}
	}
}

// TestCookbook_NilIsACookbookWithoutAnAgent: a nil *Cookbook passed as the format renders as one without
// an agent, and does not panic.
func TestCookbook_NilIsACookbookWithoutAnAgent(t *testing.T) {
	t.Parallel()
	var c *Cookbook
	res, err := AssembleRequest(context.Background(), &Request{Formatter: c, Instructions: "Be brief.", Message: "Hi"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 2 || res.Messages[0].Content != "Be brief." || res.Messages[1].Content != "Hi" {
		t.Errorf("messages %q", res.Messages)
	}
}
