package server_test

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
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

// readyzLogLevel asks /readyz once and returns its status and the level of the request's log line.
func readyzLogLevel(t *testing.T, st store.Store, ready func() error) (int, string) {
	t.Helper()
	eng, err := engine.New(st)
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	srv, err := server.New(server.Config{Engine: eng, Ready: ready, Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ts.Close() // the handler has returned, and logged
	for line := range strings.Lines(logs.String()) {
		var rec struct {
			Level, Msg, Route string
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "request" && rec.Route == "GET /readyz" {
			return resp.StatusCode, rec.Level
		}
	}
	t.Fatalf("no request line for /readyz in the logs:\n%s", logs)
	return 0, ""
}

// TestAPI_ReadyzLogLevels: a 503 from /readyz because the indexes are still loading is routine at start-up
// and logged at INFO; a 503 because the store cannot be reached is an ERROR.
func TestAPI_ReadyzLogLevels(t *testing.T) {
	t.Parallel()
	loading := func() error { return errors.New("the search indexes are loading") }
	if code, level := readyzLogLevel(t, memory.New(store.Options{}), loading); code != 503 || level != "INFO" {
		t.Errorf("not ready: status %d logged at %s, want 503 at INFO", code, level)
	}
	if code, level := readyzLogLevel(t, downStore{memory.New(store.Options{})}, nil); code != 503 || level != "ERROR" {
		t.Errorf("store down: status %d logged at %s, want 503 at ERROR", code, level)
	}
	if code, level := readyzLogLevel(t, memory.New(store.Options{}), nil); code != 200 || level != "INFO" {
		t.Errorf("ready: status %d logged at %s, want 200 at INFO", code, level)
	}
}
