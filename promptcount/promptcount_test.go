// SPDX-License-Identifier: Apache-2.0

package promptcount_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/promptcount"
	"github.com/context-loom/loom/tokenizer"
)

// cookbookRequest returns testdata/cookbook.json, the OpenAI Cookbook's example with tools ("How to
// count tokens with tiktoken", section 7), for model: the API billed it 105 prompt tokens for
// gpt-3.5-turbo and gpt-4, 101 for gpt-4o and gpt-4o-mini.
func cookbookRequest(t testing.TB, model string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "cookbook.json"))
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

// CookbookWant are the API's counts of cookbookRequest by model.
var cookbookWant = map[string]int{"gpt-3.5-turbo": 105, "gpt-4": 105, "gpt-4o": 101, "gpt-4o-mini": 101}

func count(t *testing.T, body string, opts promptcount.Options) *promptcount.Count {
	t.Helper()
	c, err := promptcount.CountRequest(context.Background(), []byte(body), opts)
	if err != nil {
		t.Fatalf("CountRequest: %v\n%s", err, body)
	}
	checkBreakdown(t, c)
	return c
}

// checkBreakdown holds a count to its invariants: the parts add up to the local count, each message's
// images are in its tokens, and exact is every part's.
func checkBreakdown(t *testing.T, c *promptcount.Count) {
	t.Helper()
	sum, exact := c.ReplyPriming, true
	for _, p := range []*promptcount.PartCount{c.System, c.ToolChoice, c.ResponseFormat} {
		if p != nil {
			sum += p.Tokens
			exact = exact && p.Exact
		}
	}
	for _, m := range c.Messages {
		sum += m.Tokens
		exact = exact && m.Exact
		images := 0
		for _, im := range m.Images {
			images += im.Tokens
			if im.Exact && !m.Exact {
				t.Errorf("message %d: an exact image in a message that is not", m.Index)
			}
		}
		if m.Overhead+images > m.Tokens || m.Overhead < 0 {
			t.Errorf("message %d: overhead %d and images %d of %d tokens", m.Index, m.Overhead, images, m.Tokens)
		}
	}
	if c.Tools != nil {
		sum += c.Tools.Tokens
		exact = exact && c.Tools.Exact
	}
	local := c.Tokens
	if c.Source != promptcount.SourceTokenizer {
		local = c.Estimate
	} else if c.Exact != (exact && c.Encoding != "estimate") {
		t.Errorf("exact %v, but the parts' exactness is %v (encoding %s)", c.Exact, exact, c.Encoding)
	}
	if sum != local {
		t.Errorf("the breakdown adds up to %d, the local count is %d: %+v", sum, local, c)
	}
	if c.Approximate == c.Exact {
		t.Errorf("approximate %v and exact %v", c.Approximate, c.Exact)
	}
}

// TestCountRequest_Cookbook counts the Cookbook's request body: 105 for gpt-3.5-turbo and gpt-4, 101 for
// gpt-4o and gpt-4o-mini, as the API billed it.
func TestCountRequest_Cookbook(t *testing.T) {
	t.Parallel()
	for model, want := range cookbookWant {
		c := count(t, cookbookRequest(t, model), promptcount.Options{})
		if c.Tokens != want || c.Shape != promptcount.ShapeOpenAI || c.Source != promptcount.SourceTokenizer {
			t.Errorf("%s: %d tokens (%s, %s), the API billed %d", model, c.Tokens, c.Shape, c.Source, want)
		}
		// Exact by the rules of cl100k_base models; for o200k_base ones the rule is an estimate.
		if c.Exact != (c.Encoding == tokenizer.CL100KBase) || c.Tools == nil || c.Tools.Count != 1 || len(c.Messages) != 2 || c.ReplyPriming != 3 {
			t.Errorf("%s: breakdown %+v", model, c)
		}
	}
}

// publishedPair is a request and the prompt_tokens OpenAI's API billed for it, from the tokenizer's test
// data (testdata/tool_counts.json there cites the source of each).
type publishedPair struct {
	Source       string          `json:"source"`
	Model        string          `json:"model"`
	PromptTokens int             `json:"prompt_tokens"`
	Estimate     bool            `json:"estimate"`
	Request      json.RawMessage `json:"request"`
}

// TestCountRequest_PublishedPairs counts every published request with tools as a request body: the API's
// count where the tokenizer's rules are exact, and otherwise at least it and at most 2 more.
func TestCountRequest_PublishedPairs(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "tokenizer", "testdata", "tool_counts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pairs []publishedPair
	if err := json.Unmarshal(data, &pairs); err != nil {
		t.Fatal(err)
	}
	if len(pairs) < 40 {
		t.Fatalf("%d pairs", len(pairs))
	}
	for i, p := range pairs {
		c := count(t, string(p.Request), promptcount.Options{Model: p.Model, Shape: promptcount.ShapeOpenAI})
		switch {
		case !p.Estimate && c.Tokens != p.PromptTokens:
			t.Errorf("pair %d (%s, %s): %d, the API billed %d", i, p.Model, p.Source, c.Tokens, p.PromptTokens)
		case p.Estimate && (c.Tokens < p.PromptTokens || c.Tokens > p.PromptTokens+2):
			t.Errorf("pair %d (%s, %s): %d, the API billed %d (want that or at most 2 more)", i, p.Model, p.Source, c.Tokens, p.PromptTokens)
		case p.Estimate && c.Exact:
			t.Errorf("pair %d (%s): an estimate reported exact", i, p.Model)
		}
	}
}

// pngData is a PNG image of w x h pixels.
func pngData(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func dataURL(t testing.TB, w, h int) string {
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngData(t, w, h))
}

// TestCountRequest_Images counts images as the model bills them: gpt-4o's tiles (a 1024x1024 image at
// high detail is 765, at low 85; 2048x4096 is 1105), from a data: URL's bytes or from the size Loom's
// extension gives beside a URL; auto is counted as high, as the tile rule says.
func TestCountRequest_Images(t *testing.T) {
	t.Parallel()
	text := count(t, `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"What is this?"}]}]}`, promptcount.Options{}).Tokens
	for _, tc := range []struct {
		image string
		want  int
		exact bool
	}{
		{fmt.Sprintf(`{"url":%q,"detail":"high"}`, dataURL(t, 1024, 1024)), 765, true},
		{fmt.Sprintf(`{"url":%q,"detail":"low"}`, dataURL(t, 1024, 1024)), 85, true},
		{`{"url":"https://example.com/a.png","detail":"high","width":2048,"height":4096}`, 1105, true},
		{`{"url":"https://example.com/a.png","width":1024,"height":1024}`, 765, true},
	} {
		body := `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":` + tc.image + `}]}]}`
		c := count(t, body, promptcount.Options{})
		if got := c.Tokens - text; got != tc.want || c.Exact != tc.exact || len(c.Messages[0].Images) != 1 || c.Messages[0].Images[0].Tokens != tc.want {
			t.Errorf("%.80s: the image counts %d (exact %v), want %d (exact %v): %+v", tc.image, got, c.Exact, tc.want, tc.exact, c.Messages[0])
		}
	}
	// An image whose size is not known is an error, not 0.
	_, err := promptcount.CountRequest(context.Background(), []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`), promptcount.Options{})
	if !errors.Is(err, loom.ErrImageSize) {
		t.Errorf("an image at a URL without its size: %v, want ErrImageSize", err)
	}
}

// TestCountRequest_ToolExchange counts a history's tool call and result by the tool rule: estimates, said
// so on their messages and not on the others.
func TestCountRequest_ToolExchange(t *testing.T) {
	t.Parallel()
	body := `{"model":"gpt-4o","messages":[
		{"role":"user","content":"Weather in Paris?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{ \"city\": \"Paris\" }"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"18C"}],
		"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],
		"tool_choice":"auto"}`
	c := count(t, body, promptcount.Options{})
	m, enc := tokenizer.Model{}, (*tokenizer.Encoding)(nil)
	m, _ = tokenizer.ForModel("gpt-4o")
	enc, _ = tokenizer.Get(m.Encoding)
	rule := m.Tools
	call := m.TokensPerMessage + enc.Count("assistant") + rule.CallOverhead + enc.Count("get_weather") + enc.Count(`{"city":"Paris"}`)
	result := m.TokensPerMessage + rule.ResultOverhead + enc.Count("get_weather") + enc.Count("18C")
	if c.Messages[1].Tokens != call || c.Messages[2].Tokens != result {
		t.Errorf("call %d, result %d; want %d, %d", c.Messages[1].Tokens, c.Messages[2].Tokens, call, result)
	}
	if !c.Messages[0].Exact || c.Messages[1].Exact || c.Messages[2].Exact || c.Exact || c.ToolChoice == nil || c.ToolChoice.Tokens != 0 {
		t.Errorf("exactness: %+v", c)
	}
}

// TestCountRequest_Anthropic counts a Messages body as an estimate, marked approximate: its system prompt,
// text, image, tool_use and tool_result blocks, and tools with Claude's tool overhead.
func TestCountRequest_Anthropic(t *testing.T) {
	t.Parallel()
	body := `{"model":"claude-sonnet-4-5-20250929","max_tokens":1024,
		"system":[{"type":"text","text":"You are terse."}],
		"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],
		"messages":[
			{"role":"user","content":[{"type":"text","text":"Weather here?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` +
		base64.StdEncoding.EncodeToString(pngData(t, 750, 750)) + `"}}]},
			{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"18C"}]}]}`
	c := count(t, body, promptcount.Options{})
	if c.Shape != promptcount.ShapeAnthropic || c.Exact || !c.Approximate || c.Encoding != "estimate" || c.Model != "claude-sonnet-4-5" {
		t.Errorf("%+v", c)
	}
	if c.System == nil || c.Tools == nil || c.Tools.Overhead != 346 || len(c.Messages) != 3 || len(c.Messages[0].Images) != 1 {
		t.Fatalf("breakdown %+v", c)
	}
	if im := c.Messages[0].Images[0]; im.Tokens != 750 || im.Exact { // 750 x 750 / 750
		t.Errorf("image %+v, want 750 tokens, an estimate", im)
	}
}

// TestCountRequest_Shape detects a body's shape from what only one shape has, or from its model, and
// refuses one that mixes them.
func TestCountRequest_Shape(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, want string }{
		{`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, promptcount.ShapeOpenAI},
		{`{"model":"claude-opus-4-1","messages":[{"role":"user","content":"hi"}]}`, promptcount.ShapeAnthropic},
		{`{"model":"claude-opus-4-1","messages":[{"role":"system","content":"x"},{"role":"user","content":"hi"}]}`, promptcount.ShapeOpenAI},
		{`{"model":"gpt-4o","system":"x","messages":[{"role":"user","content":"hi"}]}`, promptcount.ShapeAnthropic},
		{`{"model":"llama-3.1-8b","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"x"}]}]}`, promptcount.ShapeAnthropic},
	} {
		if c := count(t, tc.body, promptcount.Options{}); c.Shape != tc.want {
			t.Errorf("%s: shape %s, want %s", tc.body, c.Shape, tc.want)
		}
	}
	_, err := promptcount.CountRequest(context.Background(), []byte(`{"model":"gpt-4o","system":"x","messages":[{"role":"tool","tool_call_id":"a","content":"x"}]}`), promptcount.Options{})
	if !errors.Is(err, promptcount.ErrBody) || !strings.Contains(err.Error(), "mixes") {
		t.Errorf("a mixed body: %v", err)
	}
	// The shape asked for wins.
	if c := count(t, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, promptcount.Options{Shape: promptcount.ShapeAnthropic}); c.Shape != promptcount.ShapeAnthropic {
		t.Errorf("asked anthropic, got %s", c.Shape)
	}
}

// TestCountRequest_Errors gives a clear error for each kind of bad body, and checks the size limit before
// parsing.
func TestCountRequest_Errors(t *testing.T) {
	t.Parallel()
	many := `{"model":"gpt-4o","messages":[` + strings.Repeat(`{"role":"user","content":"a"},`, 20) + `{"role":"user","content":"a"}]}`
	for _, tc := range []struct {
		name, body string
		opts       promptcount.Options
		want       error
		text       string
	}{
		{"too large, checked before parsing", `{` + strings.Repeat(" ", 200), promptcount.Options{Limits: promptcount.Limits{MaxBytes: 100}}, promptcount.ErrTooLarge, "limit is 100"},
		{"too many items", many, promptcount.Options{Limits: promptcount.Limits{MaxItems: 20}}, promptcount.ErrTooLarge, "21 messages"},
		{"a text too long", `{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("a", 50) + `"}]}`,
			promptcount.Options{Limits: promptcount.Limits{MaxTextBytes: 10}}, promptcount.ErrTooLarge, "messages[0].content is 50 bytes"},
		{"not JSON", `{"model":`, promptcount.Options{}, promptcount.ErrBody, ""},
		{"not an object", `[1]`, promptcount.Options{}, promptcount.ErrBody, "object"},
		{"invalid UTF-8", "{\"model\":\"gpt-4o\xff\"}", promptcount.Options{}, promptcount.ErrBody, "UTF-8"},
		{"no model", `{"messages":[{"role":"user","content":"hi"}]}`, promptcount.Options{}, tokenizer.ErrUnknownModel, "names no model"},
		{"unknown model", `{"model":"nope-1","messages":[]}`, promptcount.Options{}, tokenizer.ErrUnknownModel, ""},
		{"a content of the wrong type", `{"model":"gpt-4o","messages":[{"role":"user","content":5}]}`, promptcount.Options{}, promptcount.ErrBody, "messages[0].content"},
		{"an unknown role", `{"model":"gpt-4o","messages":[{"role":"robot","content":"x"}]}`, promptcount.Options{}, promptcount.ErrBody, "robot"},
		{"audio", `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, promptcount.Options{}, promptcount.ErrNotCounted, "input_audio"},
		{"a bad tool name", `{"model":"gpt-4o","messages":[],"tools":[{"type":"function","function":{"name":"a b"}}]}`, promptcount.Options{}, loom.ErrInvalid, "tools[0]"},
		{"tool_choice without tools", `{"model":"gpt-4o","messages":[],"tool_choice":"none"}`, promptcount.Options{}, promptcount.ErrBody, "without tools"},
		{"an image from the assistant", `{"model":"gpt-4o","messages":[{"role":"assistant","content":[{"type":"image_url","image_url":{"url":"https://a.example/x.png","width":5,"height":5}}]}]}`,
			promptcount.Options{}, loom.ErrInvalid, "role assistant"},
		{"image data that is not an image", `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,aGVsbG8="}}]}]}`,
			promptcount.Options{}, loom.ErrInvalid, "image data"},
		{"a shape not known", `{"model":"gpt-4o","messages":[]}`, promptcount.Options{Shape: "gemini"}, promptcount.ErrBody, "gemini"},
		{"an Anthropic document", `{"model":"claude-opus-4-1","messages":[{"role":"user","content":[{"type":"document","source":{}}]}]}`, promptcount.Options{}, promptcount.ErrNotCounted, "document"},
	} {
		_, err := promptcount.CountRequest(context.Background(), []byte(tc.body), tc.opts)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %v, want %v with %q", tc.name, err, tc.want, tc.text)
		}
	}
}

// FuzzCountRequest holds CountRequest to its invariants on any body: no panic, an error or a count whose
// breakdown adds up, within the limits (which bound its time and memory: the body's bytes, its items).
func FuzzCountRequest(f *testing.F) {
	f.Add([]byte(cookbookRequest(f, "gpt-4o")))
	f.Add([]byte(`{"model":"claude-opus-4-1","system":"s","messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"x"}]}]}],"tools":[{"name":"t","input_schema":{}}]}`))
	f.Add([]byte(`{"model":"gpt-4o","messages":[{"role":"assistant","tool_calls":[{"id":"1","function":{"name":"f","arguments":"{\"a\":\"é\"}"}}]},{"role":"tool","tool_call_id":"1","content":"r"}],"functions":[{"name":"f"}],"function_call":{"name":"f"}}`))
	f.Add([]byte(`{"model":"gemini-2.5-pro","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"https://x.example/a","width":3,"height":4,"detail":"low"}}]}],"response_format":{"type":"json_schema","json_schema":{"a":1}}}`))
	lim := promptcount.Limits{MaxBytes: 1 << 16, MaxItems: 200}
	f.Fuzz(func(t *testing.T, body []byte) {
		c, err := promptcount.CountRequest(context.Background(), body, promptcount.Options{Limits: lim})
		if err != nil {
			if !errors.Is(err, loom.ErrInvalid) && !errors.Is(err, loom.ErrUnsupported) && !errors.Is(err, loom.ErrTooLarge) {
				t.Fatalf("an error of no kind: %v", err)
			}
			return
		}
		checkBreakdown(t, c)
		if c.Tokens < 0 {
			t.Fatalf("a negative count %d", c.Tokens)
		}
	})
}

// TestCountRequest_DoesNotAllocateOutOfProportion counts adversarial bodies of about 256 KiB (many tiny messages, many parts, a
// schema nested as deep as JSON allows, many tools, one long text, many images' headers) with memory in
// proportion to the body: what it allocates is at most 160 times the body's bytes (the tokenizer's merge
// of one long run of a letter takes 55 alone, a schema's rendering and the counts of its unknown parts
// about 120); a cost that grew faster than the body would pass that at once. A schema nested deeper than tokenizer.MaxSchemaDepth is
// refused: rendered, its indentation would grow with the square of its depth (1141 times the body, at
// 4000 levels, before the limit).
func TestCountRequest_DoesNotAllocateOutOfProportion(t *testing.T) {
	if raceEnabled {
		t.Skip("allocations mean nothing under the race detector; make test runs this without it")
	}
	const size = 1 << 18
	repeat := func(s string, n int) string { return strings.TrimSuffix(strings.Repeat(s, n), ",") }
	deep := func(n int) string {
		return strings.Repeat(`{"type":"object","properties":{"a":`, n) + `{"type":"string"}` + strings.Repeat(`}}`, n)
	}
	nested := deep(tokenizer.MaxSchemaDepth/2 - 1)
	img := `{"type":"image_url","image_url":{"url":"` + dataURL(t, 64, 64) + `","detail":"high"}},`
	bodies := map[string]string{
		"tiny messages": `{"model":"gpt-4o","messages":[` + repeat(`{"role":"user","content":"a"},`, size/30) + `]}`,
		"many parts":    `{"model":"gpt-4o","messages":[{"role":"user","content":[` + repeat(`{"type":"text","text":"ab"},`, size/28) + `]}]}`,
		"deep schema":   `{"model":"gpt-4o","messages":[],"tools":[` + repeat(`{"type":"function","function":{"name":"f","parameters":`+nested+`}},`, size/len(nested)) + `]}`,
		"many tools":    `{"model":"gpt-4o","messages":[],"tools":[` + repeat(`{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"x":{"type":"integer","format":"q"}}}}},`, size/110) + `]}`,
		"one long text": `{"model":"gpt-4o","messages":[{"role":"user","content":"` + strings.Repeat("a", size) + `"}]}`,
		"many images":   `{"model":"gpt-4o","messages":[{"role":"user","content":[` + repeat(img, size/len(img)) + `]}]}`,
		"anthropic":     `{"model":"claude-opus-4-1","messages":[` + repeat(`{"role":"assistant","content":[{"type":"tool_use","id":"i","name":"n","input":{"a":[1,2]}}]},`, size/90) + `]}`,
	}
	for name, body := range bodies {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		_, err := promptcount.CountRequest(context.Background(), []byte(body), promptcount.Options{Limits: promptcount.Limits{MaxItems: 1 << 20}})
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 160*uint64(len(body)) {
			t.Errorf("%s: %d bytes allocated for a body of %d (%.0fx)", name, alloc, len(body), float64(alloc)/float64(len(body)))
		}
	}
	_, err := promptcount.CountRequest(context.Background(), []byte(`{"model":"gpt-4o","messages":[],"tools":[{"type":"function","function":{"name":"f","parameters":`+deep(2000)+`}}]}`), promptcount.Options{})
	if !errors.Is(err, tokenizer.ErrSchemaDepth) {
		t.Errorf("a schema 4000 levels deep: %v", err)
	}
}
