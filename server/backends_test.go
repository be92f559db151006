package server_test

import (
	"path/filepath"
	"testing"

	"github.com/context-loom/loom/internal/valkeytest"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/storeurl"
)

// TestAPI_Backends runs the API's behaviour over real HTTP against the persistent stores: an SQLite file and
// a Valkey server on a free loopback port.
func TestAPI_Backends(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "loom.db") }},
		{"valkey", func(t *testing.T) string { return "valkey://" + valkeytest.Start(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, err := storeurl.Open(t.Context(), tc.url(t), storeurl.Options{Store: store.Options{}})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			RunAPI(t, st)
			RunCollectionsAPI(t, st)
		})
	}
}
