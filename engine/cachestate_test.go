package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/sqlite"
)

// TestAssemble_CacheReport plays a session on a real SQLite file and changes each stored stable part in
// turn between two assemblies: the agent's instructions, its tools, a pinned fact, the session's summary;
// each assembly reports the region that changed first, and the tokens before it, from the state the one
// before left in the store (a fresh engine reads it: nothing is kept in the process).
func TestAssemble_CacheReport(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: t.TempDir() + "/loom.db"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	agent := store.Agent{ID: "a", Instructions: "You are a travel agent.", Model: "gpt-4o", MaxTokens: 8000,
		Tools: []loom.Tool{{Type: "function", Function: loom.ToolFunction{Name: "search", Parameters: []byte(`{"type":"object"}`)}}}}
	if err := st.PutAgent(ctx, loom.DefaultTenant, agent); err != nil {
		t.Fatal(err)
	}
	if err := st.SetFact(ctx, loom.DefaultTenant, "u", store.Fact{Key: "name", Value: "Ada", Pinned: true}); err != nil {
		t.Fatal(err)
	}
	turn := 0
	assemble := func() *engine.Result {
		t.Helper()
		eng, err := testEngine(st) // a new engine each time: the state comes from the store
		if err != nil {
			t.Fatal(err)
		}
		turn++
		res, err := eng.Assemble(ctx, engine.Request{Agent: "a", User: "u", Session: "s",
			Request: assembler.Request{Message: fmt.Sprint("Question ", turn, "?")}})
		if err != nil {
			t.Fatal(err)
		}
		engine.FlushCacheStates(eng) // written before the turn is recorded, as when the model is slower than the store
		if _, err := eng.Record(ctx, engine.Turn{Session: "s", Message: fmt.Sprint("Question ", turn, "?"),
			Reply: []store.Message{{Role: "assistant", Content: fmt.Sprint("Answer ", turn, ".")}}}); err != nil {
			t.Fatal(err)
		}
		if err := eng.Close(); err != nil { // waits for the state's write
			t.Fatal(err)
		}
		return res
	}
	regionUsed := func(res *engine.Result, r loom.Region) int {
		for _, reg := range res.Report.Regions {
			if reg.Name == r {
				return reg.Used
			}
		}
		return 0
	}
	want := func(res *engine.Result, region, reason string, shared int) {
		t.Helper()
		if c := res.Cache; c == nil || c.Region != region || c.Reason != reason || c.SharedTokens != shared {
			t.Fatalf("turn %d: cache %+v, want region %q reason %q shared %d", turn, res.Cache, region, reason, shared)
		}
	}
	// The session has no messages before the first turn: its state is kept from the second on.
	want(assemble(), "", assembler.CacheFirstAssembly, 0)
	second := assemble()
	want(second, "", assembler.CacheFirstAssembly, 0)
	prev := assemble()
	tools, instr := regionUsed(prev, loom.RegionTools), regionUsed(prev, loom.RegionInstructions)
	want(prev, "", "", tools+instr+pinnedOf(prev)+regionUsed(second, loom.RegionHistory))

	agent.Instructions += " Be brief."
	if err := st.PutAgent(ctx, loom.DefaultTenant, agent); err != nil {
		t.Fatal(err)
	}
	want(assemble(), "instructions", assembler.CacheInstructionsEdited, tools)

	agent.Tools = append(agent.Tools, loom.Tool{Type: "function", Function: loom.ToolFunction{Name: "book", Parameters: []byte(`{"type":"object"}`)}})
	if err := st.PutAgent(ctx, loom.DefaultTenant, agent); err != nil {
		t.Fatal(err)
	}
	want(assemble(), "tools", assembler.CacheToolsChanged, 0)

	if err := st.SetFact(ctx, loom.DefaultTenant, "u", store.Fact{Key: "name", Value: "Ada L.", Pinned: true}); err != nil {
		t.Fatal(err)
	}
	res := assemble()
	want(res, "memory", assembler.CachePinnedChanged, regionUsed(res, loom.RegionTools)+regionUsed(res, loom.RegionInstructions))

	sum, err := st.Summary(ctx, loom.DefaultTenant, "s")
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("summary: %v", err)
	}
	if _, ok, err := st.SwapSummary(ctx, loom.DefaultTenant, "s", sum, store.Summary{Text: "The user asked twice.", From: 1, To: 4}); err != nil || !ok {
		t.Fatalf("swap: %v %v", ok, err)
	}
	res = assemble()
	want(res, "summary", assembler.CacheCompaction, regionUsed(res, loom.RegionTools)+regionUsed(res, loom.RegionInstructions)+pinnedOf(res))

	// Another tenant's session of the same name has no state of this one's.
	other := loom.WithTenant(ctx, "other")
	eng, err := testEngine(st)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if err := st.PutAgent(other, "other", agent); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AppendMessages(other, "other", "s", store.Message{Role: "user", Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	o, err := eng.Assemble(other, engine.Request{Agent: "a", Session: "s", Request: assembler.Request{Message: "Hello?"}})
	if err != nil {
		t.Fatal(err)
	}
	if o.Cache == nil || o.Cache.Reason != assembler.CacheFirstAssembly {
		t.Fatalf("another tenant's first assembly: %+v", o.Cache)
	}
}

// pinnedOf is the tokens of the result's pinned memory, as its cache state counts them.
func pinnedOf(res *engine.Result) int {
	for _, p := range res.CacheState.Parts {
		if p.Region == "memory" {
			return p.Tokens
		}
	}
	return 0
}

// failingCacheStates is a memory backend whose cache state writes fail.
type failingCacheStates struct {
	store.Backend
	store.CacheStateBackend
	store.Loader
}

func (failingCacheStates) PutCacheState(context.Context, string, string, []byte) error {
	return fmt.Errorf("disk full: %w", store.ErrUnavailable)
}

// TestAssemble_CacheStateWriteFails checks that a store that cannot write the cache state fails no
// assembly: the write is counted as failed, and the next assembly compares with what it can.
func TestAssemble_CacheStateWriteFails(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	mem := newMemory()
	b := memoryOf(mem)
	st := over(failingCacheStates{Backend: b, CacheStateBackend: b, Loader: b})
	eng, err := testEngine(st)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := st.AppendMessages(ctx, loom.DefaultTenant, "s", store.Message{Role: "user", Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		res, err := eng.Assemble(ctx, engine.Request{Session: "s", Request: assembler.Request{Model: "gpt-4o", Instructions: "Be brief.", Message: "Hello?"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.Cache == nil {
			t.Fatal("no cache report")
		}
		engine.FlushCacheStates(eng)
	}
	if n := eng.CacheStateStats()[engine.CacheStateFailed]; n != 2 {
		t.Fatalf("failed writes counted %d, want 2 (%v)", n, eng.CacheStateStats())
	}
}
