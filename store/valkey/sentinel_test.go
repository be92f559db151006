package valkey_test

import (
	"net/url"
	"testing"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/collection/collectiontest"
	"github.com/context-loom/loom/internal/valkeytest"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/storetest"
	"github.com/context-loom/loom/store/valkey"
)

// sentinelOptions are the client options that reach a master through Sentinel: the sentinels' addresses
// (open sets them) and the master set's name.
var sentinelOptions = valkeygo.ClientOption{Sentinel: valkeygo.SentinelOption{MasterSet: valkeytest.SentinelMaster}}

// TestConformance_Sentinel runs the suite on a store that finds its server through a Sentinel.
func TestConformance_Sentinel(t *testing.T) {
	t.Parallel()
	sentinel := valkeytest.StartSentinel(t, valkeytest.Start(t))
	storetest.Run(t, func(t *testing.T, opts store.Options) *store.Store {
		return open(t, valkey.Options{Options: opts, Client: sentinelOptions}, sentinel.Addr)
	})
}

// TestCollections_ConformanceSentinel runs the collection suite on a store that finds its server through a
// Sentinel.
func TestCollections_ConformanceSentinel(t *testing.T) {
	t.Parallel()
	sentinel := valkeytest.StartSentinel(t, valkeytest.Start(t))
	collectiontest.Run(t, func(t *testing.T, opts store.Options) collection.Store {
		return openColls(t, valkey.Options{Options: opts, Client: sentinelOptions}, sentinel.Addr)
	})
}

// TestSentinel_WritesReachTheMaster: through a Sentinel the store reads and writes the master it names, in
// both layouts, and the sentinel holds no data.
func TestSentinel_WritesReachTheMaster(t *testing.T) {
	t.Parallel()
	master := valkeytest.Start(t)
	sentinel := valkeytest.StartSentinel(t, master)
	ctx := t.Context()
	cb := open(t, valkey.Options{Layout: valkey.LayoutCookbook, Client: sentinelOptions}, sentinel.Addr)
	if err := cb.SetFact(ctx, valkey.DefaultTenant, "user_42", store.Fact{Key: "name", Value: "Bob"}); err != nil {
		t.Fatal(err)
	}
	if r := do(t, master, "HGET", "memory:user_42", "name"); r[0] != "Bob" {
		t.Fatalf("HGET memory:user_42 name on the master = %q", r)
	}
	// Steps are found with SCAN on every node the client knows: through Sentinel, the master.
	do(t, master, "HSET", "tool:sess_42:step_1", "tool", "check_account", "result", "{}")
	if outs, err := cb.ToolOutputs(ctx, valkey.DefaultTenant, "sess_42"); err != nil || len(outs) != 1 || outs[0].Tool != "check_account" {
		t.Fatalf("ToolOutputs = %+v, %v", outs, err)
	}
	native := open(t, valkey.Options{Prefix: "sentinel", Client: sentinelOptions}, sentinel.Addr)
	if _, err := native.AppendMessages(ctx, valkey.DefaultTenant, "s", store.Message{Role: "user", Content: "Hi"}); err != nil {
		t.Fatal(err)
	}
	if n := do(t, master, "DBSIZE"); n[0] != "3" {
		t.Errorf("DBSIZE of the master = %s, want 3 (the memory hash, the step, the messages)", n[0])
	}
	if _, err := valkeytest.Do(sentinel.Addr, "DBSIZE"); err == nil {
		t.Error("the sentinel answers DBSIZE: the test's sentinel is a plain server")
	}
}

// TestSentinel_URL: a store URL with sentinel=<master set> names the sentinels (the host and any addr=) and
// opens a store on the master; its credentials are the master's, not the sentinels'.
func TestSentinel_URL(t *testing.T) {
	t.Parallel()
	const password = "s3cret/+:@"
	master := valkeytest.StartServer(t, "--requirepass", password).Addr
	sentinel := valkeytest.StartSentinel(t, master, "sentinel auth-pass "+valkeytest.SentinelMaster+" "+password)
	// A second sentinel address that refuses connections: the client moves on to the next one.
	dead := valkeytest.StartServer(t)
	dead.Stop()
	raw := "valkey://:" + url.QueryEscape(password) + "@" + dead.Addr + "?addr=" + sentinel.Addr +
		"&sentinel=" + valkeytest.SentinelMaster + "&layout=cookbook&timeout=2s"
	opts, err := valkey.ParseURL(raw)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Client.Sentinel.MasterSet != valkeytest.SentinelMaster || len(opts.Client.InitAddress) != 2 ||
		opts.Client.Password != password || opts.Client.Sentinel.Password != "" {
		t.Fatalf("ParseURL: master set %q, addresses %q, master password set %v, sentinel password set %v",
			opts.Client.Sentinel.MasterSet, opts.Client.InitAddress, opts.Client.Password != "", opts.Client.Sentinel.Password != "")
	}
	s, err := valkey.Open(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	if _, err := s.AppendMessages(ctx, valkey.DefaultTenant, "sess_42", store.Message{Role: "user", Content: "Hi"}); err != nil {
		t.Fatal(err)
	}
	if _, err := valkeytest.Do(master, "LLEN", "chat:sess_42"); err == nil {
		t.Fatal("the master answers without AUTH")
	}
	direct := open(t, valkey.Options{Layout: valkey.LayoutCookbook, Client: valkeygo.ClientOption{Password: password}}, master)
	if msgs, err := direct.Messages(ctx, valkey.DefaultTenant, "sess_42", store.MessageQuery{}); err != nil || len(msgs) != 1 {
		t.Fatalf("Messages on the master itself = %+v, %v", msgs, err)
	}
	snap, err := s.Load(ctx, valkey.DefaultTenant, store.LoadQuery{Session: "sess_42"})
	if err != nil || len(snap.Errors) != 0 || len(snap.Messages) != 1 || snap.Messages[0].Content != "Hi" {
		t.Fatalf("Load = %+v, %v", snap, err)
	}
}
