package assembler

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/tokenizer"
)

// gemini is the Gemini API's generateContent format (see Gemini).
type gemini struct{ markup }

func (gemini) Name() string { return FormatGemini }

func (gemini) prepare(a *assembly) error { return a.prepareMarkup() }

func (gemini) body(text string) string { return text }

// estimates marks the format whose counts are the estimator's, whatever the model: Gemini's tokenizer is
// not public (see newAssembly).
func (gemini) estimates() {}

// turnCost is the estimate of the message as the Messages API's would be (see anthropic.turnCost), which
// the rendering's count then verifies.
func (gemini) turnCost(a *assembly, msg *Message, content []tokenizer.Part) int {
	return anthropic{}.turnCost(a, msg, content)
}

// render lays the plan out as the Messages API's request is (see anthropic.render: turns that alternate,
// the context and the message in the last user turn, a tool's results first in the turn after its
// calls), counted as it is, and writes it as generateContent's: the system prompt is the
// systemInstruction, the assistant's turns are the model's, a text block a text part, an image its
// inlineData (its bytes) or its fileData (its URL), a tool_use a functionCall (its arguments, an object,
// as args) and a tool_result a functionResponse ({"output": the result}, the function's name and the
// call's id).
func (gemini) render(a *assembly, out *output) {
	renderMessages(a, out, FormatGemini)
	msgs := out.messages
	out.messages = nil
	if out.system != "" {
		out.systemInstruction = &GeminiContent{Parts: []GeminiPart{{Text: out.system}}}
		out.system = ""
	}
	names := map[string]string{} // the function of each call, by its id
	contents := make([]GeminiContent, 0, len(msgs))
	blocks := 0
	for i := range msgs {
		blocks += len(msgs[i].Blocks)
	}
	all := make([]GeminiPart, 0, blocks) // every content's parts, each content's a slice of its own
	for i := range msgs {
		m := &msgs[i]
		role := "user"
		if m.Role == "assistant" {
			role = "model"
		}
		parts := all[len(all) : len(all) : len(all)+len(m.Blocks)]
		for j := range m.Blocks {
			b := &m.Blocks[j]
			switch b.Type {
			case "text":
				parts = append(parts, GeminiPart{Text: b.Text})
			case "image":
				if b.Source.Type == "base64" {
					parts = append(parts, GeminiPart{InlineData: &GeminiBlob{MIMEType: b.Source.MediaType, Data: b.Source.Data}})
				} else {
					parts = append(parts, GeminiPart{FileData: &GeminiFileData{MIMEType: a.urlTypes[b.Source.URL], FileURI: b.Source.URL}})
				}
			case "tool_use":
				names[b.ID] = b.Name
				parts = append(parts, GeminiPart{FunctionCall: &GeminiFunctionCall{ID: b.ID, Name: b.Name, Args: b.Input}})
			case "tool_result":
				name := names[b.ToolUseID]
				out.addText(RegionHistory, name)
				response, _ := marshalRaw(map[string]string{"output": b.Content})
				parts = append(parts, GeminiPart{FunctionResponse: &GeminiFunctionResponse{ID: b.ToolUseID, Name: name, Response: response}})
			}
		}
		all = all[:len(all)+len(parts)]
		contents = append(contents, GeminiContent{Role: role, Parts: parts[:len(parts):len(parts)]})
	}
	out.contents = contents
}

// check holds the request to generateContent's rules (https://ai.google.dev/api/generate-content; the
// guide "Function calling"; the quoted texts are the API's answers to a request that breaks them):
//
//   - contents has at least one content (ErrNoMessages): the systemInstruction is not one;
//   - a content's role is user or model, the first the user's, and they alternate ("Please ensure that
//     multiturn requests alternate between user and model");
//   - a content has parts, and each part one datum: a text that is not white space, an inlineData with
//     its mimeType and data, a fileData with its mimeType and fileUri, a functionCall or a
//     functionResponse; images are the user's;
//   - a functionCall is the model's, its name loom.CheckToolName's, its id its own; the turn after it is
//     the user's and starts with one functionResponse per call, of the call's id and name ("Please ensure
//     that the number of function response parts is equal to the number of function call parts of the
//     function call turn"), and a functionResponse answers a call of the turn before;
//   - a tool's name is loom.CheckToolName's.
//
// The rendering keeps each of them by construction; check proves it on every output.
func (gemini) check(a *assembly, out *output) error {
	if si := out.systemInstruction; si != nil && (len(si.Parts) != 1 || loom.IsBlank(si.Parts[0].Text)) {
		return fmt.Errorf("%w: gemini: a systemInstruction of white space", ErrProviderRule)
	}
	if len(out.contents) == 0 {
		return fmt.Errorf("%w: gemini: there is no message, context or history within the budget to send (the instructions are the systemInstruction, not a content)", ErrNoMessages)
	}
	for i, t := range a.req.Tools {
		if err := loom.CheckToolName(t.Function.Name); err != nil {
			return fmt.Errorf("%w: gemini: tools[%d]: %w", ErrProviderRule, i, err)
		}
	}
	type call struct{ id, name string }
	var asked, calls []call // the function calls of the content before, and of this one
	used := map[string]bool{}
	for i := range out.contents {
		c := &out.contents[i]
		switch {
		case c.Role != "user" && c.Role != "model":
			return fmt.Errorf("%w: gemini: contents[%d] has the role %q", ErrProviderRule, i, c.Role)
		case i == 0 && c.Role != "user":
			return fmt.Errorf("%w: a Gemini conversation starts with the user, and this one starts with the model", ErrNoUserTurn)
		case i > 0 && out.contents[i-1].Role == c.Role:
			return fmt.Errorf("%w: gemini: contents[%d] and [%d] are both the %s's", ErrProviderRule, i-1, i, c.Role)
		case len(c.Parts) == 0:
			return fmt.Errorf("%w: gemini: contents[%d] has no parts", ErrProviderRule, i)
		}
		calls = calls[:0]
		responses := true // the functionResponse parts come first
		for j := range c.Parts {
			p := &c.Parts[j]
			data := 0
			for _, set := range []bool{p.Text != "", p.InlineData != nil, p.FileData != nil, p.FunctionCall != nil, p.FunctionResponse != nil} {
				if set {
					data++
				}
			}
			bad := data != 1
			switch {
			case bad:
			case p.FunctionResponse != nil:
				r := p.FunctionResponse
				k := slices.Index(asked, call{r.ID, r.Name})
				bad = c.Role != "user" || !responses || k < 0 || !jsonObject(r.Response)
				if !bad {
					asked = slices.Delete(asked, k, k+1)
				}
			case p.FunctionCall != nil:
				f := p.FunctionCall
				bad = c.Role != "model" || f.ID == "" || used[f.ID] || loom.CheckToolName(f.Name) != nil || !jsonObject(f.Args)
				used[f.ID] = true
				calls = append(calls, call{f.ID, f.Name})
				responses = false
			case p.Text != "":
				bad = loom.IsBlank(p.Text)
				responses = false
			case p.InlineData != nil:
				bad = c.Role != "user" || p.InlineData.MIMEType == "" || p.InlineData.Data == ""
				responses = false
			case p.FileData != nil:
				if p.FileData.MIMEType == "" {
					return fmt.Errorf("%w: gemini: contents[%d].parts[%d] is an image by URL whose media type is not known (give the image's media_type): generateContent needs it",
						ErrProviderRule, i, j)
				}
				bad = c.Role != "user" || p.FileData.FileURI == ""
				responses = false
			}
			if bad {
				return fmt.Errorf("%w: gemini: contents[%d].parts[%d] is not a part the API takes there", ErrProviderRule, i, j)
			}
		}
		if len(asked) > 0 {
			return fmt.Errorf("%w: gemini: the function call %q of contents[%d] has no functionResponse right after it", ErrProviderRule, asked[0].id, i-1)
		}
		asked, calls = calls, asked
	}
	if len(asked) > 0 {
		return fmt.Errorf("%w: gemini: the function call %q of the last content has no functionResponse after it", ErrProviderRule, asked[0].id)
	}
	return nil
}

// geminiTools is the tool definitions as generateContent takes them: one tool of functionDeclarations,
// each with its name, description and parameters, a JSON schema (parametersJsonSchema, which takes the
// schemas Chat Completions takes; an empty object's when it has none).
func geminiTools(tools []Tool) renderedTools {
	if len(tools) == 0 {
		return renderedTools{}
	}
	type declaration struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parametersJsonSchema"`
	}
	decls := make([]declaration, len(tools))
	for i, t := range tools {
		schema := t.Function.Parameters
		if len(schema) == 0 {
			schema = []byte(`{"properties":{},"type":"object"}`)
		}
		decls[i] = declaration{t.Function.Name, t.Function.Description, schema}
	}
	b, _ := marshalRaw(struct {
		Declarations []declaration `json:"functionDeclarations"`
	}{decls})
	return renderedTools{text: "[" + string(b) + "]", raw: []json.RawMessage{b}}
}

// GeminiContent is a content of a generateContent request: its role ("user" or "model"; none for the
// systemInstruction) and its parts.
type GeminiContent struct {
	Role  string       `json:"role,omitempty"`
	Parts []GeminiPart `json:"parts"`
}

// GeminiPart is a part of a Gemini content: one of a text, an image's bytes (InlineData), an image by its
// URL (FileData), a function call or a function's response.
type GeminiPart struct {
	Text             string                  `json:"text,omitempty"`
	InlineData       *GeminiBlob             `json:"inlineData,omitempty"`
	FileData         *GeminiFileData         `json:"fileData,omitempty"`
	FunctionCall     *GeminiFunctionCall     `json:"functionCall,omitempty"`
	FunctionResponse *GeminiFunctionResponse `json:"functionResponse,omitempty"`
}

// GeminiBlob is an image's bytes, base64, and its media type.
type GeminiBlob struct {
	MIMEType string `json:"mimeType"`
	Data     string `json:"data"`
}

// GeminiFileData is an image by its URL, and its media type.
type GeminiFileData struct {
	MIMEType string `json:"mimeType,omitempty"`
	FileURI  string `json:"fileUri"`
}

// GeminiFunctionCall is the model's call of a function: its id, name and arguments (a JSON object: the
// call's arguments, or {"arguments": the text} for arguments that are not one, as the anthropic format
// writes them).
type GeminiFunctionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// GeminiFunctionResponse is a function's result: the call's id, the function's name and the response, a
// JSON object whose "output" is the result.
type GeminiFunctionResponse struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}
