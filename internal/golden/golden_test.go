package golden

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// readBack is the string that a "content" field of Result's text shows: the inverse of block, inline and
// visible, written from the package doc alone.
func readBack(t *testing.T, text string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for i, l := range lines {
		if v, ok := strings.CutPrefix(l, "content: "); ok {
			if strings.HasPrefix(v, `"`) { // JSON, whose text is visible's
				var s string
				if err := json.Unmarshal([]byte(v), &s); err != nil {
					t.Fatalf("quoted %q: %v", v, err)
				}
				return unvisible(s)
			}
			return unvisible(v)
		}
		if l != "content:" {
			continue
		}
		var out []string
		for _, b := range lines[i+1:] {
			if b == "  │" {
				out = append(out, "")
				continue
			}
			rest, ok := strings.CutPrefix(b, "  │ ")
			if !ok {
				break
			}
			out = append(out, rest)
		}
		s := strings.Join(out, "\n")
		if r, ok := strings.CutSuffix(s, "⏎"); ok {
			s = r + "\n"
		}
		return unvisible(s)
	}
	t.Fatalf("no content field in\n%s", text)
	return ""
}

// unvisible undoes visible: ⟨U+XXXX⟩ and ⟨0xXX⟩, the control pictures U+2400 to U+2420 (␠ and ␉
// included) and ␡.
func unvisible(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if rest, ok := strings.CutPrefix(s[i:], "⟨"); ok {
			end := strings.Index(rest, "⟩")
			code := rest[:end]
			if hex, ok := strings.CutPrefix(code, "U+"); ok {
				n, _ := strconv.ParseUint(hex, 16, 32)
				b.WriteRune(rune(n))
			} else {
				n, _ := strconv.ParseUint(strings.TrimPrefix(code, "0x"), 16, 8)
				b.WriteByte(byte(n))
			}
			i += len("⟨") + end + len("⟩")
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r >= 0x2400 && r <= 0x2420:
			b.WriteByte(byte(r - 0x2400))
		case r == '␡':
			b.WriteByte(0x7f)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// checkReadable fails t unless text has no white space at the end of a line, and no character that
// breaks a line other than the line feed or that does not show.
func checkReadable(t *testing.T, text string) {
	t.Helper()
	for n, l := range strings.Split(text, "\n") {
		if strings.TrimRight(l, " \t") != l {
			t.Errorf("line %d ends with white space: %q", n+1, l)
		}
		for _, r := range l {
			if r != ' ' && r != '\t' && (r < 0x20 || r == 0x7f || unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Zs, unicode.Co)) {
				t.Errorf("line %d holds %U: %q", n+1, r, l)
			}
		}
		if !utf8.ValidString(l) {
			t.Errorf("line %d is not UTF-8: %q", n+1, l)
		}
	}
}

// reserved reports whether s holds one of the code points that stand for invalid bytes.
func reserved(s string) bool {
	for _, r := range s {
		if r >= invalidBase {
			return true
		}
	}
	return false
}

// FuzzResult_ShowsEveryString: any string, rendered, can be read back exactly from the text, and the
// text has no trailing white space and no character that hides or breaks a line.
func FuzzResult_ShowsEveryString(f *testing.F) {
	for _, s := range []string{"", " ", "\n", "a\n", "a \n", "a\t", " a", "x\r\ny", "123", "null", `"q"`, "- x", "{}",
		"tab\tinside", "␠ and ␉ and ⏎ and ⟨U+0041⟩", "\u2028\u0085\v\f\x00\x7f", "\u202e\u200b\ufeff\u00a0", "\xff\xfe\xc3", "│ pipe",
		"end\n\n", "\n\n\n", "日本語 👩‍💻"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if reserved(s) {
			t.Skip("holds a code point that stands for an invalid byte")
		}
		text, err := Result(&struct {
			Content string `json:"content"`
		}{s})
		if err != nil {
			t.Fatal(err)
		}
		checkReadable(t, text)
		if got := readBack(t, text); got != s {
			t.Errorf("read back %q from\n%s\nwant %q", got, text, s)
		}
	})
}

// TestResult_DifferentStringsDiffer: strings that differ only in white space at a line's end or the
// text's end, or in characters that do not show, give different texts.
func TestResult_DifferentStringsDiffer(t *testing.T) {
	t.Parallel()
	groups := [][]string{
		{"content\n</context>", "content \n</context>", "content\t\n</context>", "content\u00a0\n</context>"},
		{"a", "a ", "a\n", "a \n", "a\n\n", " a", "a\r\n"},
		{"x", "x\u200b", "\u202ex", "\ufeffx", "\xffx", "\ufffdx"},
		{"1", `"1"`},
	}
	for _, g := range groups {
		seen := map[string]string{}
		for _, s := range g {
			text, err := Result(map[string]string{"content": s})
			if err != nil {
				t.Fatal(err)
			}
			if other, ok := seen[text]; ok {
				t.Errorf("%q and %q both render as\n%s", other, s, text)
			}
			seen[text] = s
		}
	}
}

// TestResult_Layout shows the layout on a small result: header fields first, then the messages, the
// tools, the context by where it is, the report, and total_tokens last; an unknown field before the report.
func TestResult_Layout(t *testing.T) {
	t.Parallel()
	in := `{"format":"openai","model":"m","total_tokens":9,"budget":10,"extra":{"a":[1,"b"]},
		"messages":[{"role":"system","content":"ctx: [1] x"},{"role":"user","content":"hi ","name":"n"}],
		"tools":[{"type":"function","function":{"name":"f","parameters":{ "type" : "object" }}}],
		"context":"[1] x","citations":[],"prefix_hash":"h",
		"report":{"regions":[{"name":"history","budget":5,"used":4,"included":["h[0]"],"dropped":[{"id":"h[1]","reason":"budget"}]},
			{"name":"tools","budget":0,"used":0,"included":[],"dropped":[]},
			{"name":"knowledge","budget":9,"used":8,"included":["k1","k2"],"included_tokens":[3,4],"dropped":[{"id":"k3","reason":"budget","tokens":6},{"id":"k4","reason":"budget","tokens":-1}]}]}}`
	got, err := Result(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `format: openai
model: m
budget: 10

messages: 2
── [0] system
content: ctx: [1] x
── [1] user
content:
  │ hi␠
name: n

tools: 1
- {"type":"function","function":{"name":"f","parameters":{"type":"object"}}}

context: the end of messages[0].content

citations: []

prefix_hash: h

extra:
  a:
    - 1
    - b

report:
  history  budget 5  used 4
    included: h[0]
    dropped: h[1] (budget)
  tools  budget 0  used 0
  knowledge  budget 9  used 8
    included: k1 (3), k2 (4)
    dropped: k3 (budget, 6), k4 (budget, not counted)

total_tokens: 9
`
	if d := Diff(want, got); d != "" {
		t.Error(d)
	}
}

// TestDiff_ReconstructsBothTexts: the diff's kept and removed lines are the wanted text, its kept and
// added lines the got text, and it keeps as many lines as the longest common subsequence has.
func TestDiff_ReconstructsBothTexts(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	text := func() []string {
		lines := make([]string, r.IntN(12))
		for i := range lines {
			lines[i] = string(rune('a'+r.IntN(4))) + "\n"
		}
		return lines
	}
	for range 2000 {
		a, b := text(), text()
		var wa, wb strings.Builder
		kept := 0
		for _, o := range diffLines(a, b) {
			if o.op != '+' {
				wa.WriteString(o.text)
			}
			if o.op != '-' {
				wb.WriteString(o.text)
			}
			if o.op == ' ' {
				kept++
			}
		}
		if wa.String() != strings.Join(a, "") || wb.String() != strings.Join(b, "") {
			t.Fatalf("diff of %q and %q does not give them back: %q, %q", a, b, wa.String(), wb.String())
		}
		if want := lcs(a, b); kept != want {
			t.Fatalf("diff of %q and %q keeps %d lines, the longest common subsequence has %d", a, b, kept, want)
		}
	}
}

// lcs is the length of the longest common subsequence of a and b, by plain recursion over a memo.
func lcs(a, b []string) int {
	memo := map[[2]int]int{}
	var f func(i, j int) int
	f = func(i, j int) int {
		if i == len(a) || j == len(b) {
			return 0
		}
		if v, ok := memo[[2]int{i, j}]; ok {
			return v
		}
		v := max(f(i+1, j), f(i, j+1))
		if a[i] == b[j] {
			v = max(v, 1+f(i+1, j+1))
		}
		memo[[2]int{i, j}] = v
		return v
	}
	return f(0, 0)
}

func TestDiff_NamesTheFirstDifferentLine(t *testing.T) {
	t.Parallel()
	if d := Diff("a\nb\n", "a\nb\n"); d != "" {
		t.Errorf("the same text: %q", d)
	}
	want := "a\nb\nc\nd\ne\nf\n"
	got := "a\nb\nc\nD\ne\nf\n"
	d := Diff(want, got)
	if !strings.HasPrefix(d, "first difference at line 4\n") || !strings.Contains(d, "-d\n+D\n") {
		t.Errorf("diff:\n%s", d)
	}
	if d := Diff("a\nb", "a\nb\n"); !strings.Contains(d, "no line break at the end") {
		t.Errorf("a missing final line break is not shown:\n%s", d)
	}
}

// recorder is a testing.TB that records failures; Fatal ends the goroutine that calls it, as testing's does.
type recorder struct {
	testing.TB
	failures []string
}

func (r *recorder) Helper()      {}
func (r *recorder) Name() string { return "TestX" }
func (r *recorder) Errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

// run calls f with a recorder in a goroutine of its own, and returns the failures.
func run(f func(tb testing.TB)) []string {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r.failures
}

func TestCheckAndStale_UpdateThenCompare(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "a.txt")
	if f := run(func(tb testing.TB) { Check(tb, path, "one\n", false) }); len(f) != 1 || !strings.Contains(f[0], "-update") {
		t.Errorf("a missing golden file: %q", f)
	}
	if f := run(func(tb testing.TB) { Check(tb, path, "one\n", true) }); len(f) != 0 {
		t.Fatalf("update: %q", f)
	}
	if f := run(func(tb testing.TB) { Check(tb, path, "one\n", false) }); len(f) != 0 {
		t.Errorf("the same text: %q", f)
	}
	if f := run(func(tb testing.TB) { Check(tb, path, "one \n", false) }); len(f) != 1 || !strings.Contains(f[0], "+one \n") {
		t.Errorf("a changed text: %q", f)
	}
	stale := filepath.Join(dir, "sub", "old.txt")
	if err := os.WriteFile(stale, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if f := run(func(tb testing.TB) { Stale(tb, filepath.Join(dir, "sub"), ".txt", []string{"a.txt"}, false) }); len(f) != 1 || !strings.Contains(f[0], "old.txt") {
		t.Errorf("a stale file: %q", f)
	}
	if f := run(func(tb testing.TB) { Stale(tb, filepath.Join(dir, "sub"), ".txt", []string{"a.txt"}, true) }); len(f) != 0 {
		t.Errorf("update: %q", f)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale file is still there: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the golden file went: %v", err)
	}
}
