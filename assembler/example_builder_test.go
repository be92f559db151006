package assembler_test

import (
	"context"
	"fmt"

	"github.com/context-loom/loom/assembler"
)

// Seed 001's builder, as its example calls it: an instruction, a knowledge chunk wrapped in a context tag,
// the conversation, and build. The system prompt joins the instruction and the tags; the messages come
// back trimmed to the budget (here they all fit), and TotalTokens counts them exactly as OpenAI chat
// messages.
func ExampleNewBuilder() {
	history := []assembler.Message{ // what the seed's manager.load(thread_id: "t1", ...) returns
		{Role: "user", Content: "Hi! Can you help me plan a weekend?"},
		{Role: "assistant", Content: "Of course. Where are you?"},
		{Role: "user", Content: "What should I do this Saturday?"},
	}

	b := assembler.NewBuilder(4096)
	b.AddInstruction("You are a helpful assistant.")
	b.AddKnowledge("The user lives in Tokyo.", "entity", false, "")
	b.AddMessages(history)
	built, err := b.Build(context.Background())
	if err != nil {
		panic(err)
	}

	fmt.Println(built.System)
	for _, m := range built.Messages {
		fmt.Printf("%s: %s\n", m.Role, m.Content)
	}
	fmt.Println(built.TotalTokens, "tokens")
	// Output:
	// You are a helpful assistant.
	//
	// <context type="entity" trusted="false">
	// The user lives in Tokyo.
	// </context>
	// user: Hi! Can you help me plan a weekend?
	// assistant: Of course. Where are you?
	// user: What should I do this Saturday?
	// 67 tokens
}

// With a small budget the conversation is trimmed oldest first, by whole turns, and never starts with the
// assistant's message; with none (NewBuilder(0)) every message passes through unchanged, as in the seed.
func ExampleNewBuilder_budget() {
	var history []assembler.Message
	for i := 1; i <= 5; i++ {
		history = append(history,
			assembler.Message{Role: "user", Content: fmt.Sprintf("Question %d: what is on the menu today?", i)},
			assembler.Message{Role: "assistant", Content: fmt.Sprintf("Answer %d: soup, bread and a salad.", i)})
	}
	for _, budget := range []int{80, 0} {
		built, err := assembler.NewBuilder(budget).AddInstruction("Be brief.").AddMessages(history).Build(context.Background())
		if err != nil {
			panic(err)
		}
		fmt.Printf("budget %d: %d of %d messages, from %q, %d tokens\n",
			budget, len(built.Messages), len(history), built.Messages[0].Content, built.TotalTokens)
	}
	// Output:
	// budget 80: 4 of 10 messages, from "Question 4: what is on the menu today?", 70 tokens
	// budget 0: 10 of 10 messages, from "Question 1: what is on the menu today?", 160 tokens
}

// AssembleRequest fits everything that could go into one call into the budget and renders it for the
// provider: here the OpenAI format, with the instructions and pinned memory first (the stable prefix),
// then the conversation, the context (knowledge marked [n] for citation; the duplicate is dropped) and
// the current message. The report accounts for every region: their used tokens add up to TotalTokens less
// the format's overhead.
func ExampleAssembleRequest() {
	req := &assembler.Request{
		Model:        "gpt-4o",
		MaxTokens:    2000,
		Instructions: "You are a helpful assistant. Cite sources as [n].",
		Memory:       []assembler.MemoryFact{{Key: "name", Value: "Bob", Pinned: true}},
		Knowledge: []assembler.Knowledge{
			{ID: "k1", Content: "Premium costs $20 a month.", Score: 0.9, Source: "pricing.md"},
			{ID: "k2", Content: "Premium includes priority support.", Score: 0.7, Source: "plans.md"},
			{ID: "k3", Content: "Premium costs $20 a month.", Score: 0.5, Source: "old-pricing.md"},
		},
		History: []assembler.Message{
			{Role: "user", Content: "Hi, I want to upgrade."},
			{Role: "assistant", Content: "Sure! To which plan?"},
		},
		Message: "How much is premium?",
	}
	res, err := assembler.AssembleRequest(context.Background(), req)
	if err != nil {
		panic(err)
	}
	for _, m := range res.Messages {
		fmt.Printf("%s: %q\n", m.Role, m.Content)
	}
	for _, c := range res.Citations {
		fmt.Printf("[%d] %s %s\n", c.Marker, c.ID, c.Source)
	}
	used := 0
	for _, r := range res.Report.Regions {
		used += r.Used
		fmt.Printf("%s: used %d, included %v, dropped %v\n", r.Name, r.Used, r.Included, r.Dropped)
	}
	fmt.Printf("%d tokens of a budget of %d; the regions use %d, the format's overhead %d\n", res.TotalTokens, res.Budget, used, res.TotalTokens-used)
	// Output:
	// system: "You are a helpful assistant. Cite sources as [n].\n\n<user_memory pinned=\"true\" trusted=\"false\">\n- name: Bob\n</user_memory>"
	// user: "Hi, I want to upgrade."
	// assistant: "Sure! To which plan?"
	// system: "[1] <context type=\"rag\" source=\"pricing.md\" trusted=\"false\">\nPremium costs $20 a month.\n</context>\n\n[2] <context type=\"rag\" source=\"plans.md\" trusted=\"false\">\nPremium includes priority support.\n</context>"
	// user: "How much is premium?"
	// [1] k1 pricing.md
	// [2] k2 plans.md
	// instructions: used 16, included [instructions], dropped []
	// tools: used 0, included [], dropped []
	// message: used 9, included [message], dropped []
	// memory: used 20, included [name], dropped []
	// tool_outputs: used 0, included [], dropped []
	// history: used 21, included [history[0] history[1]], dropped []
	// knowledge: used 54, included [k1 k2], dropped [{k3 duplicate 30}]
	// 127 tokens of a budget of 2000; the regions use 120, the format's overhead 7
}

// ResolveMarkers maps the [n] markers of a model's answer back to the citations of the assembled context,
// in the order they first appear; markers that cite nothing are ignored.
func ExampleResolveMarkers() {
	res, err := assembler.AssembleRequest(context.Background(), &assembler.Request{
		Knowledge: []assembler.Knowledge{
			{ID: "k1", DocumentID: "pricing", Content: "Premium costs $20 a month.", Score: 0.9, Source: "pricing.md"},
			{ID: "k2", DocumentID: "plans", Content: "Premium includes priority support.", Score: 0.7, Source: "plans.md"},
		},
		Message: "What do I get with premium, and for how much?",
	})
	if err != nil {
		panic(err)
	}
	answer := "Premium gives you priority support [2] for $20 a month [1][2]; see also [7]."
	for _, c := range assembler.ResolveMarkers(answer, res.Citations) {
		fmt.Printf("[%d] %s (%s, document %s)\n", c.Marker, c.ID, c.Source, c.DocumentID)
	}
	// Output:
	// [2] k2 (plans.md, document plans)
	// [1] k1 (pricing.md, document pricing)
}
