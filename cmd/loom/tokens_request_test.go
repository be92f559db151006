package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/context-loom/loom/promptcount"
)

// cookbookBody is the OpenAI Cookbook's request with tools (promptcount's testdata) for model.
func cookbookBody(t *testing.T, model string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "promptcount", "testdata", "cookbook.json"))
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(data, &body); err != nil {
		t.Fatal(err)
	}
	body["model"] = model
	out, _ := json.Marshal(body)
	return string(out)
}

// TestTokensRequest_Cookbook counts the Cookbook's request from a file and from standard input: the
// API's 105 for gpt-3.5-turbo and gpt-4, 101 for gpt-4o and gpt-4o-mini, and promptcount's answer,
// breakdown and all, under --json.
func TestTokensRequest_Cookbook(t *testing.T) {
	t.Parallel()
	for model, want := range map[string]int{"gpt-3.5-turbo": 105, "gpt-4": 105, "gpt-4o": 101, "gpt-4o-mini": 101} {
		body := cookbookBody(t, model)
		path := writeFiles(t, body)[0]
		for _, args := range [][]string{{"tokens", "--request", path}, {"tokens", "--request", "-"}} {
			stdout, stderr, code := runLoom(t, body, args...)
			// gpt-4o's tool rule is an estimate, though it gives the Cookbook's count.
			note := strings.Contains(stderr, "estimates, which err high")
			if code != 0 || stdout != strconv.Itoa(want)+"\n" || (stderr != "") != strings.HasPrefix(model, "gpt-4o") || stderr != "" && !note {
				t.Errorf("%s %v: exit %d, %q (stderr %q), want %d", model, args, code, stdout, stderr, want)
			}
		}
		stdout, _, code := runLoom(t, body, "tokens", "--json", "--request", "-")
		direct, err := promptcount.CountRequest(context.Background(), []byte(body), promptcount.Options{})
		if err != nil {
			t.Fatal(err)
		}
		wantJSON, _ := json.Marshal(direct)
		if code != 0 || strings.TrimSpace(stdout) != string(wantJSON) {
			t.Errorf("%s --json: exit %d\n%s\nwant\n%s", model, code, stdout, wantJSON)
		}
	}
}

// TestTokensRequest_Anthropic estimates a Messages body and says so.
func TestTokensRequest_Anthropic(t *testing.T) {
	t.Parallel()
	body := `{"model":"claude-sonnet-4-5","system":"Be brief.","messages":[{"role":"user","content":"Hello"}]}`
	stdout, stderr, code := runLoom(t, body, "tokens", "--request", "-")
	direct, _ := promptcount.CountRequest(context.Background(), []byte(body), promptcount.Options{})
	if code != 0 || stdout != strconv.Itoa(direct.Tokens)+"\n" || !strings.Contains(stderr, "estimate") {
		t.Errorf("exit %d, %q, stderr %q", code, stdout, stderr)
	}
	stdout, _, _ = runLoom(t, body, "tokens", "--json", "--request", "-", "--provider", "anthropic")
	var c promptcount.Count
	if err := json.Unmarshal([]byte(stdout), &c); err != nil || !c.Approximate || c.Shape != "anthropic" {
		t.Errorf("--json: %s (%v)", stdout, err)
	}
}

// TestTokensRequest_Usage refuses what does not go with --request, and a body it cannot count, with
// exit status 2.
func TestTokensRequest_Usage(t *testing.T) {
	t.Parallel()
	path := writeFiles(t, cookbookBody(t, "gpt-4"))[0]
	for _, tc := range []struct {
		args  []string
		stdin string
		want  string
	}{
		{[]string{"tokens", "--request", path, "--encoding", "o200k_base"}, "", "--encoding does not apply"},
		{[]string{"tokens", "--request", path, path}, "", "give no other files"},
		{[]string{"tokens", "--provider", "openai", path}, "", "--provider names the shape"},
		{[]string{"tokens", "--request", "-"}, `{"model":"gpt-4o","messages":[{"role":"robot"}]}`, `role "robot"`},
		{[]string{"tokens", "--request", "-"}, `not json`, "want a JSON object"},
		{[]string{"tokens", "--request", "-", "--provider", "gemini"}, `{}`, "shape"},
		{[]string{"tokens", "--request", "-"}, `{"messages":[]}`, "names no model"},
	} {
		_, stderr, code := runLoom(t, tc.stdin, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr, exitUsage, tc.want)
		}
	}
	// --model names the model of a body without one.
	body := strings.Replace(cookbookBody(t, "x"), `"model":"x",`, "", 1)
	if stdout, stderr, code := runLoom(t, body, "tokens", "--request", "-", "--model", "gpt-4o"); code != 0 || stdout != "101\n" {
		t.Errorf("--model: exit %d, %q, %q", code, stdout, stderr)
	}
}

// TestTokensRequest_Provider asks Anthropic's counting endpoint when LOOM_ANTHROPIC_API_KEY is set (a
// local server stands in for it), and says why when it fails, without the key.
func TestTokensRequest_Provider(t *testing.T) {
	fail := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages/count_tokens" || r.Header.Get("x-api-key") != "sk-ant-cli-SECRET" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		if fail {
			w.WriteHeader(529)
			io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded sk-ant-cli-SECRET"}}`)
			return
		}
		io.WriteString(w, `{"input_tokens":31}`)
	}))
	defer srv.Close()
	t.Setenv("LOOM_ANTHROPIC_API_KEY", "sk-ant-cli-SECRET")
	t.Setenv("LOOM_ANTHROPIC_BASE_URL", srv.URL)
	body := `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"Hello"}]}`
	if stdout, stderr, code := runLoom(t, body, "tokens", "--request", "-"); code != 0 || stdout != "31\n" || stderr != "" {
		t.Errorf("exit %d, %q, stderr %q", code, stdout, stderr)
	}
	fail = true
	stdout, stderr, code := runLoom(t, body, "tokens", "--json", "--request", "-")
	if code != 0 || !strings.Contains(stderr, "status 529") || strings.Contains(stderr+stdout, "SECRET") || !strings.Contains(stdout, `"degraded"`) {
		t.Errorf("exit %d, %q, stderr %q", code, stdout, stderr)
	}
}
