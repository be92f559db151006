package engine_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/internal/valkeytest"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/valkey/cookbook"
)

// seedAssembleContext is seed 003's assemble_context, verbatim.
const seedAssembleContext = `
def assemble_context(user_id: str, session_id: str, agent_id: str, current_message: str) -> list:
    """Assemble complete context for an LLM call from all 5 sources in Valkey."""
    messages = []

    # 1. System instructions (broadest context)
    config = client.hgetall(f"agent:config:{agent_id}")
    if config:
        system_prompt = f"{config.get('role', '')}\n\nConstraints: {config.get('constraints', '')}\nFormat: {config.get('output_format', '')}"
        messages.append({"role": "system", "content": system_prompt})

    # 2. User memory (cross-session preferences)
    memories = client.hgetall(f"memory:{user_id}")
    if memories:
        mem_str = "\n".join(f"- {k}: {v}" for k, v in memories.items())
        messages.append({"role": "system", "content": f"User context:\n{mem_str}"})

    # 3. Retrieved knowledge (RAG - would use FT.SEARCH in production)
    # Simplified here; see the Vector Search cookbook for full implementation
    kb_results = client.lrange(f"kb:results:{session_id}", 0, -1)
    if kb_results:
        docs = [json.loads(d) for d in kb_results]
        kb_str = "\n\n".join(f"[{d.get('title', 'Doc')}]: {d.get('content', '')}" for d in docs)
        messages.append({"role": "system", "content": f"Relevant knowledge:\n{kb_str}"})

    # 4. Conversation history (recent turns)
    history = client.lrange(f"chat:{session_id}", -10, -1)
    for raw in history:
        msg = json.loads(raw)
        messages.append({"role": msg["role"], "content": msg["content"]})

    # 5. Tool outputs from current session
    tool_keys = client.keys(f"tool:{session_id}:step_*")
    for key in sorted(tool_keys):
        data = client.hgetall(key)
        messages.append({
            "role": "system",
            "content": f"Tool '{data.get('tool', 'unknown')}' returned: {data.get('result', '{}')}",
        })

    # 6. Current user message (most specific)
    messages.append({"role": "user", "content": current_message})

    return messages
`

// seedHarness runs seedAssembleContext on a stand-in for the Valkey client that serves the keys of a
// dump (hashes as ordered field-value pairs, lists), and prints its messages as JSON.
const seedHarness = `
import fnmatch, json, sys

dump = json.load(sys.stdin)

class Client:
    def hgetall(self, key):
        return dict(dump["hashes"].get(key, []))

    def lrange(self, key, start, stop):
        items = dump["lists"].get(key, [])
        n = len(items)
        if start < 0:
            start = max(n + start, 0)
        if stop < 0:
            stop = n + stop
        return items[start:stop + 1]

    def keys(self, pattern):
        return [k for k in list(dump["hashes"]) + list(dump["lists"]) if fnmatch.fnmatchcase(k, pattern)]

client = Client()
` + seedAssembleContext + `
print(json.dumps(assemble_context(*sys.argv[1:5])))
`

// seedDump is every key of the server at addr, as seedHarness reads them.
type seedDump struct {
	Hashes map[string][][2]string `json:"hashes"`
	Lists  map[string][]string    `json:"lists"`
}

func dumpServer(t *testing.T, addr string) seedDump {
	t.Helper()
	d := seedDump{Hashes: map[string][][2]string{}, Lists: map[string][]string{}}
	keys, err := valkeytest.Do(addr, "KEYS", "*") // a test's own server
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		typ, err := valkeytest.Do(addr, "TYPE", k)
		if err != nil {
			t.Fatal(err)
		}
		switch typ[0] {
		case "hash":
			kv, err := valkeytest.Do(addr, "HGETALL", k)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i+1 < len(kv); i += 2 {
				d.Hashes[k] = append(d.Hashes[k], [2]string{kv[i], kv[i+1]})
			}
		case "list":
			if d.Lists[k], err = valkeytest.Do(addr, "LRANGE", k, "0", "-1"); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("key %s of type %s", k, typ[0])
		}
	}
	return d
}

// runSeed runs seed 003's own assemble_context on the dump with python3, if there is one.
func runSeed(t *testing.T, d seedDump, user, session, agent, message string) ([]assembler.ChatMessage, bool) {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Log("no python3: the seed's own code is not run")
		return nil, false
	}
	in, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, "-c", seedHarness, user, session, agent, message)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the seed's assemble_context: %v: %s", err, stderr.String())
	}
	var msgs []assembler.ChatMessage
	if err := json.Unmarshal(out, &msgs); err != nil {
		t.Fatalf("the seed's output %s: %v", out, err)
	}
	return msgs, true
}

func sameMessages(t *testing.T, what string, got, want []assembler.ChatMessage) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d messages, want %d:\n got %q\nwant %q", what, len(got), len(want), got, want)
	}
	for i := range want {
		if got[i].Role != want[i].Role || got[i].Content != want[i].Content {
			t.Errorf("%s: message %d = [%s] %q, want [%s] %q", what, i, got[i].Role, got[i].Content, want[i].Role, want[i].Content)
		}
	}
}

// oddKeys are keys of seed 003's shapes as other tools write them: titles missing, empty or beside a
// source, FT.SEARCH's string scores, metadata that is not all strings, a string ts, a step with an empty
// result, one without a result and one without a tool.
var oddKeys = [][]string{
	{"HSET", "agent:config:demo_agent", "role", "R", "constraints", "C", "output_format", "F"},
	{"HSET", "memory:user_42", "name", "Bob", "tier", "free"},
	{"RPUSH", "kb:results:sess_42",
		`{"title": "Pricing", "content": "Premium costs $20/month.", "score": "0.9"}`,
		`{"content": "Untitled.", "source": "a.md", "metadata": {"page": 3}}`,
		`{"title": "", "content": "An empty title."}`,
		`{"title": "T", "content": "Two titles.", "source": "a.md", "metadata": {"title": "M", "draft": true}}`,
		`{"title": "No content"}`},
	{"RPUSH", "chat:sess_42", `{"role": "user", "content": "Hi", "ts": "1764529200.1"}`,
		`{"role": "assistant", "content": "Hello", "ts": 1764529201.5}`},
	{"HSET", "tool:sess_42:step_1", "tool", "check", "result", "", "timestamp", "1764529203.0"},
	{"HSET", "tool:sess_42:step_2", "tool", "lookup"},
	{"HSET", "tool:sess_42:step_3", "result", "r"},
}

// oddWant is what seed 003's assemble_context returns for oddKeys: d.get('title', 'Doc') shows an entry
// without a title as [Doc] and an empty one as [], whatever its source; data.get('result', '{}') shows
// an empty result as it is and a missing one as {}; data.get('tool', 'unknown') a missing tool as unknown.
var oddWant = []assembler.ChatMessage{
	{Role: "system", Content: "R\n\nConstraints: C\nFormat: F"},
	{Role: "system", Content: "User context:\n- name: Bob\n- tier: free"},
	{Role: "system", Content: "Relevant knowledge:\n[Pricing]: Premium costs $20/month.\n\n[Doc]: Untitled.\n\n[]: An empty title.\n\n" +
		"[T]: Two titles.\n\n[No content]: "},
	{Role: "user", Content: "Hi"},
	{Role: "assistant", Content: "Hello"},
	{Role: "system", Content: "Tool 'check' returned: "},
	{Role: "system", Content: "Tool 'lookup' returned: {}"},
	{Role: "system", Content: "Tool 'unknown' returned: r"},
	{Role: "user", Content: "How much does premium cost?"},
}

func assembleCookbook(t *testing.T, s *store.Store, req engine.Request) *engine.Result {
	t.Helper()
	eng, err := testEngine(s)
	if err != nil {
		t.Fatal(err)
	}
	req.Preset = engine.PresetCookbook
	res, err := eng.Assemble(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestCookbookPreset_OddEntriesAsTheSeed: keys written by other tools are assembled as seed 003's own code
// assembles them, message for message (with the preset's documented difference), and entries the seed
// could not read either (not JSON objects) are left out without degrading the assembly.
func TestCookbookPreset_OddEntriesAsTheSeed(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	for _, cmd := range oddKeys {
		if _, err := valkeytest.Do(addr, cmd...); err != nil {
			t.Fatal(err)
		}
	}
	if seed, ok := runSeed(t, dumpServer(t, addr), "user_42", "sess_42", "demo_agent", "How much does premium cost?"); ok {
		sameMessages(t, "the seed's own code (checking the test's expectation)", seed, oddWant)
	}
	s, err := cookbook.Open(t.Context(), cookbook.Options{Client: valkeygo.ClientOption{InitAddress: []string{addr}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	req := engine.Request{Agent: "demo_agent", User: "user_42", Session: "sess_42",
		Request: assembler.Request{Message: "How much does premium cost?"}}
	res := assembleCookbook(t, s, req)
	sameMessages(t, "Loom", res.Messages, cookbookDifference(t, oddWant))
	if len(res.Degraded) != 0 {
		t.Errorf("degraded: %+v", res.Degraded)
	}

	// Entries that are not JSON objects (which would crash the seed) are skipped; the rest stand.
	for _, cmd := range [][]string{
		{"RPUSH", "kb:results:sess_42", `"a string"`, `[1, 2]`, `null`, `not JSON`},
		{"LINSERT", "chat:sess_42", "BEFORE", `{"role": "assistant", "content": "Hello", "ts": 1764529201.5}`, `{"content": "no role"}`},
		{"RPUSH", "chat:sess_42", `42`},
	} {
		if _, err := valkeytest.Do(addr, cmd...); err != nil {
			t.Fatal(err)
		}
	}
	res = assembleCookbook(t, s, req)
	sameMessages(t, "Loom with unreadable entries", res.Messages, cookbookDifference(t, oddWant))
	if len(res.Degraded) != 0 {
		t.Errorf("degraded: %+v", res.Degraded)
	}
}

// TestCookbookPreset_TitlesAndResultsOfLoomsItems: knowledge and tool outputs given inline, or kept by
// another backend, are shown as the seed shows the entries the Valkey store's cookbook layout writes for
// them (with the preset's documented difference): the title is Metadata["title"] when there is one (even
// empty), else Source, else Doc; a result is shown as it is, even empty.
func TestCookbookPreset_TitlesAndResultsOfLoomsItems(t *testing.T) {
	t.Parallel()
	kb := []store.Knowledge{
		{Source: "a.md", Content: "Sourced."},
		{Content: "Bare."},
		{Source: "a.md", Content: "Titled.", Metadata: map[string]string{"title": "Intro"}},
		{Source: "a.md", Content: "Empty title.", Metadata: map[string]string{"title": ""}},
	}
	outs := []store.ToolOutput{{Tool: "check", Result: ""}, {Tool: "lookup", Result: `{"ok": true}`}}
	want := []assembler.ChatMessage{
		{Role: "system", Content: "Relevant knowledge:\n[a.md]: Sourced.\n\n[Doc]: Bare.\n\n[Intro]: Titled.\n\n[]: Empty title."},
		{Role: "system", Content: "Tool 'check' returned: "},
		{Role: "system", Content: `Tool 'lookup' returned: {"ok": true}`},
		{Role: "user", Content: "Hi"},
	}

	// Inline, with nothing stored.
	var inline []assembler.ToolOutput
	for _, o := range outs {
		inline = append(inline, assembler.ToolOutput{Tool: o.Tool, Result: o.Result})
	}
	res := assembleCookbook(t, newMemory(), engine.Request{Request: assembler.Request{Message: "Hi", Knowledge: kb, ToolOutputs: inline}})
	sameMessages(t, "inline", res.Messages, cookbookDifference(t, want))

	// Stored in another backend.
	mem := newMemory()
	ctx := t.Context()
	if err := mem.SetKnowledge(ctx, "default", "s", kb); err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		if _, err := mem.AppendToolOutput(ctx, "default", "s", o); err != nil {
			t.Fatal(err)
		}
	}
	res = assembleCookbook(t, mem, engine.Request{Session: "s", Request: assembler.Request{Message: "Hi"}})
	sameMessages(t, "memory store", res.Messages, cookbookDifference(t, want))

	// Written by the cookbook layout: what the seed's own code makes of the keys, and what Loom reads back.
	addr := valkeytest.Start(t)
	s, err := cookbook.Open(ctx, cookbook.Options{Client: valkeygo.ClientOption{InitAddress: []string{addr}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SetKnowledge(ctx, "default", "s", kb); err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		if _, err := s.AppendToolOutput(ctx, "default", "s", o); err != nil {
			t.Fatal(err)
		}
	}
	if seed, ok := runSeed(t, dumpServer(t, addr), "u", "s", "a", "Hi"); ok {
		sameMessages(t, "the seed on the cookbook layout's keys", seed, want)
	}
	res = assembleCookbook(t, s, engine.Request{Session: "s", Request: assembler.Request{Message: "Hi"}})
	sameMessages(t, "cookbook layout", res.Messages, cookbookDifference(t, want))
}
