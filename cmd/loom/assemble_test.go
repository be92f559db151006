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
		{[]string{"assemble", "--request", path, "--format", "responses"}, ""},
		{[]string{"assemble", "--request", path, "--format", "gemini"}, ""},
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
		// The prompt cache key, for OpenAI's APIs; each format's own fields.
		openAI := res.Format == assembler.FormatOpenAI || res.Format == assembler.FormatResponses
		if openAI != strings.HasPrefix(res.PromptCacheKey, "loom-") {
			t.Errorf("%v: format %s, prompt_cache_key %q", tc.args, res.Format, res.PromptCacheKey)
		}
		if res.Format == assembler.FormatResponses && (len(res.Input) == 0 || res.Instructions == "") ||
			res.Format == assembler.FormatGemini && (len(res.Contents) == 0 || res.SystemInstruction == nil || res.Exact) {
			t.Errorf("%v: %s", tc.args, out)
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

// anthropicCases are three requests whose anthropic rendering the Messages API refused with a 400: an
// assistant's text of white space beside its tool call (sent as a text block of white space), instructions
// alone ("messages": []), and a final assistant message ending in white space. want checks the result of
// the first and last; the second has no message to send, and is a bad request.
var anthropicCases = []struct {
	name string
	req  string
	want func(res assembler.Result) string // what is wrong, or ""
}{
	{"whitespace beside a tool call", `{"instructions": "You look orders up.", "history": [
		{"role": "user", "content": "Where is order 18?"},
		{"role": "assistant", "content": " \n ", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{\"order\":\"18\"}"}}]},
		{"role": "tool", "tool_call_id": "call_1", "content": "packing"}]}`,
		func(res assembler.Result) string {
			if len(res.Messages) != 3 || len(res.Messages[1].Blocks) != 1 || res.Messages[1].Blocks[0].Type != "tool_use" {
				return fmt.Sprintf("want the assistant's tool_use alone: %+v", res.Messages)
			}
			return ""
		}},
	{"instructions alone", `{"instructions": "You are a helpful assistant."}`, nil},
	{"instructions and a blank message", `{"instructions": "You are a helpful assistant.", "message": " \n\t "}`, nil},
	{"a final assistant message ending in white space", `{"history": [
		{"role": "user", "content": "Write a haiku about autumn."},
		{"role": "assistant", "content": "Leaves fall on the pond,\nripples carry them away  \n"}]}`,
		func(res assembler.Result) string {
			last := res.Messages[len(res.Messages)-1]
			if last.Role != "assistant" || len(last.Blocks) != 1 || last.Blocks[0].Text != "Leaves fall on the pond,\nripples carry them away" {
				return fmt.Sprintf("want the assistant's text without its trailing white space: %+v", last)
			}
			return ""
		}},
}

// TestAssemble_AnthropicRequestsTheAPITakes: with --format anthropic, the three requests the Messages API
// refused are a request it takes, or exit status 2 with a message that says what is missing.
func TestAssemble_AnthropicRequestsTheAPITakes(t *testing.T) {
	t.Parallel()
	for _, tc := range anthropicCases {
		out, errOut, code := runLoom(t, tc.req, "assemble", "--request", "-", "--format", "anthropic")
		if tc.want == nil {
			if code != 2 || !strings.Contains(errOut, "at least one message") {
				t.Errorf("%s: exit %d, stderr %q; want 2 and a message that none is there", tc.name, code, errOut)
			}
			continue
		}
		if code != 0 {
			t.Errorf("%s: exit %d: %s", tc.name, code, errOut)
			continue
		}
		var res assembler.Result
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if res.Format != "anthropic" {
			t.Errorf("%s: format %q", tc.name, res.Format)
		}
		if msg := tc.want(res); msg != "" {
			t.Errorf("%s: %s", tc.name, msg)
		}
	}
}

// TestAssemble_PolicyClearsToolResults: a request file's policy clears the older tool results to
// placeholders and cuts the history as it says, as over HTTP.
func TestAssemble_PolicyClearsToolResults(t *testing.T) {
	t.Parallel()
	req := `{"model": "gpt-4o", "message": "And now?", "policy": {"keep_tool_results": 1, "history_trim": "turns"}, "history": [
		{"role": "user", "content": "Find the booking."},
		{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}]},
		{"role": "tool", "tool_call_id": "c1", "content": "booking 17: a flight to Lisbon on the 3rd, seat 12A, paid by card, two bags"},
		{"role": "assistant", "content": "Booking 17 is a flight to Lisbon."},
		{"role": "user", "content": "And the hotel?"},
		{"role": "assistant", "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "search", "arguments": "{}"}}]},
		{"role": "tool", "tool_call_id": "c2", "content": "booking 18: the Hotel Mundial, three nights"}]}`
	out, errOut, code := runLoom(t, req, "assemble", "--request", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, `[tool result cleared: search, call \"c1\", `) || !strings.Contains(out, "the Hotel Mundial") || !strings.Contains(out, `"cleared"`) {
		t.Errorf("c1 not cleared, or c2 cleared:\n%s", out)
	}
	_, errOut, code = runLoom(t, `{"message": "hi", "policy": {"history_trim": "pages"}}`, "assemble", "--request", "-")
	if code != 2 || !strings.Contains(errOut, "history_trim") {
		t.Errorf("a bad history_trim: exit %d: %s", code, errOut)
	}
}

// TestAssemble_CacheBreakpointsFromTheRequestFile: a request file's cache_breakpoints and cache_ttl reach
// the anthropic format: breakpoints of an hour by default, none with "off", and a bad value fails.
func TestAssemble_CacheBreakpointsFromTheRequestFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(extra string) string {
		path := filepath.Join(dir, fmt.Sprintf("req%d.json", len(extra)))
		body := fmt.Sprintf(`{"model":"claude-sonnet-4-5","format":"anthropic","instructions":%q,"message":"Hi."%s}`,
			strings.Repeat("Give temperatures in Celsius. ", 300), extra)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	out, errOut, code := runLoom(t, "", "assemble", "--request", write(`,"cache_ttl":"1h"`))
	if code != 0 || strings.Count(out, `"cache_control":{"type":"ephemeral","ttl":"1h"}`) != 2 || !strings.Contains(out, `"system_blocks"`) {
		t.Errorf("cache_ttl 1h: exit %d %s: %s", code, errOut, out)
	}
	// The flag overrides the file: an hour on the system prompt, five minutes on the message.
	out, errOut, code = runLoom(t, "", "assemble", "--request", write(`,"cache_ttl":"1h"`), "--cache-ttl", "1h+5m")
	if code != 0 || strings.Count(out, `"cache_control":{"type":"ephemeral","ttl":"1h"}`) != 1 || strings.Count(out, `"cache_control":{"type":"ephemeral"}`) != 1 {
		t.Errorf("--cache-ttl 1h+5m: exit %d %s: %s", code, errOut, out)
	}
	out, errOut, code = runLoom(t, "", "assemble", "--request", write(`,"cache_breakpoints":"off"`))
	if code != 0 || strings.Contains(out, "cache_control") {
		t.Errorf("off: exit %d %s: %s", code, errOut, out)
	}
	if _, errOut, code = runLoom(t, "", "assemble", "--request", write(`,"cache_breakpoints":"sometimes"`)); code == 0 || !strings.Contains(errOut, "cache_breakpoints") {
		t.Errorf("a bad value: exit %d: %s", code, errOut)
	}
}

// TestAssemble_AgentCacheDefaultsFromTheCLI: loom agent put --cache-ttl sets the default of the agent's
// requests, which loom assemble --cache-ttl overrides; an unknown value is refused when stored.
func TestAssemble_AgentCacheDefaultsFromTheCLI(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "loom.db")
	instructions := strings.Repeat("Give temperatures in Celsius. ", 300)
	if _, errOut, code := runLoom(t, "", "agent", "put", "--store", db, "--agent", "a", "--model", "claude-sonnet-4-5",
		"--instructions", instructions, "--cache-ttl", "1h+5m"); code != 0 {
		t.Fatalf("agent put: exit %d: %s", code, errOut)
	}
	assemble := func(extra ...string) string {
		t.Helper()
		out, errOut, code := runLoom(t, "", append([]string{"assemble", "--store", db, "--agent", "a", "--format", "anthropic", "--message", "Hi."}, extra...)...)
		if code != 0 {
			t.Fatalf("assemble %v: exit %d: %s", extra, code, errOut)
		}
		return out
	}
	if out := assemble(); strings.Count(out, `"cache_control":{"type":"ephemeral","ttl":"1h"}`) != 1 || strings.Count(out, `"cache_control":{"type":"ephemeral"}`) != 1 {
		t.Errorf("the agent's 1h+5m: %s", out)
	}
	if out := assemble("--cache-ttl", "5m"); strings.Contains(out, `"ttl":"1h"`) || strings.Count(out, `"cache_control":{"type":"ephemeral"}`) != 2 {
		t.Errorf("--cache-ttl 5m over the agent's: %s", out)
	}
	if _, errOut, code := runLoom(t, "", "agent", "put", "--store", db, "--agent", "b", "--cache-ttl", "10m"); code == 0 || !strings.Contains(errOut, "cache_ttl") {
		t.Errorf("agent put --cache-ttl 10m: exit %d: %s", code, errOut)
	}
}

// TestAssemble_CacheReportAcrossRuns: two runs of loom assemble on one session of a SQLite file, the
// second with other instructions: the first run's prompt state is in the file, and the second run's
// result says that the instructions changed, after the tokens of the parts before them.
func TestAssemble_CacheReportAcrossRuns(t *testing.T) {
	t.Parallel()
	db := "sqlite:" + filepath.Join(t.TempDir(), "loom.db")
	if _, errOut, code := runLoom(t, "", "session", "append", "--store", db, "--session", "s", "--content", "Hello."); code != 0 {
		t.Fatalf("append: %d %s", code, errOut)
	}
	assemble := func(instructions string) assembler.CacheReport {
		t.Helper()
		req := filepath.Join(t.TempDir(), "req.json")
		if err := os.WriteFile(req, []byte(`{"model":"gpt-4o","instructions":"`+instructions+`","message":"Where is my train?"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := runLoom(t, "", "assemble", "--store", db, "--session", "s", "--request", req)
		if code != 0 {
			t.Fatalf("assemble: %d %s", code, errOut)
		}
		var res struct{ Cache *assembler.CacheReport }
		if err := json.Unmarshal([]byte(out), &res); err != nil || res.Cache == nil {
			t.Fatalf("no cache report (%v): %s", err, out)
		}
		return *res.Cache
	}
	if c := assemble("Be brief."); c.Reason != assembler.CacheFirstAssembly {
		t.Fatalf("first run: %+v", c)
	}
	if c := assemble("Be brief."); c.Region != "" || c.Reason != "" || c.SharedTokens == 0 {
		t.Fatalf("the same prompt: %+v", c)
	}
	if c := assemble("Be kind."); c.Region != "instructions" || c.Reason != assembler.CacheInstructionsEdited {
		t.Fatalf("other instructions: %+v", c)
	}
}
