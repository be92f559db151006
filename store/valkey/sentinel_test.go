package valkey_test

import (
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

// TestSentinel_WritesReachTheMaster: through a Sentinel the store reads and writes the master it names,
// and the sentinel holds no data.
func TestSentinel_WritesReachTheMaster(t *testing.T) {
	t.Parallel()
	master := valkeytest.Start(t)
	sentinel := valkeytest.StartSentinel(t, master)
	ctx := t.Context()
	native := open(t, valkey.Options{Prefix: "sentinel", Client: sentinelOptions}, sentinel.Addr)
	if _, err := native.AppendMessages(ctx, "acme", "s", store.Message{Role: "user", Content: "Hi"}); err != nil {
		t.Fatal(err)
	}
	if n, err := valkeytest.Do(master, "DBSIZE"); err != nil || n[0] != "1" {
		t.Errorf("DBSIZE of the master = %v (%v), want 1 (the messages)", n, err)
	}
	if _, err := valkeytest.Do(sentinel.Addr, "DBSIZE"); err == nil {
		t.Error("the sentinel answers DBSIZE: the test's sentinel is a plain server")
	}
}
