package assembler

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// spelledJSON writes v (of decoded JSON) as JSON, each object's keys in a random order and with random
// spacing, and a string's non-ASCII characters escaped at random: another spelling of the same schema.
// The keys of a schema's "properties" are its meaning, not its spelling: they are written in the order of
// their bytes.
func spelledJSON(r *rand.Rand, v any) string { return spelled(r, v, false) }

func spelled(r *rand.Rand, v any, properties bool) string {
	space := func() string { return []string{"", " ", "\n  ", "\t"}[r.IntN(4)] }
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		if properties {
			slices.Sort(keys)
		} else {
			r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		}
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = space() + spelled(r, k, false) + space() + ":" + space() + spelled(r, v[k], k == "properties" && !properties)
		}
		return "{" + strings.Join(parts, ",") + space() + "}"
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = space() + spelled(r, e, false)
		}
		return "[" + strings.Join(parts, ",") + space() + "]"
	case string:
		if r.IntN(2) == 0 {
			b, _ := json.Marshal(v) // escapes <, > and &
			return string(b)
		}
		var b strings.Builder
		b.WriteByte('"')
		for _, c := range v {
			switch {
			case c == '"' || c == '\\':
				b.WriteString(`\` + string(c))
			case c < 0x20 || c > 0x7e && c <= 0xffff:
				fmt.Fprintf(&b, `\u%04x`, c)
			default:
				b.WriteRune(c)
			}
		}
		b.WriteByte('"')
		return b.String()
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// randomToolSchema is a random JSON schema, decoded.
func randomToolSchema(r *rand.Rand, depth int) map[string]any {
	words := []string{"city", "q", "n", "é", "<b>", "a&b", "zeta", "Alpha", "_x", "ключ"}
	props := map[string]any{}
	for range 1 + r.IntN(4) {
		name := words[r.IntN(len(words))]
		switch r.IntN(4) {
		case 0:
			props[name] = map[string]any{"type": "string", "description": words[r.IntN(len(words))] + " \u2028 line"}
		case 1:
			props[name] = map[string]any{"type": "integer", "minimum": json.Number([]string{"0", "1e3", "-2.50"}[r.IntN(3)])}
		case 2:
			props[name] = map[string]any{"type": "string", "enum": []any{"b", "a", words[r.IntN(len(words))]}}
		default:
			if depth > 0 {
				props[name] = randomToolSchema(r, depth-1)
			} else {
				props[name] = map[string]any{"type": "boolean"}
			}
		}
	}
	s := map[string]any{"type": "object", "properties": props}
	if r.IntN(2) == 0 {
		s["additionalProperties"] = false
	}
	return s
}

// TestCanonicalJSON_OneSpellingPerValue: every spelling of a JSON value (key order, spacing, escapes)
// is written as the same bytes, which are compact, have each object's keys sorted, and decode to the
// value.
func TestCanonicalJSON_OneSpellingPerValue(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(17, 2))
	for i := range 200 {
		v := randomToolSchema(r, 2)
		want := canonicalJSON(json.RawMessage(spelledJSON(r, v)))
		for range 3 {
			spelled := spelledJSON(r, v)
			if got := canonicalJSON(json.RawMessage(spelled)); !bytes.Equal(got, want) {
				t.Fatalf("schema %d: %s\nis written\n%s\nand %s\n%s", i, spelled, got, want, spelled)
			}
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, want); err != nil || !bytes.Equal(compact.Bytes(), want) {
			t.Fatalf("schema %d: %s is not compact JSON (%v)", i, want, err)
		}
		dec := json.NewDecoder(bytes.NewReader(want))
		dec.UseNumber()
		var back any
		if err := dec.Decode(&back); err != nil || !reflect.DeepEqual(back, any(v)) {
			t.Fatalf("schema %d: %s decodes to %v, want %v (%v)", i, want, back, v, err)
		}
		if bytes.Contains(want, []byte(`\u003c`)) || bytes.Contains(want, []byte(`\u0026`)) {
			t.Fatalf("schema %d: %s has HTML escapes", i, want)
		}
	}
	// Keys in byte order, at every level, but for the properties' names, which keep their order (a
	// property named "properties" among them, whose schema is sorted), and a key twice kept once, last.
	for in, want := range map[string]string{
		`{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"string"}},"required":["b","a"]}`:                                    `{"properties":{"b":{"type":"string"},"a":{"type":"string"}},"required":["b","a"],"type":"object"}`,
		`{"type":"object","properties":{"z":{"type":"object","properties":{"y":{},"x":{}}},"properties":{"type":"string","description":"d"}}}`: `{"properties":{"z":{"properties":{"y":{},"x":{}},"type":"object"},"properties":{"description":"d","type":"string"}},"type":"object"}`,
		`{"b":1,"a":2,"b":3}`:                     `{"a":2,"b":3}`,
		`{"properties":{"b":1,"a":2,"b":3}}`:      `{"properties":{"a":2,"b":3}}`,
		`{"enum":["<b>","a&b"],"default":1.50e3}`: `{"default":1.50e3,"enum":["<b>","a&b"]}`,
	} {
		if got := string(canonicalJSON(json.RawMessage(in))); got != want {
			t.Errorf("%s: got %s, want %s", in, got, want)
		}
	}
}

// TestCanonicalJSON_PropertiesKeepTheirOrder: two schemas whose properties come in other orders are two
// tools (a model writes a strict tool's arguments in that order), and stay two in every format's bytes.
func TestCanonicalJSON_PropertiesKeepTheirOrder(t *testing.T) {
	t.Parallel()
	ab := `{"type":"object","properties":{"reasoning":{"type":"string"},"answer":{"type":"string"}}}`
	ba := `{"type":"object","properties":{"answer":{"type":"string"},"reasoning":{"type":"string"}}}`
	for _, f := range []Format{OpenAI, Responses, Anthropic, Gemini} {
		out := func(schema string) string {
			req := &Request{Model: "gpt-4o", Formatter: f, Tools: []Tool{{Type: "function", Function: ToolFunction{Name: "reply", Parameters: json.RawMessage(schema)}}}, Message: "Go."}
			res, err := AssembleRequest(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := json.Marshal(res.Tools)
			return string(b)
		}
		got := out(ab)
		if i, j := strings.Index(got, "reasoning"), strings.Index(got, "answer"); i < 0 || j < 0 || i > j {
			t.Errorf("%s: the properties are reordered: %s", f.Name(), got)
		}
		if out(ba) == got {
			t.Errorf("%s: two orders of properties give one tool: %s", f.Name(), got)
		}
	}
}

// TestTools_EqualSetsGiveEqualBytes: two requests whose tools are the same set, listed in another order,
// their schemas spelled otherwise, give the same bytes in every format: the same tools, the same text
// (which holds them), the same prefix hash and the same count. A prompt cache matches bytes.
func TestTools_EqualSetsGiveEqualBytes(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(17, 3))
	strict := true
	for i := range 30 {
		var tools []Tool
		for j := range 1 + r.IntN(4) {
			tools = append(tools, Tool{Type: "function", Function: ToolFunction{Name: fmt.Sprintf("tool_%c", 'a'+rune((j*7+i)%26)),
				Description: "Does a thing.", Parameters: json.RawMessage(spelledJSON(r, randomToolSchema(r, 1)))}})
		}
		if r.IntN(2) == 0 {
			tools[0].Function.Strict = &strict
		}
		other := slices.Clone(tools)
		r.Shuffle(len(other), func(i, j int) { other[i], other[j] = other[j], other[i] })
		for j := range other {
			var v any
			dec := json.NewDecoder(bytes.NewReader(other[j].Function.Parameters))
			dec.UseNumber()
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			other[j].Function.Parameters = json.RawMessage(spelledJSON(r, v))
			if r.IntN(2) == 0 {
				other[j].Type = "" // "function" by default
			}
		}
		for _, f := range []Format{OpenAI, Anthropic, Text} {
			mk := func(tools []Tool) *Result {
				req := &Request{Model: []string{"gpt-4o", "gpt-4", "claude-sonnet-4-5"}[i%3], Formatter: f, Instructions: "Use the tools.", Tools: tools, Message: "Go."}
				res, err := AssembleRequest(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			a, b := mk(tools), mk(other)
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			if !bytes.Equal(ja, jb) {
				t.Fatalf("%s, set %d: the results differ:\n%s\n%s", f.Name(), i, ja, jb)
			}
			if len(tools) > 1 && f != Text {
				var names []string
				for _, raw := range a.Tools {
					var tool struct {
						Name     string `json:"name"`
						Function struct {
							Name string `json:"name"`
						} `json:"function"`
					}
					_ = json.Unmarshal(raw, &tool)
					names = append(names, tool.Name+tool.Function.Name)
				}
				if !slices.IsSorted(names) {
					t.Fatalf("%s: tools %v are not in the order of their names", f.Name(), names)
				}
			}
		}
	}
}

// TestPromptCacheKey_FollowsTheScopeAndTheStablePrefix: the key is the same for the calls of one scope
// whose stable prefix is the same (whatever else changes, and however the tools are ordered), and
// another when the scope, the instructions, the tools or the pinned memory change; it is set in the
// formats whose messages are OpenAI's alone, and does not show the scope's names.
func TestPromptCacheKey_FollowsTheScopeAndTheStablePrefix(t *testing.T) {
	t.Parallel()
	weather := Tool{Type: "function", Function: ToolFunction{Name: "weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}
	clock := Tool{Type: "function", Function: ToolFunction{Name: "clock"}}
	base := func() *Request {
		return &Request{Instructions: "Help.", Tools: []Tool{weather, clock}, Memory: []MemoryFact{{Key: "name", Value: "Ada", Pinned: true}},
			Message: "Hi.", CacheScope: CacheScope("acme", "helper")}
	}
	key := func(req *Request) string {
		t.Helper()
		res, err := AssembleRequest(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return res.PromptCacheKey
	}
	want := key(base())
	if len(want) != len("loom-")+32 || !strings.HasPrefix(want, "loom-") || strings.Contains(want, "acme") {
		t.Fatalf("key %q, want loom- and 32 hex digits", want)
	}
	same := map[string]func(*Request){
		"another message": func(r *Request) { r.Message = "What now?" },
		"a history": func(r *Request) {
			r.History = []Message{{Role: "user", Content: "Earlier."}, {Role: "assistant", Content: "Yes."}}
		},
		"knowledge":                 func(r *Request) { r.Knowledge = []Knowledge{{ID: "k", Content: "A fact.", Score: 1}} },
		"memory that is pinned not": func(r *Request) { r.Memory = append(r.Memory, MemoryFact{Key: "mood", Value: "glad"}) },
		"the tools reordered":       func(r *Request) { r.Tools = []Tool{clock, weather} },
		"the responses format":      func(r *Request) { r.Format = FormatResponses },
	}
	for name, change := range same {
		req := base()
		change(req)
		if got := key(req); got != want {
			t.Errorf("%s: key %q, want %q", name, got, want)
		}
	}
	other := map[string]func(*Request){
		"another tenant":        func(r *Request) { r.CacheScope = CacheScope("globex", "helper") },
		"another agent":         func(r *Request) { r.CacheScope = CacheScope("acme", "sales") },
		"names split otherwise": func(r *Request) { r.CacheScope = CacheScope("acmeh", "elper") },
		"no scope":              func(r *Request) { r.CacheScope = "" },
		"other instructions":    func(r *Request) { r.Instructions = "Help more." },
		"other tools":           func(r *Request) { r.Tools = []Tool{weather} },
		"other pinned memory":   func(r *Request) { r.Memory[0].Value = "Bob" },
	}
	seen := map[string]string{want: "the base"}
	for name, change := range other {
		req := base()
		change(req)
		got := key(req)
		if prev, ok := seen[got]; ok {
			t.Errorf("%s: key %q, as for %s", name, got, prev)
		}
		seen[got] = name
	}
	for _, f := range []string{FormatAnthropic, FormatText, FormatGemini} {
		req := base()
		req.Format = f
		if got := key(req); got != "" {
			t.Errorf("%s: a prompt_cache_key %q, which its provider does not take", f, got)
		}
	}
	if got := key(&Request{Formatter: &Cookbook{}, Message: "Hi.", CacheScope: CacheScope("acme", "helper")}); got == "" {
		t.Error("cookbook: no prompt_cache_key, though its messages are OpenAI's")
	}
}
