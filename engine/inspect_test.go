package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
)

// seedLongSession stores a session whose history a small budget must cut.
func seedLongSession(t *testing.T, ctx context.Context, st *store.Store, session string) {
	t.Helper()
	for i := range 12 {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		if _, err := st.AppendMessages(ctx, loom.Tenant(ctx), session, store.Message{Role: role, Content: strings.Repeat("turn text ", 30)}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAssemble_RecordsItsReportInTheSession(t *testing.T) {
	t.Parallel()
	st := newMemory()
	e, err := testEngine(st, engine.WithAssemblyRecords(engine.RecordOptions{Keep: 2}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := loom.WithTenant(t.Context(), "acme")
	seedLongSession(t, ctx, st, "s")
	// Knowledge of which the budget keeps little: the planner counts no more of it than it needs.
	var kb []store.Knowledge
	for i := range 8 {
		kb = append(kb, store.Knowledge{ID: fmt.Sprint("k", i), Content: strings.Repeat(fmt.Sprint("fact ", i, " of the manual. "), 40), Score: 1 - float64(i)/10})
	}
	if err := st.SetKnowledge(ctx, "acme", "s", kb); err != nil {
		t.Fatal(err)
	}
	req := engine.Request{Session: "s", Request: assembler.Request{Model: "gpt-4o", MaxTokens: 300, Message: "what now? <b>"}}
	var last *engine.Result
	for range 3 {
		if last, err = e.Assemble(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	// An assembly of a session the store holds nothing of is not recorded (it would make the session).
	if _, err := e.Assemble(ctx, engine.Request{Session: "empty", Request: assembler.Request{Model: "gpt-4o", Message: "hi"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.FlushRecords(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := e.Assemblies(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[0].Seq != 3 || recs[1].Seq != 2 {
		t.Fatalf("records %+v, want seqs 3 and 2", recs)
	}
	got := recs[0]
	if got.Window != 128000 || got.Request.Message != req.Message || got.Request.MaxTokens != 300 || got.OutputOmitted {
		t.Fatalf("record %+v", got)
	}
	if got.Result.TotalTokens != last.TotalTokens || got.Result.PrefixHash != last.PrefixHash || len(got.Result.Messages) != len(last.Messages) {
		t.Fatalf("recorded result differs: %+v", got.Result)
	}
	dropped := 0
	for _, r := range got.Result.Report.Regions {
		dropped += len(r.Dropped)
		// A recorded assembly counts what it drops, for the inspector: each item has its tokens.
		for _, d := range r.Dropped {
			if d.Tokens <= 0 {
				t.Errorf("%s: recorded %+v without its tokens", r.Name, d)
			}
		}
	}
	if dropped == 0 {
		t.Fatal("the record lost the dropped history")
	}
	// The assembly the caller got is the recorded one: counting changed nothing that is sent.
	unrecorded := req
	unrecorded.NoRecord = true
	plain, err := e.Assemble(ctx, unrecorded)
	if err != nil {
		t.Fatal(err)
	}
	if plain.TotalTokens != last.TotalTokens || plain.PrefixHash != last.PrefixHash || len(plain.Messages) != len(last.Messages) {
		t.Fatalf("the unrecorded assembly differs: %d tokens against %d", plain.TotalTokens, last.TotalTokens)
	}
	uncounted := 0
	for _, r := range plain.Report.Regions {
		for _, d := range r.Dropped {
			if d.Tokens < 0 {
				uncounted++
			}
		}
	}
	if uncounted == 0 {
		t.Error("the unrecorded assembly counted every dropped item: the test shows nothing")
	}
	one, err := e.Assembly(ctx, "s", 2)
	if err != nil || one.Seq != 2 {
		t.Fatalf("Assembly 2: %+v, %v", one, err)
	}
	if _, err := e.Assembly(ctx, "s", 1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a record no longer kept: %v", err)
	}
	if recs, err := e.Assemblies(ctx, "empty"); err != nil || len(recs) != 0 {
		t.Fatalf("an assembly of an empty session recorded %d: %v", len(recs), err)
	}
	// Another tenant's session of the same id has none.
	if recs, err := e.Assemblies(loom.WithTenant(t.Context(), "globex"), "s"); err != nil || len(recs) != 0 {
		t.Fatalf("another tenant sees %d records: %v", len(recs), err)
	}
}

func TestAssemble_RecordOverItsBoundGoesWithoutTheOutput(t *testing.T) {
	t.Parallel()
	st := newMemory()
	e, err := testEngine(st, engine.WithAssemblyRecords(engine.RecordOptions{MaxBytes: 2500}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	seedLongSession(t, ctx, st, "s")
	if _, err := e.Assemble(ctx, engine.Request{Session: "s", Request: assembler.Request{Model: "gpt-4o", MaxTokens: 2000, Message: "go"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.FlushRecords(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := e.Assemblies(ctx, "s")
	if err != nil || len(recs) != 1 {
		t.Fatalf("%d records: %v", len(recs), err)
	}
	if !recs[0].OutputOmitted || len(recs[0].Result.Messages) != 0 || len(recs[0].Result.Report.Regions) == 0 {
		t.Fatalf("record over its bound: omitted %v, %d messages, %d regions", recs[0].OutputOmitted, len(recs[0].Result.Messages), len(recs[0].Result.Report.Regions))
	}
}

// TestAssemble_RecordsNothingWhenOff: with RecordOptions{Off: true}, or without WithAssemblyRecords (a
// library user who did not ask for the inspector's records does not pay for them), nothing is recorded.
func TestAssemble_RecordsNothingWhenOff(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string][]engine.Option{
		"off":     {engine.WithAssemblyRecords(engine.RecordOptions{Off: true})},
		"default": nil,
	} {
		st := newMemory()
		e, err := testEngine(st, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if e.Recording() {
			t.Fatalf("%s: Recording", name)
		}
		ctx := t.Context()
		seedLongSession(t, ctx, st, "s")
		if _, err := e.Assemble(ctx, engine.Request{Session: "s", Request: assembler.Request{Model: "gpt-4o", Message: "go"}}); err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if recs, err := st.AssemblyRecords(ctx, loom.DefaultTenant, "s"); err != nil || len(recs) != 0 {
			t.Fatalf("%s: recorded %d: %v", name, len(recs), err)
		}
	}
	if _, err := testEngine(newMemory(), engine.WithAssemblyRecords(engine.RecordOptions{Keep: -1})); !errors.Is(err, engine.ErrInvalidRequest) {
		t.Fatalf("a negative keep: %v", err)
	}
}

func TestAssemble_RecordTooLargeEvenBareIsCountedNotWritten(t *testing.T) {
	t.Parallel()
	st := newMemory()
	e, err := testEngine(st, engine.WithAssemblyRecords(engine.RecordOptions{MaxBytes: 100}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	seedLongSession(t, ctx, st, "s")
	if _, err := e.Assemble(ctx, engine.Request{Session: "s", Request: assembler.Request{Model: "gpt-4o", MaxTokens: 2000, Message: "go"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.FlushRecords(ctx); err != nil {
		t.Fatal(err)
	}
	if recs, err := e.Assemblies(ctx, "s"); err != nil || len(recs) != 0 || e.RecordsDropped() != 1 {
		t.Fatalf("%d records, %d dropped: %v", len(recs), e.RecordsDropped(), err)
	}
}

func TestClose_WritesTheQueuedRecordsFirst(t *testing.T) {
	t.Parallel()
	st := newMemory()
	e, err := testEngine(st, engine.WithAssemblyRecords(engine.RecordOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	seedLongSession(t, ctx, st, "s")
	for range 5 {
		if _, err := e.Assemble(ctx, engine.Request{Session: "s", Request: assembler.Request{Model: "gpt-4o", Message: "go"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err := st.AssemblyRecords(ctx, loom.DefaultTenant, "s")
	if err != nil || len(recs) != 5 {
		t.Fatalf("after Close, %d records: %v", len(recs), err)
	}
	// A closed engine records nothing more, and does not block.
	if _, err := e.Assemble(ctx, engine.Request{Session: "s", Request: assembler.Request{Model: "gpt-4o", Message: "go"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.FlushRecords(ctx); err != nil {
		t.Fatal(err)
	}
}
