// Package mcptest is the suite that Loom's MCP server passes over every transport (in memory, standard
// input and output, streamable HTTP), driven by the official Go SDK's own client.
package mcptest

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/mcpserver"
	"github.com/context-loom/loom/tokenizer"
)

// The ids the suite uses.
const (
	User       = "user_42"
	Session    = "sess_42"
	Collection = "manual"
)

// Limits are the limits the suite's bad inputs pass; a server under test must be given them.
var Limits = mcpserver.Limits{MaxTextBytes: 4096, MaxItems: 10}

const manual = `# Accounts

To reset a forgotten password, open Settings, choose Security and press "Reset password". A link is sent
to the address on file; it expires after one hour.

# Billing

Invoices are issued on the first day of each month and can be downloaded as PDF from the Billing page.
`

// Seed creates the collection "manual" of tenant, which Run retrieves from.
func Seed(t testing.TB, eng *engine.Engine, tenant string) {
	t.Helper()
	ctx := loom.WithTenant(context.Background(), tenant)
	c, err := eng.CreateCollection(ctx, loom.Collection{Name: Collection, ChunkSize: 40})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.IngestText(ctx, c.ID, "manual.md", "manual.md", "", manual, nil); err != nil {
		t.Fatal(err)
	}
}

// Call calls a tool and fails the test on a protocol error: a tool's failure must be a result.
func Call(t testing.TB, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: a protocol error, not a tool result: %v", name, err)
	}
	return res
}

// Text is the text of a result's first content.
func Text(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatal("a result without content")
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("the content is %T, not text", res.Content[0])
	}
	return tc.Text
}

// OK calls a tool that must succeed and decodes its result's JSON into out (if not nil).
func OK(t testing.TB, cs *mcp.ClientSession, name string, args, out any) {
	t.Helper()
	res := Call(t, cs, name, args)
	if res.IsError {
		t.Fatalf("%s %v: %s", name, args, Text(t, res))
	}
	if out != nil {
		if err := json.Unmarshal([]byte(Text(t, res)), out); err != nil {
			t.Fatalf("%s: %v in %s", name, err, Text(t, res))
		}
		// The structured content says the same.
		sc, err := json.Marshal(res.StructuredContent)
		if err != nil || !jsonEqual(t, sc, []byte(Text(t, res))) {
			t.Errorf("%s: the structured content %s is not the text %s", name, sc, Text(t, res))
		}
	}
}

func jsonEqual(t testing.TB, a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

// Read reads a resource and returns its text.
func Read(t testing.TB, cs *mcp.ClientSession, uri string) string {
	t.Helper()
	res, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	if len(res.Contents) != 1 || res.Contents[0].URI != uri || res.Contents[0].MIMEType != "application/json" {
		t.Fatalf("read %s: %+v", uri, res.Contents)
	}
	return res.Contents[0].Text
}

// short cuts a text for a failure's message.
func short(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

// Tools are the tools the server lists.
var Tools = []string{mcpserver.ToolAssemble, mcpserver.ToolCountTokens, mcpserver.ToolForget, mcpserver.ToolRecall,
	mcpserver.ToolRecordTurn, mcpserver.ToolRemember, mcpserver.ToolRetrieve}

type facts struct {
	Facts []loom.Fact `json:"facts"`
}

type messages struct {
	Messages []loom.Message `json:"messages"`
}

// Run is each tool's and resource's happy path, through cs, a session of a tenant that Seed seeded and
// that has no other state.
func Run(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx := context.Background()
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		schema, _ := json.Marshal(tool.InputSchema)
		if !strings.Contains(string(schema), `"additionalProperties":false`) || tool.Description == "" {
			t.Errorf("%s: the schema %s takes unknown fields, or no description", tool.Name, schema)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, Tools) {
		t.Errorf("tools %q, want %q", names, Tools)
	}
	templates, err := cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(templates.ResourceTemplates) != 2 {
		t.Fatalf("resource templates: %+v %v", templates, err)
	}

	// count_tokens counts as the tokenizer does.
	var count mcpserver.CountTokensOutput
	OK(t, cs, mcpserver.ToolCountTokens, map[string]any{"text": "Hello, tokenizer world!", "encoding": "o200k_base"}, &count)
	enc, _ := tokenizer.Get("o200k_base")
	if count.Tokens != enc.Count("Hello, tokenizer world!") || count.Encoding != "o200k_base" || !count.Exact || count.Bytes != 23 {
		t.Errorf("count_tokens: %+v", count)
	}
	OK(t, cs, mcpserver.ToolCountTokens, map[string]any{"text": "Hello", "model": "gpt-4o"}, &count)
	if count.Model != "gpt-4o" || count.Encoding != "o200k_base" || count.Tokens != 1 {
		t.Errorf("count_tokens with a model: %+v", count)
	}

	// remember, recall and the memory resource.
	OK(t, cs, mcpserver.ToolRemember, map[string]any{"user": User, "key": "language", "value": "Go <generics>", "pinned": true}, nil)
	OK(t, cs, mcpserver.ToolRemember, map[string]any{"user": User, "key": "city", "value": "Lyon", "source": "chat"}, nil)
	var f facts
	OK(t, cs, mcpserver.ToolRecall, map[string]any{"user": User}, &f)
	if len(f.Facts) != 2 || !slices.ContainsFunc(f.Facts, func(x loom.Fact) bool { return x.Key == "language" && x.Value == "Go <generics>" && x.Pinned }) {
		t.Errorf("recall: %+v", f)
	}
	var rf facts
	if err := json.Unmarshal([]byte(Read(t, cs, "loom://users/"+User+"/memory")), &rf); err != nil || len(rf.Facts) != 2 {
		t.Errorf("the memory resource: %+v %v", rf, err)
	}

	// record_turn and the session resource.
	var rec messages
	OK(t, cs, mcpserver.ToolRecordTurn, map[string]any{"session": Session, "message": "I forgot my password.",
		"reply": []map[string]any{
			{"role": "assistant", "tool_calls": []map[string]any{{"id": "call_1", "type": "function", "function": map[string]any{"name": "lookup", "arguments": `{"q":"password"}`}}}},
			{"role": "tool", "tool_call_id": "call_1", "content": "account found"},
			{"role": "assistant", "content": "I can help you reset it."},
		}}, &rec)
	if len(rec.Messages) != 4 || rec.Messages[0].Seq != 1 || rec.Messages[0].Role != "user" || rec.Messages[3].Content != "I can help you reset it." {
		t.Errorf("record_turn: %+v", rec)
	}
	var rs messages
	if err := json.Unmarshal([]byte(Read(t, cs, "loom://sessions/"+Session+"/messages")), &rs); err != nil || len(rs.Messages) != 4 ||
		rs.Messages[1].ToolCalls[0].Function.Name != "lookup" {
		t.Errorf("the session resource: %+v %v", rs, err)
	}

	// retrieve.
	var hits struct {
		Results []engine.Hit `json:"results"`
	}
	OK(t, cs, mcpserver.ToolRetrieve, map[string]any{"collection": Collection, "query": "reset a forgotten password", "top_k": 2}, &hits)
	if len(hits.Results) == 0 || !strings.Contains(hits.Results[0].Text, "Reset password") {
		t.Errorf("retrieve: %+v", hits)
	}

	// assemble_context: the memory, the history and the retrieved knowledge, in the text format.
	var asm struct {
		Messages json.RawMessage `json:"messages"`
		Report   struct {
			Total  int `json:"total_tokens"`
			Budget int `json:"budget"`
		} `json:"report"`
	}
	OK(t, cs, mcpserver.ToolAssemble, map[string]any{"message": "How do I reset it?", "user": User, "session": Session,
		"collection": Collection, "top_k": 1, "max_tokens": 3000, "model": "gpt-4o", "format": "openai"}, &asm)
	for _, want := range []string{"How do I reset it?", "Go &lt;generics&gt;", "Lyon", "I forgot my password.", "I can help you reset it.", "Reset password"} {
		if !strings.Contains(string(asm.Messages), want) {
			t.Errorf("the assembled messages lack %q: %s", want, asm.Messages)
		}
	}

	// forget.
	OK(t, cs, mcpserver.ToolForget, map[string]any{"user": User, "key": "language"}, nil)
	OK(t, cs, mcpserver.ToolRecall, map[string]any{"user": User}, &f)
	if len(f.Facts) != 1 || f.Facts[0].Key != "city" {
		t.Errorf("recall after forget: %+v", f)
	}
}

// RunBadInput checks that bad inputs are tool errors (isError results, not protocol errors) that say what
// is wrong, and write nothing, with the server's limits at Limits. The tenant must have no session or
// memory before.
func RunBadInput(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	big := strings.Repeat("x", Limits.MaxTextBytes+1)
	var tooMany []map[string]any
	for range Limits.MaxItems {
		tooMany = append(tooMany, map[string]any{"role": "assistant", "content": "ok"})
	}
	for _, tc := range []struct {
		name, tool string
		args       any
		want       string
	}{
		{"missing a required field", mcpserver.ToolAssemble, map[string]any{"user": User}, "message"},
		{"an unknown field", mcpserver.ToolAssemble, map[string]any{"message": "hi", "budget": 10}, "budget"},
		{"a wrong type", mcpserver.ToolAssemble, map[string]any{"message": "hi", "max_tokens": "many"}, "max_tokens"},
		{"a text over the limit", mcpserver.ToolRemember, map[string]any{"user": User, "key": "k", "value": big}, "value is 4097 bytes, the limit for one text is 4096"},
		{"a query over the limit", mcpserver.ToolRetrieve, map[string]any{"collection": Collection, "query": big}, "query is 4097 bytes"},
		{"a reply message over the limit", mcpserver.ToolRecordTurn, map[string]any{"session": Session, "reply": []map[string]any{{"role": "assistant", "content": big}}}, "reply[0].content is 4097 bytes"},
		{"too many messages", mcpserver.ToolRecordTurn, map[string]any{"session": Session, "message": "hi", "reply": tooMany}, "11 messages, the limit is 10"},
		{"a reply with a user's role", mcpserver.ToolRecordTurn, map[string]any{"session": Session, "reply": []map[string]any{{"role": "user", "content": "x"}}}, "role"},
		{"nothing to record", mcpserver.ToolRecordTurn, map[string]any{"session": Session}, "nothing to record"},
		{"an empty user id", mcpserver.ToolRemember, map[string]any{"user": "", "key": "k", "value": "v"}, "user"},
		{"an agent that does not exist", mcpserver.ToolAssemble, map[string]any{"message": "hi", "agent": "nobody"}, "nobody"},
		{"an unknown format", mcpserver.ToolAssemble, map[string]any{"message": "hi", "format": "xml"}, "xml"},
		{"a budget the message does not fit", mcpserver.ToolAssemble, map[string]any{"message": strings.Repeat("word ", 200), "max_tokens": 20, "model": "gpt-4o"}, "budget"},
		{"top_k without a collection", mcpserver.ToolAssemble, map[string]any{"message": "hi", "top_k": 3}, "collection"},
		{"a collection that does not exist", mcpserver.ToolRetrieve, map[string]any{"collection": "nope", "query": "x"}, "nope"},
		{"a model and an encoding", mcpserver.ToolCountTokens, map[string]any{"text": "x", "model": "gpt-4o", "encoding": "cl100k_base"}, "not both"},
		{"an unknown encoding", mcpserver.ToolCountTokens, map[string]any{"text": "x", "encoding": "rot13"}, "rot13"},
		{"a fact that is not there", mcpserver.ToolForget, map[string]any{"user": User, "key": "never_set"}, "not found"},
	} {
		res := Call(t, cs, tc.tool, tc.args)
		if !res.IsError {
			t.Errorf("%s: not a tool error: %s", tc.name, short(Text(t, res)))
			continue
		}
		if msg := Text(t, res); !strings.Contains(msg, tc.want) || strings.Contains(msg, "internal error") {
			t.Errorf("%s: the error %q does not say %q", tc.name, msg, tc.want)
		}
	}
	// Nothing was written: every limit was checked before the work.
	if got := Read(t, cs, "loom://sessions/"+Session+"/messages"); got != `{"messages":[]}` {
		t.Errorf("bad inputs were recorded: %s", short(got))
	}
	if got := Read(t, cs, "loom://users/"+User+"/memory"); got != `{"facts":[]}` {
		t.Errorf("bad inputs were remembered: %s", short(got))
	}
	// A resource URI of another shape is refused.
	for _, uri := range []string{"loom://sessions/a/b/messages", "loom://users//memory", "loom://sessions/s/messages?x=1"} {
		if _, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri}); err == nil {
			t.Errorf("read %s: no error", uri)
		}
	}
}

// RunIsolation checks that b, a session of another tenant than a's, never sees a's data though it names
// the same ids. a's tenant must have no state before.
func RunIsolation(t *testing.T, a, b *mcp.ClientSession) {
	t.Helper()
	const secret = "the vault code is 0451"
	OK(t, a, mcpserver.ToolRemember, map[string]any{"user": User, "key": "secret", "value": secret}, nil)
	OK(t, a, mcpserver.ToolRecordTurn, map[string]any{"session": Session, "message": secret}, nil)
	var f facts
	OK(t, b, mcpserver.ToolRecall, map[string]any{"user": User}, &f)
	if len(f.Facts) != 0 {
		t.Errorf("another tenant recalls %+v", f)
	}
	for _, uri := range []string{"loom://users/" + User + "/memory", "loom://sessions/" + Session + "/messages"} {
		if got := Read(t, b, uri); strings.Contains(got, secret) {
			t.Errorf("another tenant reads %s: %s", uri, got)
		}
	}
	res := Call(t, b, mcpserver.ToolAssemble, map[string]any{"message": "What is the code?", "user": User, "session": Session})
	if res.IsError || strings.Contains(Text(t, res), secret) {
		t.Errorf("another tenant's assembly: %s", Text(t, res))
	}
	if res := Call(t, b, mcpserver.ToolRetrieve, map[string]any{"collection": Collection, "query": "password"}); !res.IsError {
		t.Errorf("another tenant retrieves from the collection: %s", Text(t, res))
	}
	if res := Call(t, b, mcpserver.ToolForget, map[string]any{"user": User, "key": "secret"}); !res.IsError {
		t.Errorf("another tenant forgets a fact: %s", Text(t, res))
	}
	// a still has it all.
	OK(t, a, mcpserver.ToolRecall, map[string]any{"user": User}, &f)
	if len(f.Facts) != 1 || f.Facts[0].Value != secret {
		t.Errorf("the tenant's own recall: %+v", f)
	}
}
