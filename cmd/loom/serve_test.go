package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	if err := os.WriteFile(file, []byte("# keys\nsk-file-1 acme\n\n  sk-file-2   globex \nc2VjcmV0IQ== initech\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := loadKeys("sk-env-1=acme, sk-env-2=initech,YmFzZTY0IGtleQ===hooli", true, file)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"sk-env-1": "acme", "sk-env-2": "initech", "YmFzZTY0IGtleQ==": "hooli",
		"sk-file-1": "acme", "sk-file-2": "globex", "c2VjcmV0IQ==": "initech"}
	if fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Fatalf("keys = %v, want %v", keys, want)
	}
	if keys, err := loadKeys("", false, ""); err != nil || len(keys) != 0 {
		t.Errorf("no sources: %v, %v; want no keys", keys, err)
	}
	for _, tt := range []struct{ env, want string }{
		{"sk-no-tenant", "want KEY=TENANT"},
		{"=acme", "the key is empty"},
		{"sk-secret-x=", "the tenant is empty"},
		{"c2VjcmV0IQ==", "the tenant is empty"}, // a padded key without its tenant is not a key for tenant "="
		{"sk-secret-x=acme,sk-secret-x=globex", "two tenants"},
		{"sk=bad\ttenant", "white space"},
		{"sk=bad tenant", "white space"},
		{"sk-secret-x=acme,", "entry 2"},
		{"", "names no key"},
		{" , ", "entry 1"},
	} {
		_, err := loadKeys(tt.env, true, "")
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("loadKeys(%q): %v, want an error saying %q", tt.env, err, tt.want)
		} else if strings.Contains(err.Error(), "sk-secret") || strings.Contains(err.Error(), "c2VjcmV0") {
			t.Errorf("the error names the key: %v", err)
		}
	}
	for _, tt := range []struct{ text, want string }{
		{"one two three\n", "line 1"},
		{"", "names no key"},
		{"# only a comment\n\n   \n# and another\n", "names no key"},
		{"sk-secret-x a=b\n", "may not contain"},
	} {
		if err := os.WriteFile(file, []byte(tt.text), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := loadKeys("sk-env-1=acme", true, file); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("keys file %q: %v, want an error saying %q", tt.text, err, tt.want)
		}
	}
}

// TestServe_RefusesKeySourcesWithoutKeys: a keys file that is empty or only comments, or LOOM_API_KEYS set
// to nothing, stops loom serve before it listens (exit 2): it would otherwise run without authentication.
func TestServe_RefusesKeySourcesWithoutKeys(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(file, []byte("# no keys yet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// serve stops at once; if it listens instead, it is stopped and the test fails.
	serve := func(args ...string) (int, string) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		logs := &cancelOn{syncBuffer: &syncBuffer{}, word: `msg=listening`, cancel: cancel}
		err := run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--store", "memory:"}, args...), strings.NewReader(""), &bytes.Buffer{}, logs)
		return report(err, logs), logs.String()
	}
	if code, errOut := serve("--keys", file); code != exitUsage || !strings.Contains(errOut, "names no key") {
		t.Errorf("empty keys file: exit %d: %s", code, errOut)
	}
	t.Setenv("LOOM_API_KEYS", "")
	if code, errOut := serve(); code != exitUsage || !strings.Contains(errOut, "names no key") {
		t.Errorf("empty LOOM_API_KEYS: exit %d: %s", code, errOut)
	}
}

// cancelOn is a log buffer that calls cancel once word is written to it.
type cancelOn struct {
	*syncBuffer
	word   string
	cancel func()
}

func (c *cancelOn) Write(p []byte) (int, error) {
	n, err := c.syncBuffer.Write(p)
	if strings.Contains(c.syncBuffer.String(), c.word) {
		c.cancel()
	}
	return n, err
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

// listening waits until loom serve, run in a goroutine that sends its result on done with --log-format
// json (and --addr 127.0.0.1:0, a port the system picks, so that no other test can take it first), logs
// the address it listens on, and returns it ("http://127.0.0.1:port"). It fails the test if serve returns
// first, or has not listened within two minutes (a hang).
func listening(t *testing.T, logs *syncBuffer, done <-chan error) string {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		for line := range strings.Lines(logs.String()) {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" && rec.Addr != "" {
				return rec.Addr
			}
		}
		select {
		case err := <-done:
			t.Fatalf("serve returned before it listened: %v\n%s", err, logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not listen:\n%s", logs)
		}
	}
}

// TestServe_ServesAndShutsDown runs loom serve on an SQLite file with keys from the environment, warming
// a collection's index under a memory cap, makes requests, then cancels it (as SIGTERM does) and checks
// that it stops cleanly and the data is there.
func TestServe_ServesAndShutsDown(t *testing.T) {
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
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--store", "sqlite:" + db, "--log-format", "json",
			"--warm-indexes", "acme/manual", "--index-memory", "64MiB"}, strings.NewReader(""), &bytes.Buffer{}, logs)
	}()
	base := listening(t, logs, done)
	if resp, err := http.Get(base + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v\n%s", resp, err, logs)
	} else {
		resp.Body.Close()
	}
	// Ready once the search index of the collection is warmed.
	for deadline := time.Now().Add(2 * time.Minute); ; {
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
	if out := logs.String(); !strings.Contains(out, `"msg":"search indexes warmed","collections":1`) {
		t.Errorf("ready before the index was warmed, or no log of it:\n%s", out)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"loom_indexes_loaded 1\n", "loom_index_memory_limit_bytes 6.7108864e+07\n", "loom_index_builds_total 1\n"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, metrics)
		}
	}
	post := func(path, body string) int {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-test-secret")
		req.Header.Set("Content-Type", "application/json")
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
	case <-time.After(2 * time.Minute):
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		// --store-wait is long: only a hang outlasts it between the first failed try and the restart.
		done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--store", "valkey://" + srv.Addr, "--store-wait", "10m", "--log-format", "json"},
			strings.NewReader(""), &bytes.Buffer{}, logs)
	}()
	// The store is brought back once serve has failed to reach it and said it tries again.
	for deadline := time.Now().Add(2 * time.Minute); !strings.Contains(logs.String(), "the store cannot be reached; trying again"); time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("serve gave up on a store that was down instead of trying again: %v\n%s", err, logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log of a wait for the store:\n%s", logs)
		}
	}
	srv.Restart()
	base := listening(t, logs, done) // serve listens once it has the store
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(base + "/readyz")
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
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
}

func TestServe_RefusesAssemblyRecordBoundsBelowOne(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--assemblies-kept", "0"}, {"--assembly-max-bytes", "0"}} {
		_, errOut, code := runLoom(t, "", append([]string{"serve", "--addr", "127.0.0.1:0", "--store", "memory:"}, args...)...)
		if code != exitUsage || !strings.Contains(errOut, "--record-assemblies=false") {
			t.Errorf("serve %v: exit %d, %q", args, code, errOut)
		}
	}
}
