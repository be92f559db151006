package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/internal/mcptest"
	"github.com/context-loom/loom/mcpserver"
)

// TestBuild_WithoutCgoIsStatic: CGO_ENABLED=0 builds the command (tree-sitter, which needs cgo, is left
// out), and the binary is statically linked, no interpreter and no shared library, so that an image
// FROM scratch runs it; it runs, chunks code as plain text, saying so, and serves MCP on standard input
// and output.
func TestBuild_WithoutCgoIsStatic(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("the check reads an ELF binary")
	}
	if raceEnabled {
		t.Skip("builds the command in another process, with nothing for the race detector to watch: make test runs it without it, with and without cgo")
	}
	bin := filepath.Join(t.TempDir(), "loom")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOPROXY=off", "GOTOOLCHAIN=local")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary has a %v program header: it is linked dynamically", p.Type)
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil || len(libs) > 0 {
		t.Errorf("the binary needs shared libraries %v (%v)", libs, err)
	}

	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.Contains(string(out), loom.Version) {
		t.Fatalf("loom version: %q, %v", out, err)
	}
	src := filepath.Join(t.TempDir(), "util.go")
	if err := os.WriteFile(src, []byte("package util\n\nfunc Add(a, b int) int { return a + b }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(bin, "chunk", "--strategy", "code", src).Output()
	if err != nil || !strings.Contains(string(out), `"parse_reason":"unavailable"`) {
		t.Errorf("loom chunk --strategy code without cgo: %q, %v; want chunks that say no parser was there", out, err)
	}

	// The binary serves MCP on its own standard input and output, as a desktop client starts it (its logs
	// on standard error, so that standard output carries the protocol only).
	cmd := exec.Command(bin, "mcp", "--store", "sqlite:"+filepath.Join(t.TempDir(), "loom.db"))
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("loom mcp: %v", err)
	}
	mcptest.OK(t, cs, mcpserver.ToolRemember, map[string]any{"user": "u", "key": "k", "value": "v"}, nil)
	if res := mcptest.Call(t, cs, mcpserver.ToolRecall, map[string]any{"user": "u"}); res.IsError || !strings.Contains(mcptest.Text(t, res), `"value":"v"`) {
		t.Errorf("loom mcp: recall: %s", mcptest.Text(t, res))
	}
	if err := cs.Close(); err != nil {
		t.Errorf("loom mcp: close: %v", err)
	}
}
