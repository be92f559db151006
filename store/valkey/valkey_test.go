package valkey_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/internal/valkeytest"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/storetest"
	"github.com/context-loom/loom/store/valkey"
)

var prefixes atomic.Int64

// testTimeout is the Timeout of the tests' stores unless a test sets its own: a bound only a hang breaks
// (valkey.DefaultTimeout, 2 s, is for a healthy server, and a loaded machine can take longer to answer).
const testTimeout = 2 * time.Minute

// open opens a store on addrs with a prefix of its own and testTimeout unless opts say otherwise, closed
// when the test ends.
func open(t testing.TB, opts valkey.Options, addrs ...string) *store.Store {
	t.Helper()
	opts.Client.InitAddress = addrs
	if opts.Timeout == 0 {
		opts.Timeout = testTimeout
	}
	if opts.Prefix == "" {
		opts.Prefix = fmt.Sprintf("test%d", prefixes.Add(1))
	}
	s, err := valkey.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// openColls opens a store as open does and returns its collections (a collection.Epocher too).
func openColls(t testing.TB, opts valkey.Options, addrs ...string) collection.Store {
	t.Helper()
	c, ok := open(t, opts, addrs...).Collections()
	if !ok {
		t.Fatal("the store keeps no collections")
	}
	return c
}

func TestConformance(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	storetest.Run(t, func(t *testing.T, opts store.Options) *store.Store {
		return open(t, valkey.Options{Options: opts}, addr)
	})
}

func TestBackendConformance(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	storetest.RunBackend(t, func(t *testing.T, opts store.Options) store.Backend {
		return open(t, valkey.Options{Options: opts}, addr).Backend()
	}, storetest.BackendOptions{})
}

// TestConformance_Cluster runs the suite on a three-node cluster: a command that touched keys of two
// slots would fail with CROSSSLOT (or make the client's command builder panic).
func TestConformance_Cluster(t *testing.T) {
	t.Parallel()
	c := valkeytest.StartCluster(t, 3)
	storetest.Run(t, func(t *testing.T, opts store.Options) *store.Store {
		s := open(t, valkey.Options{Options: opts}, c.Addrs()...)
		return s
	})
}

// writeCounter counts the writes to the network of the connections it dials, per address. With match
// set it counts only writes that carry it (a store's key prefix), so the client's own traffic (handshakes,
// keep-alive PINGs, which come at times a loaded machine makes unpredictable) is not mistaken for the
// store's.
type writeCounter struct {
	match  []byte
	mu     sync.Mutex
	writes map[string]int
}

func (w *writeCounter) dial(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
	c, err := d.DialContext(ctx, "tcp", dst)
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, w: w, dst: dst}, nil
}

// take returns the writes since the last take.
func (w *writeCounter) take() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.writes
	w.writes = map[string]int{}
	return out
}

type countedConn struct {
	net.Conn
	w   *writeCounter
	dst string
}

func (c *countedConn) Write(p []byte) (int, error) {
	if c.w.match != nil && !bytes.Contains(p, c.w.match) {
		return c.Conn.Write(p)
	}
	c.w.mu.Lock()
	if c.w.writes == nil {
		c.w.writes = map[string]int{}
	}
	c.w.writes[c.dst]++
	c.w.mu.Unlock()
	return c.Conn.Write(p)
}

func seedLoad(t testing.TB, s *store.Store, tenant string) {
	t.Helper()
	ctx := context.Background()
	if err := s.PutAgent(ctx, tenant, store.Agent{ID: "demo_agent", Instructions: "You are a helpful AI assistant."}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "tier"} {
		if err := s.SetFact(ctx, tenant, "user_42", store.Fact{Key: k, Value: "v"}); err != nil {
			t.Fatal(err)
		}
	}
	var msgs []store.Message
	for i := range 30 {
		msgs = append(msgs, store.Message{Role: []string{"user", "assistant"}[i%2], Content: fmt.Sprintf("turn %d", i)})
	}
	if _, err := s.AppendMessages(ctx, tenant, "sess_42", msgs...); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendToolOutput(ctx, tenant, "sess_42", store.ToolOutput{Tool: "t", Result: "r"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetKnowledge(ctx, tenant, "sess_42", []store.Knowledge{{Content: "k"}}); err != nil {
		t.Fatal(err)
	}
}

// TestLoad_OneRoundTripPerNode counts the writes the client makes to each server's connections during a
// Load: one per server means one round trip per server (a reply cannot come before its request is
// written). The counter is first shown to see two sequential calls as two writes.
func TestLoad_OneRoundTripPerNode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		addrs func(t *testing.T) []string
	}{
		{"Standalone", func(t *testing.T) []string { return []string{valkeytest.Start(t)} }},
		{"Cluster", func(t *testing.T) []string { return valkeytest.StartCluster(t, 3).Addrs() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prefix := fmt.Sprintf("rtt%d", prefixes.Add(1))
			w := &writeCounter{match: []byte(prefix + ":")}
			s := open(t, valkey.Options{Prefix: prefix, Client: valkeygo.ClientOption{DialCtxFn: w.dial}}, tc.addrs(t)...)
			seedLoad(t, s, "acme")
			ctx := context.Background()

			w.take()
			if _, err := s.Messages(ctx, "acme", "sess_42", store.MessageQuery{}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Knowledge(ctx, "acme", "sess_42"); err != nil {
				t.Fatal(err)
			}
			if n := total(w.take()); n != 2 {
				t.Fatalf("two sequential reads made %d writes; the counter cannot prove anything", n)
			}

			snap, err := s.Load(ctx, "acme", store.LoadQuery{Agent: "demo_agent", User: "user_42", Session: "sess_42", MaxMessages: 10})
			writes := w.take()
			if err != nil {
				t.Fatal(err)
			}
			if snap.Agent == nil || len(snap.Facts) != 2 || len(snap.Messages) != 10 || len(snap.ToolOutputs) != 1 || len(snap.Knowledge) != 1 {
				t.Fatalf("Load = %+v", snap)
			}
			if len(writes) == 0 {
				t.Fatal("Load wrote nothing")
			}
			for addr, n := range writes {
				if n != 1 {
					t.Errorf("Load wrote %d times to %s, want one round trip per node (all writes: %v)", n, addr, writes)
				}
			}
		})
	}
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestFault_RefusedFailsFast: with the server gone (connections refused), calls fail with ErrUnavailable at
// once, not after the store's timeout (valkey-go alone retries reads until the deadline).
func TestFault_RefusedFailsFast(t *testing.T) {
	t.Parallel()
	srv := valkeytest.StartServer(t)
	// The timeout is long, so that "at once" (within two minutes: a hang) cannot be the timeout.
	s := open(t, valkey.Options{Timeout: time.Hour}, srv.Addr)
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	calls := map[string]func() error{
		"Ping": func() error { return s.Ping(ctx) },
		"Messages": func() error {
			_, err := s.Messages(ctx, "acme", "s", store.MessageQuery{})
			return err
		},
		"Load": func() error {
			_, err := s.Load(ctx, "acme", store.LoadQuery{Agent: "a", User: "u", Session: "s"})
			return err
		},
		"AppendMessages": func() error {
			_, err := s.AppendMessages(ctx, "acme", "s", store.Message{Role: "user", Content: "lost"})
			return err
		},
	}
	for name, call := range calls {
		start := time.Now()
		err := call()
		if d := time.Since(start); !errors.Is(err, store.ErrUnavailable) || d > 2*time.Minute { // well before the hour
			t.Errorf("%s with connections refused: %v after %v, want ErrUnavailable at once (timeout 1h)", name, err, d)
		}
	}
}

// TestFault_StopRestart stops the server under a store: calls fail with ErrUnavailable and work again once
// the server is back. (The store's timeout is the tests' long one: the calls that must succeed, before the
// stop and after the restart, must not fail because the machine is slow; those made while the server is
// down fail at once, TestFault_RefusedFailsFast shows.)
func TestFault_StopRestart(t *testing.T) {
	t.Parallel()
	srv := valkeytest.StartServer(t)
	s := open(t, valkey.Options{}, srv.Addr)
	ctx := context.Background()
	if _, err := s.AppendMessages(ctx, "acme", "s", store.Message{Role: "user", Content: "before"}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	for name, call := range map[string]func() error{
		"Ping": func() error { return s.Ping(ctx) },
		"Messages": func() error {
			_, err := s.Messages(ctx, "acme", "s", store.MessageQuery{})
			return err
		},
		"AppendMessages": func() error {
			_, err := s.AppendMessages(ctx, "acme", "s", store.Message{Role: "user", Content: "lost"})
			return err
		},
		"Load": func() error {
			_, err := s.Load(ctx, "acme", store.LoadQuery{Agent: "a", User: "u", Session: "s"})
			return err
		},
	} {
		if err := call(); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s with the server down: %v, want ErrUnavailable", name, err)
		}
	}
	srv.Restart()
	deadline := time.Now().Add(2 * time.Minute)
	for s.Ping(ctx) != nil {
		if time.Now().After(deadline) {
			t.Fatal("the store did not reconnect")
		}
		time.Sleep(20 * time.Millisecond)
	}
	m, err := s.AppendMessages(ctx, "acme", "s", store.Message{Role: "user", Content: "after"})
	if err != nil {
		t.Fatal(err)
	}
	if m[0].Seq != 1 { // the restarted server kept nothing
		t.Errorf("seq %d after a restart without persistence", m[0].Seq)
	}
}

func TestOpen_Errors(t *testing.T) {
	t.Parallel()
	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}()
	ctx := context.Background()
	_, err := valkey.Open(ctx, valkey.Options{Timeout: 300 * time.Millisecond, Client: valkeygo.ClientOption{InitAddress: []string{free}, Password: "s3cret"}})
	if !errors.Is(err, store.ErrUnavailable) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open of a closed port: %v, want ErrUnavailable without the password", err)
	}
	for name, opts := range map[string]valkey.Options{
		"no address":         {},
		"brace in prefix":    {Prefix: "a{b}", Client: valkeygo.ClientOption{InitAddress: []string{free}}},
		"negative timeout":   {Timeout: -1, Client: valkeygo.ClientOption{InitAddress: []string{free}}},
		"negative cache ttl": {CacheAgents: -1, Client: valkeygo.ClientOption{InitAddress: []string{free}}},
	} {
		if _, err := valkey.Open(ctx, opts); !errors.Is(err, valkey.ErrBadOptions) {
			t.Errorf("%s: %v, want ErrBadOptions", name, err)
		}
	}
}

func TestCacheAgents(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	w := &writeCounter{match: []byte("cache:")}
	cached := open(t, valkey.Options{Prefix: "cache", CacheAgents: time.Minute, Client: valkeygo.ClientOption{DialCtxFn: w.dial}}, addr)
	plain := open(t, valkey.Options{Prefix: "cache"}, addr)
	ctx := context.Background()
	if err := plain.PutAgent(ctx, "acme", store.Agent{ID: "bot", Instructions: "v1"}); err != nil {
		t.Fatal(err)
	}
	if a, err := cached.GetAgent(ctx, "acme", "bot"); err != nil || a.Instructions != "v1" {
		t.Fatalf("GetAgent = %+v, %v", a, err)
	}
	w.take()
	for range 3 {
		if a, err := cached.GetAgent(ctx, "acme", "bot"); err != nil || a.Instructions != "v1" {
			t.Fatalf("GetAgent = %+v, %v", a, err)
		}
		snap, err := cached.Load(ctx, "acme", store.LoadQuery{Agent: "bot"})
		if err != nil || snap.Agent == nil || snap.Agent.Instructions != "v1" {
			t.Fatalf("Load = %+v, %v", snap, err)
		}
	}
	if n := total(w.take()); n != 0 {
		t.Errorf("cached agent reads made %d writes to the server", n)
	}
	// A change elsewhere invalidates the cached copy.
	if err := plain.PutAgent(ctx, "acme", store.Agent{ID: "bot", Instructions: "v2"}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		a, err := cached.GetAgent(ctx, "acme", "bot")
		if err != nil {
			t.Fatal(err)
		}
		if a.Instructions == "v2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cached agent was not invalidated")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := plain.DeleteAgent(ctx, "acme", "bot"); err != nil {
		t.Fatal(err)
	}
	for deadline = time.Now().Add(2 * time.Minute); ; {
		_, err := cached.GetAgent(ctx, "acme", "bot")
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a deleted cached agent: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	_, err := valkey.Open(ctx, valkey.Options{CacheAgents: time.Minute, Client: valkeygo.ClientOption{InitAddress: []string{addr}, AlwaysRESP2: true}})
	if !errors.Is(err, valkey.ErrNoClientCache) {
		t.Errorf("CacheAgents over RESP2: %v, want ErrNoClientCache", err)
	}
	// Without the cache RESP2 is fine.
	s := open(t, valkey.Options{Client: valkeygo.ClientOption{AlwaysRESP2: true}}, addr)
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLoad_SourceErrors: a value that does not decode fails its own source, not the Load.
func TestLoad_SourceErrors(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	s := open(t, valkey.Options{Prefix: "bad"}, addr)
	ctx := context.Background()
	if _, err := s.AppendMessages(ctx, "acme", "s", store.Message{Role: "user", Content: "fine"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFact(ctx, "acme", "u", store.Fact{Key: "k", Value: "fine"}); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{
		{"RPUSH", "bad:{t:acme:s:s}:tools", "{not json"},
		{"HSET", "bad:{t:acme}:agent:bot", "tools", "{not a list"},
		{"SET", "bad:{t:acme:s:s}:kb", "a string, not a list"},
	} {
		if _, err := valkeytest.Do(addr, cmd...); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := s.Load(ctx, "acme", store.LoadQuery{Agent: "bot", User: "u", Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Messages) != 1 || len(snap.Facts) != 1 {
		t.Errorf("the good sources: %+v", snap)
	}
	for _, src := range []store.Source{store.SourceAgent, store.SourceToolOutputs} {
		if snap.Errors[src] == nil {
			t.Errorf("no error for %s: %v", src, snap.Errors)
		}
	}
	// WRONGTYPE inside the session's transaction aborts only the session's sources.
	if snap.Errors[store.SourceKnowledge] == nil {
		t.Errorf("no error for knowledge: %v", snap.Errors)
	}
}

// TestKeys_Escaped checks the key layout the package documents, escapes included.
func TestKeys_Escaped(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	s := open(t, valkey.Options{Prefix: "loom"}, addr)
	ctx := context.Background()
	if _, err := s.AppendMessages(ctx, "a:b", "{x} 100%", store.Message{Role: "user", Content: "x"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFact(ctx, "a:b", "u}", store.Fact{Key: "k", Value: "v"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutAgent(ctx, "a:b", store.Agent{ID: "bot:1", Instructions: "Be brief.", MaxTokens: 900}); err != nil {
		t.Fatal(err)
	}
	for key, typ := range map[string]string{"loom:{t:a%3Ab:s:%7Bx%7D%20100%25}:msgs": "list", "loom:{t:a%3Ab:u:u%7D}:mem": "hash",
		"loom:{t:a%3Ab}:agent:bot%3A1": "hash"} {
		if r, err := valkeytest.Do(addr, "TYPE", key); err != nil || r[0] != typ {
			t.Errorf("TYPE %s = %v, %v; want %s", key, r, err, typ)
		}
	}
	if r, err := valkeytest.Do(addr, "HMGET", "loom:{t:a%3Ab}:agent:bot%3A1", "instructions", "max_tokens"); err != nil || strings.Join(r, "|") != "Be brief.|900" {
		t.Errorf("the agent's hash: %v, %v", r, err)
	}
}

// TestAgents_StoredAsJSONByAnEarlierLoom: an agent an earlier Loom stored as one JSON string is still read
// (by GetAgent and by Load), and the next PutAgent turns it into a hash.
func TestAgents_StoredAsJSONByAnEarlierLoom(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	s := open(t, valkey.Options{Prefix: "old"}, addr)
	ctx := context.Background()
	if _, err := valkeytest.Do(addr, "SET", "old:{t:acme}:agent:bot", `{"id":"bot","instructions":"Be brief.","max_tokens":900}`); err != nil {
		t.Fatal(err)
	}
	a, err := s.GetAgent(ctx, "acme", "bot")
	if err != nil || a.Instructions != "Be brief." || a.MaxTokens != 900 {
		t.Fatalf("GetAgent = %+v, %v", a, err)
	}
	snap, err := s.Load(ctx, "acme", store.LoadQuery{Agent: "bot"})
	if err != nil || snap.Agent == nil || snap.Agent.Instructions != "Be brief." || len(snap.Errors) != 0 {
		t.Fatalf("Load = %+v, %v", snap, err)
	}
	a.Instructions = "Be briefer."
	if err := s.PutAgent(ctx, "acme", a); err != nil {
		t.Fatal(err)
	}
	if r, err := valkeytest.Do(addr, "TYPE", "old:{t:acme}:agent:bot"); err != nil || r[0] != "hash" {
		t.Errorf("after PutAgent: TYPE %v, %v", r, err)
	}
	if a, err := s.GetAgent(ctx, "acme", "bot"); err != nil || a.Instructions != "Be briefer." {
		t.Errorf("after PutAgent: %+v, %v", a, err)
	}
}

// do sends one command to the server at addr and fails the test on an error.
func do(t testing.TB, addr string, args ...string) []string {
	t.Helper()
	r, err := valkeytest.Do(addr, args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return r
}
