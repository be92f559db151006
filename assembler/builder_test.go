package assembler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestBuilder_Seed001Shape(t *testing.T) {
	t.Parallel()
	var history []Message
	for i := range 30 {
		history = append(history, Message{Role: "user", Content: fmt.Sprintf("question %d with some words", i)},
			Message{Role: "assistant", Content: fmt.Sprintf("answer %d with some more words", i)})
	}
	b := NewBuilder(200)
	b.AddInstruction("You are a helpful assistant.")
	b.AddKnowledge("The user lives in Tokyo.", "entity", false, "")
	b.AddKnowledge("Tokyo <is> big & busy", "rag", false, "wiki/tokyo.md")
	b.AddMessages(history)
	built, err := b.Build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := "You are a helpful assistant.\n\n<context type=\"entity\" trusted=\"false\">\nThe user lives in Tokyo.\n</context>\n\n" +
		"<context type=\"rag\" source=\"wiki/tokyo.md\" trusted=\"false\">\nTokyo &lt;is&gt; big &amp; busy\n</context>"
	if built.System != want {
		t.Errorf("system:\n%s\nwant:\n%s", built.System, want)
	}
	if built.TotalTokens > 200 || len(built.Messages) == 0 || len(built.Messages) >= len(history) {
		t.Fatalf("total %d, %d messages of %d", built.TotalTokens, len(built.Messages), len(history))
	}
	// The newest messages, from a user message on.
	tail := history[len(history)-len(built.Messages):]
	if built.Messages[0].Role != "user" || built.Messages[len(built.Messages)-1].Content != tail[len(tail)-1].Content {
		t.Errorf("kept %+v", built.Messages)
	}
	// Without a budget everything passes.
	all, err := NewBuilder(0).AddMessages(history).Build(context.Background())
	if err != nil || len(all.Messages) != len(history) {
		t.Fatalf("no budget: %d messages, %v", len(all.Messages), err)
	}
	// Knowledge is always included in full: too much of it is a budget error.
	_, err = NewBuilder(50).AddKnowledge(strings.Repeat("fact ", 100), "rag", false, "").Build(context.Background())
	var be *BudgetError
	if !errors.As(err, &be) {
		t.Errorf("oversized knowledge: %v, want a BudgetError", err)
	}
}

func TestResolveMarkers(t *testing.T) {
	t.Parallel()
	cites := []Reference{{Marker: 1, ID: "a"}, {Marker: 2, ID: "b"}, {Marker: 3, ID: "c"}}
	got := ResolveMarkers("Premium is $20 [2]. It renews monthly [1, 2][3]; see [9] and [x].", cites)
	var ids []string
	for _, c := range got {
		ids = append(ids, c.ID)
	}
	if strings.Join(ids, ",") != "b,a,c" {
		t.Errorf("resolved %v, want b,a,c", ids)
	}
	if len(ResolveMarkers("no markers", cites)) != 0 {
		t.Error("resolved markers in text without any")
	}
}

// TestBuilder_NoBudgetPassesEveryMessageThrough: with no budget (NewBuilder(0)) the messages pass through
// unchanged, as seed 001's build does: a leading assistant greeting, an orphaned tool result and a blank
// message included; TotalTokens is their exact count as OpenAI chat messages with the system prompt.
func TestBuilder_NoBudgetPassesEveryMessageThrough(t *testing.T) {
	t.Parallel()
	history := []Message{
		{Role: "assistant", Content: "Hello! How can I help?"},
		{Role: "user", Content: "What's the weather?"},
		{Role: "tool", ToolCallID: "call_gone", Content: "sunny"},
		{Role: "user", Content: "  "},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Type: "function", Function: ToolCallFunction{Name: "weather", Arguments: `{}`}}}},
		{Role: "assistant", Content: "It is sunny."},
	}
	built, err := NewBuilder(0).AddInstruction("Be brief.").AddKnowledge("It rained yesterday.", "rag", false, "").AddMessages(history).Build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(built.Messages) != len(history) {
		t.Fatalf("%d messages of %d passed: %+v", len(built.Messages), len(history), built.Messages)
	}
	for i := range history {
		if fmt.Sprint(built.Messages[i]) != fmt.Sprint(history[i]) {
			t.Errorf("message %d changed: %+v, want %+v", i, built.Messages[i], history[i])
		}
	}
	msgs := []ChatMessage{{Role: "system", Content: built.System}}
	for _, m := range history {
		msgs = append(msgs, ChatMessage{Role: m.Role, Content: m.Content, Name: m.Name, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID})
	}
	if want := openAICount(t, &Result{Model: DefaultModel, Messages: msgs}); built.TotalTokens != want {
		t.Errorf("TotalTokens %d, want %d", built.TotalTokens, want)
	}
	var hist *RegionReport
	for i := range built.Report.Regions {
		if built.Report.Regions[i].Name == RegionHistory {
			hist = &built.Report.Regions[i]
		}
	}
	if hist == nil || len(hist.Included) != len(history) || len(hist.Dropped) != 0 {
		t.Errorf("history report %+v", hist)
	}
	// A budget still trims: the greeting, the orphaned result, the blank message and the unanswered call go.
	trimmed, err := NewBuilder(1000).AddMessages(history).Build(context.Background())
	if err != nil || len(trimmed.Messages) != 2 {
		t.Errorf("with a budget: %+v, %v", trimmed, err)
	}
}
