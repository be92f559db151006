//go:build cgo

package code

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unsafe"

	sitter "github.com/smacker/go-tree-sitter"
	"github.com/smacker/go-tree-sitter/golang"
	"github.com/smacker/go-tree-sitter/java"
	"github.com/smacker/go-tree-sitter/javascript"
	"github.com/smacker/go-tree-sitter/python"
	"github.com/smacker/go-tree-sitter/rust"
	"github.com/smacker/go-tree-sitter/typescript/tsx"
	"github.com/smacker/go-tree-sitter/typescript/typescript"

	"github.com/context-loom/loom/chunker"
)

// Chunker splits source code along its syntax, parsed with tree-sitter. The language comes from
// [chunker.Options].Language (see [chunker.CodeLanguages] and [chunker.CodeLanguage]); "" (or "text") means
// plain text, split like the recursive strategy at blank lines, then lines, then words.
//
// Top-level declarations (functions, methods, types, classes, impl blocks, imports, statements) are the
// units: each takes the comments and attributes before it (so a chunk starts at a doc comment), a comment
// on its last line and the blank lines after it. A declaration that fits in a chunk is never cut;
// neighbours that fit are packed together. One that does not fit is chunked on its own, split between the
// statements or members of its body (class members, function statements, impl items, and so on down) where
// a line starts, and those pieces are packed again; a member that is itself a declaration too large for a
// chunk is chunked on its own in turn. A chunk never ends inside a line of code unless one line alone is
// larger than the chunk size, and such a line is split between words. Text with syntax errors is chunked
// the same way around what the parser could not make sense of.
//
// Every chunk's Metadata has these keys:
//
//   - "language" ([chunker.MetaLanguage]): the language's name ("go", "python", ...) or "text".
//   - "symbols" ([chunker.MetaSymbols]): the names of the declarations the chunk holds or is part of,
//     comma-separated, in order: "Server,Server.Serve,main". A method is named with its receiver, class,
//     impl or trait; a declaration wholly in the chunk is named without its members. Empty when the chunk
//     declares nothing by name.
//   - "kind" ([chunker.MetaKind]): the kind of what the chunk holds ("function", "method", "class",
//     "struct", "interface", "enum", "trait", "impl", "type", "const", "var", "import", "package",
//     "statement", "comment", ...), "mixed" when it holds several kinds, "text" for plain text.
//   - "start_line", "end_line" ([chunker.MetaStartLine], [chunker.MetaEndLine]): the 1-based numbers of
//     the first and last lines holding the chunk's non-space text.
//
// Parsing is bounded in size and time. A text larger than [MaxParseBytes] is parsed in windows that end
// where a line starts (preferably a top-level declaration's), each chunked on its own; neighbours in
// different windows do not overlap. A window whose parse runs past its time bound ([ParseTimeout] plus
// [ParseTimePerMiB] per MiB of the parsing thread's CPU time), which some malformed inputs of a few bytes
// cause, and a line longer than MaxParseBytes, are chunked as plain text, and their chunks say so: "parse"
// is "fallback" and "parse_reason" is "timeout" or "too_large" ([chunker.MetaParse],
// [chunker.FallbackTimeout], [chunker.FallbackTooLarge]); their "kind" is "text" and "symbols" is empty.
// The caller's ctx ends a parse too, with ctx's error.
//
// A Chunker is safe for concurrent use: each call has its own parser.
type Chunker struct {
	maxParse int // MaxParseBytes, less in tests
	timeout  func(n int) time.Duration
}

var _ chunker.Chunker = (*Chunker)(nil)

// New returns the code strategy's chunker, parsing with tree-sitter.
func New() *Chunker {
	return &Chunker{maxParse: MaxParseBytes}
}

// levels are where text is split inside what the syntax does not cut: blank lines, lines, words.
var levels = []chunker.SplitFunc{chunker.SplitParagraphs, chunker.SplitLines, chunker.SplitWords}

// Bounds of parsing. Tree-sitter's time and memory grow with what it parses, and some inputs of a few bytes
// make its error recovery run without end, so a parse is bounded in size and in time; what is not parsed is
// chunked as plain text (see [Chunker]).
const (
	// MaxParseBytes is the most text one parse reads. A larger text is parsed in windows of at most this
	// size that end where a line starts, preferably a line at column 0 after a blank line (a top-level
	// declaration), and chunked window by window; tree-sitter's memory is that of one window.
	MaxParseBytes = 128 << 10
	// ParseTimeout and ParseTimePerMiB bound the time of one parse: ParseTimeout, plus ParseTimePerMiB for
	// each MiB of the window, in CPU time of the parsing thread (so that a loaded machine does not make a
	// parse fall back), and ParseWallFactor times that in wall-clock time. Well-formed code parses hundreds
	// of times faster.
	ParseTimeout    = 250 * time.Millisecond
	ParseTimePerMiB = 4 * time.Second
)

// Chunk splits text. It returns an error for invalid options (see [chunker.Options]), one wrapping
// [chunker.ErrUnknownLanguage] for a Language it does not know, one wrapping [chunker.ErrTooManyChunks]
// past [chunker.Options].MaxChunks, and ctx's error when ctx is done (also while parsing).
func (c *Chunker) Chunk(ctx context.Context, text string, opts *chunker.Options) ([]chunker.ChunkResult, error) {
	b, err := chunker.NewBuilder(ctx, chunker.Code, text, opts)
	if err != nil {
		return nil, err
	}
	var asked string
	if opts != nil {
		asked = opts.Language
	}
	name, err := chunker.CodeLanguage(asked)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	lang := languages[name]
	if lang == nil {
		if err := chunker.ChunkCodeText(b, name, ""); err != nil {
			return nil, err
		}
		return b.Result()
	}
	// Tree-sitter allocates with malloc, which gives each thread its own arena and keeps what is freed there
	// for that thread: on one thread, each window reuses the memory of the one before.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for start := 0; start < len(text); {
		end, whole := parseWindow(text, start, c.maxParse)
		if err := b.Window(start, end, func(w *chunker.Builder) error { return c.chunkWindow(ctx, w, lang, whole) }); err != nil {
			return nil, err
		}
		start = end
	}
	return b.Result()
}

// chunkWindow chunks the text of w, a window of the text. With whole false, the window is one line too long
// to parse.
func (c *Chunker) chunkWindow(ctx context.Context, w *chunker.Builder, lang *language, whole bool) error {
	reason := chunker.FallbackTooLarge
	if whole {
		syms, why, err := c.chunkParsed(ctx, w, lang)
		if err != nil {
			return err
		}
		if why == "" {
			describe(w, lang.name, syms)
			return nil
		}
		reason = why
	}
	return chunker.ChunkCodeText(w, lang.name, reason)
}

// chunkParsed parses w's text and chunks it along its syntax. When the parse is cut short by its bound, it
// returns the reason and makes no chunk, and the caller chunks the text as plain text; ctx's end is an
// error.
func (c *Chunker) chunkParsed(ctx context.Context, w *chunker.Builder, lang *language) ([]symbol, string, error) {
	text := w.Text()
	// A parser per call: parsers are not safe for concurrent use, and one whose parse was cancelled can
	// keep its cancellation flag set, so they are not pooled either.
	parser := sitter.NewParser()
	defer parser.Close()
	parser.SetLanguage(lang.grammar())
	// The parse is cancelled (tree-sitter's cancellation flag, through ParseCtx) once this thread has spent
	// the bound in CPU time; Chunk holds the thread.
	pctx, stop := boundParse(ctx, c.parseTimeout(len(text)))
	// ParseCtx copies the text for C: no copy of our own.
	tree, err := parser.ParseCtx(pctx, nil, unsafe.Slice(unsafe.StringData(text), len(text)))
	budgetSpent := errors.Is(context.Cause(pctx), errParseBudget)
	stop()
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		if budgetSpent {
			return nil, chunker.FallbackTimeout, nil
		}
		return nil, "", fmt.Errorf("code: parse %s: %w", lang.name, err)
	}
	defer tree.Close()
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	r := &codeRun{Builder: w, text: text, lang: lang, cursor: sitter.NewTreeCursor(tree.RootNode())}
	defer r.cursor.Close()
	top := r.groups(0, len(text), r.children(tree.RootNode()))
	rest, err := r.chunkGroups(top, false, true, nil)
	if err != nil {
		return nil, "", err
	}
	r.Pack(rest)
	if err := w.Err(); err != nil {
		return nil, "", err
	}
	return r.symbols(top), "", nil
}

// parseTimeout returns the time bound of parsing n bytes.
func (c *Chunker) parseTimeout(n int) time.Duration {
	if c.timeout != nil {
		return c.timeout(n)
	}
	return ParseTimeout + time.Duration(float64(ParseTimePerMiB)*float64(n)/(1<<20))
}

// parseWindow returns the end of the window of text that starts at byte start: the end of the text when
// the rest is at most limit bytes; else the last line start within limit bytes, preferring one at column 0
// (not a closing bracket) after a blank line, then one at column 0, then any. With no line start within
// limit bytes, it returns the end of that line (after its newline) and false: the window is too large to
// parse.
func parseWindow(text string, start, limit int) (end int, whole bool) {
	if len(text)-start <= limit {
		return len(text), true
	}
	area := text[start : start+limit+1] // a cut at start+limit is still a window of limit bytes
	anyStart, column0 := -1, -1
	for i := len(area) - 1; i > 0; {
		nl := strings.LastIndexByte(area[:i], '\n')
		if nl < 0 {
			break
		}
		p := nl + 1
		i = nl
		if p >= len(area) {
			continue
		}
		if anyStart < 0 {
			anyStart = p
		}
		if c := area[p]; c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '}' || c == ')' || c == ']' {
			continue
		}
		if column0 < 0 {
			column0 = p
		}
		if blank := strings.TrimRight(area[:nl], " \t\r"); strings.HasSuffix(blank, "\n") || blank == "" {
			return start + p, true
		}
		if p < len(area)/2 {
			break // a cut this early makes small windows: take the best one so far
		}
	}
	switch {
	case column0 > 0:
		return start + column0, true
	case anyStart > 0:
		return start + anyStart, true
	}
	if nl := strings.IndexByte(text[start+limit:], '\n'); nl >= 0 {
		return start + limit + nl + 1, false
	}
	return len(text), false
}

// Kinds of declarations and statements, for the "kind" metadata.
const (
	kindFunction    = "function"
	kindMethod      = "method"
	kindConstructor = "constructor"
	kindClass       = "class"
	kindStruct      = "struct"
	kindInterface   = "interface"
	kindEnum        = "enum"
	kindTrait       = "trait"
	kindImpl        = "impl"
	kindModule      = "module"
	kindType        = "type"
	kindConst       = "const"
	kindVar         = "var"
	kindMacro       = "macro"
	kindImport      = "import"
	kindPackage     = "package"
	kindStatement   = "statement"
	kindComment     = "comment"
	kindError       = "error" // text the parser could not make sense of
	kindMixed       = "mixed"
	kindText        = "text"
)

// language is what the code strategy knows of a language's syntax tree.
type language struct {
	name    string
	grammar func() *sitter.Language
	// leading are node types that belong to the node after them: comments, Rust's attributes.
	leading map[string]bool
	// decls are the node types of named declarations, with their kinds.
	decls map[string]string
	// wrappers are node types whose children are searched for declarations (export, decorators, groups).
	wrappers map[string]bool
	// others are the kinds of top-level nodes that declare no name, by node type; the rest are statements.
	others map[string]string
}

var goLanguage = &language{
	name:    "go",
	grammar: sync.OnceValue(golang.GetLanguage),
	leading: map[string]bool{"comment": true},
	decls: map[string]string{
		"function_declaration": kindFunction, "method_declaration": kindMethod, "type_spec": kindType,
		"type_alias": kindType, "const_spec": kindConst, "var_spec": kindVar,
	},
	wrappers: map[string]bool{"type_declaration": true, "const_declaration": true, "var_declaration": true},
	others:   map[string]string{"package_clause": kindPackage, "import_declaration": kindImport},
}

var pythonLanguage = &language{
	name:     "python",
	grammar:  sync.OnceValue(python.GetLanguage),
	leading:  map[string]bool{"comment": true},
	decls:    map[string]string{"function_definition": kindFunction, "class_definition": kindClass, "assignment": kindVar},
	wrappers: map[string]bool{"decorated_definition": true, "expression_statement": true},
	others: map[string]string{
		"import_statement": kindImport, "import_from_statement": kindImport, "future_import_statement": kindImport,
	},
}

var javascriptDecls = map[string]string{
	"function_declaration": kindFunction, "generator_function_declaration": kindFunction,
	"class_declaration": kindClass, "method_definition": kindMethod, "variable_declarator": kindVar,
}

var javascriptLanguage = &language{
	name:    "javascript",
	grammar: sync.OnceValue(javascript.GetLanguage),
	leading: map[string]bool{"comment": true},
	decls:   javascriptDecls,
	wrappers: map[string]bool{
		"export_statement": true, "lexical_declaration": true, "variable_declaration": true,
	},
	others: map[string]string{"import_statement": kindImport},
}

var typescriptDecls = func() map[string]string {
	m := map[string]string{
		"interface_declaration": kindInterface, "type_alias_declaration": kindType, "enum_declaration": kindEnum,
		"abstract_class_declaration": kindClass, "internal_module": kindModule, "module": kindModule,
		"function_signature": kindFunction, "method_signature": kindMethod, "abstract_method_signature": kindMethod,
	}
	for k, v := range javascriptDecls {
		m[k] = v
	}
	return m
}()

var typescriptWrappers = map[string]bool{
	"export_statement": true, "lexical_declaration": true, "variable_declaration": true,
	"ambient_declaration": true, "expression_statement": true,
}

var typescriptLanguage = &language{
	name:     "typescript",
	grammar:  sync.OnceValue(typescript.GetLanguage),
	leading:  map[string]bool{"comment": true},
	decls:    typescriptDecls,
	wrappers: typescriptWrappers,
	others:   map[string]string{"import_statement": kindImport},
}

var tsxLanguage = &language{
	name:     "tsx",
	grammar:  sync.OnceValue(tsx.GetLanguage),
	leading:  map[string]bool{"comment": true},
	decls:    typescriptDecls,
	wrappers: typescriptWrappers,
	others:   map[string]string{"import_statement": kindImport},
}

var rustLanguage = &language{
	name:    "rust",
	grammar: sync.OnceValue(rust.GetLanguage),
	leading: map[string]bool{
		"line_comment": true, "block_comment": true, "attribute_item": true, "inner_attribute_item": true,
	},
	decls: map[string]string{
		"function_item": kindFunction, "function_signature_item": kindFunction, "struct_item": kindStruct,
		"union_item": kindStruct, "enum_item": kindEnum, "trait_item": kindTrait, "impl_item": kindImpl,
		"mod_item": kindModule, "const_item": kindConst, "static_item": kindVar, "type_item": kindType,
		"macro_definition": kindMacro,
	},
	wrappers: map[string]bool{},
	others:   map[string]string{"use_declaration": kindImport, "extern_crate_declaration": kindImport},
}

var javaLanguage = &language{
	name:    "java",
	grammar: sync.OnceValue(java.GetLanguage),
	leading: map[string]bool{"line_comment": true, "block_comment": true},
	decls: map[string]string{
		"class_declaration": kindClass, "interface_declaration": kindInterface, "enum_declaration": kindEnum,
		"record_declaration": kindClass, "annotation_type_declaration": kindInterface,
		"method_declaration": kindMethod, "constructor_declaration": kindConstructor,
		"compact_constructor_declaration": kindConstructor,
	},
	wrappers: map[string]bool{"enum_body_declarations": true},
	others: map[string]string{
		"package_declaration": kindPackage, "import_declaration": kindImport, "module_declaration": kindModule,
	},
}

// languages are the parsed languages by name.
var languages = map[string]*language{
	"go": goLanguage, "python": pythonLanguage, "javascript": javascriptLanguage,
	"typescript": typescriptLanguage, "tsx": tsxLanguage, "rust": rustLanguage, "java": javaLanguage,
}

// codeRun is the state of one call on parsed code.
type codeRun struct {
	*chunker.Builder
	text   string // the Builder's
	lang   *language
	cursor *sitter.TreeCursor // reused to list children: Node.Child(i) is linear in i
}

// group is a span of the text that holds sibling nodes no cut may separate: a declaration with its leading
// comments, or statements that share a line.
type group struct {
	start, end int
	kids       []*sitter.Node
}

// children returns n's children that hold text, in order.
func (r *codeRun) children(n *sitter.Node) []*sitter.Node {
	r.cursor.Reset(n)
	if !r.cursor.GoToFirstChild() {
		return nil
	}
	var kids []*sitter.Node
	for {
		k := r.cursor.CurrentNode()
		if s, e := int(k.StartByte()), int(k.EndByte()); s < e && e <= len(r.text) && strings.TrimSpace(r.text[s:e]) != "" {
			kids = append(kids, k)
		}
		if !r.cursor.GoToNextSibling() {
			return kids
		}
	}
}

// groups cuts text[start:end], which holds kids, into groups: a cut goes only where a line starts and a kid
// starts on that line, and never after a leading comment that starts its own line nor before a closing
// bracket. The blank lines between groups end the group before; text before the first kid and after the
// last belongs to the first and last groups.
func (r *codeRun) groups(start, end int, kids []*sitter.Node) []group {
	var gs []group
	cur := group{start: start}
	prevEnd, forward := start, false
	for i, k := range kids {
		ks, ke := int(k.StartByte()), int(k.EndByte())
		if ks < prevEnd || ke > end {
			// Out of order (which tree-sitter does not produce): keep it in the current group.
			cur.kids = append(cur.kids, k)
			prevEnd = max(prevEnd, min(ke, end))
			continue
		}
		// The newline before k's line, if it is after the last kid's last character.
		lo := max(prevEnd-1, cur.start)
		nl := strings.LastIndexByte(r.text[lo:ks], '\n')
		newLine := i == 0 || nl >= 0
		if i > 0 && nl >= 0 && !forward && !r.closing(k) && len(cur.kids) > 0 {
			if cut := lo + nl + 1; cut > cur.start && r.IsBoundary(cut) {
				cur.end = cut
				gs = append(gs, cur)
				cur = group{start: cut}
			}
		}
		cur.kids = append(cur.kids, k)
		forward = newLine && r.lang.leading[k.Type()]
		prevEnd = ke
	}
	cur.end = end
	return append(gs, cur)
}

// closing reports whether n is a closing bracket, which stays with what it closes.
func (r *codeRun) closing(n *sitter.Node) bool {
	if n.IsNamed() || n.EndByte()-n.StartByte() != 1 {
		return false
	}
	switch r.text[n.StartByte()] {
	case '}', ')', ']':
		return true
	}
	return false
}

// chunkGroups chunks consecutive groups of one level. The groups that fit join run, the units before them
// not packed yet, and the units left at the end are returned for the caller to pack with what follows. A
// group that does not fit is split inside, its first pieces joining run; but a declaration that does not
// fit (any group at the top level) is chunked on its own, after the run is packed. With big, a lone group
// is known not to fit.
func (r *codeRun) chunkGroups(gs []group, big, top bool, run []chunker.Unit) ([]chunker.Unit, error) {
	for _, g := range gs {
		if err := r.Err(); err != nil {
			return nil, err
		}
		if !big || len(gs) > 1 {
			if n, ok := r.Fits(r.text[g.start:g.end]); ok {
				run = append(run, chunker.Unit{Start: g.start, End: g.end, Tokens: n})
				continue
			}
		}
		if !top && !r.declares(g) {
			var err error
			if run, err = r.split(g, run); err != nil {
				return nil, err
			}
			continue
		}
		r.Pack(run)
		rest, err := r.split(g, nil)
		if err != nil {
			return nil, err
		}
		r.Pack(rest)
		run = nil
	}
	return run, nil
}

// split chunks a group that does not fit, after run: its nodes that span lines are replaced by their
// children, so cuts can go between the statements or members of a body, one level further down each time.
// A group with no such node left (one long line, a long comment or string) is split as plain text.
func (r *codeRun) split(g group, run []chunker.Unit) ([]chunker.Unit, error) {
	var inner []*sitter.Node
	expanded := false
	for _, k := range g.kids {
		if ks, ke := int(k.StartByte()), int(k.EndByte()); k.ChildCount() > 0 && strings.IndexByte(r.text[ks:max(ks, ke-1)], '\n') >= 0 {
			inner = append(inner, r.children(k)...)
			expanded = true
		} else {
			inner = append(inner, k)
		}
	}
	if !expanded {
		r.Pack(run)
		return nil, r.Split(g.start, g.end, levels...)
	}
	// Closing brackets at the end cut nothing (no cut goes before one): dropped, they do not pile up level
	// after level in deeply nested code.
	for len(inner) > 0 && r.closing(inner[len(inner)-1]) {
		inner = inner[:len(inner)-1]
	}
	return r.chunkGroups(r.groups(g.start, g.end, inner), true, false, run)
}

// declares reports whether g holds a declaration other than a variable's: a method, class, function, ...
func (r *codeRun) declares(g group) bool {
	for _, k := range g.kids {
		for _, s := range r.declarations(k, k.Type(), "", "", 1) {
			if s.kind != kindVar && s.kind != kindConst {
				return true
			}
		}
	}
	return false
}

// symbol is a declaration (or, at the top level, a statement) for the metadata.
type symbol struct {
	name, kind string
	start, end int      // the node's bytes, with the leading comments of a top-level group
	members    []symbol // declarations in its body
}

// symbols returns the symbols of the top-level groups, in order.
func (r *codeRun) symbols(gs []group) []symbol {
	var out []symbol
	for _, g := range gs {
		if len(g.kids) == 0 {
			continue
		}
		var syms []symbol
		mainType := ""
		for _, k := range g.kids {
			t := k.Type()
			if r.lang.leading[t] {
				continue
			}
			if mainType == "" {
				mainType = t
			}
			syms = append(syms, r.declarations(k, t, "", "", 0)...)
		}
		start, end := int(g.kids[0].StartByte()), int(g.kids[len(g.kids)-1].EndByte())
		if len(syms) == 0 {
			kind := kindComment
			if mainType != "" {
				kind = r.lang.others[mainType]
				if kind == "" {
					kind = kindStatement
					if mainType == "ERROR" {
						kind = kindError
					}
				}
			}
			syms = []symbol{{kind: kind, start: start, end: end}}
		}
		syms[0].start = min(syms[0].start, start)
		out = append(out, syms...)
	}
	return out
}

// declarations returns the declarations n (of type t) makes, named within qual, in a body of parentKind.
func (r *codeRun) declarations(n *sitter.Node, t, qual, parentKind string, depth int) []symbol {
	kind, ok := r.lang.decls[t]
	if !ok {
		if !r.lang.wrappers[t] && t != "ERROR" {
			return nil
		}
		var out []symbol
		for _, k := range r.children(n) {
			out = append(out, r.declarations(k, k.Type(), qual, parentKind, depth)...)
		}
		return out
	}
	if t == "assignment" && depth > 0 {
		return nil // a class attribute, not a module's variable
	}
	kind = r.refineKind(n, t, kind, parentKind)
	start, end := int(n.StartByte()), int(n.EndByte())
	var out []symbol
	for _, name := range r.declNames(n, t) {
		if qual != "" && name != "" {
			name = qual + "." + name
		}
		out = append(out, symbol{name: name, kind: kind, start: start, end: end})
	}
	switch kind {
	case kindClass, kindStruct, kindInterface, kindEnum, kindTrait, kindImpl, kindModule:
		if body := n.ChildByFieldName("body"); body != nil && len(out) == 1 {
			for _, k := range r.children(body) {
				out[0].members = append(out[0].members, r.declarations(k, k.Type(), out[0].name, kind, depth+1)...)
			}
		}
	}
	return out
}

// refineKind tells structs from interfaces from other types, functions in a type's body from others, and
// variables that hold functions or classes.
func (r *codeRun) refineKind(n *sitter.Node, t, kind, parentKind string) string {
	switch {
	case t == "type_spec":
		if typ := n.ChildByFieldName("type"); typ != nil {
			switch typ.Type() {
			case "struct_type":
				return kindStruct
			case "interface_type":
				return kindInterface
			}
		}
	case t == "variable_declarator":
		if v := n.ChildByFieldName("value"); v != nil {
			switch v.Type() {
			case "arrow_function", "function", "function_expression", "generator_function":
				return kindFunction
			case "class":
				return kindClass
			}
		}
	case kind == kindFunction:
		switch parentKind {
		case kindClass, kindStruct, kindInterface, kindEnum, kindTrait, kindImpl:
			return kindMethod
		}
	}
	return kind
}

// declNames returns the names n declares: usually one, "" when it is anonymous.
func (r *codeRun) declNames(n *sitter.Node, t string) []string {
	switch t {
	case "const_spec", "var_spec": // Go: a, b = 1, 2
		var names []string
		for _, k := range r.children(n) {
			if k.Type() == "identifier" {
				names = append(names, r.nodeText(k))
			} else if k.Type() != "," {
				break
			}
		}
		return names
	case "method_declaration":
		if r.lang == goLanguage {
			name := r.nodeText(n.ChildByFieldName("name"))
			if recv := r.firstOfType(n.ChildByFieldName("receiver"), "type_identifier"); recv != nil {
				name = r.nodeText(recv) + "." + name
			}
			return []string{name}
		}
	case "impl_item": // Rust: named for its type
		typ := n.ChildByFieldName("type")
		for typ != nil && typ.Type() == "generic_type" {
			typ = typ.ChildByFieldName("type")
		}
		if typ != nil && typ.Type() == "scoped_type_identifier" {
			typ = typ.ChildByFieldName("name")
		}
		return []string{r.nodeText(typ)}
	case "assignment": // Python: X = ...
		if left := n.ChildByFieldName("left"); left != nil && left.Type() == "identifier" {
			return []string{r.nodeText(left)}
		}
		return nil
	case "variable_declarator": // JavaScript: const x = ...
		if name := n.ChildByFieldName("name"); name != nil && name.Type() == "identifier" {
			return []string{r.nodeText(name)}
		}
		return nil
	}
	return []string{r.nodeText(n.ChildByFieldName("name"))}
}

// firstOfType returns the first node of type t in n's subtree, depth first.
func (r *codeRun) firstOfType(n *sitter.Node, t string) *sitter.Node {
	if n == nil {
		return nil
	}
	if n.Type() == t {
		return n
	}
	for _, k := range r.children(n) {
		if found := r.firstOfType(k, t); found != nil {
			return found
		}
	}
	return nil
}

func (r *codeRun) nodeText(n *sitter.Node) string {
	if n == nil {
		return ""
	}
	return r.text[n.StartByte():n.EndByte()]
}

// describe sets the metadata of w's chunks, of parsed text: the language, the symbols they hold or are part
// of, their kind and their lines.
func describe(w *chunker.Builder, langName string, syms []symbol) {
	notSpace := func(r rune) bool { return !unicode.IsSpace(r) }
	chunks := w.Chunks()
	for i := range chunks {
		ch := &chunks[i]
		// The non-space text: a chunk holds some.
		first := ch.StartOffset + strings.IndexFunc(ch.Content, notSpace)
		last := ch.StartOffset + strings.LastIndexFunc(ch.Content, notSpace)
		var c collector
		c.collect(syms, first, last+1, true)
		kind := kindText
		switch {
		case len(c.kinds) == 1:
			kind = c.kinds[0]
		case len(c.kinds) > 1:
			kind = kindMixed
		}
		ch.Metadata = map[string]string{
			chunker.MetaLanguage:  langName,
			chunker.MetaSymbols:   strings.Join(c.names, ","),
			chunker.MetaKind:      kind,
			chunker.MetaStartLine: strconv.Itoa(w.Line(first)),
			chunker.MetaEndLine:   strconv.Itoa(w.Line(last)),
		}
	}
}

// collector gathers the names and kinds of the symbols in a span.
type collector struct {
	names, kinds []string
}

// collect adds the symbols of syms that overlap [lo, hi). A symbol wholly inside is named alone; one partly
// inside is named by its members that overlap, and by itself too when the span holds its start or none of
// its members. Kinds are those of the outermost symbols named (counted is false below a named one).
func (c *collector) collect(syms []symbol, lo, hi int, counted bool) {
	i := sort.Search(len(syms), func(i int) bool { return syms[i].end > lo })
	for _, s := range syms[i:] {
		if s.start >= hi {
			break
		}
		if s.end <= lo {
			continue
		}
		whole := lo <= s.start && s.end <= hi
		if whole || !overlaps(s.members, lo, hi) {
			c.add(s, counted)
			continue
		}
		named := lo <= s.start
		if named {
			c.add(s, counted)
		}
		c.collect(s.members, lo, hi, counted && !named)
	}
}

func (c *collector) add(s symbol, counted bool) {
	if s.name != "" && !slices.Contains(c.names, s.name) {
		c.names = append(c.names, s.name)
	}
	if counted && !slices.Contains(c.kinds, s.kind) {
		c.kinds = append(c.kinds, s.kind)
	}
}

func overlaps(syms []symbol, lo, hi int) bool {
	for _, s := range syms {
		if s.start < hi && lo < s.end {
			return true
		}
	}
	return false
}
