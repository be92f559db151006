package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/context-loom/loom/tokenizer"
)

func TestChunk_PrintsJSONLinesWithExactOffsets(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "..", "tokenizer", "testdata", "corpus", "english.txt"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data[:20000])
	path := writeFiles(t, text)[0]
	for _, args := range [][]string{
		{"chunk", "--size", "100", "--overlap", "10", path},
		{"chunk", "--strategy", "fixed", "--size", "64", "--overlap", "0", "--encoding", "o200k_base", path},
		{"chunk", "--strategy", "sliding", "--size", "80", path},
		{"chunk", "--size", "50", "-"},
	} {
		stdin := ""
		if args[len(args)-1] == "-" {
			stdin = text
		}
		out, errOut, code := runLoom(t, stdin, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		enc := tokenizer.CL100K()
		for i, a := range args {
			if a == "--encoding" {
				enc, _ = tokenizer.Get(args[i+1])
			}
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) < 5 {
			t.Fatalf("%v: %d chunks", args, len(lines))
		}
		prevEnd := 0
		for i, line := range lines {
			var rec chunkRecord
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("%v line %d: %v", args, i, err)
			}
			if rec.Index != i || text[rec.Start:rec.End] != rec.Text || enc.Count(rec.Text) != rec.Tokens {
				t.Fatalf("%v line %d: index %d, [%d, %d), %d tokens: not the text's bytes and count", args, i, rec.Index, rec.Start, rec.End, rec.Tokens)
			}
			if rec.Start > prevEnd {
				t.Fatalf("%v: gap before chunk %d", args, i)
			}
			if rec.Metadata == nil {
				t.Fatalf("%v: metadata is null, want an object", args)
			}
			prevEnd = rec.End
		}
		if prevEnd != len(text) {
			t.Fatalf("%v: chunks end at %d of %d", args, prevEnd, len(text))
		}
	}
}

func TestChunk_BadOptionsExitWithOneLine(t *testing.T) {
	t.Parallel()
	path := writeFiles(t, "some text to chunk\n")[0]
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"chunk", "--size", "10", "--overlap", "10", path}, 2, "overlap"},
		{[]string{"chunk", "--size", "-3", path}, 2, "size"},
		{[]string{"chunk", "--overlap", "-1", path}, 2, "overlap"},
		{[]string{"chunk", "--strategy", "nonsense", path}, 2, "unknown strategy"},
		{[]string{"chunk", "--encoding", "nonsense", path}, 2, "unknown encoding"},
		{[]string{"chunk", "--lang", "go", path}, 2, "does not apply"},
		{[]string{"chunk", "--strategy", "code", "--lang", "cobol", path}, 2, "unknown language"},
		{[]string{"chunk"}, 2, "FILE"},
		{[]string{"chunk", filepath.Join(t.TempDir(), "missing.txt")}, 1, "missing.txt"},
	} {
		out, errOut, code := runLoom(t, "", tc.args...)
		if code != tc.code || out != "" || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and one line about %q", tc.args, code, out, errOut, tc.code, tc.want)
		}
	}
}
