package assembler_test

import (
	"context"
	"encoding/json"
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
	// assembler: unknown format "html" (known: openai, responses, anthropic, gemini, text)
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

// The responses format writes an OpenAI Responses API request: the instructions, and input items, a
// tool call and its result paired by call_id; the result carries the prompt_cache_key to send with it.
func ExampleFormatByName_responses() {
	res, err := assembler.AssembleRequest(context.Background(), &assembler.Request{
		Format: assembler.FormatResponses, Instructions: "Be brief.", CacheScope: assembler.CacheScope("acme", "helper"),
		History: []assembler.Message{
			{Role: "user", Content: "Weather in Paris?"},
			{Role: "assistant", ToolCalls: []assembler.ToolCall{{ID: "c1", Type: "function", Function: assembler.ToolCallFunction{Name: "weather", Arguments: `{"city":"Paris"}`}}}},
			{Role: "tool", ToolCallID: "c1", Content: "sunny"},
		}})
	if err != nil {
		panic(err)
	}
	fmt.Printf("instructions: %q\n", res.Instructions)
	for _, it := range res.Input {
		b, _ := json.Marshal(it)
		fmt.Println(string(b))
	}
	fmt.Println(len(res.PromptCacheKey))
	// Output:
	// instructions: "Be brief."
	// {"type":"message","role":"user","content":[{"type":"input_text","text":"Weather in Paris?"}]}
	// {"type":"function_call","call_id":"c1","name":"weather","arguments":"{\"city\":\"Paris\"}"}
	// {"type":"function_call_output","call_id":"c1","output":"sunny"}
	// 37
}

// The gemini format writes a Gemini generateContent request: the systemInstruction, and contents of the
// user and the model, a function call answered by a functionResponse in the user's turn after it. Its
// counts are estimates.
func ExampleFormatByName_gemini() {
	res, err := assembler.AssembleRequest(context.Background(), &assembler.Request{
		Format: assembler.FormatGemini, Model: "gemini-2.5-flash", Instructions: "Be brief.", Message: "Thanks!",
		History: []assembler.Message{
			{Role: "user", Content: "Weather in Paris?"},
			{Role: "assistant", ToolCalls: []assembler.ToolCall{{ID: "c1", Type: "function", Function: assembler.ToolCallFunction{Name: "weather", Arguments: `{"city":"Paris"}`}}}},
			{Role: "tool", ToolCallID: "c1", Content: "sunny"},
		}})
	if err != nil {
		panic(err)
	}
	b, _ := json.Marshal(res.SystemInstruction)
	fmt.Println(string(b))
	for _, c := range res.Contents {
		b, _ := json.Marshal(c)
		fmt.Println(string(b))
	}
	fmt.Println(res.Exact, res.Encoding)
	// Output:
	// {"parts":[{"text":"Be brief."}]}
	// {"role":"user","parts":[{"text":"Weather in Paris?"}]}
	// {"role":"model","parts":[{"functionCall":{"id":"c1","name":"weather","args":{"city":"Paris"}}}]}
	// {"role":"user","parts":[{"functionResponse":{"id":"c1","name":"weather","response":{"output":"sunny"}}},{"text":"Thanks!"}]}
	// false estimate
}
