package storeurl_test

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/context-loom/loom/internal/valkeytest"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/memory"
	"github.com/context-loom/loom/store/sqlite"
	"github.com/context-loom/loom/store/storeurl"
	"github.com/context-loom/loom/store/valkey"
	"github.com/context-loom/loom/store/valkey/cookbook"
)

func TestOpen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	for _, tc := range []struct {
		url    string
		layout string
		check  func(*store.Store) bool
	}{
		{"memory:", "", func(s *store.Store) bool { _, ok := s.Backend().(*memory.Backend); return ok }},
		{"sqlite:" + filepath.Join(t.TempDir(), "a.db"), "", func(s *store.Store) bool { _, ok := s.Backend().(*sqlite.Backend); return ok }},
		{"sqlite://" + filepath.Join(t.TempDir(), "b.db"), storeurl.LayoutNative, func(s *store.Store) bool { _, ok := s.Backend().(*sqlite.Backend); return ok }},
		{"valkey://" + valkeytest.Start(t), "", func(s *store.Store) bool { _, ok := s.Backend().(*valkey.Backend); return ok }},
		{"redis://" + valkeytest.Start(t) + "/0", storeurl.LayoutCookbook, func(s *store.Store) bool { _, ok := s.Backend().(*cookbook.Backend); return ok }},
		{"valkey://" + valkeytest.Start(t) + "?layout=cookbook", "", func(s *store.Store) bool { _, ok := s.Backend().(*cookbook.Backend); return ok }},
		{"valkey://" + valkeytest.Start(t) + "?layout=native", storeurl.LayoutNative, func(s *store.Store) bool { _, ok := s.Backend().(*valkey.Backend); return ok }},
	} {
		s, err := storeurl.Open(ctx, tc.url, storeurl.Options{Layout: tc.layout})
		if err != nil {
			t.Fatalf("Open(%q): %v", tc.url, err)
		}
		if !tc.check(s) {
			t.Errorf("Open(%q) = %T", tc.url, s)
		}
		if err := s.Ping(ctx); err != nil {
			t.Errorf("Open(%q): Ping: %v", tc.url, err)
		}
		s.Close()
	}
}

func TestOpen_Errors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, layout string }{
		{"ftp://x", ""},
		{"sqlite:", ""},
		{"postgres://user:hunter2@db:5432/x", ""},
		{"memory:", "cookbook"},
		{"sqlite:x.db", "cookbook"},
		{"memory:", "weird"},
		{"valkey://user:hunter2@", ""},
		{"nothing", ""},
		{"memory:x", ""},
		{"valkey://127.0.0.1:1?layout=cookbook", "native"},
		{"valkey://127.0.0.1:1?layout=native", "cookbook"},
		{"valkey://127.0.0.1:1?layout=cookbook&prefix=x", ""},
		{"valkey://127.0.0.1:1?layout=flat", ""},
	} {
		_, err := storeurl.Open(t.Context(), tc.url, storeurl.Options{Layout: tc.layout})
		if !errors.Is(err, storeurl.ErrBadURL) {
			t.Errorf("Open(%q, %q): %v, want ErrBadURL", tc.url, tc.layout, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q): the error shows the password: %v", tc.url, err)
		}
	}
	// A server that is not there is unavailable, not a bad URL, and the password stays out of the error.
	_, err := storeurl.Open(t.Context(), "valkey://user:hunter2@127.0.0.1:1", storeurl.Options{})
	if !errors.Is(err, store.ErrUnavailable) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("an unreachable server: %v", err)
	}
}

// TestOpen_URLSettingsHold: a Valkey URL's ttl= and layout= take effect when the options leave them unset.
func TestOpen_URLSettingsHold(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	s, err := storeurl.Open(t.Context(), "valkey://"+addr+"?ttl=60s&layout=cookbook", storeurl.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.AppendMessages(t.Context(), cookbook.DefaultTenant, "s1", store.Message{Role: "user", Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	r, err := valkeytest.Do(addr, "PTTL", "chat:s1") // the cookbook's key, with the URL's TTL
	if err != nil {
		t.Fatal(err)
	}
	if ms, _ := strconv.Atoi(r[0]); ms <= 0 || ms > 60_000 {
		t.Errorf("PTTL chat:s1 = %v, want the URL's 60s", r)
	}
}
