package mcpserver_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/internal/mcptest"
	"github.com/context-loom/loom/mcpserver"
	"github.com/context-loom/loom/store/storeurl"
)

// newServer is an MCP server over an engine on a real SQLite file, with the suite's limits.
func newServer(t *testing.T) (*mcpserver.Server, *engine.Engine) {
	t.Helper()
	st, err := storeurl.Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "loom.db"), storeurl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := engine.New(st, engine.WithSourceTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	ms, err := mcpserver.New(mcpserver.Config{Engine: eng, Limits: mcptest.Limits})
	if err != nil {
		t.Fatal(err)
	}
	return ms, eng
}

// connect is an SDK client's session of tenant's server, in memory.
func connect(t *testing.T, ms *mcpserver.Server, tenant string) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := ms.ForTenant(tenant).Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestMCP_Tools(t *testing.T) {
	t.Parallel()
	ms, eng := newServer(t)
	mcptest.Seed(t, eng, "acme")
	mcptest.Run(t, connect(t, ms, "acme"))
}

func TestMCP_BadInputIsAToolError(t *testing.T) {
	t.Parallel()
	ms, eng := newServer(t)
	mcptest.Seed(t, eng, "acme")
	mcptest.RunBadInput(t, connect(t, ms, "acme"))
}

func TestMCP_TenantsAreIsolated(t *testing.T) {
	t.Parallel()
	ms, eng := newServer(t)
	mcptest.Seed(t, eng, "acme")
	mcptest.RunIsolation(t, connect(t, ms, "acme"), connect(t, ms, "globex"))
}

func TestNew_NeedsAnEngine(t *testing.T) {
	t.Parallel()
	if _, err := mcpserver.New(mcpserver.Config{}); err == nil {
		t.Error("no error without an engine")
	}
}
