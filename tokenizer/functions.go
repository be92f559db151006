package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/context-loom/loom"
)

// RenderFunctions returns tool definitions as OpenAI's chat models read them, a TypeScript-like namespace
// of function types, as public projects have reconstructed it from the API's token counts:
//
//	namespace functions {
//
//	// Get the current weather in a given location
//	type get_current_weather = (_: {
//	// The city and state, e.g. San Francisco, CA
//	location: string,
//	unit?: "celsius" | "fahrenheit",
//	}) => any;
//
//	} // namespace functions
//
// Each function is its description as a comment (none if it is empty) and its type: () => any without
// parameters, or an object of its parameters' properties in the order of the schema, each "name: type,"
// ("name?:" if it is not required), its description in a comment above it at the top level only. Types
// are string, number (for number and integer), boolean, null, a union of an enum's strings ("a" | "b"),
// an object in braces (its properties indented two spaces more, its closing brace at the line's start),
// an array as its items' type and [], and anyOf as the union of its schemas. Keywords that do not change
// the rendering (additionalProperties, const, a top-level description, strict) are left out.
//
// unknown holds the JSON of each part of a schema whose rendering is not known (other keywords, a
// missing type, a type array, an enum of numbers, an array without items, parameters that are not an
// object): RenderFunctions writes such a part as well as it can ("any" for a type it cannot write), and a
// caller that must not count less than the provider counts unknown on top (see
// [ToolRule.DefinitionTokens]).
func RenderFunctions(tools []loom.Tool) (text string, unknown []string) {
	r := renderer{}
	r.b.WriteString("namespace functions {\n\n")
	for _, t := range tools {
		r.function(t.Function)
	}
	r.b.WriteString("} // namespace functions")
	return r.b.String(), r.unknown
}

// MaxSchemaDepth is the deepest nesting of objects and arrays that a tool's parameters may have (see
// [CheckSchemaDepth]): [RenderFunctions] indents each nested object two spaces more, so that its text grows
// with the square of the depth, and a body of a few hundred kilobytes nested as deep as JSON allows would
// render as tens of megabytes. 64 levels is room for 30 of nested object schemas; OpenAI's structured
// outputs take 10.
const MaxSchemaDepth = 64

// CheckSchemaDepth returns an error wrapping ErrSchemaDepth if params, a JSON text, nests objects and
// arrays deeper than MaxSchemaDepth. It reads params once and does not check that it is JSON.
func CheckSchemaDepth(params []byte) error {
	depth, most, inString := 0, 0, false
	for i := 0; i < len(params); i++ {
		c := params[i]
		switch {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			most = max(most, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	if most > MaxSchemaDepth {
		return fmt.Errorf("%w: %d levels of objects and arrays (at most %d)", ErrSchemaDepth, most, MaxSchemaDepth)
	}
	return nil
}

type renderer struct {
	b       strings.Builder
	unknown []string
}

// function writes one function's type and the blank line after it.
func (r *renderer) function(f loom.ToolFunction) {
	if f.Description != "" {
		r.b.WriteString("// " + f.Description + "\n")
	}
	var params *jsonValue
	if len(bytes.TrimSpace(f.Parameters)) > 0 {
		v, err := parseJSON(f.Parameters)
		if err != nil || v.kind != '{' {
			r.unknown = append(r.unknown, string(f.Parameters))
		} else {
			params = v
			r.unknownKeys(v, "type", "properties", "required", "additionalProperties", "description")
		}
	}
	props := params.get("properties")
	if props == nil || props.kind != '{' || len(props.keys) == 0 {
		r.b.WriteString("type " + f.Name + " = () => any;\n\n")
		return
	}
	r.b.WriteString("type " + f.Name + " = (_: {\n")
	r.properties(params, 0)
	r.b.WriteString("\n}) => any;\n\n")
}

// properties writes an object schema's properties, each on its lines, indented by indent spaces, without
// a line break after the last.
func (r *renderer) properties(obj *jsonValue, indent int) {
	props := obj.get("properties")
	if props == nil || props.kind != '{' {
		return
	}
	required := obj.get("required")
	pad := strings.Repeat(" ", indent)
	for i, name := range props.keys {
		if i > 0 {
			r.b.WriteByte('\n')
		}
		p := props.vals[i]
		if d := p.get("description"); d != nil && d.kind == '"' && d.str != "" && indent < 2 {
			r.b.WriteString(pad + "// " + d.str + "\n")
		}
		r.b.WriteString(pad + name)
		if !required.hasString(name) {
			r.b.WriteByte('?')
		}
		r.b.WriteString(": ")
		r.typ(p, indent)
		r.b.WriteByte(',')
	}
}

// typ writes the type of a property's schema p, which is at indent.
func (r *renderer) typ(p *jsonValue, indent int) {
	if p.kind != '{' {
		r.unknown = append(r.unknown, p.json())
		r.b.WriteString("any")
		return
	}
	if anyOf := p.get("anyOf"); anyOf != nil && anyOf.kind == '[' && len(anyOf.vals) > 0 {
		r.unknownKeys(p, "anyOf", "description")
		for i, v := range anyOf.vals {
			if i > 0 {
				r.b.WriteString(" | ")
			}
			r.typ(v, indent)
		}
		return
	}
	t := p.get("type")
	if t == nil || t.kind != '"' {
		r.unknown = append(r.unknown, p.json()) // no type, or a list of types
		r.b.WriteString("any")
		return
	}
	switch t.str {
	case "string":
		r.unknownKeys(p, "type", "description", "enum", "const")
		if e := p.get("enum"); e != nil && e.kind == '[' && len(e.vals) > 0 {
			for i, v := range e.vals {
				if i > 0 {
					r.b.WriteString(" | ")
				}
				r.b.WriteString(`"` + v.text() + `"`)
			}
			return
		}
		r.b.WriteString("string")
	case "number", "integer":
		r.unknownKeys(p, "type", "description")
		if e := p.get("enum"); e != nil && e.kind == '[' && len(e.vals) > 0 {
			for i, v := range e.vals {
				if i > 0 {
					r.b.WriteString(" | ")
				}
				r.b.WriteString(v.text())
			}
			return
		}
		r.b.WriteString("number")
	case "boolean", "null":
		r.unknownKeys(p, "type", "description")
		r.b.WriteString(t.str)
	case "object":
		r.unknownKeys(p, "type", "description", "properties", "required", "additionalProperties")
		r.b.WriteString("{\n")
		r.properties(p, indent+2)
		r.b.WriteString("\n}")
	case "array":
		r.unknownKeys(p, "type", "description", "items")
		items := p.get("items")
		if items == nil {
			r.unknown = append(r.unknown, p.json())
			r.b.WriteString("any[]")
			return
		}
		r.typ(items, indent)
		r.b.WriteString("[]")
	default:
		r.unknown = append(r.unknown, p.json())
		r.b.WriteString("any")
	}
}

// unknownKeys adds to r.unknown each member of object v whose key is not among known, as its JSON.
func (r *renderer) unknownKeys(v *jsonValue, known ...string) {
	for i, k := range v.keys {
		if !slices.Contains(known, k) {
			key, _ := json.Marshal(k)
			r.unknown = append(r.unknown, string(key)+":"+v.vals[i].json())
		}
	}
}

// jsonValue is a parsed JSON value that keeps the order of an object's members, which the rendering
// follows.
type jsonValue struct {
	kind byte   // '{', '[', '"' (string), '0' (number), 't' (true or false), 'n' (null)
	str  string // a string's value
	raw  string // a scalar's JSON (an object's or array's is made when asked for: see json)
	keys []string
	vals []*jsonValue // an object's values (by keys) or an array's elements
}

// get returns the value of an object's member key, or nil (v may be nil).
func (v *jsonValue) get(key string) *jsonValue {
	if v == nil || v.kind != '{' {
		return nil
	}
	if i := slices.Index(v.keys, key); i >= 0 {
		return v.vals[i]
	}
	return nil
}

// hasString reports whether v is an array that holds the string s.
func (v *jsonValue) hasString(s string) bool {
	if v == nil || v.kind != '[' {
		return false
	}
	for _, e := range v.vals {
		if e.kind == '"' && e.str == s {
			return true
		}
	}
	return false
}

// text is an enum value as a TypeScript literal's inside: a string's value, or the JSON of another value.
func (v *jsonValue) text() string {
	if v.kind == '"' {
		return v.str
	}
	return v.json()
}

// parseJSON parses one JSON value.
func parseJSON(data []byte) (*jsonValue, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("tokenizer: trailing data after a JSON value")
	}
	return v, nil
}

func parseValue(dec *json.Decoder) (*jsonValue, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		v := &jsonValue{kind: byte(t)}
		for dec.More() {
			if t == '{' {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v.keys = append(v.keys, k.(string))
			}
			e, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			v.vals = append(v.vals, e)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return v, nil
	case string:
		b, _ := marshalString(t)
		return &jsonValue{kind: '"', str: t, raw: b}, nil
	case json.Number:
		return &jsonValue{kind: '0', raw: t.String()}, nil
	case bool:
		if t {
			return &jsonValue{kind: 't', raw: "true"}, nil
		}
		return &jsonValue{kind: 't', raw: "false"}, nil
	default:
		return &jsonValue{kind: 'n', raw: "null"}, nil
	}
}

// json is v's JSON, compact. An object's or array's is written from its members' when asked for, not kept
// at parse time: kept, every level of a nested schema would hold a copy of all below it, which costs the
// square of the nesting depth. The renderer asks only for the parts it does not know, which never nest.
func (v *jsonValue) json() string {
	if v.kind != '{' && v.kind != '[' {
		return v.raw
	}
	var b strings.Builder
	v.writeJSON(&b)
	return b.String()
}

func (v *jsonValue) writeJSON(b *strings.Builder) {
	if v.kind != '{' && v.kind != '[' {
		b.WriteString(v.raw)
		return
	}
	b.WriteByte(v.kind)
	for i, e := range v.vals {
		if i > 0 {
			b.WriteByte(',')
		}
		if v.kind == '{' {
			k, _ := marshalString(v.keys[i])
			b.WriteString(k + ":")
		}
		e.writeJSON(b)
	}
	if v.kind == '{' {
		b.WriteByte('}')
	} else {
		b.WriteByte(']')
	}
}

// marshalString is s as a JSON string, without escaping <, > and &.
func marshalString(s string) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}
