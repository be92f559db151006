package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/context-loom/loom/store"
)

// recordSeqs returns the seqs of recs, in their order.
func recordSeqs(recs []store.AssemblyRecord) []int64 {
	out := make([]int64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

// testAssemblies checks a session's recent assembly records: numbered in order, newest first, bounded in
// count (the oldest go) and in bytes (refused before the backend), kept as given, the tenant's alone, and
// deleted with their session.
func testAssemblies(t *testing.T, newStore NewStore) {
	s := open(t, newStore, store.Options{})
	ctx := t.Context()
	if !s.Assemblies() {
		_, err := s.RecordAssembly(ctx, tenant, "s", []byte(`{}`), 0, 0)
		wantErr(t, err, store.ErrUnsupported, "RecordAssembly of a store that keeps none")
		_, err = s.AssemblyRecords(ctx, tenant, "s")
		wantErr(t, err, store.ErrUnsupported, "AssemblyRecords of a store that keeps none")
		return
	}
	if recs := must(s.AssemblyRecords(ctx, tenant, "s")); len(recs) != 0 {
		t.Fatalf("an unknown session has records %v", recordSeqs(recs))
	}
	_, err := s.AssemblyRecord(ctx, tenant, "s", 1)
	wantErr(t, err, store.ErrNotFound, "AssemblyRecord of an unknown session")

	// Kept as given, numbered from 1, newest first; only the newest keep stay.
	data := func(i int) []byte { return fmt.Appendf(nil, `{"n":%d,"text":"<&> \u00e9 🧵 \"q\""}`, i) }
	for i := 1; i <= 5; i++ {
		rec := must(s.RecordAssembly(ctx, tenant, "s", data(i), 3, 0))
		if rec.Seq != int64(i) || rec.Time.IsZero() || rec.Time.Location().String() != "UTC" {
			t.Fatalf("record %d stored as seq %d at %v", i, rec.Seq, rec.Time)
		}
	}
	recs := must(s.AssemblyRecords(ctx, tenant, "s"))
	if got := recordSeqs(recs); !slices.Equal(got, []int64{5, 4, 3}) {
		t.Fatalf("records %v, want the newest 3 newest first: [5 4 3]", got)
	}
	for _, r := range recs {
		if !jsonEqual(r.Data, data(int(r.Seq))) {
			t.Fatalf("record %d reads %s, want %s", r.Seq, r.Data, data(int(r.Seq)))
		}
	}
	if r := must(s.AssemblyRecord(ctx, tenant, "s", 4)); !jsonEqual(r.Data, data(4)) || !r.Time.Equal(recs[1].Time) {
		t.Fatalf("record 4: %+v", r)
	}
	_, err = s.AssemblyRecord(ctx, tenant, "s", 1)
	wantErr(t, err, store.ErrNotFound, "a record no longer kept")

	// The bounds are the front's: checked before the backend sees the record.
	_, err = s.RecordAssembly(ctx, tenant, "s", []byte(`"`+strings.Repeat("x", 100)+`"`), 0, 64)
	wantErr(t, err, store.ErrTooLarge, "a record over its byte bound")
	_, err = s.RecordAssembly(ctx, tenant, "s", []byte(`{"open":`), 0, 0)
	wantErr(t, err, store.ErrInvalid, "a record that is not JSON")
	_, err = s.RecordAssembly(ctx, tenant, "", []byte(`{}`), 0, 0)
	wantErr(t, err, store.ErrInvalid, "a record of no session")
	if got := recordSeqs(must(s.AssemblyRecords(ctx, tenant, "s"))); !slices.Equal(got, []int64{5, 4, 3}) {
		t.Fatalf("refused records changed the session's: %v", got)
	}

	// Concurrent records of one session get distinct seqs.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, err := s.RecordAssembly(ctx, tenant, "busy", data(i), 100, 0); err != nil {
				t.Errorf("RecordAssembly: %v", err)
			}
		})
	}
	wg.Wait()
	if got := recordSeqs(must(s.AssemblyRecords(ctx, tenant, "busy"))); !slices.Equal(got, []int64{8, 7, 6, 5, 4, 3, 2, 1}) {
		t.Fatalf("concurrent records numbered %v", got)
	}

	// The tenant's alone.
	must(s.RecordAssembly(ctx, "other", "s", []byte(`{"tenant":"other"}`), 0, 0))
	if got := must(s.AssemblyRecords(ctx, "other", "s")); len(got) != 1 || !jsonEqual(got[0].Data, []byte(`{"tenant":"other"}`)) {
		t.Fatalf("another tenant's session reads %v", recordSeqs(got))
	}
	if got := recordSeqs(must(s.AssemblyRecords(ctx, tenant, "s"))); !slices.Equal(got, []int64{5, 4, 3}) {
		t.Fatalf("another tenant's record changed this one's: %v", got)
	}

	// Deleted with the session, which records alone make; a session deleted starts again from 1.
	ok(t, s.DeleteSession(ctx, tenant, "s"))
	if recs := must(s.AssemblyRecords(ctx, tenant, "s")); len(recs) != 0 {
		t.Fatalf("records %v outlived their session", recordSeqs(recs))
	}
	if rec := must(s.RecordAssembly(ctx, tenant, "s", data(9), 0, 0)); rec.Seq != 1 {
		t.Fatalf("the first record of a session started again has seq %d", rec.Seq)
	}
	must(s.AppendMessages(ctx, tenant, "s", store.Message{Role: "user", Content: "hello"}))
	if got := must(s.AssemblyRecords(ctx, tenant, "s")); len(got) != 1 {
		t.Fatalf("a message appended after a record lost it: %v", recordSeqs(got))
	}
	ok(t, s.DeleteSession(ctx, tenant, "s"))
	ok(t, s.DeleteSession(ctx, tenant, "busy"))
	wantErr(t, s.DeleteSession(ctx, tenant, "busy"), store.ErrNotFound, "DeleteSession of a session of records, twice")
	if got := must(s.AssemblyRecords(ctx, "other", "s")); len(got) != 1 {
		t.Fatal("deleting a session deleted another tenant's records")
	}
	var v map[string]any
	ok(t, json.Unmarshal(must(s.AssemblyRecords(ctx, "other", "s"))[0].Data, &v))
}
