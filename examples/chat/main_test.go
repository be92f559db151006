package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/sqlite"
)

// chatServer speaks Chat Completions: to a conversation whose last message is the user's it answers with a
// call of search_docs, to one whose last message is the tool's result it answers with the text of that
// result's first hit. It keeps the requests it was sent.
type chatServer struct {
	mu       sync.Mutex
	requests []chatRequest
}

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    string          `json:"content"`
		ToolCalls  []loom.ToolCall `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
	auth string
}

func (s *chatServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	req.auth = r.Header.Get("Authorization")
	s.mu.Lock()
	s.requests = append(s.requests, req)
	n := len(s.requests)
	s.mu.Unlock()
	last := req.Messages[len(req.Messages)-1]
	var msg map[string]any
	switch last.Role {
	case "tool":
		var hits []struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal([]byte(last.Content), &hits)
		answer := "no hit"
		if len(hits) > 0 {
			answer = "From the docs: " + strings.Join(strings.Fields(hits[0].Text), " ")
		}
		msg = map[string]any{"role": "assistant", "content": answer}
	default:
		id := "call_" + string(rune('0'+n))
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{{"id": id, "type": "function",
			"function": map[string]any{"name": "search_docs", "arguments": `{"query":"` + last.Content + `"}`}}}}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "x", "object": "chat.completion",
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": "stop"}}})
}

// TestChat_AgentLoop runs the example against a local Chat Completions server for two lines: each turn
// assembles the retrieved chunks and the tool into the request, runs the tool the model calls, prints the
// model's answer and records the turn with its tool call and result, which the second turn's request has as
// history.
func TestChat_AgentLoop(t *testing.T) {
	t.Parallel()
	srv := &chatServer{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	dir := t.TempDir()
	docs := filepath.Join(dir, "docs")
	if err := os.Mkdir(docs, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"reset.md":    "# Passwords\n\nA password reset link is valid for thirty minutes.",
		"invoices.md": "# Billing\n\nInvoices are sent on the first day of each month.",
	} {
		if err := os.WriteFile(filepath.Join(docs, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(dir, "chat.db")
	env := map[string]string{"CHAT_BASE_URL": ts.URL + "/v1", "CHAT_MODEL": "test-model", "CHAT_API_KEY": "sk-test",
		"CHAT_DOCS": docs, "CHAT_SESSION": "s1", "LOOM_STORE": "sqlite:" + db}
	var out strings.Builder
	in := strings.NewReader("How long is a password reset link valid?\nWhen are invoices sent?\n")
	if err := run(t.Context(), func(k string) string { return env[k] }, in, &out); err != nil {
		t.Fatal(err)
	}
	answers := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(answers) != 2 || !strings.Contains(answers[0], "thirty minutes") || !strings.Contains(answers[1], "first day of each month") {
		t.Fatalf("answers: %q", answers)
	}
	if len(srv.requests) != 4 {
		t.Fatalf("%d requests, want 2 a turn", len(srv.requests))
	}
	first := srv.requests[0]
	if first.Model != "test-model" || first.auth != "Bearer sk-test" || len(first.Tools) != 1 || first.Tools[0].Function.Name != "search_docs" {
		t.Errorf("first request: model %q, auth %q, tools %+v", first.Model, first.auth, first.Tools)
	}
	var prompt strings.Builder
	for _, m := range first.Messages {
		prompt.WriteString(m.Content)
	}
	if !strings.Contains(prompt.String(), "thirty minutes") || !strings.Contains(prompt.String(), "<context") {
		t.Errorf("the first request has no retrieved context: %+v", first.Messages)
	}
	// The second turn's first request has the first turn as history: its question, the call, the result,
	// the answer.
	third := srv.requests[2]
	var roles []string
	for _, m := range third.Messages {
		roles = append(roles, m.Role)
	}
	if got := strings.Join(roles, ","); !strings.Contains(got, "user,assistant,tool,assistant,") || roles[len(roles)-1] != "user" {
		t.Errorf("second turn's roles: %s", got)
	}

	// The session holds both turns with their tool calls, in the store the example wrote.
	st, err := sqlite.Open(t.Context(), sqlite.Options{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	msgs, err := st.Messages(t.Context(), loom.DefaultTenant, "s1", store.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 8 || msgs[1].Role != "assistant" || len(msgs[1].ToolCalls) != 1 || msgs[1].ToolCalls[0].Function.Name != "search_docs" ||
		msgs[2].Role != "tool" || msgs[2].ToolCallID != msgs[1].ToolCalls[0].ID || !strings.Contains(msgs[3].Content, "thirty minutes") {
		t.Errorf("stored: %+v", msgs)
	}
}
