package tokenizer_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/tokenizer"
)

// publishedPair is a Chat Completions request and the prompt_tokens that OpenAI's API billed for it, as a
// public project recorded them: testdata/tool_counts.json names the source of each. Requests of 2023 use
// the older functions and function_call, which the API renders as it renders tools.
type publishedPair struct {
	Source       string      `json:"source"`
	Model        string      `json:"model"`
	PromptTokens int         `json:"prompt_tokens"`
	Estimate     bool        `json:"estimate"` // the rule's count is an estimate: at least the API's, and close
	Request      chatRequest `json:"request"`
	index        int         // in the file
	model        tokenizer.Model
}

type chatRequest struct {
	Messages     []chatMessage       `json:"messages"`
	Tools        []loom.Tool         `json:"tools"`
	Functions    []loom.ToolFunction `json:"functions"`
	ToolChoice   json.RawMessage     `json:"tool_choice"`
	FunctionCall json.RawMessage     `json:"function_call"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    *string         `json:"content"`
	Name       string          `json:"name"`
	ToolCalls  []loom.ToolCall `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

// tools returns the request's tool definitions, its functions as tools.
func (r *chatRequest) tools() []loom.Tool {
	tools := r.Tools
	for _, f := range r.Functions {
		tools = append(tools, loom.Tool{Type: "function", Function: f})
	}
	return tools
}

// choice returns the request's tool_choice (or function_call) as ChoiceTokens takes it.
func (r *chatRequest) choice(t *testing.T) (mode, function string) {
	raw := r.ToolChoice
	if raw == nil {
		raw = r.FunctionCall
	}
	if raw == nil {
		return "", ""
	}
	if err := json.Unmarshal(raw, &mode); err == nil {
		return mode, ""
	}
	var named struct {
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		t.Fatalf("tool choice %s: %v", raw, err)
	}
	return "function", named.Name + named.Function.Name
}

func loadPublishedPairs(t *testing.T) []publishedPair {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "tool_counts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pairs []publishedPair
	if err := json.Unmarshal(data, &pairs); err != nil {
		t.Fatal(err)
	}
	for i := range pairs {
		pairs[i].index = i
		if pairs[i].model, err = tokenizer.ForModel(pairs[i].Model); err != nil {
			t.Fatal(err)
		}
	}
	return pairs
}

// countChatRequest counts a Chat Completions request by the model's rules, as the API bills it: each
// message's frame, role and content (the first system message with a line break after it when there are
// tools), tool calls and results by the tool rule, the definitions with their overhead, the tool choice,
// the reply priming. It reports whether every rule it used is exact.
func countChatRequest(t *testing.T, m tokenizer.Model, req *chatRequest) (n int, exact bool) {
	t.Helper()
	c := m.Counter()
	rule := m.Tools
	tools := req.tools()
	hasSystem, padded := false, false
	for _, msg := range req.Messages {
		hasSystem = hasSystem || msg.Role == "system"
	}
	exact = true
	callNames := map[string]string{}
	for _, msg := range req.Messages {
		content := ""
		if msg.Content != nil {
			content = *msg.Content
		}
		switch {
		case msg.Role == "tool":
			n += m.TokensPerMessage + rule.ResultOverhead + c.Count(callNames[msg.ToolCallID]) + c.Count(content)
			exact = exact && rule.CallsExact
			continue
		case len(msg.ToolCalls) > 0:
			for _, call := range msg.ToolCalls {
				callNames[call.ID] = call.Function.Name
				n += m.TokensPerMessage + c.Count("assistant") + rule.CallOverhead + c.Count(call.Function.Name) +
					tokenizer.ArgumentTokens(c, call.Function.Arguments)
			}
			exact = exact && rule.CallsExact
			if content == "" {
				continue
			}
		}
		if msg.Role == "system" && len(tools) > 0 && rule.PadSystem && !padded {
			content, padded = content+"\n", true
		}
		n += m.TokensPerMessage + c.Count(msg.Role) + c.Count(content)
		if msg.Name != "" {
			n += c.Count(msg.Name) + m.TokensPerName
		}
	}
	if len(tools) > 0 {
		defs, ok := rule.DefinitionTokens(c, tools)
		n += defs + rule.DefinitionOverhead(hasSystem)
		exact = exact && ok
	}
	mode, function := req.choice(t)
	choice, ok := rule.ChoiceTokens(c, mode, function)
	return n + choice + m.ReplyPriming, exact && ok && m.Exact()
}

// TestToolRule_PublishedPairs counts every request with tools whose prompt_tokens a public project
// recorded from OpenAI's API (testdata/tool_counts.json, which cites each source): the count is the API's
// for every definition of a cl100k_base model and for the Cookbook's example with gpt-4o and gpt-4o-mini,
// and otherwise (the pairs marked estimate) at least the API's and at most 2 more; it is reported exact
// only where the rules are.
func TestToolRule_PublishedPairs(t *testing.T) {
	t.Parallel()
	pairs := loadPublishedPairs(t)
	if len(pairs) < 40 {
		t.Fatalf("%d published pairs: the file lost some", len(pairs))
	}
	for _, p := range pairs {
		got, exact := countChatRequest(t, p.model, &p.Request)
		switch {
		case !p.Estimate && got != p.PromptTokens:
			t.Errorf("pair %d (%s, %s): counted %d, the API billed %d", p.index, p.Model, p.Source, got, p.PromptTokens)
		case p.Estimate && (got < p.PromptTokens || got > p.PromptTokens+2):
			t.Errorf("pair %d (%s, %s): estimated %d, the API billed %d: want that or at most 2 more", p.index, p.Model, p.Source, got, p.PromptTokens)
		}
		// Exact where every rule used is: definitions of cl100k_base models; never with calls or results.
		calls := false
		for _, m := range p.Request.Messages {
			calls = calls || len(m.ToolCalls) > 0 || m.Role == "tool"
		}
		if want := p.model.Tools.Exact && !calls; exact != want {
			t.Errorf("pair %d (%s): exact %v, want %v", p.index, p.Model, exact, want)
		}
	}
}

// TestToolRule_CookbookExample is the OpenAI Cookbook's example ("How to count tokens with tiktoken",
// section 7): get_current_weather and two messages are 105 prompt tokens for gpt-3.5-turbo and gpt-4, and
// 101 for gpt-4o and gpt-4o-mini.
func TestToolRule_CookbookExample(t *testing.T) {
	t.Parallel()
	want := map[string]int{"gpt-3.5-turbo": 105, "gpt-4": 105, "gpt-4o": 101, "gpt-4o-mini": 101}
	seen := 0
	for _, p := range loadPublishedPairs(t) {
		if n, ok := want[p.Model]; ok && len(p.Request.Tools) == 1 && p.Request.Tools[0].Function.Name == "get_current_weather" {
			seen++
			if got, _ := countChatRequest(t, p.model, &p.Request); got != n || p.PromptTokens != n {
				t.Errorf("%s: counted %d, the Cookbook says %d (the file says %d)", p.Model, got, n, p.PromptTokens)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("found %d of the Cookbook's %d models", seen, len(want))
	}
}

// TestRenderFunctions_Cookbook shows the rendering of the Cookbook's function.
func TestRenderFunctions_Cookbook(t *testing.T) {
	t.Parallel()
	tools := []loom.Tool{{Type: "function", Function: loom.ToolFunction{
		Name: "get_current_weather", Description: "Get the current weather in a given location",
		Parameters: json.RawMessage(`{"type":"object","properties":{"location":{"type":"string","description":"The city and state, e.g. San Francisco, CA"},
			"unit":{"type":"string","description":"The unit of temperature to return","enum":["celsius","fahrenheit"]}},"required":["location"]}`),
	}}}
	got, unknown := tokenizer.RenderFunctions(tools)
	want := `namespace functions {

// Get the current weather in a given location
type get_current_weather = (_: {
// The city and state, e.g. San Francisco, CA
location: string,
// The unit of temperature to return
unit?: "celsius" | "fahrenheit",
}) => any;

} // namespace functions`
	if got != want || len(unknown) > 0 {
		t.Errorf("rendered (unknown %q):\n%s\nwant:\n%s", unknown, got, want)
	}
}

// TestRenderFunctions_Shapes renders each shape of schema that the published pairs cover, and the parts
// whose rendering is not known, which it reports.
func TestRenderFunctions_Shapes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, params, want string
		unknown            []string
	}{
		{"no parameters", ``, "type f = () => any;", nil},
		{"no properties", `{"type":"object","properties":{}}`, "type f = () => any;", nil},
		{"optional and required", `{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"boolean"}},"required":["b"]}`,
			"type f = (_: {\na?: number,\nb: boolean,\n}) => any;", nil},
		{"nested object, its descriptions left out, its brace at the line's start",
			`{"type":"object","properties":{"o":{"type":"object","description":"top","properties":{"x":{"type":"string","description":"inner"},"y":{"type":"null"}}}}}`,
			"type f = (_: {\n// top\no?: {\n  x?: string,\n  y?: null,\n},\n}) => any;", nil},
		{"array of objects", `{"type":"object","properties":{"l":{"type":"array","items":{"type":"object","properties":{"n":{"type":"number"}},"required":["n"]}}}}`,
			"type f = (_: {\nl?: {\n  n: number,\n}[],\n}) => any;", nil},
		{"anyOf, const left out", `{"type":"object","properties":{"u":{"anyOf":[{"type":"string","const":"a"},{"type":"number"}]}}}`,
			"type f = (_: {\nu?: string | number,\n}) => any;", nil},
		{"strict's keywords", `{"type":"object","properties":{"s":{"type":"string"}},"required":["s"],"additionalProperties":false}`,
			"type f = (_: {\ns: string,\n}) => any;", nil},
		{"unknown keyword", `{"type":"object","properties":{"s":{"type":"string","format":"date"}}}`,
			"type f = (_: {\ns?: string,\n}) => any;", []string{`"format":"date"`}},
		{"no type", `{"type":"object","properties":{"s":{"description":"d"}}}`,
			"type f = (_: {\n// d\ns?: any,\n}) => any;", []string{`{"description":"d"}`}},
		{"number enum", `{"type":"object","properties":{"n":{"type":"integer","enum":[1,2]}}}`,
			"type f = (_: {\nn?: 1 | 2,\n}) => any;", []string{`"enum":[1,2]`}},
		{"not an object", `[1]`, "type f = () => any;", []string{`[1]`}},
	} {
		text, unknown := tokenizer.RenderFunctions([]loom.Tool{{Function: loom.ToolFunction{Name: "f", Parameters: json.RawMessage(tc.params)}}})
		want := "namespace functions {\n\n" + tc.want + "\n\n} // namespace functions"
		if text != want {
			t.Errorf("%s: rendered\n%s\nwant\n%s", tc.name, text, want)
		}
		if len(unknown) != len(tc.unknown) || (len(unknown) > 0 && unknown[0] != tc.unknown[0]) {
			t.Errorf("%s: unknown %q, want %q", tc.name, unknown, tc.unknown)
		}
	}
}

// TestToolRule_UnknownPartsCountHigh checks that a schema part whose rendering is not known makes the count
// an estimate that counts the part's JSON on top.
func TestToolRule_UnknownPartsCountHigh(t *testing.T) {
	t.Parallel()
	m, _ := tokenizer.ForModel("gpt-4")
	plain := []loom.Tool{{Function: loom.ToolFunction{Name: "f", Parameters: json.RawMessage(`{"type":"object","properties":{"d":{"type":"string"}}}`)}}}
	dated := []loom.Tool{{Function: loom.ToolFunction{Name: "f", Parameters: json.RawMessage(`{"type":"object","properties":{"d":{"type":"string","format":"date-time"}}}`)}}}
	n, exact := m.Tools.DefinitionTokens(m.Counter(), plain)
	nd, exactd := m.Tools.DefinitionTokens(m.Counter(), dated)
	if !exact || exactd {
		t.Errorf("exact: plain %v, with an unknown keyword %v", exact, exactd)
	}
	if extra := m.Counter().Count(`"format":"date-time"`); nd != n+extra {
		t.Errorf("with an unknown keyword: %d, want %d + %d", nd, n, extra)
	}
}

// TestArgumentTokens_Compacts checks that arguments are counted as compact JSON, the larger count where
// characters beyond ASCII may be escaped, and as they are when they are not JSON.
func TestArgumentTokens_Compacts(t *testing.T) {
	t.Parallel()
	c := tokenizer.O200K()
	if got, want := tokenizer.CompactArguments("{\n  \"a\": 1, \"b\": [1, 2]\n}"), `{"a":1,"b":[1,2]}`; got != want {
		t.Errorf("compact: %q, want %q", got, want)
	}
	if got, want := tokenizer.CompactArguments("not json {"), "not json {"; got != want {
		t.Errorf("not JSON: %q, want %q", got, want)
	}
	s := `{"city":"Zürich 東京 😀"}`
	if n := tokenizer.ArgumentTokens(c, s); n < c.Count(s) || n < c.Count(`{"city":"Z\u00fcrich \u6771\u4eac \ud83d\ude00"}`) {
		t.Errorf("non-ASCII arguments: %d, less than one of their writings", n)
	}
}

// FuzzRenderFunctions checks that any parameters render without a panic into a namespace that starts and
// ends as it must and holds the function's type, and that a rendering with no unknown part is the same
// for the same schema written with other spacing.
func FuzzRenderFunctions(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"type":"object","properties":{"a":{"type":"array","items":{"anyOf":[{"type":"string"}]}}}}`,
		`{"properties":{"x":{"type":"object","properties":{"y":{"type":"string","enum":["p","q"]}}}},"required":["x"]}`, `[`, `"s"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, params string) {
		tools := []loom.Tool{{Function: loom.ToolFunction{Name: "fn", Description: "d", Parameters: json.RawMessage(params)}}}
		text, unknown := tokenizer.RenderFunctions(tools)
		const head, tail = "namespace functions {\n\n// d\ntype fn = ", ";\n\n} // namespace functions"
		if len(text) < len(head)+len(tail) || text[:len(head)] != head || text[len(text)-len(tail):] != tail {
			t.Fatalf("rendered %q", text)
		}
		var v any
		if json.Unmarshal([]byte(params), &v) != nil {
			return
		}
		spaced, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return
		}
		if _, isObj := v.(map[string]any); !isObj || len(unknown) > 0 {
			return
		}
		// Re-encoding sorts an object's keys, which changes the order of the properties: compare only
		// when the rendering does not depend on it.
		resorted, _ := tokenizer.RenderFunctions([]loom.Tool{{Function: loom.ToolFunction{Name: "fn", Description: "d", Parameters: spaced}}})
		sorted, _ := json.Marshal(v)
		compact, _ := tokenizer.RenderFunctions([]loom.Tool{{Function: loom.ToolFunction{Name: "fn", Description: "d", Parameters: sorted}}})
		if resorted != compact {
			t.Fatalf("spacing changed the rendering:\n%s\n%s", resorted, compact)
		}
	})
}

// TestRenderFunctions_MemoryLinearInNesting: what rendering a schema allocates grows with the schema's
// size, not with the square of its nesting depth (a hostile tool definition, nested thousands deep, within
// the limits a request admits). Doubling the depth may at most about double the bytes allocated.
func TestRenderFunctions_MemoryLinearInNesting(t *testing.T) {
	allocated := func(depth int) uint64 {
		params := `{"type":"object","properties":{"a":` + strings.Repeat(`{"x":`, depth) + `1` + strings.Repeat(`}`, depth) + `}}`
		tools := []loom.Tool{{Type: "function", Function: loom.ToolFunction{Name: "f", Parameters: json.RawMessage(params)}}}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, unknown := tokenizer.RenderFunctions(tools)
		runtime.ReadMemStats(&after)
		if len(unknown) == 0 {
			t.Fatalf("depth %d: the nested members are not reported unknown", depth)
		}
		return after.TotalAlloc - before.TotalAlloc
	}
	small, large := allocated(2000), allocated(8000)
	if large > 6*small {
		t.Errorf("rendering allocated %d bytes at depth 2000 and %d at depth 8000: more than linear", small, large)
	}
}

// TestCheckSchemaDepth refuses parameters nested deeper than MaxSchemaDepth, counting only the brackets
// outside strings.
func TestCheckSchemaDepth(t *testing.T) {
	t.Parallel()
	nest := func(n int) string { return strings.Repeat(`{"a":`, n-1) + `{}` + strings.Repeat(`}`, n-1) }
	for _, tc := range []struct {
		params string
		ok     bool
	}{
		{``, true},
		{`{"type":"object"}`, true},
		{nest(tokenizer.MaxSchemaDepth), true},
		{nest(tokenizer.MaxSchemaDepth + 1), false},
		{`{"a":"` + strings.Repeat(`[{`, 100) + `\"[[["}`, true}, // brackets in a string, and an escaped quote
		{strings.Repeat(`[`, tokenizer.MaxSchemaDepth+1), false},
	} {
		err := tokenizer.CheckSchemaDepth([]byte(tc.params))
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, tokenizer.ErrSchemaDepth)) {
			t.Errorf("%.40s...: %v, want ok %v", tc.params, err, tc.ok)
		}
	}
}
