package tokenizer_test

import (
	"encoding/json"
	"fmt"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/tokenizer"
)

// A Meter counts a text made of parts from the parts' counts: a part counted before (a message whose
// count a store keeps) is not counted again, and joins where counts may not add up are counted from the
// few bytes around them.
func ExampleMeter() {
	enc := tokenizer.O200K()
	body := "Loom fits the context of a model call into its token budget, exactly."
	parts := []tokenizer.Part{
		tokenizer.NewPart("<context>\n"),
		{Text: body, Tokens: enc.Count(body)}, // counted when it was stored
		tokenizer.NewPart("\n</context>"),
	}
	m := tokenizer.NewMeter(enc)
	n := m.Join(parts)
	fmt.Println(n, n == enc.Count(tokenizer.JoinText(parts)))
	// Output: 21 true
}

// recorder is a third-party counter: it counts with an encoding and records how many bytes it counted.
// It keeps the meter's fast paths by implementing the upgrades, forwarding them to the encoding.
type recorder struct {
	enc   *tokenizer.Encoding
	bytes int
}

func (r *recorder) Count(text string) int { r.bytes += len(text); return r.enc.Count(text) }

func (r *recorder) CountUpTo(text string, limit int) (int, bool) {
	r.bytes += len(text)
	return r.enc.CountUpTo(text, limit)
}

func (r *recorder) SplitsAt(text string, p int) bool { return r.enc.SplitsAt(text, p) }

var (
	_ tokenizer.UpToCounter = (*recorder)(nil)
	_ tokenizer.Splitter    = (*recorder)(nil)
)

// A counter of its own gets the fast paths by implementing the upgrades: here the meter adds up the
// counts of two paragraphs it counted before, and counts nothing again.
func Example_upgrades() {
	r := &recorder{enc: tokenizer.O200K()}
	m := tokenizer.NewMeter(r)
	parts := []tokenizer.Part{
		tokenizer.NewPart("The first paragraph ends here."),
		tokenizer.NewPart(" The second one starts with a space."),
	}
	first := m.Join(parts)
	counted := r.bytes
	again := m.Join(parts) // the parts remember their counts
	fmt.Println(first == again, counted == len(tokenizer.JoinText(parts)), r.bytes == counted)

	// An upTo counter stops early: a long text is not counted through to learn that it does not fit.
	_, fits := tokenizer.CountUpTo(r, "a text much longer than two tokens", 2)
	fmt.Println(fits)
	// Output:
	// true true true
	// false
}

// The OpenAI Cookbook's tool, as gpt-4o reads it, and what its definition adds to a request with a system
// message: the namespace's tokens and the rule's overhead.
func ExampleRenderFunctions() {
	tools := []loom.Tool{{Type: "function", Function: loom.ToolFunction{
		Name:        "get_current_weather",
		Description: "Get the current weather in a given location",
		Parameters: json.RawMessage(`{"type":"object","properties":{
			"location":{"type":"string","description":"The city and state, e.g. San Francisco, CA"},
			"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["location"]}`),
	}}}
	text, _ := tokenizer.RenderFunctions(tools)
	fmt.Println(text)
	m, _ := tokenizer.ForModel("gpt-4o")
	n, exact := m.Tools.DefinitionTokens(m.Counter(), tools)
	fmt.Println(n+m.Tools.DefinitionOverhead(true), "tokens, exact:", exact)
	// Output:
	// namespace functions {
	//
	// // Get the current weather in a given location
	// type get_current_weather = (_: {
	// // The city and state, e.g. San Francisco, CA
	// location: string,
	// unit?: "celsius" | "fahrenheit",
	// }) => any;
	//
	// } // namespace functions
	// 61 tokens, exact: false
}
