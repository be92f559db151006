package assembler

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/context-loom/loom/tokenizer"
)

// toolSet is a request's tool definitions, rendered and counted once for all the assemblies that send the
// same set: an agent sends its tools with every turn, and rendering and counting them again each time
// would cost more than the rest of an assembly. A set is identified by the SHA-256 of its canonical JSON
// (the Chat Completions array, compact), which Result.PrefixHash holds; it is found by a fingerprint of
// the definitions (toolsHash) and told from the other sets of that fingerprint by comparing the
// definitions themselves, so that no collision can give a set another's counts. It is immutable but for
// its counts, which are added under mu.
type toolSet struct {
	tools  []Tool // a copy of the definitions
	openai renderedTools
	id     string // hex SHA-256 of openai.text: what Result.PrefixHash holds of the tools

	anthropicOnce sync.Once
	anthropic     renderedTools

	mu     sync.Mutex
	counts map[toolCountKey]toolCount
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

// toolSets is the cache of tool sets, by the fast hash of their definitions. It holds at most
// maxToolSets sets of maxToolSetBytes in all; when a set would not fit, it starts again empty, and a set
// larger than all of it is not kept.
var toolSets = struct {
	sync.RWMutex
	sets  map[uint64][]*toolSet
	n     int
	bytes int
}{sets: map[uint64][]*toolSet{}}

// maxToolSets and maxToolSetBytes bound the cache, and maxToolSetsPerKey the sets a lookup may compare.
// The bytes are bounded too, as a request's tools may be as large as its body: a thousand large sets
// from one client would otherwise be kept.
const maxToolSets, maxToolSetBytes, maxToolSetsPerKey = 1024, 64 << 20, 8

// cachedToolSet returns the set of tools, from the cache or made and added; nil for no tools. A set is
// checked when it is made: a tool's name must be one providers accept (CheckToolName) and its parameters,
// if any, JSON nested no deeper than tokenizer.MaxSchemaDepth, or cachedToolSet returns an error wrapping
// ErrInvalidRequest.
func cachedToolSet(tools []Tool) (*toolSet, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	key := toolsHash(tools)
	toolSets.RLock()
	for _, s := range toolSets.sets[key] {
		if sameTools(s.tools, tools) {
			toolSets.RUnlock()
			return s, nil
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
	toolSets.Lock()
	defer toolSets.Unlock()
	for _, other := range toolSets.sets[key] { // made meanwhile by another assembly
		if sameTools(other.tools, tools) {
			return other, nil
		}
	}
	size := s.size()
	if size > maxToolSetBytes {
		return s, nil
	}
	if toolSets.n >= maxToolSets || toolSets.bytes+size > maxToolSetBytes || len(toolSets.sets[key]) >= maxToolSetsPerKey {
		toolSets.sets, toolSets.n, toolSets.bytes = map[uint64][]*toolSet{}, 0, 0
	}
	toolSets.sets[key] = append(toolSets.sets[key], s)
	toolSets.n++
	toolSets.bytes += size
	return s, nil
}

// size is about what the set keeps in memory: its definitions twice (a copy, and their rendering), and
// the rendering in the other shape it may make.
func (s *toolSet) size() int {
	n := 0
	for _, t := range s.tools {
		n += len(t.Type) + len(t.Function.Name) + len(t.Function.Description) + len(t.Function.Parameters)
	}
	return 3*n + len(s.openai.text)
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
	s.openai = renderTools(s.tools, openAITool)
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

// anthropicTools returns the set in the Messages API's shape.
func (s *toolSet) anthropicTools() renderedTools {
	s.anthropicOnce.Do(func() { s.anthropic = renderTools(s.tools, anthropicTool) })
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

// countTools counts the tools' definitions (see toolTokens).
func (a *assembly) countTools(render, text string) toolCount {
	if render != "namespace" {
		return toolCount{a.m.Count(text), false}
	}
	rule := a.model.Tools
	rule.Exact = true // for whether the rendering of every schema is known
	n, known := rule.DefinitionTokens(a.m, a.tools.tools)
	return toolCount{n, known}
}

// prefixID is what Result.PrefixHash holds of the set: its id, or "" for no tools (s nil).
func (s *toolSet) prefixID() string {
	if s == nil {
		return ""
	}
	return s.id
}

// rendered returns the set in a format's shape (openai or anthropic); none for no tools (s nil).
func (s *toolSet) rendered(shape string) renderedTools {
	switch {
	case s == nil:
		return renderedTools{}
	case shape == "anthropic":
		return s.anthropicTools()
	}
	return s.openai
}
