package assembler

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/context-loom/loom/tokenizer"
)

// toolSet is a request's tool definitions, rendered and counted once for all the assemblies that send the
// same set: an agent sends its tools with every turn, and rendering and counting them again each time
// would cost more than the rest of an assembly. Every format renders the set's canonical form
// (canonicalTools), so that equal sets give equal bytes however the request orders them and spells their
// schemas. A set is identified by the SHA-256 of its canonical JSON (the Chat Completions array, compact),
// which Result.PrefixHash holds; it is found by a fingerprint of the definitions as given (toolsHash) and
// told from the other sets of that fingerprint by comparing the definitions themselves, so that no
// collision can give a set another's counts. It is immutable but for its counts, which are added under mu.
type toolSet struct {
	tools     []Tool // a copy of the definitions as given, which a lookup compares
	canonical []Tool // the definitions as every format renders them (see canonicalTools)
	openai    renderedTools
	id        string // hex SHA-256 of openai.text: what Result.PrefixHash holds of the tools

	anthropicOnce sync.Once
	anthropic     renderedTools
	responsesOnce sync.Once
	responses     renderedTools
	geminiOnce    sync.Once
	gemini        renderedTools
	schemaOnce    sync.Once
	schemaErr     error // of checkInputSchemas

	mu     sync.Mutex
	counts map[toolCountKey]toolCount
	items  map[toolCountKey][]int // each tool's count alone, for the report (see toolItemTokens)
}

// toolCountKey names a count of a set: of a rendering (the function namespace, or a format's JSON) with
// the counter of an encoding ("" for the estimator).
type toolCountKey struct {
	render   string
	encoding string
}

// toolCount is a count of a set's definitions, and whether the rendering counted is the provider's
// (every part of every schema known; never for a JSON text, which no provider bills as it is).
type toolCount struct {
	n     int
	known bool
}

// toolSets is the cache of tool sets: one of its own for each cache scope (Request.CacheScope: the
// tenant's and the agent's in the engine), by the fast hash of their definitions. A set is never shared
// between scopes, so that no tenant can learn whether another sends a set, by a lookup's speed or by the
// set's counts: a scope that sends a set another has sent makes its own. A scope holds at most
// maxScopeToolSets sets of maxScopeToolSetBytes; when a set would not fit, the scope starts again empty,
// and a set larger than all of it is not kept. The cache holds at most maxToolSets sets of
// maxToolSetBytes in all; when a set would not fit, the scope holding the most bytes is dropped whole
// (what another scope can tell from that is only that someone filled the cache, never which tools).
var toolSets = struct {
	sync.RWMutex
	scopes map[string]*toolScope
	n      int
	bytes  int
}{scopes: map[string]*toolScope{}}

// toolScope is the sets of one cache scope (see toolSets).
type toolScope struct {
	sets  map[uint64][]*toolSet
	n     int
	bytes int
}

// maxToolSets and maxToolSetBytes bound the cache, maxScopeToolSets and maxScopeToolSetBytes one scope's
// share of it, and maxToolSetsPerKey the sets a lookup may compare. The bytes are bounded too, as a
// request's tools may be as large as its body: a thousand large sets from one client would otherwise be
// kept.
const (
	maxToolSets, maxToolSetBytes, maxToolSetsPerKey = 1024, 64 << 20, 8
	maxScopeToolSets, maxScopeToolSetBytes          = 256, maxToolSetBytes / 4
)

// cachedToolSet returns the set of tools of the cache scope (see toolSets), from the cache or made and
// added; nil for no tools. A set is checked when it is made: a tool's name must be one providers accept
// (CheckToolName) and its parameters, if any, JSON nested no deeper than tokenizer.MaxSchemaDepth, or
// cachedToolSet returns an error wrapping ErrInvalidRequest.
func cachedToolSet(scope string, tools []Tool) (*toolSet, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	key := toolsHash(tools)
	toolSets.RLock()
	if sc := toolSets.scopes[scope]; sc != nil {
		for _, s := range sc.sets[key] {
			if sameTools(s.tools, tools) {
				toolSets.RUnlock()
				return s, nil
			}
		}
	}
	toolSets.RUnlock()

	for i, t := range tools {
		if err := CheckToolName(t.Function.Name); err != nil {
			return nil, fmt.Errorf("tools[%d]: %w", i, err)
		}
		if len(t.Function.Parameters) > 0 && !json.Valid(t.Function.Parameters) {
			return nil, fmt.Errorf("%w: tools[%d] parameters are not JSON", ErrInvalidRequest, i)
		}
		if err := tokenizer.CheckSchemaDepth(t.Function.Parameters); err != nil {
			return nil, fmt.Errorf("tools[%d] parameters: %w", i, invalidRequest(err))
		}
	}
	s := newToolSet(tools)
	size := s.size()
	if size > maxScopeToolSetBytes {
		return s, nil
	}
	toolSets.Lock()
	defer toolSets.Unlock()
	sc := toolSets.scopes[scope]
	if sc != nil {
		for _, other := range sc.sets[key] { // made meanwhile by another assembly
			if sameTools(other.tools, tools) {
				return other, nil
			}
		}
		if sc.n >= maxScopeToolSets || sc.bytes+size > maxScopeToolSetBytes || len(sc.sets[key]) >= maxToolSetsPerKey {
			toolSets.n, toolSets.bytes = toolSets.n-sc.n, toolSets.bytes-sc.bytes
			sc = nil
		}
	}
	if sc == nil {
		sc = &toolScope{sets: map[uint64][]*toolSet{}}
		toolSets.scopes[scope] = sc
	}
	for toolSets.n >= maxToolSets || toolSets.bytes+size > maxToolSetBytes {
		var largest string
		var drop *toolScope
		for name, other := range toolSets.scopes {
			if drop == nil || other.bytes > drop.bytes {
				largest, drop = name, other
			}
		}
		toolSets.n, toolSets.bytes = toolSets.n-drop.n, toolSets.bytes-drop.bytes
		if drop == sc {
			sc.sets, sc.n, sc.bytes = map[uint64][]*toolSet{}, 0, 0
			continue
		}
		delete(toolSets.scopes, largest)
	}
	sc.sets[key] = append(sc.sets[key], s)
	sc.n++
	sc.bytes += size
	toolSets.n++
	toolSets.bytes += size
	return s, nil
}

// size is about what the set keeps in memory: its definitions (a copy, and the canonical one), their
// rendering, and the renderings in the other shapes it may make.
func (s *toolSet) size() int {
	n := 0
	for _, t := range s.tools {
		n += len(t.Type) + len(t.Function.Name) + len(t.Function.Description) + len(t.Function.Parameters)
	}
	return 6*n + len(s.openai.text)
}

func newToolSet(tools []Tool) *toolSet {
	s := &toolSet{tools: make([]Tool, len(tools)), counts: map[toolCountKey]toolCount{}}
	for i, t := range tools {
		t.Function.Parameters = bytes.Clone(t.Function.Parameters)
		if t.Function.Strict != nil {
			strict := *t.Function.Strict
			t.Function.Strict = &strict
		}
		s.tools[i] = t
	}
	s.canonical = canonicalTools(s.tools)
	s.openai = renderTools(s.canonical, openAITool)
	sum := sha256.Sum256([]byte(s.openai.text))
	s.id = hex.EncodeToString(sum[:])
	return s
}

// toolsHash is the fingerprint that finds a set: FNV-1a of the definitions' names and of the lengths of
// their other fields. It leaves their bytes to sameTools, which compares them whole, so that a lookup
// reads them once.
func toolsHash(tools []Tool) uint64 {
	const prime = 0x100000001b3
	h := uint64(0xcbf29ce484222325)
	for _, t := range tools {
		for i := 0; i < len(t.Function.Name); i++ {
			h = (h ^ uint64(t.Function.Name[i])) * prime
		}
		for _, n := range [...]int{len(t.Type), len(t.Function.Description), len(t.Function.Parameters)} {
			h = (h ^ uint64(n)) * prime
		}
	}
	return h
}

// sameTools reports whether two lists of definitions are the same, field by field.
func sameTools(a, b []Tool) bool {
	return slices.EqualFunc(a, b, func(x, y Tool) bool {
		fx, fy := x.Function, y.Function
		return x.Type == y.Type && fx.Name == fy.Name && fx.Description == fy.Description &&
			bytes.Equal(fx.Parameters, fy.Parameters) &&
			(fx.Strict == nil) == (fy.Strict == nil) && (fx.Strict == nil || *fx.Strict == *fy.Strict)
	})
}

// checkInputSchemas returns an error wrapping ErrInvalidRequest unless every tool's parameters are none
// (sent as an empty object schema) or a JSON object whose "type" is "object": the Messages API takes no
// other input_schema. It checks a set once; nil for no tools (s nil).
func (s *toolSet) checkInputSchemas() error {
	if s == nil {
		return nil
	}
	s.schemaOnce.Do(func() {
		for _, t := range s.canonical {
			if len(t.Function.Parameters) == 0 {
				continue
			}
			var schema map[string]json.RawMessage
			var typ string
			if json.Unmarshal(t.Function.Parameters, &schema) != nil {
				s.schemaErr = fmt.Errorf("%w: anthropic: tool %q: its parameters (input_schema) are not a JSON object", ErrInvalidRequest, t.Function.Name)
				return
			}
			if json.Unmarshal(schema["type"], &typ) != nil || typ != "object" {
				s.schemaErr = fmt.Errorf("%w: anthropic: tool %q: its parameters (input_schema) must have \"type\":\"object\"", ErrInvalidRequest, t.Function.Name)
				return
			}
		}
	})
	return s.schemaErr
}

// anthropicTools returns the set in the Messages API's shape.
func (s *toolSet) anthropicTools() renderedTools {
	s.anthropicOnce.Do(func() { s.anthropic = renderTools(s.canonical, anthropicTool) })
	return s.anthropic
}

// toolTokens is what the tools' definitions cost the assembly rendered as render: the function namespace
// of the model's tool rule ("namespace"), or the JSON text of a format's shape (text, by render), the
// rule's overheads aside. The count is cached in the set when the assembly counts with its model's own
// counter (a test may meter with another).
func (a *assembly) toolTokens(render, text string) toolCount {
	key := toolCountKey{render: render}
	switch c := a.m.Counter().(type) {
	case *tokenizer.Encoding:
		key.encoding = c.Name()
	case tokenizer.Estimator:
	default:
		return a.countTools(render, text)
	}
	s := a.tools
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.counts[key]
	if !ok {
		c = a.countTools(render, text)
		s.counts[key] = c
	}
	return c
}

// toolItemTokens is what each of the request's tools costs alone, in the order they are rendered: its
// definition in the function namespace when the model's tool rule reads tools so, else its JSON as Chat
// Completions takes it (the report's RegionReport.IncludedTokens). The counts are cached in the set as
// toolTokens caches the set's.
func (a *assembly) toolItemTokens() []int {
	s := a.tools
	if s == nil {
		return []int{}
	}
	rule := a.model.Tools
	count := func() []int {
		n := make([]int, len(s.canonical))
		for i := range s.canonical {
			if rule.Namespace {
				n[i], _ = rule.DefinitionTokens(a.m, s.canonical[i:i+1])
			} else {
				n[i] = a.m.Count(string(s.openai.raw[i]))
			}
		}
		return n
	}
	key := toolCountKey{render: "json"}
	if rule.Namespace {
		key.render = "namespace"
	}
	switch c := a.m.Counter().(type) {
	case *tokenizer.Encoding:
		key.encoding = c.Name()
	case tokenizer.Estimator:
	default:
		return count()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.items[key]
	if !ok {
		n = count()
		if s.items == nil {
			s.items = map[toolCountKey][]int{}
		}
		s.items[key] = n
	}
	return slices.Clone(n) // the result's own: a caller may change it
}

// countTools counts the tools' definitions (see toolTokens).
func (a *assembly) countTools(render, text string) toolCount {
	if render != "namespace" {
		return toolCount{a.m.Count(text), false}
	}
	rule := a.model.Tools
	rule.Exact = true // for whether the rendering of every schema is known
	n, known := rule.DefinitionTokens(a.m, a.tools.canonical)
	return toolCount{n, known}
}

// prefixID is what Result.PrefixHash holds of the set: its id, or "" for no tools (s nil).
func (s *toolSet) prefixID() string {
	if s == nil {
		return ""
	}
	return s.id
}

// rendered returns the set in a format's shape (openai, anthropic, responses or gemini), each made once;
// none for no tools (s nil).
func (s *toolSet) rendered(shape string) renderedTools {
	switch {
	case s == nil:
		return renderedTools{}
	case shape == FormatAnthropic:
		return s.anthropicTools()
	case shape == FormatResponses:
		s.responsesOnce.Do(func() { s.responses = renderTools(s.canonical, responsesTool) })
		return s.responses
	case shape == FormatGemini:
		s.geminiOnce.Do(func() { s.gemini = geminiTools(s.canonical) })
		return s.gemini
	}
	return s.openai
}

// canonicalTools returns the definitions as every format renders them: sorted by name (then by their
// canonical JSON, for two of one name), each one's parameters written as canonical JSON (see
// canonicalJSON) and its type "function" when it has none. A prompt cache matches bytes: a client that
// lists its tools in another order from one call to the next, or writes a schema's keys in another order
// (as a hash map does), would otherwise miss it. tools are valid (see cachedToolSet).
func canonicalTools(tools []Tool) []Tool {
	type keyed struct {
		t   Tool
		key string // its JSON, canonical
	}
	all := make([]keyed, len(tools))
	for i, t := range tools {
		if t.Type == "" {
			t.Type = "function"
		}
		if len(t.Function.Parameters) > 0 {
			t.Function.Parameters = canonicalJSON(t.Function.Parameters)
		}
		b, _ := marshalRaw(t)
		all[i] = keyed{t, string(b)}
	}
	slices.SortStableFunc(all, func(x, y keyed) int {
		if c := strings.Compare(x.t.Function.Name, y.t.Function.Name); c != 0 {
			return c
		}
		return strings.Compare(x.key, y.key)
	})
	out := make([]Tool, len(all))
	for i, k := range all {
		out[i] = k.t
	}
	return out
}

// canonicalJSON returns raw, valid JSON, written canonically: compact, numbers as they are spelled,
// strings escaped as marshalRaw escapes them (no HTML escapes), and every object's keys sorted (by their
// bytes) but for a schema's "properties": their order is meaning, not spelling (a model writes a strict
// tool's arguments in it, and OpenAI's rendering lists them in it), so it is kept. Two texts of one
// schema but for spacing, the order of other keys and string escapes give the same bytes. An object with
// a key twice keeps the last, as encoding/json reads it (in a "properties" object, where the last was).
func canonicalJSON(raw json.RawMessage) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b bytes.Buffer
	if err := writeCanonical(&b, dec, false); err != nil {
		return raw
	}
	if _, err := dec.Token(); err != io.EOF {
		return raw // more after the value: not one JSON value
	}
	return b.Bytes()
}

// writeCanonical writes the next JSON value of dec to b, canonically (see canonicalJSON). keepOrder says
// the value, if an object, is a schema's "properties", whose keys keep their order.
func writeCanonical(b *bytes.Buffer, dec *json.Decoder, keepOrder bool) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok := tok.(type) {
	case json.Delim:
		switch tok {
		case '[':
			b.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					b.WriteByte(',')
				}
				if err := writeCanonical(b, dec, false); err != nil {
					return err
				}
			}
			b.WriteByte(']')
		case '{':
			type member struct {
				key, value string
				dead       bool // the key is there again, later
			}
			var members []member
			at := map[string]int{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				key, _ := kt.(string)
				var v bytes.Buffer
				// The value of the keyword "properties" keeps its order; within it, a key is a property's
				// name, whatever it is, and its value a schema, where "properties" is the keyword again.
				if err := writeCanonical(&v, dec, key == "properties" && !keepOrder); err != nil {
					return err
				}
				if i, ok := at[key]; ok {
					members[i].dead = true
				}
				at[key] = len(members)
				members = append(members, member{key: key, value: v.String()})
			}
			members = slices.DeleteFunc(members, func(m member) bool { return m.dead })
			if !keepOrder {
				slices.SortFunc(members, func(x, y member) int { return strings.Compare(x.key, y.key) })
			}
			b.WriteByte('{')
			for i, m := range members {
				if i > 0 {
					b.WriteByte(',')
				}
				k, _ := marshalRaw(m.key)
				b.Write(k)
				b.WriteByte(':')
				b.WriteString(m.value)
			}
			b.WriteByte('}')
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return err
		}
	default:
		v, err := marshalRaw(tok) // a string, a json.Number as spelled, a bool or nil
		if err != nil {
			return err
		}
		b.Write(v)
	}
	return nil
}
