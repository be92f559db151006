// SPDX-License-Identifier: Apache-2.0

package loom

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Message is one message of a conversation: what a session keeps and what an assembly's history holds.
type Message struct {
	// Seq numbers a session's messages from 1 in the order they were appended. The store assigns it; the
	// assembler does not read it.
	Seq     int64  `json:"seq,omitempty"`
	Role    string `json:"role"` // "user", "assistant", "tool" or "system"
	Content string `json:"content"`
	// Parts are a user message's content after Content: texts and images (see [Part], [CheckParts]).
	// Content alone is the content of a message without them.
	Parts      []Part     `json:"parts,omitempty"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`   // an assistant's calls
	ToolCallID string     `json:"tool_call_id,omitempty"` // the call a tool message answers
	// Time is when the message was appended (the store sets it if zero); the assembler does not read it.
	Time time.Time `json:"ts,omitzero"`
	// TokenCounts are counts of Content (not of Parts) cached by encoding name, and the estimate under the
	// name of the estimator's rule (tokenizer.EstimateKey), counted when a store wrote the message so that no
	// assembly counts it again.
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

// Tool is an OpenAI function tool definition. It is counted as the model's provider bills it: for OpenAI's
// chat models, as the TypeScript-like namespace that they read (package tokenizer's RenderFunctions and
// ToolRule); for the others, as its JSON, an estimate.
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

// ToolOutput is the result of one tool run of a session, kept outside the message history (the Valkey
// cookbook's tool steps): the tool, the call, its arguments and its result.
type ToolOutput struct {
	// Seq numbers a session's steps from 1; the store assigns it and the assembler does not read it.
	Seq    int64  `json:"seq,omitempty"`
	Tool   string `json:"tool"`
	CallID string `json:"call_id,omitempty"`
	Args   string `json:"args,omitempty"`
	Result string `json:"result"`
	// Time is when the step was appended (the store sets it if zero).
	Time time.Time `json:"ts,omitzero"`
}

// MaxToolName is the longest tool name providers accept, in bytes.
const MaxToolName = 64

// CheckToolName returns an error wrapping ErrInvalid, whose text names the name, unless name is one that
// providers accept for a tool: 1 to 64 ASCII letters, digits, underscores and hyphens
// (^[a-zA-Z0-9_-]{1,64}$). Tool definitions, the tool calls of a history and the tool of a tool output are
// all held to it, by the assembler and by every store, so that a name cannot carry text into a rendering.
func CheckToolName(name string) error {
	ok := name != "" && len(name) <= MaxToolName
	for i := 0; i < len(name) && ok; i++ {
		c := name[i]
		ok = c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	if ok {
		return nil
	}
	return NewError(ErrInvalid, fmt.Sprintf("tool name %s is not 1 to %d letters, digits, _ or - (^[a-zA-Z0-9_-]{1,%d}$)",
		quoteName(name), MaxToolName, MaxToolName))
}

// CheckRole returns an error wrapping ErrInvalid unless role is one a message may have: "user",
// "assistant", "system", or "tool" with the id of the call it answers.
func CheckRole(role, toolCallID string) error {
	switch role {
	case "user", "assistant", "system":
		return nil
	case "tool":
		if toolCallID == "" {
			return NewError(ErrInvalid, "a tool message without tool_call_id")
		}
		return nil
	}
	return NewError(ErrInvalid, fmt.Sprintf("role %s (want user, assistant, tool or system)", quoteName(role)))
}

// quoteName quotes a name for an error message, cut after 80 bytes (and saying so) so that a huge one does
// not make a huge message.
func quoteName(name string) string {
	const most = 80
	if len(name) <= most {
		return strconv.Quote(name)
	}
	cut := most
	for cut > 0 && name[cut]&0xC0 == 0x80 {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(name[:cut]), len(name))
}
