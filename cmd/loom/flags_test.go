package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// commandVerbs are the verbs of the commands that have them.
var commandVerbs = map[string]map[string]verb{
	"session": sessionVerbs, "memory": memoryVerbs, "agent": agentVerbs, "collection": collectionVerbs, "document": documentVerbs,
}

// TestFlags_AfterAnArgument_EveryCommand: every command and verb parses a flag that comes after an
// argument (here -h, which every one of them knows): before, the flag was taken as one more argument.
func TestFlags_AfterAnArgument_EveryCommand(t *testing.T) {
	t.Parallel()
	var lines [][]string
	for _, c := range commands {
		table, ok := commandVerbs[c.name]
		if !ok {
			lines = append(lines, []string{c.name})
			continue
		}
		for _, v := range slices.Sorted(func(yield func(string) bool) {
			for v := range table {
				if !yield(v) {
					return
				}
			}
		}) {
			lines = append(lines, []string{c.name, v})
		}
	}
	for _, line := range lines {
		t.Run(strings.Join(line, "_"), func(t *testing.T) {
			t.Parallel()
			args := append(append([]string(nil), line...), "stray-argument", "-h")
			_, errOut, code := runLoom(t, "", args...)
			if code != 0 || !strings.Contains(errOut, "Usage") {
				t.Errorf("loom %q: exit %d, stderr %q; want the usage and exit 0", args, code, errOut)
			}
			// After "--", -h is an argument: no command takes it for a flag.
			args = append(append([]string(nil), line...), "--", "-h")
			if _, errOut, code := runLoom(t, "", args...); code == 0 || strings.Contains(errOut, "Usage") {
				t.Errorf("loom %q: exit %d, stderr %q; want -h taken as an argument", args, code, errOut)
			}
		})
	}
}

// TestParseFlags_Interleaved: flags and arguments in any order; "--" ends the flags, unless it is a flag's
// value.
func TestParseFlags_Interleaved(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args       []string
		wantArgs   []string
		wantN      int
		wantS      string
		wantB      bool
		wantMultis []string
	}{
		{args: []string{"a", "-n", "2", "b"}, wantArgs: []string{"a", "b"}, wantN: 2},
		{args: []string{"a", "b", "--s=x", "--b"}, wantArgs: []string{"a", "b"}, wantS: "x", wantB: true},
		{args: []string{"-", "--b", "-"}, wantArgs: []string{"-", "-"}, wantB: true},
		{args: []string{"a", "--", "-n", "3", "--"}, wantArgs: []string{"a", "-n", "3", "--"}},
		{args: []string{"--s", "--", "a", "-n", "4"}, wantArgs: []string{"a"}, wantS: "--", wantN: 4},
		{args: []string{"--s", "--", "--", "-b"}, wantArgs: []string{"-b"}, wantS: "--"},
		{args: []string{"--b", "--", "-n"}, wantArgs: []string{"-n"}, wantB: true},
		{args: []string{"x", "--m", "1", "y", "--m", "2"}, wantArgs: []string{"x", "y"}, wantMultis: []string{"1", "2"}},
		{args: nil, wantArgs: []string{}},
	} {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		n := fs.Int("n", 0, "")
		s := fs.String("s", "", "")
		b := fs.Bool("b", false, "")
		var m multiFlag
		fs.Var(&m, "m", "")
		if err := parseFlags(fs, func() {}, tt.args); err != nil {
			t.Fatalf("%q: %v", tt.args, err)
		}
		if got := fs.Args(); !slices.Equal(got, tt.wantArgs) || *n != tt.wantN || *s != tt.wantS || *b != tt.wantB || !slices.Equal(m, tt.wantMultis) {
			t.Errorf("%q: args %q n %d s %q b %v m %q; want %q %d %q %v %q", tt.args, got, *n, *s, *b, m, tt.wantArgs, tt.wantN, tt.wantS, tt.wantB, tt.wantMultis)
		}
	}
}

// TestFlags_AfterArguments_PerCommand: the commands that take arguments read flags that follow them as
// flags: the examples from the bug report, and one for each such command.
func TestFlags_AfterArguments_PerCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	readme := filepath.Join(dir, "README.md")
	text := strings.Repeat("Loom fits context into a model's window. Iota is the ninth letter. ", 40)
	if err := os.WriteFile(readme, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	same := func(name string, a, b []string) string {
		t.Helper()
		outA, errA, codeA := runLoom(t, "", a...)
		outB, errB, codeB := runLoom(t, "", b...)
		if codeA != 0 || codeB != 0 || outA != outB {
			t.Errorf("%s: loom %q (exit %d, %s) and loom %q (exit %d, %s) differ:\n%s\n%s", name, a, codeA, errA, b, codeB, errB, outA, outB)
		}
		return outA
	}
	// tokens README.md --json: was "open --json".
	out := same("tokens", []string{"tokens", readme, "--json"}, []string{"tokens", "--json", readme})
	var rec tokensRecord
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec.File != readme || rec.Tokens == 0 {
		t.Errorf("tokens README.md --json: %q (%v)", out, err)
	}
	// chunk FILE --size N.
	out = same("chunk", []string{"chunk", readme, "--size", "32", "--overlap", "0"}, []string{"chunk", "--size", "32", "--overlap", "0", readme})
	if n := strings.Count(out, "\n"); n < 10 {
		t.Errorf("chunk FILE --size 32: %d chunks, want many", n)
	}
	// ingest PATH --collection C --json, and retrieve --collection c iota --top-k 2 (was a search for
	// "iota --top-k 2").
	db := "sqlite:" + filepath.Join(dir, "loom.db")
	out, errOut, code := runLoom(t, "", "ingest", readme, "--store", db, "--collection", "c", "--chunk-size", "32", "--json")
	if code != 0 || !json.Valid([]byte(out)) {
		t.Fatalf("ingest PATH --flags: exit %d %q %s", code, out, errOut)
	}
	out = same("retrieve", []string{"retrieve", "--store", db, "--collection", "c", "iota", "--top-k", "2"},
		[]string{"retrieve", "--store", db, "--collection", "c", "--top-k", "2", "iota"})
	if n := strings.Count(out, "\n"); n != 2 {
		t.Errorf("retrieve ... iota --top-k 2: %d results, want 2:\n%s", n, out)
	}
	// A flag's value may be "--": memory set --value -- stores "--".
	if _, errOut, code := runLoom(t, "", "memory", "set", "--store", db, "--user", "u", "--key", "k", "--value", "--"); code != 0 {
		t.Fatalf("memory set --value --: exit %d %s", code, errOut)
	}
	out, _, _ = runLoom(t, "", "memory", "get", "--store", db, "--user", "u", "--key", "k")
	var f struct{ Value string }
	if json.Unmarshal([]byte(out), &f) != nil || f.Value != "--" {
		t.Errorf("memory get after --value --: %q", out)
	}
}
