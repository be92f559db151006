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

// sessionNames returns the sessions of a listing, in its order.
func sessionNames(l []store.AssemblySession) []string {
	out := make([]string, len(l))
	for i, a := range l {
		out[i] = a.Session
	}
	return out
}

// testAssemblySessions checks the listing of a tenant's sessions that have records: the most recently
// recorded first, each with its count and newest record, bounded by its limit, the tenant's alone, and
// without a session deleted or one that has no records.
func testAssemblySessions(t *testing.T, newStore NewStore) {
	s := open(t, newStore, store.Options{})
	ctx := t.Context()
	if !s.Assemblies() {
		_, err := s.AssemblySessions(ctx, tenant, 0)
		wantErr(t, err, store.ErrUnsupported, "AssemblySessions of a store that keeps no records")
		return
	}
	if l := must(s.AssemblySessions(ctx, tenant, 0)); len(l) != 0 {
		t.Fatalf("a store of no records lists %v", sessionNames(l))
	}
	must(s.AppendMessages(ctx, tenant, "quiet", store.Message{Role: "user", Content: "no assembly yet"}))
	rec := func(tenant, session string) store.AssemblyRecord {
		return must(s.RecordAssembly(ctx, tenant, session, []byte(`{}`), 2, 0))
	}
	rec(tenant, "a")
	rec(tenant, "b")
	rec(tenant, "c")
	rec(tenant, "a")
	last := rec(tenant, "a") // a keeps its newest 2
	rec("other", "b")
	rec("other", "z")

	all := must(s.AssemblySessions(ctx, tenant, 0))
	if got := sessionNames(all); !slices.Equal(got, []string{"a", "c", "b"}) {
		t.Fatalf("sessions %v, want the most recently recorded first: [a c b]", got)
	}
	if a := all[0]; a.Assemblies != 2 || a.LastSeq != 3 || !a.LastTime.Equal(last.Time) {
		t.Fatalf("session a listed as %+v, want 2 records, the newest seq 3 at %v", a, last.Time)
	}
	if b := all[2]; b.Assemblies != 1 || b.LastSeq != 1 || !b.LastTime.Before(all[1].LastTime) {
		t.Fatalf("session b listed as %+v (c: %+v)", b, all[1])
	}
	if got := sessionNames(must(s.AssemblySessions(ctx, tenant, 2))); !slices.Equal(got, []string{"a", "c"}) {
		t.Fatalf("a listing of limit 2 lists %v, want [a c]", got)
	}
	for _, bad := range []int{-1, store.MaxAssemblySessions + 1} {
		_, err := s.AssemblySessions(ctx, tenant, bad)
		wantErr(t, err, store.ErrInvalid, fmt.Sprintf("a listing of limit %d", bad))
	}
	_, err := s.AssemblySessions(ctx, "", 0)
	wantErr(t, err, store.ErrInvalid, "a listing of no tenant")

	// The tenant's alone: another's session b counts its own record only.
	other := must(s.AssemblySessions(ctx, "other", 0))
	if got := sessionNames(other); !slices.Equal(got, []string{"z", "b"}) || other[1].Assemblies != 1 {
		t.Fatalf("the other tenant lists %+v, want z then b with 1 record", other)
	}

	// A deleted session leaves the listing; one started again comes back, counted from 1.
	ok(t, s.DeleteSession(ctx, tenant, "a"))
	if got := sessionNames(must(s.AssemblySessions(ctx, tenant, 0))); !slices.Equal(got, []string{"c", "b"}) {
		t.Fatalf("after deleting a, sessions %v, want [c b]", got)
	}
	rec(tenant, "a")
	if l := must(s.AssemblySessions(ctx, tenant, 1)); len(l) != 1 || l[0].Session != "a" || l[0].Assemblies != 1 || l[0].LastSeq != 1 {
		t.Fatalf("a session started again lists as %+v", l)
	}
	if got := sessionNames(must(s.AssemblySessions(ctx, "other", 0))); !slices.Equal(got, []string{"z", "b"}) {
		t.Fatalf("another tenant's delete changed this one's listing: %v", got)
	}
}
