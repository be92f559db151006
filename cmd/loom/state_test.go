package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
)

// TestState_SeedScenarioFromTheCLI sets up seed 003's scenario with the state commands alone, on an SQLite
// file, and assembles it with the cookbook preset and with Loom's own rendering.
func TestState_SeedScenarioFromTheCLI(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "loom.db")
	mustRun := func(args ...string) string {
		t.Helper()
		out, errOut, code := runLoom(t, "", append(args, "--store", db, "--tenant", "acme")...)
		if code != 0 {
			t.Fatalf("loom %s: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
		return out
	}
	mustRun("agent", "put", "--agent", "demo_agent", "--instructions", "You are a helpful AI assistant.",
		"--constraints", "Be concise and accurate.", "--output-format", "Plain text.")
	for _, kv := range [][2]string{{"name", "Bob"}, {"preferred_language", "English"}, {"tier", "free"}} {
		mustRun("memory", "set", "--user", "user_42", "--key", kv[0], "--value", kv[1])
	}
	mustRun("session", "append", "--session", "sess_42", "--content", "Hi, I need help with my account")
	mustRun("session", "append", "--session", "sess_42", "--role", "assistant", "--content", "Sure! What do you need help with?")
	out := mustRun("session", "append", "--session", "sess_42", "--content", "I want to upgrade to premium")
	var appended store.Message
	if err := json.Unmarshal([]byte(out), &appended); err != nil || appended.Seq != 3 || appended.TokenCounts["o200k_base"] == 0 {
		t.Fatalf("append printed %q (%v)", out, err)
	}
	mustRun("session", "tool-output", "--session", "sess_42", "--tool", "check_account", "--result", `{"plan": "free", "eligible_upgrade": true}`)

	shown := strings.Split(strings.TrimSpace(mustRun("session", "show", "--session", "sess_42", "--limit", "2")), "\n")
	if len(shown) != 2 || !strings.Contains(shown[1], "I want to upgrade to premium") {
		t.Fatalf("session show --limit 2: %q", shown)
	}
	if got := mustRun("memory", "get", "--user", "user_42", "--key", "tier"); !strings.Contains(got, `"value":"free"`) {
		t.Fatalf("memory get: %q", got)
	}
	if got := mustRun("agent", "get", "--agent", "demo_agent"); !strings.Contains(got, `"constraints":"Be concise and accurate."`) {
		t.Fatalf("agent get: %q", got)
	}

	out = mustRun("assemble", "--agent", "demo_agent", "--user", "user_42", "--session", "sess_42",
		"--message", "How much does premium cost?", "--max-tokens", "4000", "--preset", "cookbook")
	var res engine.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"system: You are a helpful AI assistant.\n\nConstraints: Be concise and accurate.\nFormat: Plain text.",
		"system: User context:\n<user_memory trusted=\"false\">\n- name: Bob\n- preferred_language: English\n- tier: free\n</user_memory>",
		"user: Hi, I need help with my account",
		"assistant: Sure! What do you need help with?",
		"user: I want to upgrade to premium",
		"system: Tool 'check_account' returned: <tool_output trusted=\"false\">\n{&quot;plan&quot;: &quot;free&quot;, &quot;eligible_upgrade&quot;: true}\n</tool_output>",
		"user: How much does premium cost?",
	}
	if len(res.Messages) != len(want) {
		t.Fatalf("%d messages, want %d:\n%s", len(res.Messages), len(want), out)
	}
	for i, m := range res.Messages {
		if got := m.Role + ": " + m.Content; got != want[i] {
			t.Errorf("message %d = %q, want %q", i, got, want[i])
		}
	}
	if res.TotalTokens == 0 || res.TotalTokens > 4000 || res.Budget != 4000 {
		t.Errorf("total %d budget %d", res.TotalTokens, res.Budget)
	}

	// Loom's own rendering, with a request file that adds to the stored state.
	reqFile := filepath.Join(t.TempDir(), "req.json")
	if err := os.WriteFile(reqFile, []byte(`{"session": "sess_42", "instructions": "Answer in one line.", "message": "How much does premium cost?"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out = mustRun("assemble", "--request", reqFile, "--agent", "demo_agent", "--user", "user_42", "--format", "anthropic")
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Format != "anthropic" || !strings.Contains(res.System, "Answer in one line.") || !strings.Contains(res.System, "You are a helpful AI assistant.") ||
		!strings.Contains(out, "I want to upgrade to premium") || !strings.Contains(out, "check_account") {
		t.Errorf("merged anthropic assembly:\n%s", out)
	}

	mustRun("session", "delete", "--session", "sess_42")
	if got := mustRun("session", "show", "--session", "sess_42"); got != "" {
		t.Errorf("after delete, show printed %q", got)
	}
}

func TestState_Errors(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "loom.db")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"session"}, exitUsage, "Usage"},
		{[]string{"session", "frobnicate"}, exitUsage, "unknown verb"},
		{[]string{"session", "append", "--store", db}, exitUsage, "--session is required"},
		{[]string{"session", "append", "--store", db, "--session", "s", "--role", "wizard", "--content", "x"}, exitUsage, "role"},
		{[]string{"session", "delete", "--store", db, "--session", "nope"}, 1, "not found"},
		{[]string{"memory", "get", "--store", db, "--user", "u", "--key", "k"}, 1, "not found"},
		{[]string{"agent", "get", "--store", db, "--agent", "ghost"}, 1, "not found"},
		{[]string{"agent", "put", "--store", db, "--agent", "a\nb"}, exitUsage, "control character"},
		{[]string{"assemble", "--store", db, "--agent", "ghost", "--message", "hi"}, 1, "agent"},
		{[]string{"assemble", "--store", db, "--session", "s", "--message", "hi", "--max-tokens", "5"}, exitBudget, "budget is 5"},
		{[]string{"assemble", "--store", "ftp://x", "--session", "s", "--message", "hi"}, exitUsage, "bad store URL"},
		{[]string{"assemble", "--store", "valkey://user:hunter2@127.0.0.1:1", "--layout", "weird", "--session", "s", "--message", "hi"}, exitUsage, "layout"},
		{[]string{"assemble", "--message", "hi"}, exitUsage, "want --request"},
	} {
		_, errOut, code := runLoom(t, "", tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("loom %q: exit %d, stderr %q; want exit %d mentioning %q", tc.args, code, errOut, tc.code, tc.want)
		}
		if strings.Contains(errOut, "hunter2") {
			t.Errorf("loom %q printed the password: %q", tc.args, errOut)
		}
	}
}
