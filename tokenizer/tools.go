package tokenizer

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/context-loom/loom"
)

// ToolRule is how a model's provider counts what tools add to a chat request: the tool definitions, which
// it writes into the prompt in a form of its own, and the tool calls and results of the history. A rule
// that is not a Namespace rule counts the definitions' JSON text and its overheads, as an estimate: the
// zero ToolRule, or a Claude model's, whose Overhead is the system prompt Anthropic adds for tools.
//
// OpenAI's chat models (the built-in OpenAI models) read function definitions as a TypeScript-like
// namespace ([RenderFunctions]) in a system message. What that costs was measured against the API's
// prompt_tokens by public projects (the OpenAI Cookbook's "How to count tokens with tiktoken", and the test
// suites of openai-chat-tokens, openai-token-counter and openai-scala-client), and the rule below
// reproduces every pair they published for cl100k_base models. For o200k_base models (GPT-4o and later)
// the same rule gives the Cookbook's count, and counts up to 2 tokens more than the API on the other
// published pairs: an estimate that errs high.
type ToolRule struct {
	// Namespace reports that the definitions are written as [RenderFunctions] writes them; if false, they
	// are counted as their JSON text.
	Namespace bool
	// Overhead is what the definitions add besides their text when the request has no system message (they
	// come in one of their own: 9 for OpenAI's chat models), and SystemOverhead what they add when it has
	// one (5). With PadSystem, the first system message is then counted with a line break after its text,
	// which may or may not add a token.
	Overhead, SystemOverhead int
	PadSystem                bool
	// CallOverhead is what one tool call of an assistant's message costs besides the model's per-message
	// overhead, the assistant role, the function's name and its arguments as compact JSON; ResultOverhead
	// what a tool's result costs besides the per-message overhead, the name of the function it answers and
	// its content. The call's id is not counted: the model does not see it.
	CallOverhead, ResultOverhead int
	// Exact reports that the definitions' count is the provider's (for the schemas [RenderFunctions] knows);
	// CallsExact the same of calls and results. When false, the counts are estimates that err high.
	Exact, CallsExact bool
}

// The tool rules of OpenAI's chat models, by encoding.
//
// Definitions. cl100k_base models: exact, by every published pair (see ToolRule). o200k_base models: the
// same constants, which give the Cookbook's 101 for gpt-4o and gpt-4o-mini, and 0 to 2 tokens more than
// the API on the six other published requests with tools (gpt-4o, gpt-4o-mini, gpt-4.1-mini), which no
// simple change of the rendering explains; so an estimate.
//
// Calls and results. A call and its result cost 13 tokens besides the function's name (counted twice: the
// call names it, and the result is the function's message), the arguments as compact JSON and the result's
// content: so on all six published pairs of o200k_base models (the recorded API exchanges of simonw/llm's
// and pydantic-ai's test cassettes). The one published pair of a cl100k_base model (gpt-4, in
// forestwanglin/openai-java issue 5) is one more, which its rule adds. Published pairs hold one call per
// message with no text beside it; a message's text and each further call are counted as messages of their
// own, which errs high if the API frames them together. Estimates, for both encodings.
var (
	cl100kTools = ToolRule{Namespace: true, Overhead: 9, SystemOverhead: 5, PadSystem: true,
		CallOverhead: 3, ResultOverhead: 4, Exact: true}
	o200kTools = ToolRule{Namespace: true, Overhead: 9, SystemOverhead: 5, PadSystem: true,
		CallOverhead: 3, ResultOverhead: 3}
)

// anthropicTools returns the tool rule of a Claude model: the definitions' JSON (an estimate) and the
// system prompt that Anthropic adds to a request with tools, whose size its documentation ("Tool use
// pricing and tokens") gives per model and tool choice: the larger of the two, as the tool choice is not
// known here (Claude 3 Opus: 530 for auto; Claude 3 Haiku and 3.5 Haiku: 340 for any or a tool; Claude
// 3.5 Sonnet and the later models: 346 for auto).
func anthropicTools(name string) ToolRule {
	n := 346
	switch name {
	case "claude-3-opus":
		n = 530
	case "claude-3-haiku", "claude-3-5-haiku":
		n = 340
	}
	return ToolRule{Overhead: n, SystemOverhead: n}
}

// openAITools returns the tool rule of an OpenAI chat model counted with enc.
func openAITools(enc string) ToolRule {
	if enc == CL100KBase {
		return cl100kTools
	}
	return o200kTools
}

// DefinitionTokens returns what tools' definitions count by rule r with c, the overheads aside (see
// [ToolRule.DefinitionOverhead]): [RenderFunctions]'s text, and the JSON of each schema part whose
// rendering it does not know, counted on top so that the count errs high. exact reports that the count is
// the provider's: r is exact and every part of every schema is known. For a rule that is not a Namespace
// rule, DefinitionTokens counts the tools' JSON (an array, as Chat Completions takes it), not exactly.
func (r ToolRule) DefinitionTokens(c Counter, tools []loom.Tool) (n int, exact bool) {
	if len(tools) == 0 {
		return 0, true
	}
	if !r.Namespace {
		b, _ := json.Marshal(tools)
		return c.Count(string(b)), false
	}
	text, unknown := RenderFunctions(tools)
	n = c.Count(text)
	for _, u := range unknown {
		n += c.Count(u)
	}
	return n, r.Exact && len(unknown) == 0
}

// DefinitionOverhead is what definitions add to a request besides their text (see [ToolRule]): Overhead,
// or SystemOverhead if the request has a system message. A request with no tools has none.
func (r ToolRule) DefinitionOverhead(hasSystem bool) int {
	if hasSystem {
		return r.SystemOverhead
	}
	return r.Overhead
}

// CompactArguments returns a tool call's arguments as the model reads them: JSON without insignificant
// space, as OpenAI writes them back into a conversation. Arguments that are not JSON are returned as
// they are.
func CompactArguments(args string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(args)); err != nil {
		return args
	}
	if b.Len() == len(args) {
		return args
	}
	return b.String()
}

// ArgumentTokens counts a tool call's arguments as the model reads them ([CompactArguments]) with c. Where
// the arguments hold characters beyond ASCII, whether they are written as they are or escaped (\u00e9) is
// not known, and the larger count is returned.
func ArgumentTokens(c Counter, args string) int {
	compact := CompactArguments(args)
	n := c.Count(compact)
	if !isASCII(compact) {
		n = max(n, c.Count(asciiJSON(compact)))
	}
	return n
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// asciiJSON writes each character beyond ASCII of a JSON text as a \u escape (two for one beyond the
// Basic Multilingual Plane), as Python's json.dumps does by default.
func asciiJSON(s string) string {
	const hex = "0123456789abcdef"
	var b strings.Builder
	esc := func(r rune) {
		b.WriteString(`\u`)
		for shift := 12; shift >= 0; shift -= 4 {
			b.WriteByte(hex[r>>shift&0xF])
		}
	}
	for _, r := range s {
		switch {
		case r < utf8.RuneSelf:
			b.WriteRune(r)
		case r > 0xFFFF:
			r -= 0x10000
			esc(0xD800 + r>>10)
			esc(0xDC00 + r&0x3FF)
		default:
			esc(r)
		}
	}
	return b.String()
}

// ChoiceTokens is what a request's tool_choice (or the older function_call) adds by rule r, counted with
// c: mode "" or "auto" adds nothing; "none" 1; "function" (a named function, function) 4 and the name's
// tokens. exact reports the count as the provider's: so for a Namespace rule that is Exact, by the
// published pairs of cl100k_base models. "required", whose cost no published pair isolates, and any other
// mode are counted as 1 and as a named function respectively, estimates.
func (r ToolRule) ChoiceTokens(c Counter, mode, function string) (n int, exact bool) {
	known := r.Namespace && r.Exact
	switch mode {
	case "", "auto":
		return 0, true
	case "none":
		return 1, known
	case "required":
		return 1, false
	case "function":
		return 4 + c.Count(function), known
	}
	return 4 + c.Count(function), false
}
