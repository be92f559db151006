package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/sqlite"
	"github.com/context-loom/loom/store/storetest"
)

// open opens a store in a fresh file under t.TempDir and closes it when the test ends.
func open(t testing.TB, opts store.Options, options ...sqlite.Option) (*sqlite.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "loom.db")
	s, err := sqlite.Open(t.Context(), path, opts, options...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, opts store.Options) store.Store {
		s, _ := open(t, opts)
		return s
	})
}
