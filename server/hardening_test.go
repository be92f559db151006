package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/server"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/memory"
)

// newPlainServer is a server over an empty memory store with cfg (its Engine set here).
func newPlainServer(t *testing.T, cfg server.Config) *httptest.Server {
	t.Helper()
	eng, err := engine.New(memory.New(store.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Engine = eng
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// TestOpenAPI_VersionIsLoomVersion: the document served, and OpenAPI(), say loom.Version, the version the
// CLI prints.
func TestOpenAPI_VersionIsLoomVersion(t *testing.T) {
	t.Parallel()
	ts := newPlainServer(t, server.Config{})
	resp, err := http.Get(ts.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	served, _ := io.ReadAll(resp.Body)
	for name, doc := range map[string][]byte{"served": served, "OpenAPI()": server.OpenAPI()} {
		var d struct {
			Info struct {
				Version string `json:"version"`
			} `json:"info"`
		}
		if err := json.Unmarshal(doc, &d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d.Info.Version != loom.Version {
			t.Errorf("%s: info.version %q, want loom.Version %q", name, d.Info.Version, loom.Version)
		}
	}
}
