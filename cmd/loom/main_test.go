package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/tokenizer"
)

// Texts to count. textB's counts differ between cl100k_base, o200k_base and the estimate, so that a test
// that counts it in the wrong one fails.
const (
	textA = "Loom fits context into a model's window exactly.\n"
	textB = "语言模型的上下文窗口是有限的。 Контекстное окно ограничено. 🧵🧵\n"
	textC = "func main() {\n\tfmt.Println(\"<|endoftext|> & more\")\n}\n"
)

// runLoom runs the command line args with stdin, as main would, and returns what it printed and its exit code.
func runLoom(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	code = report(err, &errOut)
	return out.String(), errOut.String(), code
}

// writeFiles writes the texts into a new temporary directory and returns their paths.
func writeFiles(t *testing.T, texts ...string) []string {
	t.Helper()
	dir := t.TempDir()
	paths := make([]string, len(texts))
	for i, text := range texts {
		paths[i] = filepath.Join(dir, fmt.Sprintf("file%d.txt", i))
		if err := os.WriteFile(paths[i], []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return paths
}

func TestTokens_TextsTellEncodingsApart(t *testing.T) {
	t.Parallel()
	cl, o, est := tokenizer.CL100K().Count(textB), tokenizer.O200K().Count(textB), tokenizer.Estimate(textB)
	if cl == o || cl == est || o == est {
		t.Errorf("textB: cl100k_base %d, o200k_base %d, estimate %d: the tests need them to differ", cl, o, est)
	}
}

func TestTokens_Output(t *testing.T) {
	t.Parallel()
	paths := writeFiles(t, textA, textB, textC)
	a, b, c := paths[0], paths[1], paths[2]
	cl, o := tokenizer.CL100K(), tokenizer.O200K()
	est := tokenizer.Estimate

	tests := []struct {
		name       string
		args       []string
		stdin      string
		wantStdout string
		wantStderr string // a substring of stderr; "" means stderr must be empty
	}{
		{
			name:       "OneFileDefaultsToCL100K",
			args:       []string{"tokens", b},
			wantStdout: fmt.Sprintf("%d\t%s\n", cl.Count(textB), b),
		},
		{
			name: "SeveralFilesEndWithTotal",
			args: []string{"tokens", a, b, c},
			wantStdout: fmt.Sprintf("%d\t%s\n%d\t%s\n%d\t%s\n%d\ttotal\n",
				cl.Count(textA), a, cl.Count(textB), b, cl.Count(textC), c,
				cl.Count(textA)+cl.Count(textB)+cl.Count(textC)),
		},
		{
			name:       "StdinWithoutFilesPrintsCountAlone",
			args:       []string{"tokens"},
			stdin:      textB,
			wantStdout: fmt.Sprintf("%d\n", cl.Count(textB)),
		},
		{
			name:       "DashReadsStdin",
			args:       []string{"tokens", "--encoding", "o200k_base", a, "-"},
			stdin:      textC,
			wantStdout: fmt.Sprintf("%d\t%s\n%d\t-\n%d\ttotal\n", o.Count(textA), a, o.Count(textC), o.Count(textA)+o.Count(textC)),
		},
		{
			name:       "Encoding",
			args:       []string{"tokens", "-encoding=o200k_base", b},
			wantStdout: fmt.Sprintf("%d\t%s\n", o.Count(textB), b),
		},
		{
			name:       "ModelCountsInItsEncoding",
			args:       []string{"tokens", "--model", "gpt-4o", b},
			wantStdout: fmt.Sprintf("%d\t%s\n", o.Count(textB), b),
		},
		{
			name:       "ModelGPT4CountsInCL100K",
			args:       []string{"tokens", "--model", "gpt-4", b},
			wantStdout: fmt.Sprintf("%d\t%s\n", cl.Count(textB), b),
		},
		{
			name:       "EstimatedModelSaysSo",
			args:       []string{"tokens", "--model", "claude-sonnet-4-5", b},
			wantStdout: fmt.Sprintf("%d\t%s\n", est(textB), b),
			wantStderr: "claude-sonnet-4-5 is not counted exactly; its counts are estimates",
		},
		{
			name:  "JSON",
			args:  []string{"tokens", "--json", a, "-"},
			stdin: textB,
			wantStdout: fmt.Sprintf(`{"file":%q,"encoding":"cl100k_base","tokens":%d,"bytes":%d}`+"\n"+
				`{"file":"-","encoding":"cl100k_base","tokens":%d,"bytes":%d}`+"\n",
				a, cl.Count(textA), len(textA), cl.Count(textB), len(textB)),
		},
		{
			name:  "JSONStdin",
			args:  []string{"tokens", "--json", "--encoding", "o200k_base"},
			stdin: textC,
			wantStdout: fmt.Sprintf(`{"file":"-","encoding":"o200k_base","tokens":%d,"bytes":%d}`+"\n",
				o.Count(textC), len(textC)),
		},
		{
			name: "JSONModelNamesTheResolvedModel",
			args: []string{"tokens", "--json", "--model", "openai/gpt-4o-2024-08-06", c},
			wantStdout: fmt.Sprintf(`{"file":%q,"encoding":"o200k_base","model":"gpt-4o","tokens":%d,"bytes":%d}`+"\n",
				c, o.Count(textC), len(textC)),
		},
		{
			name: "JSONFineTuneNamesItsBaseModel",
			args: []string{"tokens", "--json", "--model", "ft:gpt-4o-mini-2024-07-18:org::id", c},
			wantStdout: fmt.Sprintf(`{"file":%q,"encoding":"o200k_base","model":"gpt-4o-mini","tokens":%d,"bytes":%d}`+"\n",
				c, o.Count(textC), len(textC)),
		},
		{
			name: "JSONAzureNameIsOpenAIs",
			args: []string{"tokens", "--json", "--model", "gpt-35-turbo-16k", c},
			wantStdout: fmt.Sprintf(`{"file":%q,"encoding":"cl100k_base","model":"gpt-3.5-turbo-16k","tokens":%d,"bytes":%d}`+"\n",
				c, cl.Count(textC), len(textC)),
		},
		{
			name: "JSONEstimatedModelIsApproximate",
			args: []string{"tokens", "--json", "--model", "gemini-2.5-pro", b},
			wantStdout: fmt.Sprintf(`{"file":%q,"encoding":"estimate","model":"gemini-2.5-pro","tokens":%d,"bytes":%d,"approximate":true}`+"\n",
				b, est(textB), len(textB)),
		},
		{
			name:       "EmptyStdin",
			args:       []string{"tokens"},
			wantStdout: "0\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runLoom(t, tt.stdin, tt.args...)
			if code != 0 {
				t.Fatalf("exit code %d, stderr %q", code, stderr)
			}
			if stdout != tt.wantStdout {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout, tt.wantStdout)
			}
			if tt.wantStderr == "" && stderr != "" || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("stderr %q, want %q", stderr, tt.wantStderr)
			}
		})
	}
}

func TestTokens_JSONIsOneObjectPerLine(t *testing.T) {
	t.Parallel()
	// A path that JSON would escape as HTML, and counts against tokenizer's.
	dir := t.TempDir()
	path := filepath.Join(dir, "a<b>&c.txt")
	if err := os.WriteFile(path, []byte(textB), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runLoom(t, "", "tokens", "--json", "--model", "llama-3.3-70b", path, path)
	if code != 0 {
		t.Fatalf("exit code %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2:\n%s", len(lines), stdout)
	}
	for _, line := range lines {
		if !strings.Contains(line, `"file":"`+path+`"`) {
			t.Errorf("line %s does not hold the path %q as given", line, path)
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"file": path, "encoding": "estimate", "model": "llama-3.3-70b",
			"tokens": float64(tokenizer.Estimate(textB)), "bytes": float64(len(textB)), "approximate": true,
		}
		if fmt.Sprint(rec) != fmt.Sprint(want) {
			t.Errorf("got %v, want %v", rec, want)
		}
	}
}

func TestRun_Errors(t *testing.T) {
	t.Parallel()
	paths := writeFiles(t, textA)
	a := paths[0]
	missing := filepath.Join(filepath.Dir(a), "missing.txt")

	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr []string // substrings of stderr
	}{
		{
			name:       "UnknownEncoding",
			args:       []string{"tokens", "--encoding", "p50k_base", a},
			wantCode:   2,
			wantStderr: []string{`unknown encoding "p50k_base"`, "cl100k_base", "o200k_base"},
		},
		{
			name:       "UnknownModel",
			args:       []string{"tokens", "--model", "gpt-9", a},
			wantCode:   2,
			wantStderr: []string{`unknown model "gpt-9"`, "gpt-4o", "claude-sonnet-4-5"},
		},
		{
			name:       "EmptyModel",
			args:       []string{"tokens", "--model=", a},
			wantCode:   2,
			wantStderr: []string{"unknown model"},
		},
		{
			name:       "EncodingAndModel",
			args:       []string{"tokens", "--encoding", "o200k_base", "--model", "gpt-4o", a},
			wantCode:   2,
			wantStderr: []string{"--encoding and --model are mutually exclusive"},
		},
		{
			name:       "UndefinedFlag",
			args:       []string{"tokens", "--count", a},
			wantCode:   2,
			wantStderr: []string{"-count", "loom help tokens"},
		},
		{
			name:       "MissingFileAfterReportingTheOthers",
			args:       []string{"tokens", a, missing, a},
			wantCode:   1,
			wantStdout: fmt.Sprintf("%d\t%s\n", tokenizer.CL100K().Count(textA), a),
			wantStderr: []string{missing},
		},
		{
			name:       "NoCommand",
			wantCode:   2,
			wantStderr: []string{"Usage:", "tokens"},
		},
		{
			name:       "UnknownCommand",
			args:       []string{"frobnicate"},
			wantCode:   2,
			wantStderr: []string{`unknown command "frobnicate"`},
		},
		{
			name:       "HelpUnknownCommand",
			args:       []string{"help", "frobnicate"},
			wantCode:   2,
			wantStderr: []string{`unknown command "frobnicate"`},
		},
		{
			name:       "VersionWithArguments",
			args:       []string{"version", "now"},
			wantCode:   2,
			wantStderr: []string{"takes no arguments"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runLoom(t, "", tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d (stderr %q)", code, tt.wantCode, stderr)
			}
			if stdout != tt.wantStdout {
				t.Errorf("stdout %q, want %q", stdout, tt.wantStdout)
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q does not contain %q", stderr, want)
				}
			}
		})
	}
}

func TestRun_HelpAndVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		args       []string
		wantStdout []string // substrings of stdout
		wantStderr []string // substrings of stderr
	}{
		{name: "Help", args: []string{"help"}, wantStdout: []string{"Usage:", "tokens", "version"}},
		{name: "DashH", args: []string{"-h"}, wantStdout: []string{"Usage:", "tokens"}},
		{name: "DashDashHelp", args: []string{"--help"}, wantStdout: []string{"Usage:", "tokens"}},
		{
			name:       "HelpTokens",
			args:       []string{"help", "tokens"},
			wantStdout: []string{"loom tokens [--encoding NAME | --model NAME] [--json] [FILE...]", "cl100k_base", "-model"},
		},
		{
			name:       "TokensDashH",
			args:       []string{"tokens", "-h"},
			wantStderr: []string{"loom tokens [--encoding NAME | --model NAME] [--json] [FILE...]"},
		},
		{name: "Version", args: []string{"version"}, wantStdout: []string{"loom " + loom.Version + "\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, code := runLoom(t, "", tt.args...)
			if code != 0 {
				t.Errorf("exit code %d, want 0 (stderr %q)", code, stderr)
			}
			for _, want := range tt.wantStdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("stdout %q does not contain %q", stdout, want)
				}
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q does not contain %q", stderr, want)
				}
			}
			if len(tt.wantStderr) == 0 && stderr != "" {
				t.Errorf("stderr %q, want none", stderr)
			}
		})
	}
}

func TestRun_CanceledContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	err := run(ctx, []string{"tokens"}, strings.NewReader(textA), &out, &errOut)
	if err == nil || report(err, &errOut) != 1 {
		t.Errorf("run with a canceled context: err %v, want context.Canceled exiting 1", err)
	}
	if out.Len() != 0 {
		t.Errorf("stdout %q, want none", out.String())
	}
}
