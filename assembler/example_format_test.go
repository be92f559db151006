package assembler_test

import (
	"context"
	"fmt"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
)

// A request names its format on the wire; a Go caller may pass the format itself as Request.Formatter.
func ExampleFormatByName() {
	f, err := assembler.FormatByName("anthropic")
	if err != nil {
		panic(err)
	}
	res, err := assembler.AssembleRequest(context.Background(), &assembler.Request{
		Formatter: f, Instructions: "Be brief.", Message: "Hi!"})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Format, f == assembler.Anthropic)
	fmt.Printf("system: %q\n", res.System)
	for _, m := range res.Messages {
		fmt.Printf("%s: %q\n", m.Role, m.Blocks[0].Text)
	}
	_, err = assembler.FormatByName("html")
	fmt.Println(err)
	// Output:
	// anthropic true
	// system: "Be brief."
	// user: "Hi!"
	// assembler: unknown format "html" (known: openai, anthropic, text)
}

// The cookbook format lays a request out as the Valkey cookbook's assemble_context does: the agent's
// configuration, the request's instructions, memory and knowledge in system messages of their own, the
// history, a system message per tool output and the user's message, each untrusted value in its tag.
func ExampleCookbook() {
	res, err := assembler.AssembleRequest(context.Background(), &assembler.Request{
		Formatter: &assembler.Cookbook{Agent: &loom.Agent{Instructions: "You are a helpful AI assistant.",
			Constraints: "Be concise and accurate.", OutputFormat: "Plain text."}},
		Memory:      []assembler.MemoryFact{{Key: "name", Value: "Bob"}, {Key: "tier", Value: "free"}},
		Knowledge:   []assembler.Knowledge{{Content: "Premium costs $20/month.", Metadata: map[string]string{"title": "Pricing"}}},
		History:     []assembler.Message{{Role: "user", Content: "I want to upgrade to premium"}},
		ToolOutputs: []assembler.ToolOutput{{Tool: "check_account", Result: `{"plan": "free"}`}},
		Message:     "How much does premium cost?",
	})
	if err != nil {
		panic(err)
	}
	for _, m := range res.Messages {
		fmt.Printf("%s: %q\n", m.Role, m.Content)
	}
	fmt.Println(res.Format, res.TotalTokens)
	// Output:
	// system: "You are a helpful AI assistant.\n\nConstraints: Be concise and accurate.\nFormat: Plain text."
	// system: "User context:\n<user_memory trusted=\"false\">\n- name: Bob\n- tier: free\n</user_memory>"
	// system: "Relevant knowledge:\n[Pricing]: <context type=\"rag\" trusted=\"false\">\nPremium costs $20/month.\n</context>"
	// user: "I want to upgrade to premium"
	// system: "Tool 'check_account' returned: <tool_output trusted=\"false\">\n{&quot;plan&quot;: &quot;free&quot;}\n</tool_output>"
	// user: "How much does premium cost?"
	// openai 139
}
