package loom_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The README's set-up commands, each in a code block of its own.
const (
	mainCommand = "go run ./cmd/loom demo"
	testCommand = "make test"
)

// offlineEnv is the environment, plus extra, for go commands run by these tests: no network, no toolchain
// download, no workspace.
func offlineEnv(extra ...string) []string {
	return append(append(os.Environ(), "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local"), extra...)
}

func readREADME(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(data), "\r\n", "\n")
}

// fencedBlocks returns the README's fenced code blocks in order, as (language, content) pairs.
func fencedBlocks(readme string) [][2]string {
	var blocks [][2]string
	lines := strings.SplitAfter(readme, "\n")
	for i := 0; i < len(lines); i++ {
		lang, ok := strings.CutPrefix(strings.TrimRight(lines[i], "\n"), "```")
		if !ok {
			continue
		}
		var body strings.Builder
		for i++; i < len(lines) && strings.TrimRight(lines[i], "\n") != "```"; i++ {
			body.WriteString(lines[i])
		}
		blocks = append(blocks, [2]string{lang, body.String()})
	}
	return blocks
}

// TestREADME_FragmentsAreRun checks that every Go block of the README that is not a whole program (those
// run in TestREADME_LibraryExample) stands verbatim in an Example that `go test` runs.
func TestREADME_FragmentsAreRun(t *testing.T) {
	t.Parallel()
	var examples []byte
	for _, path := range []string{filepath.Join("chunker", "example_test.go"), filepath.Join("engine", "example_test.go"), filepath.Join("engine", "example_cgo_test.go")} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		examples = append(examples, data...)
	}
	for _, b := range fencedBlocks(readREADME(t)) {
		if b[0] != "go" || strings.HasPrefix(b[1], "package ") {
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(b[1]), "\n") {
			if !strings.Contains(string(examples), "\t"+line+"\n") {
				t.Errorf("README line %q is in no example that runs", line)
			}
		}
	}
}

func TestREADME_SetUpCommands(t *testing.T) {
	t.Parallel()
	readme := readREADME(t)
	for _, cmd := range []string{mainCommand, testCommand} {
		if block := "```sh\n" + cmd + "\n```\n"; !strings.Contains(readme, block) {
			t.Errorf("README.md has no code block %q", block)
		}
	}
	ci, err := os.ReadFile(filepath.Join(".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "\n"+testCommand+"\n") {
		t.Errorf(".ci/run does not run the README's test command %q", testCommand)
	}
}

func TestREADME_MainCommandRuns(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs cmd/loom; skipped with -short")
	}
	goBin := lookGo(t)
	args := strings.Fields(mainCommand)[1:]
	cmd := exec.CommandContext(t.Context(), goBin, args...) // in the repository's root
	cmd.Env = offlineEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", mainCommand, err, stderr.String())
	}
	// The seed's scenario, assembled: the agent's instructions, the history, Bob's memory, the tool's
	// result, the question last, and the table's total within the seed's budget of 4000.
	out := stdout.String()
	for _, want := range []string{"You are a helpful AI assistant.", "I want to upgrade to premium", "- name: Bob",
		`&quot;eligible_upgrade&quot;: true`, "[user]\n  How much does premium cost?\n", "Nothing was left out"} {
		if !strings.Contains(out, want) {
			t.Errorf("%s does not print %q:\n%s", mainCommand, want, out)
		}
	}
	if !regexp.MustCompile(`total \(with the format's overhead\) +[1-9][0-9]* +4000`).MatchString(out) {
		t.Errorf("%s prints no total out of 4000:\n%s", mainCommand, out)
	}
}

func TestREADME_LibraryExample(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the README's example; skipped with -short")
	}
	var program, want string
	blocks := fencedBlocks(readREADME(t))
	for i, b := range blocks {
		if b[0] == "go" {
			if i+1 >= len(blocks) || blocks[i+1][0] != "text" {
				t.Fatal("README.md: the first ```go block is not followed by a ```text block with its output")
			}
			program, want = b[1], blocks[i+1][1]
			break
		}
	}
	if program == "" {
		t.Fatal("README.md has no ```go block")
	}

	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	gomod := "module readmeexample\n\ngo 1.26\n\nrequire github.com/context-loom/loom v0.0.0\n\n" +
		"replace github.com/context-loom/loom => " + root + "\n"
	for name, content := range map[string]string{"go.mod": gomod, "main.go": program} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(t.Context(), lookGo(t), "run", ".")
	cmd.Dir = dir
	cmd.Env = offlineEnv("GOFLAGS=-mod=mod") // no go.sum: the only requirement is replaced by a directory
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go run the README's example: %v\n%s", err, stderr.String())
	}
	if got := stdout.String(); got != want {
		t.Errorf("the README's example printed:\n%s\nthe README says:\n%s", got, want)
	}
}

// lookGo returns the go command; go test puts its own first on the PATH.
func lookGo(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to run the README's commands: %v", err)
	}
	return goBin
}
