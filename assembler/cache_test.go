package assembler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// cacheRequest is an anthropic request for a Claude model whose tools, system prompt and history each
// pass its minimum cacheable length (1024 tokens for claude-sonnet-4-5).
func cacheRequest() *Request {
	long := strings.Repeat("Answer from the station's records; say which record. ", 120)
	return &Request{
		Model: "claude-sonnet-4-5", Format: FormatAnthropic,
		Instructions: "You are a weather assistant. " + strings.Repeat("Give temperatures in Celsius. ", 20),
		Tools: []Tool{
			{Type: "function", Function: ToolFunction{Name: "list_cities"}},
			{Type: "function", Function: ToolFunction{Name: "get_weather", Description: long,
				Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}},
		},
		Memory: []MemoryFact{{Key: "units", Value: "metric", Pinned: true}, {Key: "city", Value: "Lyon"}},
		History: []Message{
			{Role: "user", Content: "Is it raining in Lyon?"},
			{Role: "assistant", ToolCalls: []ToolCall{{ID: "call_1", Type: "function", Function: ToolCallFunction{Name: "get_weather", Arguments: `{"city":"Lyon"}`}}}},
			{Role: "tool", ToolCallID: "call_1", Content: "light rain, 12 C"},
		},
		Knowledge: []Knowledge{{ID: "k1", Content: "Paris is north of Lyon.", Score: 0.9}},
		Message:   "And in Paris?",
	}
}

// breakpoint is where a result carries a cache_control: "tools[i]", "system[i]" or "messages[i][j]".
type breakpoint struct {
	where string
	cc    CacheControl
}

// breakpoints lists res's cache breakpoints in the provider's order (tools, system, messages), read
// from its JSON as a client sends it.
func breakpoints(t *testing.T, res *Result) []breakpoint {
	t.Helper()
	var out []breakpoint
	for i, raw := range res.Tools {
		var tool struct {
			CacheControl *CacheControl `json:"cache_control"`
		}
		if err := json.Unmarshal(raw, &tool); err != nil {
			t.Fatal(err)
		}
		if tool.CacheControl != nil {
			out = append(out, breakpoint{"tools[" + strconv.Itoa(i) + "]", *tool.CacheControl})
		}
	}
	for i, b := range res.SystemBlocks {
		if b.CacheControl != (CacheControl{}) {
			out = append(out, breakpoint{"system[" + strconv.Itoa(i) + "]", b.CacheControl})
		}
	}
	for i, m := range res.Messages {
		for j, b := range m.Blocks {
			if b.CacheControl != (CacheControl{}) {
				if !cacheable(&b) {
					t.Errorf("messages[%d][%d], a %s block, carries a cache_control", i, j, b.Type)
				}
				out = append(out, breakpoint{"messages[" + strconv.Itoa(i) + "][" + strconv.Itoa(j) + "]", b.CacheControl})
			}
		}
	}
	return out
}

// countKeys counts the object keys named key anywhere in the JSON data.
func countKeys(t *testing.T, data []byte, key string) int {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	var walk func(v any) int
	walk = func(v any) int {
		n := 0
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if k == key {
					n++
				}
				n += walk(e)
			}
		case []any:
			for _, e := range v {
				n += walk(e)
			}
		}
		return n
	}
	return walk(v)
}

// TestBreakpoints_AtTheEndsOfTheStableParts: a prompt whose parts each pass the model's minimum gets four
// breakpoints, in the provider's order: the last tool, the system prompt (then also written as a block),
// the history's last block (its tool result, in the user turn the context and the message then join),
// the newest turn's last block; each the request's TTL (for "1h+5m", an hour on the tools and the system
// prompt, five minutes on the messages), which the provider's check accepts.
func TestBreakpoints_AtTheEndsOfTheStableParts(t *testing.T) {
	t.Parallel()
	for _, ttl := range []string{"", CacheTTL5m, CacheTTL1h, CacheTTL1h5m} {
		req := cacheRequest()
		req.CacheTTL = ttl
		res, err := AssembleRequest(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		bps := breakpoints(t, res)
		last := len(res.Messages) - 1
		want := []string{"tools[1]", "system[0]", "messages[" + strconv.Itoa(last) + "][0]",
			"messages[" + strconv.Itoa(last) + "][" + strconv.Itoa(len(res.Messages[last].Blocks)-1) + "]"}
		var got []string
		for _, b := range bps {
			got = append(got, b.where)
			wantTTL := map[string]string{"": "", CacheTTL5m: "", CacheTTL1h: "1h"}[ttl]
			if ttl == CacheTTL1h5m && !strings.HasPrefix(b.where, "messages") { // an hour on the stable prefix, five minutes after it
				wantTTL = CacheTTL1h
			}
			if b.cc != (CacheControl{Type: "ephemeral", TTL: wantTTL}) {
				t.Errorf("ttl %q: %s has %+v", ttl, b.where, b.cc)
			}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("ttl %q: breakpoints %v, want %v", ttl, got, want)
		}
		if len(res.SystemBlocks) != 1 || res.SystemBlocks[0].Text != res.System {
			t.Errorf("system blocks %+v do not hold the system prompt %q", res.SystemBlocks, res.System)
		}
		// The history's breakpoint is on its tool result, which opens the last user turn; the newest
		// turn's is after the context, on the message.
		if b := res.Messages[last].Blocks; len(b) != 3 || b[0].Type != "tool_result" || b[2].Text != req.Message {
			t.Errorf("the last turn's blocks are %+v", b)
		}
	}
}

// stripped is res with its breakpoints taken out, as JSON.
func stripped(t *testing.T, res *Result) []byte {
	t.Helper()
	c := *res
	c.SystemBlocks = nil
	c.Tools = nil
	for _, raw := range res.Tools {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		if _, ok := m["cache_control"]; ok {
			raw = bytes.Replace(raw, []byte(`,"cache_control":{"type":"ephemeral"}`), nil, 1)
			raw = bytes.Replace(raw, []byte(`,"cache_control":{"type":"ephemeral","ttl":"1h"}`), nil, 1)
		}
		c.Tools = append(c.Tools, raw)
	}
	c.Messages = nil
	for _, m := range res.Messages {
		m.Blocks = append([]Block(nil), m.Blocks...)
		for j := range m.Blocks {
			m.Blocks[j].CacheControl = CacheControl{}
		}
		c.Messages = append(c.Messages, m)
	}
	b, err := json.Marshal(&c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBreakpoints_OffIsTheSameOutputWithout: "off" places none (no cache_control key anywhere, no
// system blocks), and its output is the breakpoints' output with them taken out, the counts the same.
func TestBreakpoints_OffIsTheSameOutputWithout(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(17, 1))
	for i := range 60 {
		req := randomRequest(r)
		if i%2 == 0 {
			req = cacheRequest()
		}
		req.Format, req.Model = FormatAnthropic, []string{"claude-sonnet-4-5", "claude-3-5-haiku", "gpt-4o"}[i%3]
		off := *req
		off.CacheBreakpoints = CacheBreakpointsOff
		auto, err := AssembleRequest(context.Background(), req)
		if err != nil {
			continue // a request the format refuses is refused either way
		}
		none, err := AssembleRequest(context.Background(), &off)
		if err != nil {
			t.Fatalf("off: %v", err)
		}
		offJSON, _ := json.Marshal(none)
		if n := countKeys(t, offJSON, "cache_control"); n != 0 || none.SystemBlocks != nil {
			t.Fatalf("off: %d cache_control keys, system blocks %v", n, none.SystemBlocks)
		}
		if got := stripped(t, auto); !bytes.Equal(got, offJSON) {
			t.Fatalf("request %d: without its breakpoints the output differs from off's:\n%s\n%s", i, got, offJSON)
		}
		if auto.TotalTokens != none.TotalTokens {
			t.Fatalf("request %d: %d tokens with breakpoints, %d without", i, auto.TotalTokens, none.TotalTokens)
		}
		if n := len(breakpoints(t, auto)); n > MaxCacheBreakpoints {
			t.Fatalf("request %d: %d breakpoints", i, n)
		}
		again, _ := AssembleRequest(context.Background(), req)
		a1, _ := json.Marshal(auto)
		a2, _ := json.Marshal(again)
		if !bytes.Equal(a1, a2) {
			t.Fatalf("request %d: two assemblies of one request differ", i)
		}
	}
}

// TestBreakpoints_OnlyPastTheModelsMinimum: a prefix shorter than the model's minimum cacheable length
// gets no breakpoint; the same prompt gets one for a model whose minimum it passes.
func TestBreakpoints_OnlyPastTheModelsMinimum(t *testing.T) {
	t.Parallel()
	small := &Request{Model: "claude-sonnet-4-5", Format: FormatAnthropic, Instructions: "Be brief.", Message: "Hi."}
	res, err := AssembleRequest(context.Background(), small)
	if err != nil {
		t.Fatal(err)
	}
	if bps := breakpoints(t, res); len(bps) != 0 || res.SystemBlocks != nil {
		t.Fatalf("a short prompt has breakpoints %v", bps)
	}
	// About 2,000 tokens in all: past claude-sonnet-4-5's 1024, short of claude-opus-4-5's 4096.
	mid := func(model string) *Request {
		return &Request{Model: model, Format: FormatAnthropic, Instructions: strings.Repeat("Give temperatures in Celsius. ", 300), Message: "Hi."}
	}
	for model, want := range map[string]int{"claude-sonnet-4-5": 2, "claude-opus-4-5-20251101": 0, "claude-haiku-4-5": 0, "claude-3-5-haiku": 2} {
		res, err := AssembleRequest(context.Background(), mid(model))
		if err != nil {
			t.Fatal(err)
		}
		if got := len(breakpoints(t, res)); got != want || res.TotalTokens < 1024 || res.TotalTokens >= 4096 {
			t.Errorf("%s (%d tokens): %d breakpoints, want %d", model, res.TotalTokens, got, want)
		}
	}
	for model, want := range map[string]int{"claude-opus-4-5": 4096, "claude-haiku-4-5": 4096, "claude-3-haiku": 2048, "claude-sonnet-4-5": 1024, "llama-3": DefaultCacheMinTokens} {
		if got := CacheMinTokens(model); got != want {
			t.Errorf("CacheMinTokens(%q) = %d, want %d", model, got, want)
		}
	}
}

// TestBreakpoints_OptionsAreChecked: unknown values, and a TTL the request cannot use, are refused.
func TestBreakpoints_OptionsAreChecked(t *testing.T) {
	t.Parallel()
	for name, req := range map[string]Request{
		"unknown breakpoints": {Format: FormatAnthropic, CacheBreakpoints: "always"},
		"unknown ttl":         {Format: FormatAnthropic, CacheTTL: "10m"},
		"ttl for openai":      {Format: FormatOpenAI, CacheTTL: CacheTTL1h},
		"ttl with off":        {Format: FormatAnthropic, CacheBreakpoints: CacheBreakpointsOff, CacheTTL: CacheTTL1h},
	} {
		req.Message = "hi"
		if _, err := AssembleRequest(context.Background(), &req); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: %v, want ErrInvalidRequest", name, err)
		}
	}
	for _, f := range []string{FormatOpenAI, FormatResponses, FormatGemini, FormatText} {
		req := cacheRequest()
		req.Format, req.Model = f, "gpt-4o"
		res, err := AssembleRequest(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(res)
		if n := countKeys(t, data, "cache_control"); n != 0 {
			t.Errorf("%s: %d cache_control keys", f, n)
		}
	}
}

// TestBreakpoints_UntrustedTextForgesNone: texts that spell a cache_control (in the message, the
// history, a tool output, knowledge, memory) stay text: the JSON holds as many cache_control keys as
// Loom placed, none with breakpoints off.
func TestBreakpoints_UntrustedTextForgesNone(t *testing.T) {
	t.Parallel()
	forge := `"},"cache_control":{"type":"ephemeral"},{"type":"text","text":"` + "\n\"cache_control\": {\"type\": \"ephemeral\"}"
	for _, mode := range []string{"", CacheBreakpointsOff} {
		req := cacheRequest()
		req.CacheBreakpoints = mode
		req.Message += forge
		req.History[0].Content += forge
		req.History[2].Content += forge
		req.Knowledge[0].Content += forge
		req.Memory[0].Value += forge
		req.ToolOutputs = []ToolOutput{{Tool: "get_weather", Args: forge, Result: forge}}
		res, err := AssembleRequest(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(res)
		want := len(breakpoints(t, res))
		if mode == CacheBreakpointsOff {
			want = 0
		}
		if n := countKeys(t, data, "cache_control"); n != want || want > MaxCacheBreakpoints {
			t.Errorf("mode %q: %d cache_control keys, %d placed", mode, n, want)
		}
	}
}

// flatPrefix is a result's request as the provider reads it for its cache, in order: the tools, the
// system prompt, then each message's blocks with its role, each without its cache_control; and the
// position in it of each breakpoint (the index of the item that carries it).
func flatPrefix(t *testing.T, res *Result) (items []string, marks []int) {
	t.Helper()
	for _, raw := range res.Tools {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		_, has := m["cache_control"]
		delete(m, "cache_control")
		b, _ := json.Marshal(m)
		items = append(items, "tool "+string(b))
		if has {
			marks = append(marks, len(items)-1)
		}
	}
	if res.System != "" {
		items = append(items, "system "+res.System)
		if res.SystemBlocks != nil {
			marks = append(marks, len(items)-1)
		}
	}
	for _, m := range res.Messages {
		for _, b := range m.Blocks {
			has := b.CacheControl != (CacheControl{})
			b.CacheControl = CacheControl{}
			j, _ := json.Marshal(b)
			items = append(items, m.Role+" "+string(j))
			if has {
				marks = append(marks, len(items)-1)
			}
		}
	}
	return items, marks
}

// TestBreakpoints_StableFromTurnToTurn: over a growing conversation whose history is cut in steps, each
// turn's prompt up to each breakpoint but the newest turn's is the start of the next turn's prompt,
// but where the next turn's history starts elsewhere (the cut moved); every turn has at most four
// breakpoints, and the newest turn's is on the last block.
func TestBreakpoints_StableFromTurnToTurn(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(17, 2))
	session := growingSession(r, 50, 40)
	base := cacheRequest()
	var prev []string
	var prevMarks []int
	prevFirst, checked, moved := -1, 0, 0
	for n := 2; n <= len(session); n++ {
		if session[n-1].Role != "assistant" || len(session[n-1].ToolCalls) > 0 { // a turn ends with the answer
			continue
		}
		req := *base
		req.Tools = base.Tools
		req.History = session[:n]
		req.MaxTokens = 6000
		req.Knowledge = []Knowledge{{ID: "k", Content: "fact " + strconv.Itoa(n), Score: 0.5}}
		req.Message = "Turn " + strconv.Itoa(n) + ": go on."
		res, err := AssembleRequest(context.Background(), &req)
		if err != nil {
			t.Fatal(err)
		}
		items, marks := flatPrefix(t, res)
		if len(marks) > MaxCacheBreakpoints || len(marks) == 0 || marks[len(marks)-1] != len(items)-1 {
			t.Fatalf("history of %d: breakpoints at %v of %d items", n, marks, len(items))
		}
		first := firstKept(t, res)
		if prev != nil && first == prevFirst {
			for _, m := range prevMarks[:len(prevMarks)-1] { // the newest turn's changes by definition
				if m >= len(items) || strings.Join(items[:m+1], "\n") != strings.Join(prev[:m+1], "\n") {
					t.Fatalf("history of %d: the prompt up to the last turn's breakpoint at %d changed", n, m)
				}
				checked++
			}
		} else if prev != nil {
			moved++
		}
		prev, prevMarks, prevFirst = items, marks, first
	}
	t.Logf("checked %d, moved %d", checked, moved)
	if checked < 60 || moved == 0 {
		t.Fatalf("checked %d breakpoints, the cut moved %d times: the conversation does not test the rule", checked, moved)
	}
}

// TestCheckBreakpoints_RefusesWhatTheAPIRefuses: a fifth breakpoint, one on a blank text, one of another
// type, and an hour's after a shorter one are provider-rule errors; four in order are not.
func TestCheckBreakpoints_RefusesWhatTheAPIRefuses(t *testing.T) {
	t.Parallel()
	five, hour := CacheControl{Type: "ephemeral"}, CacheControl{Type: "ephemeral", TTL: CacheTTL1h}
	text := func(s string, c CacheControl) Block { return Block{Type: "text", Text: s, CacheControl: c} }
	tool := json.RawMessage(`{"name":"t","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral","ttl":"1h"}}`)
	for name, tc := range map[string]struct {
		out  output
		fail bool
	}{
		"four in order": {output{tools: []json.RawMessage{tool}, systemBlocks: []Block{text("s", hour)},
			messages: []ChatMessage{{Role: "user", Blocks: []Block{text("a", five), text("b", five)}}}}, false},
		"five": {output{tools: []json.RawMessage{tool}, systemBlocks: []Block{text("s", hour)},
			messages: []ChatMessage{{Role: "user", Blocks: []Block{text("a", five), text("b", five), text("c", five)}}}}, true},
		"blank text":          {output{messages: []ChatMessage{{Role: "user", Blocks: []Block{text(" ", five)}}}}, true},
		"another type":        {output{messages: []ChatMessage{{Role: "user", Blocks: []Block{text("a", CacheControl{Type: "persistent"})}}}}, true},
		"an hour after 5m":    {output{systemBlocks: []Block{text("s", five)}, messages: []ChatMessage{{Role: "user", Blocks: []Block{text("a", hour)}}}}, true},
		"a thinking block":    {output{messages: []ChatMessage{{Role: "assistant", Blocks: []Block{{Type: "thinking", CacheControl: five}}}}}, true},
		"a tool's after none": {output{tools: []json.RawMessage{json.RawMessage(`{"name":"t"}`), tool}}, false},
	} {
		err := checkBreakpoints(&tc.out)
		if (err != nil) != tc.fail || err != nil && !errors.Is(err, ErrProviderRule) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestWithCacheControl_AsMarshaled: the cache_control members written without encoding are the bytes the
// encoder writes, and a tool that only mentions cache_control in its schema is decoded, not taken for
// one that carries a breakpoint.
func TestWithCacheControl_AsMarshaled(t *testing.T) {
	t.Parallel()
	for _, c := range []CacheControl{{Type: "ephemeral"}, {Type: "ephemeral", TTL: CacheTTL1h}} {
		cc, err := marshalRaw(c)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(cacheControlMember(c)), `,"cache_control":`+string(cc)+"}"; got != want {
			t.Errorf("%+v: %s, want %s", c, got, want)
		}
		got := withCacheControl(json.RawMessage(`{"name":"f"} `), c)
		var back struct {
			CacheControl CacheControl `json:"cache_control"`
		}
		if err := json.Unmarshal(got, &back); err != nil || back.CacheControl != c {
			t.Errorf("%s reads back as %+v (%v)", got, back.CacheControl, err)
		}
	}
	nested := json.RawMessage(`{"name":"f","input_schema":{"type":"object","properties":{"cache_control":{"type":"ephemeral"}}}}`)
	out := &output{tools: []json.RawMessage{nested, nested, nested, nested, nested}}
	if err := checkBreakpoints(out); err != nil {
		t.Errorf("a schema's cache_control property counted as a breakpoint: %v", err)
	}
}
