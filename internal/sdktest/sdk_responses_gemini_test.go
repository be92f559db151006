package sdktest

// The responses and gemini formats, held to their official SDKs as the openai and anthropic formats are
// (see sdk_test.go): openai-go's Responses params, and google.golang.org/genai, whose client sends our
// contents to a local server standing in for the Gemini API, so that the body compared is the one the
// SDK itself sends.
//
// What the SDKs legitimately spell differently is normalised in our JSON before comparing, and only that:
//
//   - genai: a functionCall's "args": {} is dropped (the SDK omits an empty map; the API reads both
//     alike); our "system_instruction" is compared with the body's "systemInstruction" (the REST API
//     takes both spellings), and the SDK's "role": "user" in the systemInstruction, which the SDK adds
//     to every content without a role and the API does not read there, is dropped.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"google.golang.org/genai"

	"github.com/context-loom/loom/assembler"
)

func TestSDK_ResponsesMatchesTheSDKAndTheRules(t *testing.T) {
	t.Parallel()
	for name, mk := range sdkCases() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			req := mk()
			req.Format = assembler.FormatResponses
			res, err := assembler.AssembleRequest(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range sdkCheckResponses(res) {
				t.Error(p)
			}
		})
	}
}

func TestSDK_GeminiMatchesTheSDKAndTheRules(t *testing.T) {
	t.Parallel()
	for name, mk := range sdkCases() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			req := mk()
			req.Format = assembler.FormatGemini
			res, err := assembler.AssembleRequest(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range sdkCheckGemini(res) {
				t.Error(p)
			}
		})
	}
}

func TestSDK_ResponsesRandomRequests(t *testing.T) {
	t.Parallel()
	testRandomSDK(t, assembler.FormatResponses, rand.New(rand.NewPCG(9, 10)), sdkCheckResponses)
}

func TestSDK_GeminiRandomRequests(t *testing.T) {
	t.Parallel()
	testRandomSDK(t, assembler.FormatGemini, rand.New(rand.NewPCG(11, 12)), sdkCheckGemini)
}

// TestSDK_EdgeHistoriesResponsesGemini: the histories of TestSDK_EdgeHistories in the two formats.
func TestSDK_EdgeHistoriesResponsesGemini(t *testing.T) {
	t.Parallel()
	call := func(ids ...string) assembler.Message {
		m := assembler.Message{Role: "assistant"}
		for _, id := range ids {
			m.ToolCalls = append(m.ToolCalls, assembler.ToolCall{ID: id, Type: "function", Function: assembler.ToolCallFunction{Name: "lookup", Arguments: `{"q":"x"}`}})
		}
		return m
	}
	result := func(id string) assembler.Message {
		return assembler.Message{Role: "tool", ToolCallID: id, Content: "found it"}
	}
	user := func(s string) assembler.Message { return assembler.Message{Role: "user", Content: s} }
	assistant := func(s string) assembler.Message { return assembler.Message{Role: "assistant", Content: s} }
	cases := map[string][]assembler.Message{
		"unanswered call":                 {user("Look it up."), call("c1"), user("Never mind.")},
		"partly answered calls":           {user("Look both up."), call("c1", "c2"), result("c1"), assistant("One found.")},
		"whitespace text beside a call":   {user("Look it up."), {Role: "assistant", Content: " \n ", ToolCalls: call("c1").ToolCalls}, result("c1")},
		"final assistant text with space": {user("Write a haiku."), assistant("Leaves fall  \n")},
		"call ids outside [a-zA-Z0-9_-]":  {user("Look it up."), call("functions.lookup:0"), result("functions.lookup:0"), assistant("Done.")},
		"system message in the history":   {{Role: "system", Content: "Be brief."}, user("Hi."), assistant("Hello.")},
		"arguments that are not an object": {user("Look it up."), {Role: "assistant", ToolCalls: []assembler.ToolCall{
			{ID: "c1", Type: "function", Function: assembler.ToolCallFunction{Name: "lookup", Arguments: ``}},
			{ID: "c2", Type: "function", Function: assembler.ToolCallFunction{Name: "lookup", Arguments: `[1]`}},
		}}, result("c1"), result("c2"), assistant("Done.")},
	}
	for name, h := range cases {
		for _, format := range []string{assembler.FormatResponses, assembler.FormatGemini} {
			t.Run(name+"/"+format, func(t *testing.T) {
				t.Parallel()
				res, err := assembler.AssembleRequest(context.Background(), &assembler.Request{Format: format, Instructions: "Be helpful.", History: h, Message: "Thanks."})
				if err != nil {
					if errors.Is(err, assembler.ErrInvalidRequest) {
						return
					}
					t.Fatal(err)
				}
				check := sdkCheckResponses
				if format == assembler.FormatGemini {
					check = sdkCheckGemini
				}
				for _, p := range check(res) {
					t.Error(p)
				}
			})
		}
	}
}

// TestSDK_ResponsesGeminiChecksCatchBrokenOutput makes sure the checks are not vacuous.
func TestSDK_ResponsesGeminiChecksCatchBrokenOutput(t *testing.T) {
	t.Parallel()
	msg := func(role, typ, text string) assembler.InputItem {
		return assembler.InputItem{Type: "message", Role: role, Content: []assembler.InputContent{{Type: typ, Text: text}}}
	}
	fcall := assembler.InputItem{Type: "function_call", CallID: "c1", Name: "f", Arguments: "{}"}
	fout := assembler.InputItem{Type: "function_call_output", CallID: "c1", Output: "r"}
	text := func(s string) assembler.GeminiPart { return assembler.GeminiPart{Text: s} }
	gcall := assembler.GeminiPart{FunctionCall: &assembler.GeminiFunctionCall{ID: "c1", Name: "f", Args: json.RawMessage(`{"a":1}`)}}
	gresp := assembler.GeminiPart{FunctionResponse: &assembler.GeminiFunctionResponse{ID: "c1", Name: "f", Response: json.RawMessage(`{"output":"r"}`)}}
	content := func(role string, parts ...assembler.GeminiPart) assembler.GeminiContent {
		return assembler.GeminiContent{Role: role, Parts: parts}
	}
	for name, c := range map[string]struct {
		res  *assembler.Result
		want string
	}{
		"responses: output before its call": {&assembler.Result{Format: "responses", Input: []assembler.InputItem{msg("user", "input_text", "q"), fout}}, "answers no"},
		"responses: call without output":    {&assembler.Result{Format: "responses", Input: []assembler.InputItem{msg("user", "input_text", "q"), fcall, msg("user", "input_text", "q")}}, "unanswered"},
		"responses: input_text of the assistant": {&assembler.Result{Format: "responses", Input: []assembler.InputItem{msg("user", "input_text", "q"), msg("assistant", "input_text", "a")}},
			"output_text"},
		"responses: blank text": {&assembler.Result{Format: "responses", Input: []assembler.InputItem{msg("user", "input_text", " \n")}}, "white space"},
		"responses: a chat tool": {&assembler.Result{Format: "responses", Input: []assembler.InputItem{msg("user", "input_text", "q")},
			Tools: []json.RawMessage{json.RawMessage(`{"type":"function","function":{"name":"f"}}`)}}, "tools[0]"},
		"gemini: the model first": {&assembler.Result{Format: "gemini", Contents: []assembler.GeminiContent{content("model", text("a")), content("user", text("q"))}}, "first content"},
		"gemini: two user turns":  {&assembler.Result{Format: "gemini", Contents: []assembler.GeminiContent{content("user", text("q")), content("user", text("q"))}}, "alternate"},
		"gemini: a call unanswered": {&assembler.Result{Format: "gemini", Contents: []assembler.GeminiContent{content("user", text("q")), content("model", gcall),
			content("user", text("q"))}}, "functionResponse"},
		"gemini: text before the response": {&assembler.Result{Format: "gemini", Contents: []assembler.GeminiContent{content("user", text("q")), content("model", gcall),
			content("user", text("x"), gresp)}}, "first"},
		"gemini: an assistant role": {&assembler.Result{Format: "gemini", Contents: []assembler.GeminiContent{content("user", text("q")), content("assistant", text("a"))}}, "role"},
		"gemini: no contents":       {&assembler.Result{Format: "gemini"}, "no contents"},
	} {
		c.res.Model = "gpt-4o"
		check := sdkCheckResponses
		if c.res.Format == "gemini" {
			check = sdkCheckGemini
		}
		if problems := strings.Join(check(c.res), "\n"); !strings.Contains(problems, c.want) {
			t.Errorf("%s: problems %q, want one with %q", name, problems, c.want)
		}
	}
}

// sdkCheckResponses returns what is wrong with a responses result: mismatches with openai-go's Responses
// params, broken rules.
func sdkCheckResponses(res *assembler.Result) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if res.Format != assembler.FormatResponses {
		fail("format %q", res.Format)
	}
	var items []json.RawMessage
	for i, it := range res.Input {
		b, err := json.Marshal(it)
		if err != nil {
			return []string{fmt.Sprintf("input[%d]: %v", i, err)}
		}
		items = append(items, b)
	}
	ours := map[string]any{"input": sdkDecodeAll(items), "tools": sdkDecodeAll(res.Tools)}
	fields := []string{"input", "tools"}
	newParams := func() responses.ResponseNewParams {
		p := responses.ResponseNewParams{Model: openai.ChatModel(res.Model)}
		if res.Instructions != "" {
			p.Instructions = openai.String(res.Instructions)
		}
		return p
	}

	// 1. Our JSON, unmarshalled into the SDK's params.
	params := newParams()
	var list responses.ResponseInputParam
	for i, raw := range items {
		var p responses.ResponseInputItemUnionParam
		if err := json.Unmarshal(raw, &p); err != nil {
			fail("input[%d]: the SDK cannot read %s: %v", i, raw, err)
		}
		list = append(list, p)
	}
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: list}
	for i, raw := range res.Tools {
		var p responses.ToolUnionParam
		if err := json.Unmarshal(raw, &p); err != nil || p.OfFunction == nil {
			fail("tools[%d]: the SDK cannot read %s as a function tool: %v", i, raw, err)
		}
		params.Tools = append(params.Tools, p)
	}
	problems = append(problems, sdkCompareSent("responses (unmarshalled)", params, ours, fields)...)
	problems = append(problems, sdkCompareInstructions(params, res.Instructions)...)

	// 2. The same params, built with the SDK's constructors.
	built := newParams()
	list = nil
	for i, raw := range items {
		p, err := sdkBuildResponsesItem(raw)
		if err != nil {
			fail("input[%d] %s: %v", i, raw, err)
			continue
		}
		list = append(list, p)
	}
	built.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: list}
	for i, raw := range res.Tools {
		var w struct {
			Type        string         `json:"type"`
			Name        string         `json:"name"`
			Description *string        `json:"description"`
			Parameters  map[string]any `json:"parameters"`
			Strict      *bool          `json:"strict"`
		}
		if err := sdkDecodeStrict(raw, &w); err != nil || w.Type != "function" || w.Strict == nil {
			fail("tools[%d] %s: not a flat function tool with strict said: %v", i, raw, err)
			continue
		}
		tool := responses.ToolParamOfFunction(w.Name, w.Parameters, *w.Strict)
		if w.Description != nil {
			tool.OfFunction.Description = openai.String(*w.Description)
		}
		built.Tools = append(built.Tools, tool)
	}
	problems = append(problems, sdkCompareSent("responses (constructed)", built, ours, fields)...)

	// 3. The Responses API's rules.
	problems = append(problems, sdkResponsesRules(res)...)
	return problems
}

// sdkCompareInstructions compares the instructions the SDK sends with ours.
func sdkCompareInstructions(params responses.ResponseNewParams, want string) []string {
	b, _ := json.Marshal(params)
	var sent struct {
		Instructions string `json:"instructions"`
	}
	_ = json.Unmarshal(b, &sent)
	if sent.Instructions != want {
		return []string{fmt.Sprintf("responses: instructions sent %q, ours %q", sent.Instructions, want)}
	}
	return nil
}

// sdkBuildResponsesItem builds an input item with the SDK's constructors from our JSON, decoded strictly.
func sdkBuildResponsesItem(raw json.RawMessage) (responses.ResponseInputItemUnionParam, error) {
	var w struct {
		Type    string `json:"type"`
		Role    string `json:"role"`
		Content []struct {
			Type        string   `json:"type"`
			Text        *string  `json:"text"`
			ImageURL    string   `json:"image_url"`
			Detail      string   `json:"detail"`
			Annotations []string `json:"annotations"`
		} `json:"content"`
		CallID    string  `json:"call_id"`
		Name      string  `json:"name"`
		Arguments *string `json:"arguments"`
		Output    *string `json:"output"`
	}
	if err := sdkDecodeStrict(raw, &w); err != nil {
		return responses.ResponseInputItemUnionParam{}, err
	}
	switch w.Type {
	case "function_call":
		if w.Arguments == nil {
			return responses.ResponseInputItemUnionParam{}, errors.New("a function_call without arguments")
		}
		return responses.ResponseInputItemParamOfFunctionCall(*w.Arguments, w.CallID, w.Name), nil
	case "function_call_output":
		if w.Output == nil {
			return responses.ResponseInputItemUnionParam{}, errors.New("a function_call_output without output")
		}
		p := responses.ResponseInputItemParamOfFunctionCallOutput(*w.Output)
		p.OfFunctionCallOutput.CallID = openai.String(w.CallID)
		return p, nil
	case "message":
	default:
		return responses.ResponseInputItemUnionParam{}, fmt.Errorf("item type %q", w.Type)
	}
	if w.Role == "assistant" { // output_text parts: the SDK's output message, without the id and status the API gives its own
		var content []responses.ResponseOutputMessageContentUnionParam
		for j, c := range w.Content {
			if c.Type != "output_text" || c.Text == nil || c.Annotations == nil {
				return responses.ResponseInputItemUnionParam{}, fmt.Errorf("content[%d]: an assistant's part of type %q (want output_text, with annotations)", j, c.Type)
			}
			content = append(content, responses.ResponseOutputMessageContentUnionParam{OfOutputText: &responses.ResponseOutputTextParam{
				Text: *c.Text, Annotations: []responses.ResponseOutputTextAnnotationUnionParam{}}})
		}
		return responses.ResponseInputItemUnionParam{OfOutputMessage: &responses.ResponseOutputMessageParam{Content: content}}, nil
	}
	var content responses.ResponseInputMessageContentListParam
	for j, c := range w.Content {
		switch c.Type {
		case "input_text":
			if c.Text == nil {
				return responses.ResponseInputItemUnionParam{}, fmt.Errorf("content[%d]: input_text without text", j)
			}
			content = append(content, responses.ResponseInputContentParamOfInputText(*c.Text))
		case "input_image":
			content = append(content, responses.ResponseInputContentUnionParam{OfInputImage: &responses.ResponseInputImageParam{
				Detail: responses.ResponseInputImageDetail(c.Detail), ImageURL: openai.String(c.ImageURL)}})
		default:
			return responses.ResponseInputItemUnionParam{}, fmt.Errorf("content[%d]: a %s's part of type %q", j, w.Role, c.Type)
		}
	}
	p := responses.ResponseInputItemParamOfMessage(content, responses.EasyInputMessageRole(w.Role))
	p.OfMessage.Type = responses.EasyInputMessageTypeMessage
	return p, nil
}

// sdkResponsesRules checks the Responses API's rules: a message's role is user, system, developer or
// assistant, its content parts input_text/input_image (not the assistant's) or output_text (the
// assistant's alone), no text of white space, images with an https or data URL and a detail; every
// function_call has a call_id of its own and a name of ^[a-zA-Z0-9_-]{1,64}$, and one
// function_call_output of its call_id before the next message; function tools are flat, their
// parameters an object schema, strict said.
func sdkResponsesRules(res *assembler.Result) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if len(res.Input) == 0 && res.Instructions == "" {
		fail("nothing to send")
	}
	if len(res.Messages) > 0 || res.System != "" || res.Contents != nil {
		fail("fields of another format")
	}
	open, called := map[string]bool{}, map[string]bool{}
	for i, it := range res.Input {
		switch it.Type {
		case "message":
			if len(open) > 0 {
				fail("input[%d] is a message while the calls %v are unanswered", i, sdkKeys(open))
			}
			if !slices.Contains([]string{"user", "system", "developer", "assistant"}, it.Role) {
				fail("input[%d]: role %q", i, it.Role)
			}
			if len(it.Content) == 0 {
				fail("input[%d]: no content", i)
			}
			for j, c := range it.Content {
				switch {
				case c.Type == "output_text" && it.Role != "assistant", c.Type != "output_text" && it.Role == "assistant":
					fail("input[%d].content[%d]: %s in a %s message (the assistant's are output_text)", i, j, c.Type, it.Role)
				case c.Type == "input_text" || c.Type == "output_text":
					if strings.TrimSpace(c.Text) == "" {
						fail("input[%d].content[%d]: a text of white space", i, j)
					}
				case c.Type == "input_image":
					if it.Role != "user" || !(strings.HasPrefix(c.ImageURL, "https://") || strings.HasPrefix(c.ImageURL, "data:image/")) || !slices.Contains([]string{"low", "high", "auto"}, c.Detail) {
						fail("input[%d].content[%d]: an image the API does not take: %+v", i, j, c)
					}
				default:
					fail("input[%d].content[%d]: type %q", i, j, c.Type)
				}
			}
		case "function_call":
			if it.CallID == "" || called[it.CallID] || !sdkOpenAIToolName.MatchString(it.Name) {
				fail("input[%d]: a function_call with call_id %q and name %q", i, it.CallID, it.Name)
			}
			open[it.CallID], called[it.CallID] = true, true
		case "function_call_output":
			if !open[it.CallID] {
				fail("input[%d]: a function_call_output for %q answers no unanswered call", i, it.CallID)
			}
			delete(open, it.CallID)
		default:
			fail("input[%d]: type %q", i, it.Type)
		}
	}
	if len(open) > 0 {
		fail("the calls %v are never answered", sdkKeys(open))
	}
	for i, raw := range res.Tools {
		var tool struct {
			Type       string         `json:"type"`
			Name       string         `json:"name"`
			Parameters map[string]any `json:"parameters"`
			Strict     *bool          `json:"strict"`
		}
		if err := json.Unmarshal(raw, &tool); err != nil || tool.Type != "function" || !sdkOpenAIToolName.MatchString(tool.Name) || tool.Parameters["type"] != "object" || tool.Strict == nil {
			fail("tools[%d] %s: want a flat function tool", i, raw)
		}
	}
	return problems
}

// geminiSent sends contents with config through genai's client to a server of its own that stands in
// for the Gemini API (it answers with a text), and returns the body the server got.
func geminiSent(ctx context.Context, model string, contents []*genai.Content, config *genai.GenerateContentConfig) (map[string]any, error) {
	var mu sync.Mutex
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]},"finishReason":"STOP"}]}`)
	}))
	defer srv.Close()
	client, err := genai.NewClient(ctx, &genai.ClientConfig{APIKey: "test", Backend: genai.BackendGeminiAPI, HTTPClient: srv.Client(),
		HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL}})
	if err != nil {
		return nil, err
	}
	if _, err := client.Models.GenerateContent(ctx, model, contents, config); err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 {
		return nil, fmt.Errorf("the server got %d requests, want 1", len(bodies))
	}
	var body map[string]any
	err = json.Unmarshal(bodies[0], &body)
	return body, err
}

// sdkCheckGemini returns what is wrong with a gemini result: mismatches with what google.golang.org/genai
// sends, broken rules.
func sdkCheckGemini(res *assembler.Result) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if res.Format != assembler.FormatGemini {
		fail("format %q", res.Format)
	}
	ctx := context.Background()
	model := "gemini-2.5-flash"
	var raws []json.RawMessage
	for _, c := range res.Contents {
		b, err := json.Marshal(c)
		if err != nil {
			return []string{err.Error()}
		}
		raws = append(raws, b)
	}
	ours := map[string]any{"contents": sdkNormalizeGemini(sdkDecodeAll(raws)), "tools": sdkDecodeAll(res.Tools)}
	var si any
	if res.SystemInstruction != nil {
		b, _ := json.Marshal(res.SystemInstruction)
		_ = json.Unmarshal(b, &si)
	}
	compare := func(what string, body map[string]any) {
		for _, field := range []string{"contents", "tools"} {
			want, _ := ours[field].([]any)
			got, _ := body[field].([]any)
			if len(want) != len(got) {
				fail("%s: %d %s sent, we have %d", what, len(got), field, len(want))
				continue
			}
			for i := range want {
				if !sdkDeepEqual(want[i], got[i]) {
					w, _ := json.Marshal(want[i])
					g, _ := json.Marshal(got[i])
					fail("%s: %s[%d] differs\n    ours: %s\n    sdk:  %s", what, field, i, w, g)
				}
			}
		}
		got, _ := body["systemInstruction"].(map[string]any)
		if got != nil && got["role"] == "user" {
			delete(got, "role")
		}
		if !sdkDeepEqual(si, got) && !(si == nil && got == nil) {
			w, _ := json.Marshal(si)
			g, _ := json.Marshal(got)
			fail("%s: systemInstruction differs\n    ours: %s\n    sdk:  %s", what, w, g)
		}
	}

	// 1. Our JSON, unmarshalled into the SDK's types, sent by its client.
	var contents []*genai.Content
	for i, raw := range raws {
		var c genai.Content
		if err := sdkDecodeStrict(raw, &c); err != nil {
			fail("contents[%d]: the SDK cannot read %s: %v", i, raw, err)
		}
		contents = append(contents, &c)
	}
	config := &genai.GenerateContentConfig{}
	if res.SystemInstruction != nil {
		b, _ := json.Marshal(res.SystemInstruction)
		config.SystemInstruction = &genai.Content{}
		if err := sdkDecodeStrict(b, config.SystemInstruction); err != nil {
			fail("system_instruction: the SDK cannot read %s: %v", b, err)
		}
	}
	for i, raw := range res.Tools {
		var tool genai.Tool
		if err := sdkDecodeStrict(raw, &tool); err != nil || len(tool.FunctionDeclarations) == 0 {
			fail("tools[%d]: the SDK cannot read %s as function declarations: %v", i, raw, err)
		}
		config.Tools = append(config.Tools, &tool)
	}
	if len(problems) > 0 {
		return problems
	}
	body, err := geminiSent(ctx, model, contents, config)
	if err != nil {
		return append(problems, fmt.Sprintf("the SDK does not send it: %v", err))
	}
	compare("gemini (unmarshalled)", body)

	// 2. The same request, built with the SDK's constructors.
	built := &genai.GenerateContentConfig{}
	if res.SystemInstruction != nil {
		built.SystemInstruction = genai.NewContentFromText(res.SystemInstruction.Parts[0].Text, "")
	}
	for _, raw := range res.Tools {
		var w struct {
			Declarations []struct {
				Name        string         `json:"name"`
				Description string         `json:"description"`
				Schema      map[string]any `json:"parametersJsonSchema"`
			} `json:"functionDeclarations"`
		}
		if err := sdkDecodeStrict(raw, &w); err != nil {
			fail("tools %s: %v", raw, err)
			continue
		}
		tool := &genai.Tool{}
		for _, d := range w.Declarations {
			tool.FunctionDeclarations = append(tool.FunctionDeclarations, &genai.FunctionDeclaration{Name: d.Name, Description: d.Description, ParametersJsonSchema: d.Schema})
		}
		built.Tools = append(built.Tools, tool)
	}
	contents = nil
	for _, c := range res.Contents {
		var parts []*genai.Part
		for _, p := range c.Parts {
			switch {
			case p.FunctionCall != nil:
				var args map[string]any
				if err := json.Unmarshal(p.FunctionCall.Args, &args); err != nil {
					fail("functionCall args %s: %v", p.FunctionCall.Args, err)
				}
				part := genai.NewPartFromFunctionCall(p.FunctionCall.Name, args)
				part.FunctionCall.ID = p.FunctionCall.ID
				parts = append(parts, part)
			case p.FunctionResponse != nil:
				var response map[string]any
				if err := json.Unmarshal(p.FunctionResponse.Response, &response); err != nil {
					fail("functionResponse response %s: %v", p.FunctionResponse.Response, err)
				}
				part := genai.NewPartFromFunctionResponse(p.FunctionResponse.Name, response)
				part.FunctionResponse.ID = p.FunctionResponse.ID
				parts = append(parts, part)
			case p.InlineData != nil:
				var data []byte
				if err := json.Unmarshal([]byte(`"`+p.InlineData.Data+`"`), &data); err != nil {
					fail("inlineData: %v", err)
				}
				parts = append(parts, genai.NewPartFromBytes(data, p.InlineData.MIMEType))
			case p.FileData != nil:
				parts = append(parts, genai.NewPartFromURI(p.FileData.FileURI, p.FileData.MIMEType))
			default:
				parts = append(parts, genai.NewPartFromText(p.Text))
			}
		}
		contents = append(contents, genai.NewContentFromParts(parts, genai.Role(c.Role)))
	}
	if body, err = geminiSent(ctx, model, contents, built); err != nil {
		return append(problems, fmt.Sprintf("the SDK does not send the constructed request: %v", err))
	}
	compare("gemini (constructed)", body)

	// 3. generateContent's rules.
	return append(problems, sdkGeminiRules(res)...)
}

// sdkDeepEqual compares two decoded JSON values, as their JSON.
func sdkDeepEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// sdkNormalizeGemini drops a functionCall's empty args, as the SDK does (see the file comment).
func sdkNormalizeGemini(contents []any) []any {
	for _, c := range contents {
		obj, _ := c.(map[string]any)
		parts, _ := obj["parts"].([]any)
		for _, p := range parts {
			call, _ := p.(map[string]any)["functionCall"].(map[string]any)
			if args, ok := call["args"].(map[string]any); ok && len(args) == 0 {
				delete(call, "args")
			}
		}
	}
	return contents
}

// sdkGeminiRules checks generateContent's rules: contents of the roles user and model that alternate
// from the user's, each with parts, each part one datum; no text of white space; a functionCall is the
// model's, with an id of its own and a name of ^[a-zA-Z0-9_-]{1,64}$, and the next content is the user's,
// starting with one functionResponse per call, of its id and name, whose response is an object; images
// are the user's, with an image media type; the systemInstruction has no role and one text; one tool of
// functionDeclarations, each with an object schema.
func sdkGeminiRules(res *assembler.Result) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if len(res.Contents) == 0 {
		fail("no contents")
	}
	if len(res.Messages) > 0 || res.System != "" || res.Input != nil {
		fail("fields of another format")
	}
	if si := res.SystemInstruction; si != nil && (si.Role != "" || len(si.Parts) != 1 || strings.TrimSpace(si.Parts[0].Text) == "") {
		fail("systemInstruction %+v", si)
	}
	type call struct{ id, name string }
	var asked []call
	used := map[string]bool{}
	for i, c := range res.Contents {
		switch {
		case c.Role != "user" && c.Role != "model":
			fail("contents[%d]: role %q", i, c.Role)
		case i == 0 && c.Role != "user":
			fail("the first content is the %s's; it must be the user's", c.Role)
		case i > 0 && res.Contents[i-1].Role == c.Role:
			fail("contents[%d] and [%d] are both %s: roles must alternate", i-1, i, c.Role)
		}
		if len(c.Parts) == 0 {
			fail("contents[%d] has no parts", i)
		}
		var calls []call
		for j, p := range c.Parts {
			b, _ := json.Marshal(p)
			var wire map[string]any
			_ = json.Unmarshal(b, &wire)
			if len(wire) != 1 {
				fail("contents[%d].parts[%d] %s: not one datum", i, j, b)
			}
			switch {
			case p.FunctionResponse != nil:
				r := p.FunctionResponse
				var resp map[string]any
				if c.Role != "user" || j >= len(asked) || asked[j] != (call{r.ID, r.Name}) || json.Unmarshal(r.Response, &resp) != nil || resp == nil {
					fail("contents[%d].parts[%d]: a functionResponse %s that does not answer the call before it, first", i, j, b)
				}
			case p.FunctionCall != nil:
				f := p.FunctionCall
				var args map[string]any
				if c.Role != "model" || f.ID == "" || used[f.ID] || !sdkOpenAIToolName.MatchString(f.Name) || json.Unmarshal(f.Args, &args) != nil {
					fail("contents[%d].parts[%d]: a functionCall %s", i, j, b)
				}
				used[f.ID] = true
				calls = append(calls, call{f.ID, f.Name})
			case p.InlineData != nil || p.FileData != nil:
				mime := ""
				if p.InlineData != nil {
					mime = p.InlineData.MIMEType
				} else {
					mime = p.FileData.MIMEType
				}
				if c.Role != "user" || !strings.HasPrefix(mime, "image/") {
					fail("contents[%d].parts[%d]: an image %s", i, j, b)
				}
			default:
				if strings.TrimSpace(p.Text) == "" {
					fail("contents[%d].parts[%d]: a text of white space", i, j)
				}
			}
		}
		if len(asked) > 0 {
			n := 0
			for _, p := range c.Parts {
				if p.FunctionResponse != nil {
					n++
				}
			}
			if n != len(asked) {
				fail("contents[%d] has %d functionResponse parts for the %d calls before it", i, n, len(asked))
			}
		}
		asked = calls
	}
	if len(asked) > 0 {
		fail("the calls of the last content have no functionResponse")
	}
	if len(res.Tools) > 1 {
		fail("%d tools, want one of functionDeclarations", len(res.Tools))
	}
	for _, raw := range res.Tools {
		var tool struct {
			Declarations []struct {
				Name   string         `json:"name"`
				Schema map[string]any `json:"parametersJsonSchema"`
			} `json:"functionDeclarations"`
		}
		if err := json.Unmarshal(raw, &tool); err != nil || len(tool.Declarations) == 0 {
			fail("tools %s", raw)
		}
		for _, d := range tool.Declarations {
			if !sdkOpenAIToolName.MatchString(d.Name) || d.Schema["type"] != "object" {
				fail("tools %s: declaration %s", raw, d.Name)
			}
		}
	}
	return problems
}
