package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/tokenizer"
)

// AssembleInput is the input of assemble_context.
type AssembleInput struct {
	Message      string `json:"message" jsonschema:"the user's current message; it is always kept"`
	Agent        string `json:"agent,omitempty" jsonschema:"the stored agent whose instructions, tools, model and budget apply"`
	User         string `json:"user,omitempty" jsonschema:"the user whose remembered facts fill the memory region"`
	Session      string `json:"session,omitempty" jsonschema:"the session whose stored history (and summary) fill the history region"`
	Model        string `json:"model,omitempty" jsonschema:"the model whose tokenizer counts and whose window bounds the budget (default: the agent's, else gpt-4o)"`
	MaxTokens    int    `json:"max_tokens,omitempty" jsonschema:"the prompt's token budget (default: the agent's, else the model's window less its output reserve)"`
	Format       string `json:"format,omitempty" jsonschema:"the output's format: openai (the default), responses, anthropic, gemini or text"`
	Instructions string `json:"instructions,omitempty" jsonschema:"instructions added after the agent's"`
	HistoryLimit int    `json:"history_limit,omitempty" jsonschema:"how many of the session's newest messages to consider"`
	Collection   string `json:"collection,omitempty" jsonschema:"retrieve knowledge for the message from this collection"`
	TopK         int    `json:"top_k,omitempty" jsonschema:"with collection: how many chunks to retrieve"`
}

func (s *Server) assemble(ctx context.Context, in *AssembleInput) (any, error) {
	req := engine.Request{Agent: in.Agent, User: in.User, Session: in.Session, HistoryLimit: in.HistoryLimit}
	req.Model, req.MaxTokens, req.Format, req.Instructions, req.Message = in.Model, in.MaxTokens, in.Format, in.Instructions, in.Message
	if in.Collection != "" {
		req.Retrieve = &engine.RetrieveRequest{Collection: in.Collection, TopK: in.TopK}
	} else if in.TopK != 0 {
		return nil, fmt.Errorf("%w: top_k needs a collection", loom.ErrInvalid)
	}
	res, err := s.eng.Assemble(ctx, req)
	if err != nil {
		return nil, err
	}
	return jsonValue(res)
}

// RetrieveInput is the input of retrieve.
type RetrieveInput struct {
	Collection string            `json:"collection" jsonschema:"the collection to search"`
	Query      string            `json:"query" jsonschema:"what to search for"`
	TopK       int               `json:"top_k,omitempty" jsonschema:"how many results (default 10)"`
	MinScore   float64           `json:"min_score,omitempty" jsonschema:"drop results less relevant than this, from 0 to 1"`
	Mode       string            `json:"mode,omitempty" jsonschema:"hybrid (the default), keyword, vector or mmr"`
	Filter     map[string]string `json:"filter,omitempty" jsonschema:"keep only chunks whose metadata has these values"`
}

func (s *Server) retrieve(ctx context.Context, in *RetrieveInput) (any, error) {
	opts := []engine.RetrieveOption{engine.WithCollection(in.Collection), engine.WithTopK(in.TopK),
		engine.WithMinScore(in.MinScore), engine.WithMode(in.Mode)}
	if len(in.Filter) > 0 {
		opts = append(opts, engine.WithFilter(in.Filter))
	}
	results, err := s.eng.Retrieve(ctx, in.Query, opts...)
	if err != nil {
		return nil, err
	}
	out := make([]engine.Hit, len(results))
	for i, r := range results {
		out[i] = engine.NewHit(r)
	}
	return jsonValue(map[string][]engine.Hit{"results": out})
}

// RememberInput is the input of remember.
type RememberInput struct {
	User   string `json:"user" jsonschema:"the user the fact is about"`
	Key    string `json:"key" jsonschema:"the fact's key, such as preferred_language"`
	Value  string `json:"value" jsonschema:"the fact"`
	Pinned bool   `json:"pinned,omitempty" jsonschema:"always keep the fact in the memory region"`
	Source string `json:"source,omitempty" jsonschema:"where the fact came from"`
}

func (s *Server) remember(ctx context.Context, in *RememberInput) (any, error) {
	f := store.Fact{Key: in.Key, Value: in.Value, Pinned: in.Pinned, Source: in.Source}
	if err := s.st.SetFact(ctx, loom.Tenant(ctx), in.User, f); err != nil {
		return nil, err
	}
	return jsonValue(f)
}

// RecallInput is the input of recall.
type RecallInput struct {
	User string `json:"user" jsonschema:"the user whose facts to list"`
}

func (s *Server) recall(ctx context.Context, in *RecallInput) (any, error) {
	return s.readMemory(ctx, in.User)
}

func (s *Server) readMemory(ctx context.Context, user string) (any, error) {
	facts, err := s.st.Facts(ctx, loom.Tenant(ctx), user)
	if err != nil {
		return nil, err
	}
	if facts == nil {
		facts = []store.Fact{}
	}
	return jsonValue(map[string][]store.Fact{"facts": facts})
}

// ForgetInput is the input of forget.
type ForgetInput struct {
	User string `json:"user" jsonschema:"the user the fact is about"`
	Key  string `json:"key" jsonschema:"the fact's key"`
}

func (s *Server) forget(ctx context.Context, in *ForgetInput) (any, error) {
	if err := s.st.DeleteFact(ctx, loom.Tenant(ctx), in.User, in.Key); err != nil {
		return nil, err
	}
	return map[string]any{"forgotten": in.Key}, nil
}

// ReplyMessage is one message of a recorded turn's reply.
type ReplyMessage struct {
	Role       string          `json:"role" jsonschema:"assistant or tool"`
	Content    string          `json:"content,omitempty" jsonschema:"the message's text"`
	ToolCalls  []loom.ToolCall `json:"tool_calls,omitempty" jsonschema:"an assistant's tool calls, as in OpenAI's chat format"`
	ToolCallID string          `json:"tool_call_id,omitempty" jsonschema:"the call a tool message answers"`
	Name       string          `json:"name,omitempty" jsonschema:"the tool of a tool message"`
}

// RecordTurnInput is the input of record_turn.
type RecordTurnInput struct {
	Session string         `json:"session" jsonschema:"the session to append to"`
	Agent   string         `json:"agent,omitempty" jsonschema:"the agent whose compaction policy the session follows"`
	Message string         `json:"message,omitempty" jsonschema:"the user's message (empty: record only the reply)"`
	Reply   []ReplyMessage `json:"reply,omitempty" jsonschema:"what answered it, in order"`
}

func (s *Server) recordTurn(ctx context.Context, in *RecordTurnInput) (any, error) {
	if n := len(in.Reply) + 1; n > s.limits.MaxItems {
		return nil, fmt.Errorf("%w: %d messages, the limit is %d", loom.ErrTooLarge, n, s.limits.MaxItems)
	}
	t := engine.Turn{Session: in.Session, Agent: in.Agent, Message: in.Message}
	for _, m := range in.Reply {
		t.Reply = append(t.Reply, store.Message{Role: m.Role, Content: m.Content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID, Name: m.Name})
	}
	stored, err := s.eng.Record(ctx, t)
	if err != nil {
		return nil, err
	}
	for i := range stored {
		stored[i].TokenCounts = nil // the store's cache, not the caller's business
	}
	return jsonValue(map[string][]store.Message{"messages": stored})
}

func (s *Server) readSession(ctx context.Context, session string) (any, error) {
	msgs, err := s.st.Messages(ctx, loom.Tenant(ctx), session, store.MessageQuery{Limit: s.limits.MaxItems})
	if err != nil {
		return nil, err
	}
	if msgs == nil {
		msgs = []store.Message{}
	}
	for i := range msgs {
		msgs[i].TokenCounts = nil
	}
	return jsonValue(map[string][]store.Message{"messages": msgs})
}

// CountTokensInput is the input of count_tokens.
type CountTokensInput struct {
	Text     string `json:"text" jsonschema:"the text to count"`
	Model    string `json:"model,omitempty" jsonschema:"count as this model's tokenizer does (an estimate for a model whose tokenizer is not public)"`
	Encoding string `json:"encoding,omitempty" jsonschema:"count with this encoding (default cl100k_base); not with model"`
}

// CountTokensOutput is the output of count_tokens.
type CountTokensOutput struct {
	Tokens   int    `json:"tokens"`
	Encoding string `json:"encoding"` // "estimate" for a model counted by an estimate
	Model    string `json:"model,omitempty"`
	Exact    bool   `json:"exact"`
	Bytes    int    `json:"bytes"`
}

func (s *Server) countTokens(_ context.Context, in *CountTokensInput) (any, error) {
	out := CountTokensOutput{Bytes: len(in.Text), Exact: true}
	var c tokenizer.Counter
	switch {
	case in.Model != "" && in.Encoding != "":
		return nil, fmt.Errorf("%w: give a model or an encoding, not both", loom.ErrInvalid)
	case in.Model != "":
		m, err := tokenizer.ForModel(in.Model)
		if err != nil {
			return nil, err
		}
		c, out.Model, out.Encoding, out.Exact = m.Counter(), m.Name, m.Encoding, m.Exact()
		if !m.Exact() {
			out.Encoding = "estimate"
		}
	default:
		name := in.Encoding
		if name == "" {
			name = tokenizer.CL100KBase
		}
		e, err := tokenizer.Get(name)
		if err != nil {
			return nil, err
		}
		c, out.Encoding = e, e.Name()
	}
	out.Tokens = c.Count(in.Text)
	return out, nil
}

// jsonValue returns v as the JSON it marshals to, HTML characters unescaped (the text is for models).
func jsonValue(v any) (json.RawMessage, error) {
	text, err := marshal(v)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(text), nil
}

func marshal(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("encode: %w", err)
	}
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n"))), nil
}
