package server_test

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/internal/mcptest"
	"github.com/context-loom/loom/mcpserver"
	"github.com/context-loom/loom/server"
	"github.com/context-loom/loom/store/storeurl"
)

// newMCPServer is the API over a real SQLite file, with keys (for acme and globex) or without, and the MCP
// suite's limits; it returns its URL and engine.
func newMCPServer(t *testing.T, keys map[string]string) (*httptest.Server, *engine.Engine) {
	t.Helper()
	st, err := storeurl.Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "loom.db"), storeurl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := testEngine(st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	srv, err := server.New(server.Config{Engine: eng, Keys: keys,
		Limits: server.Limits{MaxMessageBytes: mcptest.Limits.MaxTextBytes, MaxItems: mcptest.Limits.MaxItems, MaxBodyBytes: 64 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts, eng
}

var bothKeys = map[string]string{keyAcme: "acme", keyGlobex: "globex"}

// bearer sends every request with its key.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b != "" {
		r.Header.Set("Authorization", "Bearer "+string(b))
	}
	return http.DefaultTransport.RoundTrip(r)
}

// connectMCP is an SDK client's session of the server's /mcp, with key ("" for none).
func connectMCP(t *testing.T, url, key string) (*mcp.ClientSession, error) {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: bearer(key)}, MaxRetries: -1}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func mustConnectMCP(t *testing.T, url, key string) *mcp.ClientSession {
	t.Helper()
	cs, err := connectMCP(t, url, key)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestMCPHTTP_Tools(t *testing.T) {
	t.Parallel()
	ts, eng := newMCPServer(t, bothKeys)
	mcptest.Seed(t, eng, "acme")
	mcptest.Run(t, mustConnectMCP(t, ts.URL, keyAcme))
}

func TestMCPHTTP_BadInputIsAToolError(t *testing.T) {
	t.Parallel()
	ts, eng := newMCPServer(t, bothKeys)
	mcptest.Seed(t, eng, "acme")
	mcptest.RunBadInput(t, mustConnectMCP(t, ts.URL, keyAcme))
}

// TestMCPHTTP_TenantsAreIsolated: a client with globex's key names acme's user, session and collection and
// sees none of them.
func TestMCPHTTP_TenantsAreIsolated(t *testing.T) {
	t.Parallel()
	ts, eng := newMCPServer(t, bothKeys)
	mcptest.Seed(t, eng, "acme")
	mcptest.RunIsolation(t, mustConnectMCP(t, ts.URL, keyAcme), mustConnectMCP(t, ts.URL, keyGlobex))
}

// TestMCPHTTP_NeedsAKey: /mcp is behind the API's keys: no key or an unknown one gets the API's 401, and
// the SDK's client cannot connect.
func TestMCPHTTP_NeedsAKey(t *testing.T) {
	t.Parallel()
	ts, _ := newMCPServer(t, bothKeys)
	for _, key := range []string{"", "sk-not-a-key"} {
		if _, err := connectMCP(t, ts.URL, key); err == nil {
			t.Errorf("key %q: the client connected", key)
		}
		req, _ := http.NewRequest("POST", ts.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := (&http.Client{Transport: bearer(key)}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("key %q: %d %s, want the API's 401", key, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
}

// TestMCPHTTP_Keyless: without keys /mcp is the default tenant's, on a loopback Host only (421 for
// another, against DNS rebinding), with a JSON Content-Type only (415, against cross-site posts).
func TestMCPHTTP_Keyless(t *testing.T) {
	t.Parallel()
	ts, _ := newMCPServer(t, nil)
	cs := mustConnectMCP(t, ts.URL, "")
	mcptest.OK(t, cs, mcpserver.ToolRemember, map[string]any{"user": "u", "key": "k", "value": "v"}, nil)
	for _, tc := range []struct {
		host, ctype string
		want        int
	}{
		{"evil.example", "application/json", http.StatusMisdirectedRequest},
		{"", "text/plain", http.StatusUnsupportedMediaType},
	} {
		req, _ := http.NewRequest("POST", ts.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		if tc.host != "" {
			req.Host = tc.host
		}
		req.Header.Set("Content-Type", tc.ctype)
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Host %q, Content-Type %s: %d, want %d", tc.host, tc.ctype, resp.StatusCode, tc.want)
		}
	}
}

// TestMCPHTTP_BodyLimit: a JSON-RPC message larger than the body limit is refused before it is read whole.
func TestMCPHTTP_BodyLimit(t *testing.T) {
	t.Parallel()
	ts, _ := newMCPServer(t, bothKeys)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"count_tokens","arguments":{"text":"` + strings.Repeat("x", 65<<10) + `"}}}`
	req, _ := http.NewRequest("POST", ts.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := (&http.Client{Transport: bearer(keyAcme)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("%d, want 413", resp.StatusCode)
	}
}

// TestMCP_DefaultLimitsAreTheAPIs: the MCP server's default limits are the HTTP API's.
func TestMCP_DefaultLimitsAreTheAPIs(t *testing.T) {
	t.Parallel()
	if mcpserver.DefaultMaxBodyBytes != server.DefaultMaxBodyBytes || mcpserver.DefaultMaxTextBytes != server.DefaultMaxMessageBytes ||
		mcpserver.DefaultMaxItems != server.DefaultMaxItems || mcpserver.DefaultCallTimeout != server.DefaultRequestTimeout {
		t.Error("the MCP server's default limits differ from the API's")
	}
}
