package main

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/internal/mcptest"
	"github.com/context-loom/loom/store/storeurl"
)

// startMCP runs `loom mcp` in-process on a pair of pipes and returns the SDK client's session of it. When
// the test ends, the client closes its end and the command must return nil.
func startMCP(t *testing.T, args ...string) *mcp.ClientSession {
	t.Helper()
	inR, inW := io.Pipe()   // client -> loom mcp
	outR, outW := io.Pipe() // loom mcp -> client
	done := make(chan error, 1)
	var stderr syncBuffer
	go func() {
		err := run(context.Background(), append([]string{"mcp"}, args...), inR, outW, &stderr)
		outW.Close()
		done <- err
	}()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(),
		&mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		inW.Close()
		t.Fatalf("connect: %v (stderr: %s)", err, stderr.String())
	}
	t.Cleanup(func() {
		cs.Close() // closes inW: loom mcp sees the end of its input
		if err := <-done; err != nil {
			t.Errorf("loom mcp: %v (stderr: %s)", err, stderr.String())
		}
	})
	return cs
}

// seededStore is an SQLite file whose tenant acme has the suite's collection.
func seededStore(t *testing.T) string {
	t.Helper()
	url := "sqlite:" + filepath.Join(t.TempDir(), "loom.db")
	st, err := storeurl.Open(t.Context(), url, storeurl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := engine.New(st)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	mcptest.Seed(t, eng, "acme")
	return url
}

func limitArgs() []string {
	return []string{"--max-message-bytes", strconv.Itoa(mcptest.Limits.MaxTextBytes), "--max-items", strconv.Itoa(mcptest.Limits.MaxItems)}
}

func TestMCP_Stdio(t *testing.T) {
	t.Parallel()
	url := seededStore(t)
	mcptest.Run(t, startMCP(t, append([]string{"--store", url, "--tenant", "acme"}, limitArgs()...)...))
}

func TestMCP_StdioBadInput(t *testing.T) {
	t.Parallel()
	url := seededStore(t)
	mcptest.RunBadInput(t, startMCP(t, append([]string{"--store", url, "--tenant", "acme"}, limitArgs()...)...))
}

// TestMCP_StdioTenant: --tenant chooses whose state the server sees: another tenant of the same file
// does not see acme's collection.
func TestMCP_StdioTenant(t *testing.T) {
	t.Parallel()
	url := seededStore(t)
	cs := startMCP(t, "--store", url, "--tenant", "globex")
	if res := mcptest.Call(t, cs, "retrieve", map[string]any{"collection": mcptest.Collection, "query": "password"}); !res.IsError {
		t.Errorf("globex retrieves from acme's collection: %s", mcptest.Text(t, res))
	}
}

func TestMCP_BadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--tenant", ""}, {"--max-items", "0"}, {"extra"}, {"--store", "nope:x"}} {
		err := run(t.Context(), append([]string{"mcp"}, args...), strings.NewReader(""), io.Discard, io.Discard)
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != exitUsage {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}
