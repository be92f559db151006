package assembler

import (
	"bytes"
	"encoding/json"
)

// Result is an assembled context, ready for the provider. It is the JSON that `loom assemble` prints.
type Result struct {
	// Format is the shape of the request: "openai" (Messages), "responses" (Instructions and Input),
	// "anthropic" (System and Messages), "gemini" (SystemInstruction and Contents) or "text" (Text); the
	// cookbook format's messages are OpenAI's.
	Format   string `json:"format"`
	Model    string `json:"model"`
	Encoding string `json:"encoding"` // the exact encoding, or "estimate"
	// Budget is the most tokens the prompt may have; TotalTokens is the count of what is returned, in the
	// model's encoding, wrappers, separators and the format's per-message overhead included. It never
	// exceeds Budget.
	Budget      int `json:"budget"`
	TotalTokens int `json:"total_tokens"`
	// Exact is false when some count is an estimate: the model's tokenizer is not public, or a region
	// follows a rule known only as an estimate (see RegionReport.Exact). An estimate errs high, so that
	// the budget holds.
	Exact bool `json:"exact"`

	Messages []ChatMessage `json:"messages,omitzero"` // openai and anthropic: at least one (see ErrNoMessages); none for the others
	System   string        `json:"system,omitempty"`  // anthropic: the top-level system prompt
	// SystemBlocks is the anthropic format's system prompt as the Messages API's array of text blocks, set
	// when a cache breakpoint ends it (see Request.CacheBreakpoints): send it as the request's system in
	// place of System, whose text it holds.
	SystemBlocks []Block `json:"system_blocks,omitempty"`
	// Tools are the tool definitions in the format's shape. Their bytes are shared by the results of the
	// same tool set (see AssembleRequest) and must not be modified.
	Tools []json.RawMessage `json:"tools,omitempty"`
	Text  string            `json:"text,omitempty"` // text: the whole prompt

	// Instructions and Input are a Responses API request's (responses): the stable prefix, and the
	// messages, function calls and their outputs.
	Instructions string      `json:"instructions,omitempty"`
	Input        []InputItem `json:"input,omitzero"`
	// SystemInstruction and Contents are a generateContent request's (gemini): the stable prefix, and the
	// user's and the model's turns. Tools then holds one tool, of the functionDeclarations.
	SystemInstruction *GeminiContent  `json:"system_instruction,omitempty"`
	Contents          []GeminiContent `json:"contents,omitzero"`

	// Context is the knowledge region as rendered (the <context> tags), also inside Messages or Text.
	Context   string      `json:"context,omitempty"`
	Citations []Reference `json:"citations"`
	// PrefixHash identifies the stable prefix (tools, instructions, pinned memory): consecutive turns with
	// the same hash share it, which providers' prompt caches reward.
	PrefixHash string `json:"prefix_hash"`
	// PromptCacheKey is the key to send as OpenAI's prompt_cache_key, in the formats whose messages are
	// OpenAI's (openai, responses, and the cookbook's): "loom-" and 32 hex digits of a SHA-256 of the
	// request's CacheScope (the engine's: the tenant and the agent) and the stable prefix (PrefixHash's).
	// The calls of one agent for one tenant that share a stable prefix share the key, which routes them to
	// the same prompt cache; a change of tools, instructions or pinned memory changes it, and no two
	// tenants or agents share one. The names are hashed: the key does not show them.
	PromptCacheKey string `json:"prompt_cache_key,omitempty"`
	// Cache says how much of the prompt's start is byte-identical to the previous assembly's for the
	// session, and why the shared prefix ended early, when it did (see Request.CachePrevious).
	Cache *CacheReport `json:"cache,omitempty"`
	// CacheState is what the next assembly's Cache compares with (see Request.CacheReport). It is not
	// part of the JSON: the engine keeps it in the store.
	CacheState *CacheState `json:"-"`
	Report     Report      `json:"report"`
}

// Reference is a citation of one included knowledge item, by the marker [n] that precedes it in the
// context.
type Reference struct {
	Marker      int               `json:"marker"`
	ID          string            `json:"id,omitempty"`
	DocumentID  string            `json:"document_id,omitempty"`
	Source      string            `json:"source,omitempty"`
	Score       float64           `json:"score"`
	StartOffset int               `json:"start,omitempty"`
	EndOffset   int               `json:"end,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
}

// Report says, per region, what it was given, what it used, and every item included or dropped.
//
// Every token of Result.TotalTokens is counted once: in the Used of the region whose text it is, or in
// the format's overhead, which is no region's. The overhead is the reply priming (OpenAI's 3 tokens per
// request; the text format's closing "Assistant:") and the frame (per-message tokens and role) of a
// message that the context (memory that is not pinned, tool outputs, knowledge) opens: the system message
// that carries it in the openai format, the user message it starts in the anthropic format (the cookbook
// format's messages each hold one region, and their frames are its). So the regions' Used add up to
// TotalTokens less that overhead. Any other message's frame is the region's whose text it opens with (the
// instructions', or pinned memory's when there are no instructions); a wrapper or separator is the
// region's that it wraps or follows (pinned memory's wrapper is memory's); and where two regions meet in
// one text, a token that spans the join is the later region's. What the model's tool rule adds for the
// tool definitions (the system message they are written in, the line break it counts after the first
// system message) is the tools region's. Every format's output is counted, and its tokens given out, by
// these rules, by one function of the assembler (see [Format]).
type Report struct {
	Regions []RegionReport `json:"regions"`
	// Summary is the range of the session that the request's summary covers (see Request.Summary), when it
	// had one: its messages are reported dropped as "summarized" in the history's region.
	Summary *SummaryRange `json:"summary,omitempty"`
}

// SummaryRange is what a summary of an assembly covers: the seqs of its first and last messages (0 when
// not known), and how many of the request's history messages it stands for.
type SummaryRange struct {
	From   int64 `json:"from,omitempty"`
	To     int64 `json:"to,omitempty"`
	Covers int   `json:"covers"`
}

// RegionReport is one region's account.
type RegionReport struct {
	Name   Region `json:"name"`
	Budget int    `json:"budget"` // tokens allotted: the policy's share, or what the region took of the leftover; for required regions, what they need
	// Used is the tokens of the output that are the region's (see Report).
	Used int `json:"used"`
	// Exact is false when Used is an estimate, which errs high: the model's tokenizer is not public, or the
	// region holds what the provider counts by a rule known only from its published counts and not in
	// every case (tool definitions for o200k_base models, schema keywords whose rendering is not known,
	// tool calls and results in the history: see tokenizer.ToolRule).
	Exact    bool     `json:"exact"`
	Included []string `json:"included"`
	// IncludedTokens is what each item of Included costs, index by index, as the planner counted it: a
	// history message with its per-message overhead, a memory fact, tool output or knowledge item as it
	// is rendered in the region with its separator (and a knowledge item its marker), a tool its
	// definition alone (in the function namespace when the model's provider reads tools so, else its JSON
	// as Chat Completions takes it), and the item of a region of one item (instructions, message,
	// summary) the region's Used. What the region adds around its items (its tag or wrapper, the tool
	// namespace and the rule's overhead, the frame of a message the context opens) is in Used and in no
	// item's count, so the items' tokens add up to about Used, not to it exactly.
	IncludedTokens []int     `json:"included_tokens"`
	Dropped        []Dropped `json:"dropped"`
}

// Dropped is an item left out, and why.
type Dropped struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
	// Tokens is what the item would have cost as IncludedTokens counts a kept one, or -1 when it was not
	// counted: the planner stops counting the candidates of a region once one does not fit, and a
	// request's CountDropped counts them all (an item below the policy's minimum score is never rendered,
	// and never counted). An empty item's is 0. A truncated tool output's is its text's tokens before the
	// cut, and a cleared tool result's its content's before it was cleared, both without their framing.
	Tokens int `json:"tokens"`
}

// Reasons for dropping an item.
const (
	ReasonBudget        = "budget"          // it did not fit
	ReasonDuplicate     = "duplicate"       // the same text as a better item
	ReasonNearDuplicate = "near_duplicate"  // nearly the same text as a better item
	ReasonMinScore      = "below_min_score" // scored below the policy's minimum
	ReasonOrphan        = "orphaned"        // a tool result without its call, or a history that would start mid-turn
	ReasonEmpty         = "empty"           // nothing to say
	ReasonTruncated     = "truncated"       // kept, but cut head and tail (tool outputs)
	ReasonStep          = "step"            // it fitted, but the history was cut in a step that keeps its start for the turns that follow (see Policy.HistoryTrim)
	ReasonCleared       = "cleared"         // kept, its tool result cleared to a placeholder (see Policy.KeepToolResults)
	ReasonSummarized    = "summarized"      // a history message that the request's summary stands for
)

// ChatMessage is one message in the provider's format. For "openai", Content holds the text, or Parts
// the content parts of a message with images (its text among them: Content is then empty); for
// "anthropic", Blocks hold the content blocks.
type ChatMessage struct {
	Role       string
	Content    string
	Parts      []ContentPart
	Blocks     []Block
	Name       string
	ToolCalls  []ToolCall
	ToolCallID string
}

// Block is an Anthropic content block: text, image, tool_use or tool_result, or a text block of the
// system prompt (Result.SystemBlocks).
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	Source    ImageSource     `json:"source,omitzero"` // an image's
	// CacheControl is a cache breakpoint the anthropic format placed (see Request.CacheBreakpoints).
	CacheControl CacheControl `json:"cache_control,omitzero"`
}

// MarshalJSON writes the message as its provider expects: OpenAI's {"role","content",...}, its content
// the array of its Parts when it has them, or Anthropic's {"role","content":[blocks]}.
func (m ChatMessage) MarshalJSON() ([]byte, error) {
	if m.Blocks != nil {
		return marshalRaw(struct {
			Role    string  `json:"role"`
			Content []Block `json:"content"`
		}{m.Role, m.Blocks})
	}
	var content any
	switch {
	case m.Parts != nil:
		content = m.Parts
	case m.Content != "" || len(m.ToolCalls) == 0:
		content = m.Content
	}
	return marshalRaw(struct {
		Role       string     `json:"role"`
		Content    any        `json:"content"`
		Name       string     `json:"name,omitempty"`
		ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
		ToolCallID string     `json:"tool_call_id,omitempty"`
	}{m.Role, content, m.Name, m.ToolCalls, m.ToolCallID})
}

// marshalRaw marshals v without escaping <, > and & (the text is for a model, and readable as it is).
func marshalRaw(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// UnmarshalJSON reads either shape: a content array with an image_url part is OpenAI's Parts, any other
// array Anthropic's Blocks (an OpenAI array of text parts alone reads as text blocks).
func (m *ChatMessage) UnmarshalJSON(data []byte) error {
	var raw struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		Name       string          `json:"name"`
		ToolCalls  []ToolCall      `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*m = ChatMessage{Role: raw.Role, Name: raw.Name, ToolCalls: raw.ToolCalls, ToolCallID: raw.ToolCallID}
	if len(raw.Content) > 0 && raw.Content[0] == '[' {
		var parts []ContentPart
		if err := json.Unmarshal(raw.Content, &parts); err == nil {
			for _, p := range parts {
				if p.Type == "image_url" {
					m.Parts = parts
					return nil
				}
			}
		}
		return json.Unmarshal(raw.Content, &m.Blocks)
	}
	if len(raw.Content) > 0 && string(raw.Content) != "null" {
		return json.Unmarshal(raw.Content, &m.Content)
	}
	return nil
}
