package sqlite

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/context-loom/loom/store"
)

func TestPing_UnavailableWhenTheFileCannotBeQueried(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "loom.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	_ = s.rdb.Close() // the read pool fails, the store is not closed
	err = s.Ping(t.Context())
	if !errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrClosed) {
		t.Fatalf("Ping: %v, want ErrUnavailable", err)
	}
}
