package store_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/memory"
	"github.com/context-loom/loom/tokenizer"
)

// spy is a backend that keeps nothing and counts the calls that reach it.
type spy struct {
	calls, closes atomic.Int64
}

func (s *spy) call() { s.calls.Add(1) }

func (s *spy) PutAgent(context.Context, string, store.Agent) error { s.call(); return nil }
func (s *spy) GetAgent(context.Context, string, string) (store.Agent, error) {
	s.call()
	return store.Agent{}, nil
}
func (s *spy) DeleteAgent(context.Context, string, string) error         { s.call(); return nil }
func (s *spy) SetFact(context.Context, string, string, store.Fact) error { s.call(); return nil }
func (s *spy) Facts(context.Context, string, string) ([]store.Fact, error) {
	s.call()
	return nil, nil
}
func (s *spy) DeleteFact(context.Context, string, string, string) error { s.call(); return nil }
func (s *spy) AppendMessages(_ context.Context, _, _ string, msgs []store.Message) ([]store.Message, error) {
	s.call()
	return msgs, nil
}
func (s *spy) ReadMessages(context.Context, string, string, int64, int) ([]store.Message, int64, error) {
	s.call()
	return nil, 0, nil
}
func (s *spy) AppendToolOutput(_ context.Context, _, _ string, o store.ToolOutput) (store.ToolOutput, error) {
	s.call()
	return o, nil
}
func (s *spy) ToolOutputs(context.Context, string, string) ([]store.ToolOutput, error) {
	s.call()
	return nil, nil
}
func (s *spy) SetKnowledge(context.Context, string, string, []store.Knowledge) error {
	s.call()
	return nil
}
func (s *spy) Knowledge(context.Context, string, string) ([]store.Knowledge, error) {
	s.call()
	return nil, nil
}
func (s *spy) DeleteSession(context.Context, string, string) error { s.call(); return nil }
func (s *spy) Ping(context.Context) error                          { s.call(); return nil }
func (s *spy) Close() error                                        { s.closes.Add(1); return nil }

// calls are one call of every method of a Store, with the tenant and the session given.
func calls(s *store.Store, tenant, session string) map[string]func(ctx context.Context) error {
	msg := store.Message{Role: "user", Content: "x"}
	return map[string]func(ctx context.Context) error{
		"PutAgent":       func(ctx context.Context) error { return s.PutAgent(ctx, tenant, store.Agent{ID: "a"}) },
		"GetAgent":       func(ctx context.Context) error { _, err := s.GetAgent(ctx, tenant, "a"); return err },
		"DeleteAgent":    func(ctx context.Context) error { return s.DeleteAgent(ctx, tenant, "a") },
		"SetFact":        func(ctx context.Context) error { return s.SetFact(ctx, tenant, "u", store.Fact{Key: "k"}) },
		"Facts":          func(ctx context.Context) error { _, err := s.Facts(ctx, tenant, "u"); return err },
		"DeleteFact":     func(ctx context.Context) error { return s.DeleteFact(ctx, tenant, "u", "k") },
		"AppendMessages": func(ctx context.Context) error { _, err := s.AppendMessages(ctx, tenant, session, msg); return err },
		"Messages": func(ctx context.Context) error {
			_, err := s.Messages(ctx, tenant, session, store.MessageQuery{})
			return err
		},
		"AppendToolOutput": func(ctx context.Context) error {
			_, err := s.AppendToolOutput(ctx, tenant, session, store.ToolOutput{Tool: "t"})
			return err
		},
		"ToolOutputs":   func(ctx context.Context) error { _, err := s.ToolOutputs(ctx, tenant, session); return err },
		"SetKnowledge":  func(ctx context.Context) error { return s.SetKnowledge(ctx, tenant, session, nil) },
		"Knowledge":     func(ctx context.Context) error { _, err := s.Knowledge(ctx, tenant, session); return err },
		"DeleteSession": func(ctx context.Context) error { return s.DeleteSession(ctx, tenant, session) },
		"Load": func(ctx context.Context) error {
			_, err := s.Load(ctx, tenant, store.LoadQuery{Agent: "a", User: "u", Session: session})
			return err
		},
	}
}

// TestStore_RulesBeforeTheBackend: a bad tenant or id, a bad value, a bad query or a context that is done
// is refused by the Store: the backend sees none of them.
func TestStore_RulesBeforeTheBackend(t *testing.T) {
	t.Parallel()
	b := &spy{}
	s, err := store.New(b, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for name, call := range calls(s, "bad\ntenant", "s") {
		if err := call(ctx); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s with a bad tenant: %v, want ErrInvalid", name, err)
		}
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	for name, call := range calls(s, "acme", "s") {
		if err := call(done); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a canceled context: %v", name, err)
		}
	}
	refused := map[string]error{
		"a bad session":      errOf(s.AppendMessages(ctx, "acme", "", store.Message{Role: "user", Content: "x"})),
		"a blank message":    errOf(s.AppendMessages(ctx, "acme", "s", store.Message{Role: "user"})),
		"a bad role":         errOf(s.AppendMessages(ctx, "acme", "s", store.Message{Role: "wizard", Content: "x"})),
		"a bad query":        errOf(s.Messages(ctx, "acme", "s", store.MessageQuery{Encoding: "p50k_base", MaxTokens: 9})),
		"a bad load query":   errOf(s.Load(ctx, "acme", store.LoadQuery{Session: "s", MaxTokens: -1})),
		"a bad agent":        s.PutAgent(ctx, "acme", store.Agent{ID: "a", MaxTokens: -1}),
		"a bad fact key":     s.SetFact(ctx, "acme", "u", store.Fact{Key: ""}),
		"a bad tool name":    errOf(s.AppendToolOutput(ctx, "acme", "s", store.ToolOutput{Tool: "no spaces"})),
		"too much knowledge": s.SetKnowledge(ctx, "acme", "s", make([]store.Knowledge, store.DefaultMaxBatch+1)),
	}
	for what, err := range refused {
		if !errors.Is(err, store.ErrInvalid) && !errors.Is(err, store.ErrTooLarge) {
			t.Errorf("%s: %v, want ErrInvalid or ErrTooLarge", what, err)
		}
	}
	if n := b.calls.Load(); n != 0 {
		t.Fatalf("%d calls reached the backend", n)
	}
	for name, call := range calls(s, "acme", "s") {
		if err := call(ctx); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if b.calls.Load() == 0 {
		t.Fatal("good calls did not reach the backend")
	}
}

// errOf is the error of a call that returns a value too.
func errOf[T any](_ T, err error) error { return err }

// TestStore_ClosedOnce: Close closes the backend once, however often it is called, and after it every call
// returns ErrClosed without reaching the backend.
func TestStore_ClosedOnce(t *testing.T) {
	t.Parallel()
	b := &spy{}
	s, err := store.New(b, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.closes.Load(); n != 1 {
		t.Fatalf("the backend was closed %d times", n)
	}
	all := calls(s, "acme", "s")
	all["Ping"] = s.Ping
	for name, call := range all {
		if err := call(t.Context()); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	if n := b.calls.Load(); n != 0 {
		t.Fatalf("%d calls reached the backend after Close", n)
	}
}

// TestNew: a Store needs a backend, and claims collections only for a backend that keeps them.
func TestNew(t *testing.T) {
	t.Parallel()
	if _, err := store.New(nil, store.Options{}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("New(nil): %v, want ErrInvalid", err)
	}
	b := &spy{}
	s, err := store.New(b, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Backend() != store.Backend(b) {
		t.Error("Backend is not the backend given")
	}
	if c, ok := s.Collections(); ok || c != nil {
		t.Errorf("a backend that keeps no collections has collections %v", c)
	}
}

// TestStore_CountsKnowledgeAsTheAssemblerRendersIt: a Store opened with no options at all keeps, on every
// knowledge item it writes, the counts of the item as the assembler renders it, under the keys the
// assembler reads, so that an assembly from a store never counts a session's knowledge again; counts a
// caller gave are replaced.
func TestStore_CountsKnowledgeAsTheAssemblerRendersIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := memory.Open(ctx, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	content := `  She said "it's <fine>" & left.  `
	if err := s.SetKnowledge(ctx, "t", "s", []store.Knowledge{{Content: content, TokenCounts: map[string]int{assembler.KnowledgeCountKey("o200k_base"): 1}}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Knowledge(ctx, "t", "s")
	if err != nil || len(got) != 1 {
		t.Fatalf("Knowledge: %v, %v", got, err)
	}
	for _, enc := range []*tokenizer.Encoding{tokenizer.O200K(), tokenizer.CL100K()} {
		key, want := assembler.KnowledgeCountKey(enc.Name()), enc.Count(assembler.RenderedKnowledge(content))
		if n, ok := got[0].TokenCounts[key]; !ok || n != want {
			t.Errorf("counts %v, want %d under %q", got[0].TokenCounts, want, key)
		}
	}
}
