package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/context-loom/loom/internal/valkeytest"
)

// testdata writes a corpus of one document, beside a SOURCES.md that is not part of it, and a dev set of two
// questions.
func testdata(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "corpus"), 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"corpus/notes.md":   "# Tea\n\nGreen tea steeps for two minutes.\n",
		"corpus/SOURCES.md": "not a document of the corpus: never ingested, so its phrases are not found\n",
		"dev.jsonl": `{"id":"d1","doc":"notes.md","question":"How long does green tea steep?","gold":"two minutes"}` + "\n" +
			`{"id":"d2","doc":"notes.md","question":"Tea?","gold":"Green tea"}` + "\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRun_PrintsTheTableOfEachStoreAndMode(t *testing.T) {
	t.Parallel()
	var stdout, stderr strings.Builder
	if err := run(t.Context(), []string{"-testdata", testdata(t), "-stores", "memory,sqlite", "-ranks"}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"dev: 2 questions, top 5\n",
		"| memory | keyword | 1.000 (2) | 1.000 (2) | 1.000 |\n",
		"| sqlite | mmr |",
		"dev, ranks on memory:",
		"| d1 | notes.md | 1 | 1 | 1 | 1 | How long does green tea steep? |\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the output has no %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr.String(), "heldout.jsonl") {
		t.Errorf("stderr does not say the held-out set is missing: %q", stderr.String())
	}
}

// TestRun_StartsAValkeyServerOfItsOwn: the valkey store is a server the command starts on a free port and
// stops at the end.
func TestRun_StartsAValkeyServerOfItsOwn(t *testing.T) {
	t.Parallel()
	bin := valkeytest.Binary()
	if bin == "" {
		if os.Getenv(valkeytest.EnvRequire) == "1" {
			t.Fatal("no Valkey server binary, and " + valkeytest.EnvRequire + "=1 requires one")
		}
		t.Skip("no Valkey server binary")
	}
	var stdout, stderr strings.Builder
	if err := run(t.Context(), []string{"-testdata", testdata(t), "-stores", "valkey", "-valkey-server", bin}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if want := "| valkey | hybrid | 1.000 (2) | 1.000 (2) | 1.000 |\n"; !strings.Contains(stdout.String(), want) {
		t.Errorf("the output has no %q:\n%s", want, stdout.String())
	}
}

func TestRun_RefusesWhatItCannotMeasure(t *testing.T) {
	t.Parallel()
	dir := testdata(t)
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"id":"b1","doc":"notes.md","question":"Which tea?","gold":"ea"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		usage bool
	}{
		{"an unknown store", []string{"-testdata", dir, "-stores", "memory,postgres"}, true},
		{"an argument", []string{"-testdata", dir, "extra"}, true},
		{"a gold phrase found twice", []string{"-testdata", dir, "-stores", "memory", "-questions", bad}, false},
		{"no corpus", []string{"-testdata", t.TempDir(), "-stores", "memory"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr strings.Builder
			err := run(t.Context(), tc.args, &stdout, &stderr)
			if err == nil || errors.Is(err, errUsage) != tc.usage {
				t.Errorf("error %v, want one (a usage error: %v)", err, tc.usage)
			}
		})
	}
}
