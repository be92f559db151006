package assembler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/context-loom/loom"
)

// Request is everything that could go into one LLM call. It is the wire format that `loom assemble
// --request` and the HTTP API read (JSON field names in the tags); [Assemble] fits it into the budget.
type Request struct {
	// Model names the model (see tokenizer.ForModel): its encoding counts the tokens, its window and output
	// limit set the default budget, its chat format the per-message overhead. Default "gpt-4o".
	Model string `json:"model,omitempty"`
	// MaxTokens is the budget for the prompt. 0: the model's window minus ReserveOutput and a margin. It
	// may not be more than the window minus ReserveOutput (an invalid request; see [PromptBudget]).
	MaxTokens int `json:"max_tokens,omitempty"`
	// ReserveOutput is what the window keeps for the reply: the budget when MaxTokens is 0 is what it
	// leaves (less a margin), and a MaxTokens may not take it. 0 means the model's output limit, capped at
	// a quarter of its window.
	ReserveOutput int `json:"reserve_output,omitempty"`
	// Format names the output's format (see [FormatByName]): "openai" (the default, Chat Completions),
	// "responses" (OpenAI's Responses API), "anthropic", "gemini" or "text". The text format is one
	// transcript of turns, each starting with its header ("User: ", "Tool result (id): ", ...) at the start
	// of a line; every line of a turn's body after its first, and every line of a text inside a tag of the
	// context, starts with two spaces, so that no text can start a line that reads as a turn header.
	Format string `json:"format,omitempty"`
	// Formatter, when not nil, is the output's format as a value, for a Go caller (see [Format]); Format
	// must then be "" or its name. It is not part of the wire format.
	Formatter Format `json:"-"`

	// Instructions are the system prompt, shown as they are given. Instructions that are only white space
	// say nothing: the openai, anthropic and text formats do not render them (they are reported dropped as
	// empty), as they do not render a blank Message; the cookbook format shows them as the cookbook does.
	Instructions string `json:"instructions,omitempty"`
	Tools        []Tool `json:"tools,omitempty"`
	// ToolChoice is how the model is to choose among the tools, as Chat Completions' tool_choice says it:
	// the zero ToolChoice (or "auto") lets it choose. The openai format counts what it adds to the prompt
	// (tokenizer.ToolRule.ChoiceTokens); the caller sends it beside the result's tools.
	ToolChoice  ToolChoice   `json:"tool_choice,omitzero"`
	Memory      []MemoryFact `json:"memory,omitempty"`
	Knowledge   []Knowledge  `json:"knowledge,omitempty"`
	History     []Message    `json:"history,omitempty"`
	ToolOutputs []ToolOutput `json:"tool_outputs,omitempty"`
	// Message is the current user message. It is always kept.
	Message string `json:"message,omitempty"`
	// MessageParts are the current message's content parts after Message: texts and images (see
	// loom.Part), sent and counted as a history message's are.
	MessageParts []loom.Part `json:"message_parts,omitempty"`

	// Policy sets how the optional regions share the budget; nil means DefaultPolicy.
	Policy *Policy `json:"policy,omitempty"`

	// Summary, when set, is the running summary of History's first Summary.Covers messages, which it
	// stands for: they are not sent (the report lists them dropped as "summarized"), and the summary is,
	// in a <conversation_summary trusted="false"> element after the stable prefix. It is required, as the
	// instructions are. The cookbook format takes none.
	Summary *Summary `json:"summary,omitempty"`
	// CacheBreakpoints says whether the anthropic format places cache_control breakpoints: "" or "auto"
	// (the default) places up to four, at the ends of the stable parts, where the prompt before them
	// reaches the model's minimum cacheable length (see [CacheMinTokens]); "off" places none, and the
	// output is the same as without breakpoints. The other formats place none. Token counts are the same
	// either way: a cache_control is not billed as tokens.
	CacheBreakpoints string `json:"cache_breakpoints,omitempty"`
	// CacheTTL is the breakpoints' time to live: "" or "5m" (the API's default, five minutes, sent as no
	// ttl), "1h" (an hour, written "ttl":"1h" on every breakpoint), or "1h+5m" (an hour on the tools' and
	// the system prompt's breakpoints, five minutes on the messages': see [CacheTTL1h5m]). Only the
	// anthropic format takes it.
	CacheTTL string `json:"cache_ttl,omitempty"`
	// CacheScope names who may share a prompt cache entry: Result.PromptCacheKey is derived from it and
	// the stable prefix. The engine sets it to the tenant's and the agent's (see [CacheScope]); a Go
	// caller may set its own. It is not part of the wire format, so that no request names another
	// tenant's scope.
	CacheScope string `json:"-"`
	// CacheReport asks for Result.CacheState, the hashes of the stable parts of the prompt that the next
	// assembly of the session compares with; CachePrevious, when set, is the previous assembly's, and the
	// result's Cache then says how much of the prompt's start is the same and, if it ends early, why (see
	// [CacheReport]). The engine keeps the previous state per session; a Go caller may keep its own.
	CacheReport   bool        `json:"-"`
	CachePrevious *CacheState `json:"-"`

	// CountDropped asks for the tokens of every candidate the assembly leaves out (Dropped.Tokens), which
	// costs counting them all: without it, a candidate the planner did not need to count is reported
	// with -1 tokens.
	CountDropped bool `json:"count_dropped,omitempty"`
}

// CacheScope is the Request.CacheScope of an agent's assemblies for a tenant: the two names, each
// prefixed with its length, so that no other pair of names gives the same scope.
func CacheScope(tenant, agent string) string {
	return strconv.Itoa(len(tenant)) + ":" + tenant + strconv.Itoa(len(agent)) + ":" + agent
}

// ToolChoice is a request's tool_choice: Mode "" or "auto" (the model chooses, the default), "none" (it
// calls no tool), "required" (it calls one), or "function" with the name of the tool it must call. In
// JSON it is Chat Completions' own: "auto", "none", "required", or {"type":"function","function":{"name":
// "get_weather"}}.
type ToolChoice struct {
	Mode     string
	Function string // the tool to call, for Mode "function"
}

// The modes of a ToolChoice.
const (
	ToolChoiceAuto     = "auto"
	ToolChoiceNone     = "none"
	ToolChoiceRequired = "required"
	ToolChoiceFunction = "function"
)

// MarshalJSON writes c as Chat Completions' tool_choice.
func (c ToolChoice) MarshalJSON() ([]byte, error) {
	if c.Mode != ToolChoiceFunction {
		return json.Marshal(c.Mode)
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	named.Type, named.Function.Name = ToolChoiceFunction, c.Function
	return json.Marshal(named)
}

// UnmarshalJSON reads Chat Completions' tool_choice: a mode's name, or a function to call.
func (c *ToolChoice) UnmarshalJSON(data []byte) error {
	if data = bytes.TrimSpace(data); len(data) > 0 && data[0] == '"' {
		*c = ToolChoice{}
		return json.Unmarshal(data, &c.Mode)
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(data, &named); err != nil {
		return err
	}
	*c = ToolChoice{Mode: named.Type, Function: named.Function.Name}
	return nil
}

// check returns an error wrapping ErrInvalidRequest unless c is a choice among tools: a known mode, a
// function that is one of them, and no choice but "auto" without tools (Chat Completions refuses one).
func (c ToolChoice) check(tools []Tool) error {
	switch c.Mode {
	case "", ToolChoiceAuto:
		return nil
	case ToolChoiceNone, ToolChoiceRequired:
	case ToolChoiceFunction:
		for _, t := range tools {
			if t.Function.Name == c.Function {
				return nil
			}
		}
		return fmt.Errorf("%w: tool_choice names the function %q, which is not among the tools", ErrInvalidRequest, c.Function)
	default:
		return fmt.Errorf("%w: tool_choice %q (want auto, none, required or a function)", ErrInvalidRequest, c.Mode)
	}
	if len(tools) == 0 {
		return fmt.Errorf("%w: tool_choice %q without tools", ErrInvalidRequest, c.Mode)
	}
	return nil
}

// Summary is a running summary of a history's first messages (a session's stored summary: see
// loom.Summary).
type Summary struct {
	// Text is the summary, untrusted: it is escaped, and written as data, never as instructions.
	Text string `json:"text"`
	// Covers is how many of the request's History, from the first, the summary stands for.
	Covers int `json:"covers,omitempty"`
	// From and To are the seqs of the session's messages it covers, for the report and the element's
	// attributes; 0 when not known.
	From int64 `json:"from,omitempty"`
	To   int64 `json:"to,omitempty"`
}

// DropTokenCounts forgets the cached token counts of r's knowledge and history. A count the assembler is
// given is trusted (that is what makes cached counts fast), and a wrong one would make the budget and
// TotalTokens wrong; a request read from outside the process (a file, an HTTP body) cannot vouch for its
// counts, so the CLI and the server drop them and the assembler counts.
func (r *Request) DropTokenCounts() {
	for i := range r.Knowledge {
		r.Knowledge[i].TokenCounts = nil
	}
	for i := range r.History {
		r.History[i].TokenCounts = nil
	}
}

// The request's parts are the types of package loom, under the names the assembler has always had.
type (
	Tool             = loom.Tool
	ToolFunction     = loom.ToolFunction
	MemoryFact       = loom.Fact
	Knowledge        = loom.Knowledge
	Message          = loom.Message
	ToolCall         = loom.ToolCall
	ToolCallFunction = loom.ToolCallFunction
	ToolOutput       = loom.ToolOutput
)

// Formats.
const (
	FormatOpenAI    = "openai"
	FormatAnthropic = "anthropic"
	FormatText      = "text"
	FormatResponses = "responses"
	FormatGemini    = "gemini"
	// FormatCookbook is the name of the [Cookbook] format, which a request does not name: engine's
	// PresetCookbook renders with it, and a Go caller passes it as Request.Formatter.
	FormatCookbook = "cookbook"
)

// DefaultModel is the model of a request that names none.
const DefaultModel = "gpt-4o"

// Errors of the region assembler.
var (
	ErrInvalidRequest = loom.NewError(loom.ErrInvalid, "assembler: invalid request")
	ErrUnknownFormat  = loom.NewError(loom.ErrInvalid, "assembler: unknown format")
	// ErrNoUserTurn is returned, wrapped with the history index, for a history whose latest tool exchange
	// has no user message before it. That exchange is required (the model is mid-task), and a conversation
	// starts with the user's message (Anthropic rejects any other start); rather than send an
	// assistant-first conversation, or drop the tool results the model is to continue from, the request is
	// refused in every format. It wraps ErrInvalidRequest. An older exchange without a user message before
	// it is not required: it is dropped, reported as orphaned.
	ErrNoUserTurn = fmt.Errorf("%w: the latest tool exchange has no user message before it", ErrInvalidRequest)
	// ErrProviderRule is returned, wrapped with the rule and where the output breaks it, when the request's
	// rendering would break a rule of its format's provider that the format cannot keep by construction (a
	// participant's name that Chat Completions refuses, say): each format checks its output as the last step
	// of an assembly (see [Format]), so that a request the provider would answer with a 400 is an error
	// here instead. It wraps ErrInvalidRequest.
	ErrProviderRule = fmt.Errorf("%w: the output would break its provider's rules", ErrInvalidRequest)
	// ErrNoMessages is returned for a request that keeps no message to send, in the openai and anthropic
	// formats: no current message (a blank one is none), no context, and no history within the budget, and
	// in the anthropic format no instructions either count, for they are the top-level system prompt.
	// Chat Completions and the Messages API both take at least one message. It wraps ErrProviderRule.
	ErrNoMessages = fmt.Errorf("%w: a request needs at least one message", ErrProviderRule)
)

// BudgetError is returned when the required items (instructions, tools, the current message, the latest
// tool exchange) do not fit the budget; it matches loom.ErrBudget.
type BudgetError = loom.BudgetError
