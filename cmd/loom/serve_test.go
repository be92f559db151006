package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/context-loom/loom/internal/valkeytest"
)

func TestServe_RefusesPublicAddressWithoutKeys(t *testing.T) {
	_, errOut, code := runLoom(t, "", "serve", "--addr", "0.0.0.0:0", "--store", "memory:")
	if code != exitUsage || !strings.Contains(errOut, "refusing to listen") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
}

func TestLoadKeys(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte("# keys\nsk-file-1 acme\n\n  sk-file-2   globex \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := loadKeys("sk-env-1=acme, sk-env-2=initech", file)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"sk-env-1": "acme", "sk-env-2": "initech", "sk-file-1": "acme", "sk-file-2": "globex"}
	if fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Fatalf("keys = %v, want %v", keys, want)
	}
	for _, bad := range []string{"sk-no-tenant", "=acme", "sk-secret-x=acme,sk-secret-x=globex", "sk=bad\ttenant"} {
		_, err := loadKeys(bad, "")
		if err == nil {
			t.Errorf("loadKeys(%q) succeeded", bad)
		} else if strings.Contains(err.Error(), "sk-secret") {
			t.Errorf("the error names the key: %v", err)
		}
	}
	if err := os.WriteFile(file, []byte("one two three\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadKeys("", file); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a bad keys file: %v", err)
	}
}

// syncBuffer is a buffer written by the server's logger and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServe_ServesAndShutsDown runs loom serve on an SQLite file with keys from the environment, makes
// requests, then cancels it (as SIGTERM does) and checks that it stops cleanly and the data is there.
func TestServe_ServesAndShutsDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	db := filepath.Join(t.TempDir(), "loom.db")
	doc := filepath.Join(t.TempDir(), "manual.md")
	if err := os.WriteFile(doc, []byte("# Manual\n\nThe zeppelin leaves at noon.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runLoom(t, "", "ingest", "--store", "sqlite:"+db, "--tenant", "acme", "--collection", "manual", doc); code != 0 {
		t.Fatalf("ingest: exit %d: %s", code, errOut)
	}
	t.Setenv("LOOM_API_KEYS", "sk-test-secret=acme")
	t.Setenv("LOOM_MAX_ITEMS", "5")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", addr, "--store", "sqlite:" + db, "--log-format", "json"}, strings.NewReader(""), &bytes.Buffer{}, logs)
	}()
	base := "http://" + addr
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not come up: %v\n%s", err, logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Ready once the search index of the collection is loaded.
	for {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 200 {
			break
		}
		if resp.StatusCode != 503 || time.Now().After(deadline) {
			t.Fatalf("/readyz: %d\n%s", resp.StatusCode, logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out := logs.String(); !strings.Contains(out, `"msg":"search indexes loaded","collections":1`) {
		t.Errorf("ready before the index was loaded, or no log of it:\n%s", out)
	}
	post := func(path, body string) int {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-test-secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("/v1/sessions/s/messages", `{"role":"user","content":"hello"}`); code != 201 {
		t.Fatalf("append: %d", code)
	}
	six := `{"messages":[` + strings.TrimSuffix(strings.Repeat(`{"role":"user","content":"x"},`, 6), ",") + `]}`
	if code := post("/v1/sessions/s/messages", six); code != 413 {
		t.Errorf("LOOM_MAX_ITEMS=5 did not limit an append of 6: %d", code)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve returned %v\n%s", err, logs)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop")
	}
	out := logs.String()
	if strings.Contains(out, "sk-test-secret") {
		t.Error("the key is in the logs")
	}
	for _, want := range []string{`"msg":"listening"`, `"msg":"stopped"`, `"route":"POST /v1/sessions/{session}/messages"`, `"tenant":"acme"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the logs lack %s:\n%s", want, out)
		}
	}
	// The acknowledged message is in the file.
	shown, errOut, code := runLoom(t, "", "session", "show", "--store", "sqlite:"+db, "--tenant", "acme", "--session", "s")
	var m struct{ Content string }
	if code != 0 || json.Unmarshal([]byte(shown), &m) != nil || m.Content != "hello" {
		t.Fatalf("after shutdown: exit %d %q %s", code, shown, errOut)
	}
}

// TestServe_WaitsForTheStore: a Valkey server that is down when loom serve starts is retried; once it is up
// the server serves.
func TestServe_WaitsForTheStore(t *testing.T) {
	t.Parallel()
	srv := valkeytest.StartServer(t)
	srv.Stop()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", addr, "--store", "valkey://" + srv.Addr, "--store-wait", "20s", "--log-format", "json"},
			strings.NewReader(""), &bytes.Buffer{}, logs)
	}()
	time.Sleep(1500 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("serve gave up on a store that was down for 1.5s: %v\n%s", err, logs)
	default:
	}
	srv.Restart()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after the store came back: %v\n%s", err, logs)
		}
	}
	if !strings.Contains(logs.String(), "the store cannot be reached; trying again") {
		t.Errorf("no log of the wait:\n%s", logs)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
}
