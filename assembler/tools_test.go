package assembler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/context-loom/loom/tokenizer"
)

// publishedPair is a Chat Completions request and the prompt_tokens OpenAI's API billed for it, from
// tokenizer/testdata/tool_counts.json, which cites the source of each (see tokenizer's
// TestToolRule_PublishedPairs).
type publishedPair struct {
	Source       string `json:"source"`
	Model        string `json:"model"`
	PromptTokens int    `json:"prompt_tokens"`
	Estimate     bool   `json:"estimate"`
	Request      struct {
		Messages []struct {
			Role       string     `json:"role"`
			Content    *string    `json:"content"`
			Name       string     `json:"name"`
			ToolCalls  []ToolCall `json:"tool_calls"`
			ToolCallID string     `json:"tool_call_id"`
		} `json:"messages"`
		Tools        []Tool          `json:"tools"`
		Functions    []ToolFunction  `json:"functions"`
		ToolChoice   json.RawMessage `json:"tool_choice"`
		FunctionCall json.RawMessage `json:"function_call"`
	} `json:"request"`
}

// asRequest returns the pair's request as an assembler's request that renders the same Chat Completions
// messages (a first system message as the instructions, a last user message as the message, the rest as
// the history, the tool choice or function call as its ToolChoice), and false when the assembler cannot:
// a message the assembler drops (a blank one) or changes.
func (p *publishedPair) asRequest() (*Request, bool) {
	r := &p.Request
	req := &Request{Model: p.Model, Tools: r.Tools}
	switch {
	case r.ToolChoice != nil:
		if err := json.Unmarshal(r.ToolChoice, &req.ToolChoice); err != nil {
			return nil, false
		}
	case r.FunctionCall != nil: // "none", "auto" or {"name": ...}
		var named struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(r.FunctionCall, &req.ToolChoice.Mode) != nil {
			if json.Unmarshal(r.FunctionCall, &named) != nil {
				return nil, false
			}
			req.ToolChoice = ToolChoice{Mode: ToolChoiceFunction, Function: named.Name}
		}
	}
	for _, f := range r.Functions {
		req.Tools = append(req.Tools, Tool{Type: "function", Function: f})
	}
	msgs := r.Messages
	if len(msgs) > 0 && msgs[0].Role == "system" && msgs[0].Content != nil {
		req.Instructions, msgs = *msgs[0].Content, msgs[1:]
	}
	if n := len(msgs); n > 0 && msgs[n-1].Role == "user" && msgs[n-1].Content != nil {
		req.Message, msgs = *msgs[n-1].Content, msgs[:n-1]
	}
	for _, m := range msgs {
		content := ""
		if m.Content != nil {
			content = *m.Content
		}
		if (strings.TrimSpace(content) == "" && len(m.ToolCalls) == 0 && m.Role != "tool") || (m.Name != "" && m.Role != "tool") {
			return nil, false
		}
		req.History = append(req.History, Message{Role: m.Role, Content: content, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID})
	}
	if len(req.History) > 0 && req.History[0].Role != "user" && req.History[0].Role != "system" {
		return nil, false // a conversation the assembler does not start mid-turn
	}
	return req, true
}

// TestAssemble_CountsToolsAsOpenAIBills assembles every published request with tools that the assembler
// can render as it was sent, and checks that the result's count is what the API billed: exactly where
// the tokenizer's rule is exact (the Cookbook's example gives 105 for gpt-3.5-turbo and gpt-4, 101 for
// gpt-4o and gpt-4o-mini), at most 2 more where it is an estimate, which the report then says.
func TestAssemble_CountsToolsAsOpenAIBills(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "tokenizer", "testdata", "tool_counts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var pairs []publishedPair
	if err := json.Unmarshal(data, &pairs); err != nil {
		t.Fatal(err)
	}
	assembled, cookbook := 0, 0
	for i := range pairs {
		p := &pairs[i]
		req, ok := p.asRequest()
		if !ok {
			continue
		}
		res, err := AssembleRequest(context.Background(), req)
		if err != nil {
			t.Errorf("pair %d (%s): %v", i, p.Model, err)
			continue
		}
		assembled++
		if strings.HasPrefix(p.Source, "openai/openai-cookbook") {
			cookbook++
		}
		if len(res.Messages) != len(p.Request.Messages) {
			t.Errorf("pair %d: %d messages rendered of %d", i, len(res.Messages), len(p.Request.Messages))
		}
		switch {
		case !p.Estimate && res.TotalTokens != p.PromptTokens:
			t.Errorf("pair %d (%s, %s): total %d, the API billed %d", i, p.Model, p.Source, res.TotalTokens, p.PromptTokens)
		case p.Estimate && (res.TotalTokens < p.PromptTokens || res.TotalTokens > p.PromptTokens+2):
			t.Errorf("pair %d (%s, %s): total %d, the API billed %d: want that or at most 2 more", i, p.Model, p.Source, res.TotalTokens, p.PromptTokens)
		}
		model, _ := tokenizer.ForModel(p.Model)
		for _, r := range res.Report.Regions {
			if r.Name == RegionTools && r.Exact != model.Tools.Exact {
				t.Errorf("pair %d (%s): tools exact %v, want the rule's %v", i, p.Model, r.Exact, model.Tools.Exact)
			}
		}
		if res.Exact && p.Estimate {
			t.Errorf("pair %d (%s): an estimate reported exact", i, p.Model)
		}
	}
	if assembled < 40 || cookbook != 4 {
		t.Errorf("assembled %d published pairs, %d of the Cookbook's 4", assembled, cookbook)
	}
}

// randomSchema returns a random JSON schema of the shapes the rendering knows, and now and then a keyword
// it does not, at depth.
func randomSchema(r *rand.Rand, depth int) map[string]any {
	s := map[string]any{}
	switch k := r.IntN(9); {
	case k == 0 && depth < 3:
		s["type"] = "object"
		props := map[string]any{}
		var required []string
		for i := range r.IntN(4) {
			name := fmt.Sprintf("p%d_%s", i, randomWord(r))
			props[name] = randomSchema(r, depth+1)
			if r.IntN(2) == 0 {
				required = append(required, name)
			}
		}
		s["properties"] = props
		if required != nil {
			s["required"] = required
		}
	case k == 1 && depth < 3:
		s["type"] = "array"
		s["items"] = randomSchema(r, depth+1)
	case k == 2:
		s["type"] = "string"
		s["enum"] = []string{randomWord(r), randomWord(r) + " " + randomWord(r)}
	case k == 3 && depth < 3:
		s["anyOf"] = []any{randomSchema(r, depth+1), randomSchema(r, depth+1)}
	case k == 4:
		s["type"] = []string{"integer", "number"}[r.IntN(2)]
	case k == 5:
		s["type"] = []string{"boolean", "null"}[r.IntN(2)]
	default:
		s["type"] = "string"
	}
	if r.IntN(2) == 0 {
		s["description"] = randomText(r)
	}
	if r.IntN(8) == 0 {
		s["format"] = "date-time" // a keyword whose rendering is not known
	}
	return s
}

func randomWord(r *rand.Rand) string {
	words := []string{"city", "unit", "Zürich", "東京", "count", "id", "x", "é", "query", "limit"}
	return words[r.IntN(len(words))]
}

func randomText(r *rand.Rand) string {
	parts := []string{"The", " city", " name.", "\n", " 😀", " e.g. Lyon", ":", "  ", "東京", "<b>", "&"}
	var b strings.Builder
	for range 1 + r.IntN(6) {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.String()
}

// randomTools returns 1 to 20 random tool definitions.
func randomTools(r *rand.Rand) []Tool {
	tools := make([]Tool, 1+r.IntN(20))
	for i := range tools {
		params := randomSchema(r, 0)
		params["type"] = "object"
		if _, ok := params["properties"]; !ok && r.IntN(2) == 0 {
			params["properties"] = map[string]any{"q": randomSchema(r, 1)}
		}
		b, _ := json.Marshal(params)
		tools[i] = Tool{Type: "function", Function: ToolFunction{Name: fmt.Sprintf("tool_%d", i), Parameters: b}}
		if r.IntN(3) > 0 {
			tools[i].Function.Description = randomText(r)
		}
		if r.IntN(5) == 0 {
			tools[i].Function.Parameters = nil
		}
	}
	return tools
}

// TestAssemble_RandomToolsCountAsRendered assembles random tool sets with random requests, for a model of
// each encoding and every budget from tight to ample: the tools region's count is the definitions as
// tokenizer.RenderFunctions renders them, counted apart (with the schema parts it does not know, the
// rule's overhead and the line break after the first system message), the whole count is the independent
// recount of the messages, and no budget is exceeded.
func TestAssemble_RandomToolsCountAsRendered(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(15, 1))
	checked, trimmed := 0, 0
	defer func() {
		if checked < sweep(150)/2 || trimmed == 0 {
			t.Errorf("checked %d of %d requests, %d trimmed: the test does not see enough", checked, sweep(150), trimmed)
		}
	}()
	for i := range sweep(150) {
		req := randomRequest(r)
		req.Format, req.Formatter = "", nil
		req.Model = []string{"gpt-4o", "gpt-4", "gpt-4.1-mini"}[i%3]
		req.Tools = randomTools(r)
		if r.IntN(3) == 0 {
			req.Instructions = ""
		}
		req.MaxTokens = 200 + r.IntN(4000)
		res, err := AssembleRequest(context.Background(), req)
		var budgetErr *BudgetError
		if errors.As(err, &budgetErr) || errors.Is(err, ErrNoUserTurn) {
			continue
		}
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if res.TotalTokens > res.Budget {
			t.Fatalf("request %d: total %d over budget %d", i, res.TotalTokens, res.Budget)
		}
		checked++
		for _, reg := range res.Report.Regions {
			if len(reg.Dropped) > 0 {
				trimmed++
				break
			}
		}
		if got := openAICount(t, res); got != res.TotalTokens {
			t.Fatalf("request %d: total %d, recount %d", i, res.TotalTokens, got)
		}
		model, _ := tokenizer.ForModel(req.Model)
		c := model.Counter()
		text, unknown := tokenizer.RenderFunctions(req.Tools)
		want := c.Count(text)
		for _, u := range unknown {
			want += c.Count(u)
		}
		hasSystem := false
		firstSystem := ""
		for _, m := range res.Messages {
			if m.Role == "system" && !hasSystem {
				hasSystem, firstSystem = true, m.Content
			}
		}
		want += model.Tools.DefinitionOverhead(hasSystem)
		if hasSystem {
			want += c.Count(firstSystem+"\n") - c.Count(firstSystem)
		}
		for _, reg := range res.Report.Regions {
			if reg.Name != RegionTools {
				continue
			}
			if reg.Used != want {
				t.Fatalf("request %d (%s): tools used %d, rendered and counted apart %d", i, req.Model, reg.Used, want)
			}
			if wantExact := model.Tools.Exact && len(unknown) == 0; reg.Exact != wantExact {
				t.Fatalf("request %d (%s): tools exact %v, want %v (unknown %q)", i, req.Model, reg.Exact, wantExact, unknown)
			}
		}
	}
}

// TestAssemble_ToolSetCachedAndIdentified checks that one tool set is rendered once for the assemblies that
// send it, that a set that differs in any field is another, and that the prefix hash names the set.
func TestAssemble_ToolSetCachedAndIdentified(t *testing.T) {
	t.Parallel()
	tools := randomTools(rand.New(rand.NewPCG(3, 3)))
	again := make([]Tool, len(tools))
	copy(again, tools)
	set := func(tools []Tool) *toolSet {
		s, err := cachedToolSet("", tools)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if set(tools) != set(again) {
		t.Error("the same tools made two sets")
	}
	changed := make([]Tool, len(tools))
	copy(changed, tools)
	changed[0].Function.Description += "!"
	if s := set(changed); s == set(tools) || s.id == set(tools).id {
		t.Error("a changed description found the first set")
	}
	strict := true
	changed[0] = tools[0]
	changed[0].Function.Strict = &strict
	if set(changed) == set(tools) {
		t.Error("a changed strict flag found the first set")
	}
	// A set is checked when it is made, and a bad one is not kept.
	bad := []Tool{{Function: ToolFunction{Name: "ok", Parameters: json.RawMessage(`{"type":`)}}}
	for range 2 {
		if _, err := cachedToolSet("", bad); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("parameters that are not JSON: %v", err)
		}
	}
	req := &Request{Model: "gpt-4o", Message: "hi", Tools: tools}
	first, err := AssembleRequest(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	req.Tools = changed
	second, err := AssembleRequest(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if first.PrefixHash == second.PrefixHash {
		t.Error("two tool sets, one prefix hash")
	}
}

// TestAssemble_ClaudeToolsCountAnthropicsSystemPrompt checks that tools sent to a Claude model count the
// system prompt Anthropic adds for them (346 tokens for Claude Sonnet 4.5, by Anthropic's documentation)
// besides their JSON, in the anthropic format and the openai one, and say they are estimates.
func TestAssemble_ClaudeToolsCountAnthropicsSystemPrompt(t *testing.T) {
	t.Parallel()
	tools := []Tool{{Type: "function", Function: ToolFunction{Name: "lookup", Parameters: json.RawMessage(`{"type":"object"}`)}}}
	for _, format := range []string{FormatAnthropic, FormatOpenAI} {
		res, err := AssembleRequest(context.Background(), &Request{Model: "claude-sonnet-4-5", Format: format, Message: "hi", Tools: tools})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Report.Regions {
			if r.Name == RegionTools && (r.Used < 346+tokenizer.Estimate(`{"name":"lookup"}`) || r.Exact) {
				t.Errorf("%s: tools used %d (exact %v), want Anthropic's 346 and their JSON, an estimate", format, r.Used, r.Exact)
			}
		}
	}
}

// TestAssemble_ToolSetsShared assembles requests with a few new tool sets from many goroutines at once
// (run with -race), so that sets are made and counted while others read them: every result is the one
// a lone assembly gives afterwards.
func TestAssemble_ToolSetsShared(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 7))
	sets := [][]Tool{randomTools(r), randomTools(r), randomTools(r)}
	for _, tools := range sets {
		tools[0].Function.Description = fmt.Sprintf("shared %p", tools) // new to the cache
	}
	type total struct{ set, n int }
	totals := make(chan total, 8*30)
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			for i := range 30 {
				k := (g + i) % len(sets)
				res, err := AssembleRequest(context.Background(), &Request{Model: []string{"gpt-4", "gpt-4o"}[g%2], Message: "hi", Tools: sets[k]})
				if err != nil {
					errs <- err
					return
				}
				totals <- total{k + len(sets)*(g%2), res.TotalTokens}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(totals)
	want := map[int]int{}
	for k := range 2 * len(sets) {
		res, err := AssembleRequest(context.Background(), &Request{Model: []string{"gpt-4", "gpt-4o"}[k/len(sets)], Message: "hi", Tools: sets[k%len(sets)]})
		if err != nil {
			t.Fatal(err)
		}
		want[k] = res.TotalTokens
	}
	for got := range totals {
		if got.n != want[got.set] {
			t.Errorf("set %d: total %d, alone %d", got.set, got.n, want[got.set])
		}
	}
}

// TestToolSetCache_NotSharedAcrossScopes: a cache scope (a tenant's and agent's) never finds a set that
// another scope made, nor its counts, so that no tenant can tell whether another sends a set; and a scope
// that fills its share of the cache does not drop another's sets.
func TestToolSetCache_NotSharedAcrossScopes(t *testing.T) {
	t.Parallel()
	tools := randomTools(rand.New(rand.NewPCG(9, 9)))
	tools[0].Function.Description = fmt.Sprintf("scoped %p", tools) // new to the cache
	a, b := CacheScope("tenant-a", "agent"), CacheScope("tenant-b", "agent")
	set := func(scope string, tools []Tool) *toolSet {
		s, err := cachedToolSet(scope, tools)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	req := &Request{Model: "gpt-4o", Message: "hi", Tools: tools, CacheScope: a}
	if _, err := AssembleRequest(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	first := set(a, tools)
	if first != set(a, slices.Clone(tools)) {
		t.Error("one scope, the same tools: two sets")
	}
	other := set(b, tools)
	if other == first {
		t.Fatal("tenant-b found the set tenant-a made")
	}
	other.mu.Lock()
	counts := len(other.counts)
	other.mu.Unlock()
	if counts != 0 {
		t.Errorf("tenant-b's set holds %d counts before it assembled anything", counts)
	}
	if other.id != first.id {
		t.Error("one tool set, two ids: the prefix hash depends on the scope")
	}
	for i := range maxScopeToolSets + 1 { // tenant-b fills its share, and starts again
		set(b, []Tool{{Type: "function", Function: ToolFunction{Name: fmt.Sprint("t", i)}}})
	}
	if set(a, tools) != first {
		t.Error("tenant-b filling its share dropped tenant-a's set")
	}
}

// TestToolSetCache_BoundedInBytes: the tool-set cache keeps at most maxToolSetBytes however large the
// sets that requests bring, and a set larger than all of it is still assembled, not kept. It adds sets of
// 1 MiB until twice the bound has gone in, so that the cache has started again at least twice, and not
// more: each set is checked and rendered whole, a few seconds' work. One goroutine's: under the race
// detector, which finds nothing in it and slows it tenfold, it is left to the run without the detector.
func TestToolSetCache_BoundedInBytes(t *testing.T) {
	if raceEnabled {
		t.Skip("one goroutine filling the cache twice over: make test runs it without the race detector")
	}
	params := func(i, size int) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"type":"object","description":"%d %s"}`, i, strings.Repeat("x", size)))
	}
	cached := func() int {
		toolSets.RLock()
		defer toolSets.RUnlock()
		n := 0
		for _, sc := range toolSets.scopes {
			for _, sets := range sc.sets {
				for _, s := range sets {
					n += s.size()
				}
			}
		}
		return n
	}
	restarts := 0
	for i, added := 0, 0; added <= 2*maxToolSetBytes; i++ {
		tools := []Tool{{Type: "function", Function: ToolFunction{Name: "big", Parameters: params(i, 1<<20)}}}
		before := cached()
		s, err := cachedToolSet(fmt.Sprint("bounded", i%8), tools) // scopes of 8 MiB or more: the global bound is reached
		if err != nil {
			t.Fatal(err)
		}
		added += s.size()
		n := cached()
		if n > maxToolSetBytes {
			t.Fatalf("after %d sets of 1 MiB the cache holds %d bytes, over %d", i+1, n, maxToolSetBytes)
		}
		if n < before {
			restarts++
		}
	}
	if restarts < 2 {
		t.Fatalf("the cache started again %d times: the test did not reach its bound", restarts)
	}
	// Its parameters are kept three times over and rendered once: a quarter of the bound is more than all of it.
	huge := []Tool{{Type: "function", Function: ToolFunction{Name: "huge", Parameters: params(-1, maxToolSetBytes/4)}}}
	s, err := cachedToolSet("", huge)
	if err != nil || s == nil || s.prefixID() == "" {
		t.Fatalf("a set larger than the cache: %v, %v", s, err)
	}
	if s.size() <= maxToolSetBytes {
		t.Fatalf("the huge set is %d bytes, not more than the cache's %d", s.size(), maxToolSetBytes)
	}
	if n := cached(); n > maxToolSetBytes {
		t.Fatalf("a set larger than the cache was kept: %d bytes", n)
	}
}

// TestToolChoice_JSON reads and writes Chat Completions' tool_choice, and refuses a choice the API would.
func TestToolChoice_JSON(t *testing.T) {
	t.Parallel()
	for _, in := range []string{`"auto"`, `"none"`, `"required"`, `{"type":"function","function":{"name":"get_weather"}}`} {
		var c ToolChoice
		if err := json.Unmarshal([]byte(in), &c); err != nil {
			t.Fatal(err)
		}
		if out, _ := json.Marshal(c); string(out) != in {
			t.Errorf("%s: read %+v, written %s", in, c, out)
		}
	}
	tools := []Tool{{Type: "function", Function: ToolFunction{Name: "get_weather"}}}
	for _, tc := range []struct {
		c     ToolChoice
		tools []Tool
		ok    bool
	}{
		{ToolChoice{}, nil, true},
		{ToolChoice{Mode: "auto"}, nil, true},
		{ToolChoice{Mode: "none"}, tools, true},
		{ToolChoice{Mode: "none"}, nil, false},
		{ToolChoice{Mode: "required"}, nil, false},
		{ToolChoice{Mode: "function", Function: "get_weather"}, tools, true},
		{ToolChoice{Mode: "function", Function: "other"}, tools, false},
		{ToolChoice{Mode: "sometimes"}, tools, false},
	} {
		_, err := AssembleRequest(context.Background(), &Request{Message: "hi", Tools: tc.tools, ToolChoice: tc.c})
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrInvalidRequest)) {
			t.Errorf("%+v with %d tools: %v", tc.c, len(tc.tools), err)
		}
	}
}

// TestAssemble_CountsToolChoice: the tool choice adds to the tools' region what the rule says (none: 1; a
// function: 4 and its name; required: 1, an estimate), and "auto" nothing.
func TestAssemble_CountsToolChoice(t *testing.T) {
	t.Parallel()
	tools := []Tool{{Type: "function", Function: ToolFunction{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}}
	base, err := AssembleRequest(context.Background(), &Request{Model: "gpt-4", Message: "Weather?", Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	enc := tokenizer.CL100K()
	for _, tc := range []struct {
		c     ToolChoice
		add   int
		exact bool
	}{
		{ToolChoice{Mode: "auto"}, 0, true},
		{ToolChoice{Mode: "none"}, 1, true},
		{ToolChoice{Mode: "function", Function: "get_weather"}, 4 + enc.Count("get_weather"), true},
		{ToolChoice{Mode: "required"}, 1, false},
	} {
		res, err := AssembleRequest(context.Background(), &Request{Model: "gpt-4", Message: "Weather?", Tools: tools, ToolChoice: tc.c})
		if err != nil {
			t.Fatal(err)
		}
		if res.TotalTokens != base.TotalTokens+tc.add || res.Exact != tc.exact {
			t.Errorf("%+v: total %d (exact %v), want %d (exact %v)", tc.c, res.TotalTokens, res.Exact, base.TotalTokens+tc.add, tc.exact)
		}
		for _, r := range res.Report.Regions {
			if r.Name == RegionTools && r.Exact != tc.exact {
				t.Errorf("%+v: the tools' region exact %v", tc.c, r.Exact)
			}
		}
	}
}

// TestAssemble_RefusesDeepSchemas: parameters nested deeper than tokenizer.MaxSchemaDepth are an invalid
// request, not a rendering that grows with the square of their depth.
func TestAssemble_RefusesDeepSchemas(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"type":"object","properties":{"a":`, 2000) + `{"type":"string"}` + strings.Repeat(`}}`, 2000)
	_, err := AssembleRequest(context.Background(), &Request{Message: "hi", Tools: []Tool{{Type: "function", Function: ToolFunction{Name: "f", Parameters: json.RawMessage(deep)}}}})
	if !errors.Is(err, tokenizer.ErrSchemaDepth) || !errors.Is(err, ErrInvalidRequest) {
		t.Errorf("%v", err)
	}
}

// TestAnthropic_InputSchemaMustBeAnObject: the Messages API refuses a tool whose input_schema is not an
// object schema, so Loom refuses it at the request, naming the tool; no schema (sent as an empty object
// schema) and an object schema pass, and the other formats are not held to the rule.
func TestAnthropic_InputSchemaMustBeAnObject(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		schema string
		ok     bool
	}{
		{"", true},
		{`{"type":"object"}`, true},
		{`{"properties":{"a":{"type":"string"}},"type":"object"}`, true},
		{`{"type":"string"}`, false},
		{`{"properties":{}}`, false},
		{`{"type":["object","null"]}`, false},
		{`[{"type":"object"}]`, false},
		{`"object"`, false},
		{`true`, false},
	} {
		tool := Tool{Type: "function", Function: ToolFunction{Name: "lookup", Parameters: json.RawMessage(tc.schema)}}
		_, err := AssembleRequest(context.Background(), &Request{Format: FormatAnthropic, Message: "hi", Tools: []Tool{tool}})
		if tc.ok != (err == nil) || err != nil && (!errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), `"lookup"`)) {
			t.Errorf("%s: %v", tc.schema, err)
		}
		if _, err := AssembleRequest(context.Background(), &Request{Format: FormatOpenAI, Message: "hi", Tools: []Tool{tool}}); err != nil {
			t.Errorf("openai, %s: %v", tc.schema, err)
		}
	}
}
