package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSessionAppend_RefusesEmptyContent: append without --content, or with blank content, stored an empty
// user message and exited 0. It is a usage error (exit 2) and nothing is stored; an assistant message with
// tool calls and a tool's result may be empty.
func TestSessionAppend_RefusesEmptyContent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "loom.db")
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--session", "s"}, "want --content TEXT or --json FILE"},
		{[]string{"--session", "s", "--role", "assistant"}, "want --content TEXT or --json FILE"},
		{[]string{"--session", "s", "--role", "tool", "--tool-call-id", "c1"}, "want --content TEXT or --json FILE"},
		{[]string{"--session", "s", "--content", ""}, "message 1: no content (role user"},
		{[]string{"--session", "s", "--content", " \n\t"}, "message 1: no content (role user"},
		{[]string{"--session", "s", "--json", write("one.json", `{"role":"user"}`)}, "message 1: no content (role user"},
		{[]string{"--session", "s", "--json", write("two.json", `[{"role":"user","content":"hi"},{"role":"assistant","content":""}]`)}, "message 2: no content (role assistant"},
		{[]string{"--session", "s", "--content", "hi", "--json", write("x.json", `{"role":"user","content":"x"}`)}, "not both"},
		{[]string{"--session", "s", "--content", "", "--json", write("y.json", `{"role":"user","content":"x"}`)}, "not both"},
	} {
		args := append([]string{"session", "append", "--store", db}, tt.args...)
		_, errOut, code := runLoom(t, "", args...)
		if code != exitUsage || !strings.Contains(errOut, tt.want) {
			t.Errorf("loom %q: exit %d %q; want %d with %q", args, code, errOut, exitUsage, tt.want)
		}
	}
	if out, _, _ := runLoom(t, "", "session", "show", "--store", db, "--session", "s"); out != "" {
		t.Errorf("refused appends stored messages:\n%s", out)
	}
	// What may be empty is stored.
	calls := write("calls.json", `[{"role":"user","content":"what time is it?"},
		{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"clock","arguments":"{}"}}]}]`)
	for _, args := range [][]string{
		{"--json", calls},
		{"--role", "tool", "--tool-call-id", "c1", "--content", ""},
	} {
		args = append([]string{"session", "append", "--store", db, "--session", "s"}, args...)
		if _, errOut, code := runLoom(t, "", args...); code != 0 {
			t.Errorf("loom %q: exit %d %s", args, code, errOut)
		}
	}
	if out, _, _ := runLoom(t, "", "session", "show", "--store", db, "--session", "s"); strings.Count(out, "\n") != 3 {
		t.Errorf("want 3 messages stored:\n%s", out)
	}
}
