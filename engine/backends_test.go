package engine_test

import (
	"path/filepath"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/internal/valkeytest"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/sqlite"
	"github.com/context-loom/loom/store/storeurl"
)

func init() {
	openSQLite := func(tb testing.TB, path string) *store.Store {
		s, err := sqlite.Open(tb.Context(), sqlite.Options{Path: path})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		return s
	}
	openValkey := func(tb testing.TB, addr string) *store.Store {
		// Opened the way the CLI and the server open it.
		s, err := storeurl.Open(tb.Context(), "valkey://"+addr, storeurl.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		return s
	}
	backends = append(backends,
		backend{"sqlite",
			func(tb testing.TB) *store.Store { return openSQLite(tb, filepath.Join(tb.TempDir(), "loom.db")) },
			func(tb testing.TB) (*store.Store, *store.Store) {
				path := filepath.Join(tb.TempDir(), "loom.db")
				return openSQLite(tb, path), openSQLite(tb, path)
			}},
		backend{"valkey",
			// A server of its own on a free loopback port.
			func(tb testing.TB) *store.Store { return openValkey(tb, valkeytest.Start(tb)) },
			func(tb testing.TB) (*store.Store, *store.Store) {
				addr := valkeytest.Start(tb)
				return openValkey(tb, addr), openValkey(tb, addr)
			}},
	)
}

// TestScenario_Backends runs seed 003's scenario end to end on each persistent backend.
func TestScenario_Backends(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := b.open(t)
			defer s.Close()
			RunScenario(t, s)
		})
	}
}

// TestScenario_CookbookValkey writes seed 003's keys exactly as its Python does, then assembles them through
// the cookbook layout and preset: a user of that pipeline points Loom at their Valkey unchanged and gets the
// same messages.
func TestScenario_CookbookValkey(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	for _, cmd := range [][]string{
		{"HSET", "agent:config:demo_agent", "role", "You are a helpful AI assistant.", "constraints", "Be concise and accurate.", "output_format", "Plain text."},
		{"HSET", "memory:user_42", "name", "Bob", "preferred_language", "English", "tier", "free"},
		{"RPUSH", "chat:sess_42", `{"role": "user", "content": "Hi, I need help with my account", "ts": 1764529200.125}`},
		{"RPUSH", "chat:sess_42", `{"role": "assistant", "content": "Sure! What do you need help with?", "ts": 1764529201.5}`},
		{"RPUSH", "chat:sess_42", `{"role": "user", "content": "I want to upgrade to premium", "ts": 1764529202.75}`},
		{"EXPIRE", "chat:sess_42", "1800"},
		{"HSET", "tool:sess_42:step_1", "tool", "check_account", "result", `{"plan": "free", "eligible_upgrade": true}`, "timestamp", "1764529203.0"},
		{"EXPIRE", "tool:sess_42:step_1", "3600"},
	} {
		if _, err := valkeytest.Do(addr, cmd...); err != nil {
			t.Fatal(err)
		}
	}
	s, err := storeurl.Open(t.Context(), "valkey://"+addr, storeurl.Options{Layout: storeurl.LayoutCookbook})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	eng, _ := testEngine(s)
	res, err := eng.Assemble(t.Context(), engine.Request{Agent: "demo_agent", User: "user_42", Session: "sess_42", Preset: engine.PresetCookbook,
		Request: assembler.Request{Message: "How much does premium cost?", MaxTokens: 4000}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != len(seedMessages) {
		t.Fatalf("%d messages, want %d: %+v", len(res.Messages), len(seedMessages), res.Messages)
	}
	for i, w := range withCookbookDifference(t, seedMessages) {
		if m := res.Messages[i]; m.Role != w.role || m.Content != w.content {
			t.Errorf("message %d = [%s] %q, want [%s] %q", i, m.Role, m.Content, w.role, w.content)
		}
	}
	if want := openAICount(res.Messages); res.TotalTokens != want {
		t.Errorf("total_tokens %d, want %d", res.TotalTokens, want)
	}
	// The tenant other than the default is refused in this single-tenant layout.
	if _, err := eng.Assemble(loom.WithTenant(t.Context(), "acme"), engine.Request{Session: "sess_42", Request: assembler.Request{Message: "hi"}}); err == nil {
		t.Error("the cookbook layout served another tenant")
	}
}
