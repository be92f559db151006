package assembler

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
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
	// Format is the output's shape: "openai" (the default), "anthropic" or "text". The text format is one
	// transcript of turns, each starting with its header ("User: ", "Tool result (id): ", ...) at the start
	// of a line; every line of a turn's body after its first, and every line of a text inside a tag of the
	// context, starts with two spaces, so that no text can start a line that reads as a turn header.
	Format string `json:"format,omitempty"`

	Instructions string       `json:"instructions,omitempty"`
	Tools        []Tool       `json:"tools,omitempty"`
	Memory       []MemoryFact `json:"memory,omitempty"`
	Knowledge    []Knowledge  `json:"knowledge,omitempty"`
	History      []Message    `json:"history,omitempty"`
	ToolOutputs  []ToolOutput `json:"tool_outputs,omitempty"`
	// Message is the current user message. It is always kept.
	Message string `json:"message,omitempty"`

	// Policy sets how the optional regions share the budget; nil means DefaultPolicy.
	Policy *Policy `json:"policy,omitempty"`
}

// Tool is an OpenAI function tool definition. Its JSON is counted as it is sent.
type Tool struct {
	Type     string       `json:"type"` // "function"
	Function ToolFunction `json:"function"`
}

// ToolFunction describes a function the model may call.
type ToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"` // a JSON schema
	Strict      *bool           `json:"strict,omitempty"`
}

// MemoryFact is one thing known about the user.
type MemoryFact struct {
	Key       string    `json:"key"`
	Value     string    `json:"value"`
	Pinned    bool      `json:"pinned,omitempty"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	Source    string    `json:"source,omitempty"`
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

// Knowledge is one retrieved or given piece of knowledge.
type Knowledge struct {
	ID          string            `json:"id,omitempty"`
	DocumentID  string            `json:"document_id,omitempty"`
	Content     string            `json:"content"`
	Score       float64           `json:"score,omitempty"`
	Source      string            `json:"source,omitempty"`
	Type        string            `json:"type,omitempty"`    // a label for the tag, such as "rag" or "entity"; default "rag"
	Trusted     bool              `json:"trusted,omitempty"` // false (the default): data, never instructions
	StartOffset int               `json:"start,omitempty"`
	EndOffset   int               `json:"end,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	// TokenCounts are counts of the content as it is rendered (see [RenderedKnowledge]), cached under
	// [KnowledgeCountKey] of the encoding as a store keeps them, so that assembling does not count it again.
	TokenCounts map[string]int `json:"token_counts,omitempty"`
}

// Message is one message of the conversation history.
type Message struct {
	Role       string     `json:"role"` // "user", "assistant" or "tool" ("system" is kept as given)
	Content    string     `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`   // an assistant's calls
	ToolCallID string     `json:"tool_call_id,omitempty"` // the call a tool message answers
	// TokenCounts are counts of Content cached by encoding name (as a store keeps them).
	TokenCounts map[string]int `json:"token_counts,omitempty"`
}

// ToolCall is an assistant's call of a tool, as in OpenAI's chat format.
type ToolCall struct {
	ID       string           `json:"id"`
	Type     string           `json:"type"` // "function"
	Function ToolCallFunction `json:"function"`
}

// ToolCallFunction is the function and arguments of a call.
type ToolCallFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // JSON text
}

// ToolOutput is the result of a tool run in this session outside the message history (the Valkey
// cookbook's tool steps).
type ToolOutput struct {
	Tool   string `json:"tool"`
	CallID string `json:"call_id,omitempty"`
	Args   string `json:"args,omitempty"`
	Result string `json:"result"`
}

// Formats.
const (
	FormatOpenAI    = "openai"
	FormatAnthropic = "anthropic"
	FormatText      = "text"
)

// DefaultModel is the model of a request that names none.
const DefaultModel = "gpt-4o"

// Errors of the region assembler.
var (
	ErrInvalidRequest = errors.New("assembler: invalid request")
	ErrUnknownFormat  = errors.New("assembler: unknown format")
	// ErrNoUserTurn is returned, wrapped with the history index, for a history whose latest tool exchange
	// has no user message before it. That exchange is required (the model is mid-task), and a conversation
	// starts with the user's message (Anthropic rejects any other start); rather than send an
	// assistant-first conversation, or drop the tool results the model is to continue from, the request is
	// refused in every format. It wraps ErrInvalidRequest. An older exchange without a user message before
	// it is not required: it is dropped, reported as orphaned.
	ErrNoUserTurn = fmt.Errorf("%w: the latest tool exchange has no user message before it", ErrInvalidRequest)
)

// BudgetError is returned when the required items (instructions, tools, the current message, the latest
// tool exchange) do not fit the budget.
type BudgetError struct {
	Required  int // tokens the required items need, with the format's overhead
	Available int // the budget
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("assembler: the required items need %d tokens, the budget is %d", e.Required, e.Available)
}
