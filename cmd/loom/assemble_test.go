package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/context-loom/loom/assembler"
)

func TestAssemble_PrintsTheResult(t *testing.T) {
	t.Parallel()
	path := filepath.Join("testdata", "cookbook-request.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		stdin string
	}{
		{[]string{"assemble", "--request", path}, ""},
		{[]string{"assemble", "--request", "-", "--format", "anthropic"}, string(data)},
		{[]string{"assemble", "--request", path, "--format", "text"}, ""},
	} {
		out, errOut, code := runLoom(t, tc.stdin, tc.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errOut)
		}
		var res assembler.Result
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if res.TotalTokens <= 0 || res.TotalTokens > res.Budget || len(res.Report.Regions) == 0 || res.PrefixHash == "" {
			t.Errorf("%v: result %+v", tc.args, res)
		}
		if strings.Contains(out, `\u003c`) {
			t.Errorf("%v: output escapes < as \\u003c", tc.args)
		}
	}
}

func TestAssemble_ExitCodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, body string
		code       int
		want       string
	}{
		{"budget.json", `{"max_tokens": 20, "instructions": "` + strings.Repeat("Follow the rules. ", 20) + `", "message": "hi"}`, 3, "budget is 20"},
		{"broken.json", `{"message": `, 2, "malformed"},
		{"unknown.json", `{"message": "hi", "colour": "red"}`, 2, "colour"},
		{"format.json", `{"message": "hi", "format": "xml"}`, 2, "unknown format"},
		{"model.json", `{"message": "hi", "model": "gpt-99"}`, 2, "unknown model"},
	} {
		_, errOut, code := runLoom(t, "", "assemble", "--request", write(tc.name, tc.body))
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", tc.name, code, errOut, tc.code, tc.want)
		}
	}
	if _, _, code := runLoom(t, "", "assemble"); code != 2 {
		t.Errorf("no --request: exit %d", code)
	}
}

// TestAssemble_RequestCountsIgnored: counts in a request file are not trusted; the budget holds.
func TestAssemble_RequestCountsIgnored(t *testing.T) {
	t.Parallel()
	lie := map[string]int{"o200k_base": 1, "cl100k_base": 1}
	req := map[string]any{"model": "gpt-4o", "max_tokens": 60, "message": "hi"}
	var history []map[string]any
	for i := range 4 {
		history = append(history, map[string]any{"role": []string{"user", "assistant"}[i%2],
			"content": strings.Repeat("many words in this message ", 3), "token_counts": lie})
	}
	req["history"] = history
	data, _ := json.Marshal(req)
	out, errOut, code := runLoom(t, string(data), "assemble", "--request", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res assembler.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.TotalTokens > 60 || len(res.Messages) >= 2+len(history) {
		t.Errorf("understated counts were trusted: total %d of 60, %d messages", res.TotalTokens, len(res.Messages))
	}
}

// TestAssemble_UsesEveryField: each field class of a request file changes the result, or is refused when
// it cannot apply: the table is the HTTP API's (the file is POST /v1/assemble's body). The store is named
// by LOOM_STORE only, as a user's would be: before, a "retrieve" block was dropped unless a stored part was
// named too.
func TestAssemble_UsesEveryField(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("LOOM_STORE", "sqlite:"+filepath.Join(dir, "loom.db"))
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, args := range [][]string{
		{"agent", "put", "--agent", "a", "--instructions", "You are Agent A."},
		{"memory", "set", "--user", "u", "--key", "plan", "--value", "basic"},
		{"session", "append", "--session", "s", "--json", write("msgs.json", `[{"role":"user","content":"first question"},
			{"role":"assistant","content":"first answer"},{"role":"user","content":"second question"}]`)},
		{"ingest", "--collection", "kb", write("travel.md", "# Travel\n\nThe zeppelin leaves at noon from the tower.\n")},
	} {
		if _, errOut, code := runLoom(t, "", args...); code != 0 {
			t.Fatalf("loom %q: exit %d %s", args, code, errOut)
		}
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "server", "testdata", "assemble-fields.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fields []struct {
		Field         string
		Without, With json.RawMessage
		Error         bool
	}
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	for i, f := range fields {
		without, errA, codeA := runLoom(t, "", "assemble", "--request", write(fmt.Sprintf("without-%d.json", i), string(f.Without)))
		with, errB, codeB := runLoom(t, "", "assemble", "--request", write(fmt.Sprintf("with-%d.json", i), string(f.With)))
		switch {
		case codeA != 0:
			t.Errorf("%s: the request without it: exit %d %s", f.Field, codeA, errA)
		case f.Error && codeB == 0:
			t.Errorf("%s: exit 0, want it refused:\n%s", f.Field, with)
		case !f.Error && codeB != 0:
			t.Errorf("%s: exit %d %s", f.Field, codeB, errB)
		case !f.Error && without == with:
			t.Errorf("%s is ignored: the result is the same with it and without it:\n%s", f.Field, with)
		}
	}
}
