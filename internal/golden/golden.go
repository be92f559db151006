// Package golden writes an assembled context as a person reads it, for the golden files of the assembler's
// and the engine's tests, and compares such a text with its file under testdata.
//
// The text is made from the result's JSON (what `loom assemble` prints and the HTTP API returns), so that
// it shows every field a user receives, a field added later included. Its layout:
//
//   - One section per top-level field: the header fields first (format, model, encoding, exact, budget),
//     then system, instructions, system_instruction, messages, input, contents, text, tools, context,
//     citations, prefix_hash, prompt_cache_key, any other field, the report and
//     total_tokens last.
//   - Each message starts with a line "── [i] role"; its other fields follow, nested as in the JSON,
//     objects as "key: value" lines and arrays as "- " items.
//   - A string that spans lines or starts or ends with white space is a block: each of its
//     lines on a line of its own after "│ ". White space that ends a line is written ␠ (space) and ␉ (tab),
//     and a string that ends with a line break has ⏎ after its last line, so no trailing white space of the
//     output is invisible, and the file itself has none. Any other string is written after its key, quoted
//     as JSON only if it is empty, starts with a quote or "- ", or would read as another JSON value (a
//     number, true, false, null, {} or []).
//   - Everywhere, a character that would be invisible or would upset the display is written as a picture or
//     a code point: C0 controls (but tab and line feed) as their control pictures (␍ for CR), DEL as ␡, and
//     format characters, line and paragraph separators, other spaces than U+0020, private-use characters,
//     and the pictures and marks this layout uses, as ⟨U+XXXX⟩. A byte of a string that is not valid UTF-8
//     (which JSON would show as U+FFFD) is written ⟨0xXX⟩: the result's strings are read before they are
//     marshaled, so the text shows what a caller of the Go API receives.
//   - Each tool definition is one line of compact JSON.
//   - The context, which is also inside a message or the text, is named by where it is, or written as a
//     block if it is nowhere else.
//   - The report is one line per region ("name  budget B  used U", and "(estimate)" when the region's count
//     is not exact), then a line of its included ids and a line of its dropped ids with their reasons, each
//     only if there are any.
package golden

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// node is a JSON value whose objects keep their keys' order.
type node struct {
	kind   byte // 'o' object, 'a' array, 's' string, 'l' any other literal (number, true, false, null)
	keys   []string
	vals   []*node // the object's values, or the array's items
	scalar string  // the string's value, or the literal as written
}

func (n *node) get(key string) *node {
	if n == nil || n.kind != 'o' {
		return nil
	}
	if i := slices.Index(n.keys, key); i >= 0 {
		return n.vals[i]
	}
	return nil
}

func parse(data []byte) (*node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := parseValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("golden: trailing data after the JSON value")
	}
	return n, nil
}

func parseValue(dec *json.Decoder) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		n := &node{kind: 'a'}
		if t == '{' {
			n.kind = 'o'
		}
		for dec.More() {
			if n.kind == 'o' {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, k.(string))
			}
			v, err := parseValue(dec)
			if err != nil {
				return nil, err
			}
			n.vals = append(n.vals, v)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		return n, nil
	case string:
		return &node{kind: 's', scalar: t}, nil
	case json.Number:
		return &node{kind: 'l', scalar: t.String()}, nil
	case bool:
		return &node{kind: 'l', scalar: strconv.FormatBool(t)}, nil
	case nil:
		return &node{kind: 'l', scalar: "null"}, nil
	}
	return nil, fmt.Errorf("golden: unexpected token %v", tok)
}

// compact writes n as compact JSON, without escaping <, > and &.
func compact(b *strings.Builder, n *node) {
	switch n.kind {
	case 'o', 'a':
		open, end := "[", "]"
		if n.kind == 'o' {
			open, end = "{", "}"
		}
		b.WriteString(open)
		for i, v := range n.vals {
			if i > 0 {
				b.WriteString(",")
			}
			if n.kind == 'o' {
				b.WriteString(quote(n.keys[i]) + ":")
			}
			compact(b, v)
		}
		b.WriteString(end)
	case 's':
		b.WriteString(quote(n.scalar))
	default:
		b.WriteString(n.scalar)
	}
}

func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return strings.TrimSuffix(b.String(), "\n")
}

// Result renders an assembled context (an *assembler.Result, or an *engine.Result that embeds one) as the
// package documents. It marks the bytes of v's strings that are not valid UTF-8, in place, before it
// marshals v: v is not to be used afterwards.
func Result(v any) (string, error) {
	markInvalid(reflect.ValueOf(v))
	data, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	root, err := parse(data)
	if err != nil {
		return "", err
	}
	if root.kind != 'o' {
		return "", errors.New("golden: the result is not a JSON object")
	}
	w := &writer{}
	first := []string{"format", "model", "encoding", "exact", "budget"}
	body := []string{"system", "system_blocks", "instructions", "system_instruction", "messages", "input", "contents", "text", "tools", "context", "citations", "prefix_hash", "prompt_cache_key"}
	last := []string{"report", "total_tokens"}
	for _, k := range first {
		if v := root.get(k); v != nil {
			w.field(0, k, v)
		}
	}
	section := func(k string, v *node) {
		w.line("")
		switch k {
		case "messages":
			w.messages(v)
		case "tools":
			w.tools(v)
		case "context":
			w.context(root, v)
		case "report":
			w.report(v)
		default:
			w.field(0, k, v)
		}
	}
	for _, k := range body {
		if v := root.get(k); v != nil {
			section(k, v)
		}
	}
	for i, k := range root.keys {
		if !slices.Contains(first, k) && !slices.Contains(body, k) && !slices.Contains(last, k) {
			section(k, root.vals[i])
		}
	}
	for _, k := range last {
		if v := root.get(k); v != nil {
			section(k, v)
		}
	}
	return w.b.String(), nil
}

// invalidBase is where the code points that stand for invalid bytes start: byte b is invalidBase+b, the last
// 256 code points of plane 16 (private use), which visible writes as ⟨0xXX⟩. (A character of a result that
// is one of them would be written the same; the tests' texts hold none.)
const invalidBase = 0x10FF00

// markInvalid replaces each byte that is not valid UTF-8, in every string that v holds (through pointers,
// structs, slices and maps; not in byte slices such as json.RawMessage), by the code point that stands for
// it.
func markInvalid(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			markInvalid(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				markInvalid(v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := range v.Len() {
			markInvalid(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			markInvalid(e)
			nk := reflect.New(k.Type()).Elem()
			nk.Set(k)
			markInvalid(nk)
			v.SetMapIndex(k, reflect.Value{})
			v.SetMapIndex(nk, e)
		}
	case reflect.String:
		if s := v.String(); !utf8.ValidString(s) && v.CanSet() {
			var b strings.Builder
			for i := 0; i < len(s); {
				r, n := utf8.DecodeRuneInString(s[i:])
				if r == utf8.RuneError && n == 1 {
					b.WriteRune(invalidBase + rune(s[i]))
				} else {
					b.WriteString(s[i : i+n])
				}
				i += n
			}
			v.SetString(b.String())
		}
	}
}

type writer struct{ b strings.Builder }

func (w *writer) line(s string) {
	w.b.WriteString(s)
	w.b.WriteString("\n")
}

// field writes "key: value", or "key:" and the value's lines below it.
func (w *writer) field(indent int, key string, v *node) {
	pad := strings.Repeat("  ", indent)
	if s, ok := inline(v); ok {
		w.line(pad + visible(key) + ": " + s)
		return
	}
	w.line(pad + visible(key) + ":")
	w.value(indent+1, v)
}

// value writes a value that is not inline on lines of its own.
func (w *writer) value(indent int, v *node) {
	pad := strings.Repeat("  ", indent)
	switch v.kind {
	case 's':
		w.block(pad, v.scalar)
	case 'o':
		for i, k := range v.keys {
			w.field(indent, k, v.vals[i])
		}
	case 'a':
		for _, item := range v.vals {
			w.item(indent, item)
		}
	}
}

// item writes an array's item: "- value", or "- " before an object's first field, the rest below it.
func (w *writer) item(indent int, v *node) {
	pad := strings.Repeat("  ", indent)
	if s, ok := inline(v); ok {
		w.line(pad + "- " + s)
		return
	}
	if v.kind != 'o' {
		w.line(pad + "-")
		w.value(indent+1, v)
		return
	}
	var sub writer
	sub.value(indent+1, v)
	text := sub.b.String()
	// The first field's line, indented one level, starts with "- " in place of the indent's last two spaces.
	w.b.WriteString(pad + "- " + strings.TrimPrefix(text, pad+"  "))
}

// inline returns v as it is written after its key, if it is written there.
func inline(v *node) (string, bool) {
	switch v.kind {
	case 'l':
		return v.scalar, true
	case 'o', 'a':
		if len(v.vals) == 0 {
			if v.kind == 'o' {
				return "{}", true
			}
			return "[]", true
		}
		return "", false
	}
	s := v.scalar
	if s == "" {
		return `""`, true
	}
	if strings.Contains(s, "\n") {
		return "", false
	}
	r, _ := utf8.DecodeRuneInString(s)
	l, _ := utf8.DecodeLastRuneInString(s)
	if unicode.IsSpace(r) || unicode.IsSpace(l) {
		return "", false
	}
	if ambiguous(s) {
		return visible(quote(s)), true
	}
	return visible(s), true
}

// ambiguous reports whether s, written bare after a key, would read as another value than a string.
func ambiguous(s string) bool {
	switch s {
	case "null", "true", "false", "{}", "[]":
		return true
	}
	if s[0] == '"' || s[0] == '-' && len(s) > 1 && s[1] == ' ' {
		return true
	}
	var n json.Number
	return json.Unmarshal([]byte(s), &n) == nil
}

// block writes s as lines after "│ ", trailing white space and a final line break marked.
func (w *writer) block(pad, s string) {
	lines := strings.Split(s, "\n")
	end := ""
	if len(lines) > 1 && lines[len(lines)-1] == "" {
		lines, end = lines[:len(lines)-1], "⏎"
	}
	for i, l := range lines {
		text := visible(l)
		if i == len(lines)-1 {
			text += end
		}
		if text == "" {
			w.line(pad + "│")
		} else {
			w.line(pad + "│ " + text)
		}
	}
}

// visible writes one line of text so that every character shows (see the package doc): the white space
// that ends it as ␠ and ␉.
func visible(s string) string {
	trail := len(s) - len(strings.TrimRight(s, " \t"))
	var b strings.Builder
	for _, r := range s[:len(s)-trail] {
		switch {
		case r == '\t' || r == ' ':
			b.WriteRune(r)
		case r < 0x20:
			b.WriteRune(0x2400 + r)
		case r == 0x7f:
			b.WriteRune('␡')
		case r == utf8.RuneError, r == '│':
			b.WriteRune(r)
		case r >= invalidBase:
			fmt.Fprintf(&b, "⟨0x%02X⟩", r-invalidBase)
		case r >= 0x2400 && r <= 0x2426, r == '⏎', r == '⟨', r == '⟩',
			unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Zs, unicode.Co, unicode.Cs, unicode.Noncharacter_Code_Point):
			fmt.Fprintf(&b, "⟨U+%04X⟩", r)
		default:
			b.WriteRune(r)
		}
	}
	for _, c := range s[len(s)-trail:] {
		if c == ' ' {
			b.WriteRune('␠')
		} else {
			b.WriteRune('␉')
		}
	}
	return b.String()
}

// messages writes each message after a line naming its index and role.
func (w *writer) messages(v *node) {
	if v.kind != 'a' {
		w.field(0, "messages", v)
		return
	}
	w.line(fmt.Sprintf("messages: %d", len(v.vals)))
	for i, m := range v.vals {
		role := m.get("role")
		if m.kind != 'o' || role == nil || role.kind != 's' {
			w.line(fmt.Sprintf("── [%d]", i))
			w.value(0, m)
			continue
		}
		w.line(fmt.Sprintf("── [%d] %s", i, visible(role.scalar)))
		for j, k := range m.keys {
			if k != "role" {
				w.field(0, k, m.vals[j])
			}
		}
	}
}

// tools writes each tool definition as a line of compact JSON.
func (w *writer) tools(v *node) {
	if v.kind != 'a' {
		w.field(0, "tools", v)
		return
	}
	w.line(fmt.Sprintf("tools: %d", len(v.vals)))
	for _, t := range v.vals {
		var b strings.Builder
		compact(&b, t)
		w.line("- " + visible(b.String()))
	}
}

// context names the message, block or text that holds the context, or writes it.
func (w *writer) context(root, v *node) {
	if v.kind == 's' && v.scalar != "" {
		if where := find(root, v.scalar); where != "" {
			w.line("context: " + where)
			return
		}
	}
	w.field(0, "context", v)
}

// find says where the messages or the text hold ctx: inside the text, or at the end of a message's content
// or a block's text; "" if nowhere.
func find(root *node, ctx string) string {
	if t := root.get("text"); t != nil && t.kind == 's' && strings.Contains(t.scalar, ctx) {
		return "inside text"
	}
	msgs := root.get("messages")
	if msgs == nil || msgs.kind != 'a' {
		return ""
	}
	for i, m := range msgs.vals {
		c := m.get("content")
		if c == nil {
			continue
		}
		if c.kind == 's' && strings.HasSuffix(c.scalar, ctx) {
			return fmt.Sprintf("the end of messages[%d].content", i)
		}
		if c.kind == 'a' {
			for j, blk := range c.vals {
				if t := blk.get("text"); t != nil && t.kind == 's' && strings.HasSuffix(t.scalar, ctx) {
					return fmt.Sprintf("the end of messages[%d].content[%d].text", i, j)
				}
			}
		}
	}
	return ""
}

// report writes one line per region, and its included and dropped ids.
func (w *writer) report(v *node) {
	regions := v.get("regions")
	if regions == nil || regions.kind != 'a' || len(v.keys) != 1 {
		w.field(0, "report", v)
		return
	}
	w.line("report:")
	for _, r := range regions.vals {
		name, budget, used := r.get("name"), r.get("budget"), r.get("used")
		if r.kind != 'o' || name == nil || budget == nil || used == nil {
			w.item(1, r)
			continue
		}
		line := fmt.Sprintf("  %s  budget %s  used %s", plain(name), plain(budget), plain(used))
		if exact := r.get("exact"); exact != nil && plain(exact) == "false" {
			line += "  (estimate)"
		}
		w.line(line)
		for i, k := range r.keys {
			switch k {
			case "name", "budget", "used", "exact":
			case "included":
				w.ids(k, r.vals[i], r.get("included_tokens"))
			case "dropped":
				w.ids(k, r.vals[i], nil)
			case "included_tokens": // with the included ids
			default:
				w.field(2, k, r.vals[i])
			}
		}
	}
}

// ids writes "included: a (5), b (7)" (ids with their tokens, when tokens lists them) or "dropped: a
// (reason, 5), b (reason, not counted)" on one line.
func (w *writer) ids(key string, v, tokens *node) {
	if v.kind != 'a' || (tokens != nil && (tokens.kind != 'a' || len(tokens.vals) != len(v.vals))) {
		w.field(2, key, v)
		if tokens != nil {
			w.field(2, "included_tokens", tokens)
		}
		return
	}
	var out []string
	for i, it := range v.vals {
		id, reason, n := it.get("id"), it.get("reason"), it.get("tokens")
		switch {
		case (it.kind == 's' || it.kind == 'l') && tokens != nil:
			out = append(out, plain(it)+" ("+plain(tokens.vals[i])+")")
		case it.kind == 's' || it.kind == 'l':
			out = append(out, plain(it))
		case it.kind == 'o' && len(it.keys) == 3 && id != nil && reason != nil && n != nil:
			count := plain(n)
			if count == "-1" {
				count = "not counted"
			}
			out = append(out, plain(id)+" ("+plain(reason)+", "+count+")")
		case it.kind == 'o' && len(it.keys) == 2 && id != nil && reason != nil:
			out = append(out, plain(id)+" ("+plain(reason)+")")
		default:
			w.field(2, key, v) // a shape this layout does not know: written in full
			return
		}
	}
	if len(out) == 0 { // an empty list: no line
		return
	}
	w.line("    " + key + ": " + strings.Join(out, ", "))
}

// plain is a scalar written inline, quoted if it could not be read back from a list.
func plain(v *node) string {
	if v.kind != 's' {
		s, _ := inline(v)
		if s == "" {
			var b strings.Builder
			compact(&b, v)
			return visible(b.String())
		}
		return s
	}
	if v.scalar == "" || strings.ContainsAny(v.scalar, ",() \t\n") {
		return visible(quote(v.scalar))
	}
	return visible(v.scalar)
}

// Check compares got with the golden file at path and fails t with a diff if they differ, or writes got
// there when update is set.
func Check(t testing.TB, path, got string, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run %s -update writes it)", err, t.Name())
	}
	if d := Diff(string(want), got); d != "" {
		t.Errorf("%s changed (go test -update rewrites it):\n%s", path, d)
	}
}

// Stale fails t for each file in dir whose name ends with suffix and is not one of names, or removes it
// when update is set: a golden file that no test writes any more.
func Stale(t testing.TB, dir, suffix string, names []string, update bool) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !(update && errors.Is(err, os.ErrNotExist)) {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), suffix) || slices.Contains(names, e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if !update {
			t.Errorf("%s is no test's golden file (go test -update removes it)", path)
		} else if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}
}

// Diff returns "" if want and got are the same text, or else the first line where they differ and a
// unified diff of their lines (3 lines of context, the first 120 lines of it).
func Diff(want, got string) string {
	if want == got {
		return ""
	}
	a, b := splitLines(want), splitLines(got)
	first := 0
	for first < len(a) && first < len(b) && a[first] == b[first] {
		first++
	}
	var out strings.Builder
	fmt.Fprintf(&out, "first difference at line %d\n--- want\n+++ got\n", first+1)
	ops := diffLines(a, b)
	const context, most = 3, 120
	lines := 0
	for i := 0; i < len(ops); {
		if ops[i].op == ' ' {
			i++
			continue
		}
		// A hunk: from context lines before this change to context lines after the last change within reach.
		start := max(i-context, 0)
		end := i
		for j := i; j < len(ops); j++ {
			if ops[j].op != ' ' {
				end = j + 1
			} else if j-end >= 2*context {
				break
			}
		}
		end = min(end+context, len(ops))
		fmt.Fprintf(&out, "@@ -%d +%d @@\n", ops[start].a+1, ops[start].b+1)
		for _, o := range ops[start:end] {
			if lines++; lines > most {
				out.WriteString("... (the rest of the diff left out)\n")
				return out.String()
			}
			text := o.text
			if !strings.HasSuffix(text, "\n") {
				text += "\n\\ no line break at the end\n"
			}
			out.WriteString(string(o.op) + text)
		}
		i = end
	}
	return out.String()
}

// splitLines splits s after each line break; a last line without one is a line too.
func splitLines(s string) []string {
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

type diffOp struct {
	op   byte // ' ', '-' (want only) or '+' (got only)
	a, b int  // the line's index in want and got (of the next line, for a line the other lacks)
	text string
}

// diffLines is the longest common subsequence diff of a and b, after their common head and tail.
func diffLines(a, b []string) []diffOp {
	head := 0
	for head < len(a) && head < len(b) && a[head] == b[head] {
		head++
	}
	tail := 0
	for tail < len(a)-head && tail < len(b)-head && a[len(a)-1-tail] == b[len(b)-1-tail] {
		tail++
	}
	ma, mb := a[head:len(a)-tail], b[head:len(b)-tail]
	// lcs[i][j] is the length of the longest common subsequence of ma[i:] and mb[j:].
	lcs := make([][]int32, len(ma)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(mb)+1)
	}
	for i := len(ma) - 1; i >= 0; i-- {
		for j := len(mb) - 1; j >= 0; j-- {
			if ma[i] == mb[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []diffOp
	for k := range head {
		ops = append(ops, diffOp{' ', k, k, a[k]})
	}
	i, j := 0, 0
	for i < len(ma) || j < len(mb) {
		switch {
		case i < len(ma) && j < len(mb) && ma[i] == mb[j]:
			ops = append(ops, diffOp{' ', head + i, head + j, ma[i]})
			i, j = i+1, j+1
		case i < len(ma) && (j == len(mb) || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, diffOp{'-', head + i, head + j, ma[i]})
			i++
		default:
			ops = append(ops, diffOp{'+', head + i, head + j, mb[j]})
			j++
		}
	}
	for k := range tail {
		ops = append(ops, diffOp{' ', len(a) - tail + k, len(b) - tail + k, a[len(a)-tail+k]})
	}
	return ops
}
