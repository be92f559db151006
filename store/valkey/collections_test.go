package valkey_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/collection/collectiontest"
	"github.com/context-loom/loom/internal/valkeytest"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/valkey"
)

func TestCollections_Conformance(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	collectiontest.Run(t, func(t *testing.T, opts store.Options) collection.Store {
		return openColls(t, valkey.Options{Options: opts}, addr)
	})
}

// TestCollections_ConformanceCluster runs the suite on a three-node cluster: a script or transaction that
// touched keys of two slots would fail with CROSSSLOT (or make the client's command builder panic).
func TestCollections_ConformanceCluster(t *testing.T) {
	t.Parallel()
	c := valkeytest.StartCluster(t, 3)
	collectiontest.Run(t, func(t *testing.T, opts store.Options) collection.Store {
		return openColls(t, valkey.Options{Options: opts}, c.Addrs()...)
	})
}

func testDoc(collID, id, version string, n, dims int) (loom.Document, []collection.Chunk) {
	d := loom.Document{ID: id, CollectionID: collID, Source: id + ".md", Hash: id + "@" + version, Chunks: n}
	chunks := make([]collection.Chunk, n)
	for i := range chunks {
		text := fmt.Sprintf("%s %s chunk %d: %s", id, version, i, strings.Repeat("lorem ipsum ", 40))
		v := make([]float32, dims)
		for j := range v {
			v[j] = float32(i*dims+j) / 7
		}
		chunks[i] = collection.Chunk{Chunk: loom.Chunk{ID: fmt.Sprintf("%s#%d", id, i), DocumentID: id, Content: text, Index: i,
			StartOffset: i * len(text), EndOffset: (i + 1) * len(text), TokenCount: 90, Metadata: map[string]string{"source": d.Source}}, Vector: v}
		d.Bytes += len(text)
	}
	return d, chunks
}

// followers returns two stores sharing one server (or cluster) and prefix, as two Loom servers would.
func followers(t *testing.T, addrs []string) (a, b collection.Store) {
	prefix := fmt.Sprintf("shared%d", prefixes.Add(1))
	return openColls(t, valkey.Options{Prefix: prefix}, addrs...), openColls(t, valkey.Options{Prefix: prefix}, addrs...)
}

// blockedOn waits until some client is blocked (XREAD BLOCK) on one of the servers at addrs, and returns
// true; or returns false as soon as returned is ready, the blocking call having returned. It fails the test
// if neither happens within two minutes (a hang).
func blockedOn(t *testing.T, addrs []string, returned <-chan struct{}) bool {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; {
		for _, addr := range addrs {
			info, err := valkeytest.Do(addr, "INFO", "clients")
			if err != nil {
				t.Fatal(err)
			}
			if n, ok := infoField(info[0], "blocked_clients"); ok && n != "0" {
				return true
			}
		}
		select {
		case <-returned:
			return false
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no client blocked on the servers")
		}
	}
}

// infoField returns the value of field in the text of an INFO reply.
func infoField(info, field string) (string, bool) {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v, true
		}
	}
	return "", false
}

// TestChanges_TwoServers: a document put through one store is seen through the other's change feed, by a
// reader already waiting in Changes (blocked on the server), as soon as it is written; then the reader
// reloads the document and finds its chunks.
func TestChanges_TwoServers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		addrs func(t *testing.T) []string
	}{
		{"Standalone", func(t *testing.T) []string { return []string{valkeytest.Start(t)} }},
		{"Cluster", func(t *testing.T) []string { return valkeytest.StartCluster(t, 3).Addrs() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addrs := tc.addrs(t)
			writer, reader := followers(t, addrs)
			ctx := t.Context()
			c, err := writer.CreateCollection(ctx, "acme", loom.Collection{Name: "manuals"})
			if err != nil {
				t.Fatal(err)
			}
			from, err := reader.LastChange(ctx)
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				changes []collection.Change
				at      time.Time
				err     error
			}
			got := make(chan result, 1)
			returned := make(chan struct{})
			go func() {
				defer close(returned)
				ch, err := reader.Changes(ctx, from, 10, time.Hour) // the change ends the wait
				got <- result{ch, time.Now(), err}
			}()
			if !blockedOn(t, addrs, returned) {
				r := <-got
				t.Fatalf("Changes with nothing new returned before the hour's wait: %+v, %v", r.changes, r.err)
			}
			d, chunks := testDoc(c.ID, "install", "v1", 3, 8)
			if changed, err := writer.PutDocument(ctx, "acme", d, chunks); err != nil || !changed {
				t.Fatalf("PutDocument = %v, %v", changed, err)
			}
			var r result
			select {
			case r = <-got:
			case <-time.After(2 * time.Minute):
				t.Fatal("the waiting reader did not get the change")
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			if len(r.changes) != 1 || r.changes[0].Op != collection.OpPut || r.changes[0].DocumentID != "install" ||
				r.changes[0].Tenant != "acme" || r.changes[0].CollectionID != c.ID {
				t.Fatalf("changes = %+v", r.changes)
			}
			stored, err := reader.DocumentChunks(ctx, "acme", c.ID, "install")
			if err != nil || len(stored) != 3 || !slices.Equal(stored[2].Vector, chunks[2].Vector) {
				t.Fatalf("the reader's DocumentChunks = %d chunks, %v", len(stored), err)
			}
			if l, _ := writer.LastChange(ctx); l != r.changes[0].Seq {
				t.Errorf("the writer's LastChange %q, the reader saw %q", l, r.changes[0].Seq)
			}
		})
	}
}

// TestCollections_CraftedIDs: ids made to look like another tenant's or collection's keys stay apart, and
// the keys are those the package documents.
func TestCollections_CraftedIDs(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	s := openColls(t, valkey.Options{Prefix: "loom"}, addr)
	ctx := t.Context()
	// "a" with collection "b:c:x" would make the key {t:a:c:b:c:x} without escaping, as would tenant
	// "a:c:b" with collection "x"; "a}" would close the hash tag.
	pairs := [][2]string{{"a", "b:c:x"}, {"a:c:b", "x"}, {"a}", "{b}"}, {"a", "b"}}
	for i, p := range pairs {
		c, err := s.CreateCollection(ctx, p[0], loom.Collection{ID: p[1], Name: "name " + p[1]})
		if err != nil {
			t.Fatalf("create %q/%q: %v", p[0], p[1], err)
		}
		d, chunks := testDoc(c.ID, "doc", fmt.Sprint(i), 1, 2)
		if _, err := s.PutDocument(ctx, p[0], d, chunks); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range pairs {
		d, err := s.GetDocument(ctx, p[0], p[1], "doc")
		if err != nil || d.Hash != "doc@"+fmt.Sprint(i) {
			t.Errorf("%q/%q holds %+v, %v", p[0], p[1], d, err)
		}
		l, err := s.ListCollections(ctx, p[0])
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, c := range l {
			ids = append(ids, c.ID)
		}
		want := map[string][]string{"a": {"b:c:x"}, "a:c:b": {"x"}, "a}": {"{b}"}}[p[0]]
		if p[0] == "a" {
			want = []string{"b:c:x", "b"}
		}
		if len(ids) != len(want) {
			t.Errorf("tenant %q lists %q, want %q", p[0], ids, want)
		}
	}
	for _, key := range []string{"loom:{t:a:c:b%3Ac%3Ax}:meta", "loom:{t:a%3Ac%3Ab:c:x}:docs", "loom:{t:a%7D:c:%7Bb%7D}:chunks", "loom:{t:a}:colls", "loom:changes"} {
		if n, err := valkeytest.Do(addr, "EXISTS", key); err != nil || n[0] != "1" {
			t.Errorf("EXISTS %s = %v, %v", key, n, err)
		}
	}
}

// TestDeleteCollection_RemovesEveryKey: after deleting the tenant's only collection nothing of it is left
// but the tenant's index holding its generation counter alone.
func TestDeleteCollection_RemovesEveryKey(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	s := openColls(t, valkey.Options{Prefix: "del"}, addr)
	ctx := t.Context()
	c, err := s.CreateCollection(ctx, "acme", loom.Collection{Name: "docs"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		d, chunks := testDoc(c.ID, fmt.Sprintf("d {%d}", i), "v1", 3, 4)
		if _, err := s.PutDocument(ctx, "acme", d, chunks); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteCollection(ctx, "acme", c.ID); err != nil {
		t.Fatal(err)
	}
	keys, err := valkeytest.Do(addr, "KEYS", "del:*") // the test's own server
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"del:changes", "del:{t:acme}:colls"}) {
		t.Fatalf("keys left: %q", keys)
	}
	if fields, err := valkeytest.Do(addr, "HKEYS", "del:{t:acme}:colls"); err != nil || !slices.Equal(fields, []string{"gen"}) {
		t.Fatalf("the tenant's index holds %q, %v; want its counter alone", fields, err)
	}
}

// TestCollections_Unavailable: with the server gone every call fails with ErrUnavailable, at once (the
// store's timeout is the tests' long one, so that the calls made before the stop cannot time out).
func TestCollections_Unavailable(t *testing.T) {
	t.Parallel()
	srv := valkeytest.StartServer(t)
	s := openColls(t, valkey.Options{}, srv.Addr)
	ctx := t.Context()
	c, err := s.CreateCollection(ctx, "acme", loom.Collection{Name: "docs"})
	if err != nil {
		t.Fatal(err)
	}
	d, chunks := testDoc(c.ID, "d", "v1", 2, 3)
	srv.Stop()
	for name, call := range map[string]func() error{
		"CreateCollection": func() error {
			_, err := s.CreateCollection(ctx, "acme", loom.Collection{Name: "other"})
			return err
		},
		"GetCollection":    func() error { _, err := s.GetCollection(ctx, "acme", c.ID); return err },
		"ListCollections":  func() error { _, err := s.ListCollections(ctx, "acme"); return err },
		"DeleteCollection": func() error { return s.DeleteCollection(ctx, "acme", c.ID) },
		"PutDocument":      func() error { _, err := s.PutDocument(ctx, "acme", d, chunks); return err },
		"GetDocument":      func() error { _, err := s.GetDocument(ctx, "acme", c.ID, "d"); return err },
		"ListDocuments":    func() error { _, err := s.ListDocuments(ctx, "acme", c.ID); return err },
		"DeleteDocument":   func() error { return s.DeleteDocument(ctx, "acme", c.ID, "d") },
		"DocumentChunks":   func() error { _, err := s.DocumentChunks(ctx, "acme", c.ID, "d"); return err },
		"ScanChunks": func() error {
			return s.ScanChunks(ctx, "acme", c.ID, func(collection.Chunk) error { return nil })
		},
		"Changes":        func() error { _, err := s.Changes(ctx, "", 10, 0); return err },
		"Changes (wait)": func() error { _, err := s.Changes(ctx, "", 10, 200*time.Millisecond); return err },
		"LastChange":     func() error { _, err := s.LastChange(ctx); return err },
	} {
		start := time.Now()
		if err := call(); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s with the server down: %v, want ErrUnavailable", name, err)
		}
		// A bound only a call that waited for its timeout breaks, not a loaded machine.
		if d := time.Since(start); d >= testTimeout {
			t.Errorf("%s took %v, the store's timeout", name, d)
		}
	}
}

func TestChanges_BadInput(t *testing.T) {
	t.Parallel()
	s := openColls(t, valkey.Options{}, valkeytest.Start(t))
	for _, after := range []string{"x", "1-", "-1", "1-2-3"} {
		if _, err := s.Changes(t.Context(), after, 10, 0); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Changes(%q) = %v, want ErrInvalid", after, err)
		}
	}
	if ch, err := s.Changes(t.Context(), "12345", 10, 0); err != nil || len(ch) != 0 {
		t.Errorf("Changes after a bare millisecond id: %v, %v", ch, err)
	}
}

// TestPutDocument_Rejects: bad chunks are refused before anything is written.
func TestPutDocument_Rejects(t *testing.T) {
	t.Parallel()
	s := openColls(t, valkey.Options{Options: store.Options{Limits: store.Limits{MaxValueBytes: 1000}}}, valkeytest.Start(t))
	ctx := t.Context()
	c, err := s.CreateCollection(ctx, "acme", loom.Collection{Name: "docs"})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		edit func(*loom.Document, []collection.Chunk)
		want error
	}{
		"no hash":          {func(d *loom.Document, _ []collection.Chunk) { d.Hash = "" }, store.ErrInvalid},
		"mixed dimensions": {func(_ *loom.Document, c []collection.Chunk) { c[1].Vector = c[1].Vector[:1] }, store.ErrInvalid},
		"repeated chunk":   {func(_ *loom.Document, c []collection.Chunk) { c[1].ID = c[0].ID }, store.ErrInvalid},
		"negative offset":  {func(_ *loom.Document, c []collection.Chunk) { c[0].StartOffset = -1 }, store.ErrInvalid},
		"large chunk":      {func(_ *loom.Document, c []collection.Chunk) { c[0].Content = strings.Repeat("x", 1001) }, store.ErrTooLarge},
		"bad utf-8 source": {func(d *loom.Document, _ []collection.Chunk) { d.Source = "\xff" }, store.ErrInvalid},
	} {
		d, chunks := testDoc(c.ID, "d", "v1", 2, 3)
		tc.edit(&d, chunks)
		if _, err := s.PutDocument(ctx, "acme", d, chunks); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	if docs, err := s.ListDocuments(ctx, "acme", c.ID); err != nil || len(docs) != 0 {
		t.Errorf("rejected documents were stored: %v, %v", docs, err)
	}
	if _, err := s.CreateCollection(ctx, "acme", loom.Collection{Name: "neg", ChunkSize: -1}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("a negative chunk size: %v", err)
	}
}

// TestScanChunks_ManyDocuments scans more documents than one HSCAN reply holds, each chunk exactly once.
func TestScanChunks_ManyDocuments(t *testing.T) {
	t.Parallel()
	s := openColls(t, valkey.Options{}, valkeytest.Start(t))
	ctx := t.Context()
	c, err := s.CreateCollection(ctx, "acme", loom.Collection{Name: "docs"})
	if err != nil {
		t.Fatal(err)
	}
	const docs, per = 300, 4
	for i := range docs {
		d, chunks := testDoc(c.ID, fmt.Sprintf("doc%03d", i), "v1", per, 2)
		if _, err := s.PutDocument(ctx, "acme", d, chunks); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]int{}
	if err := s.ScanChunks(ctx, "acme", c.ID, func(ch collection.Chunk) error { seen[ch.ID]++; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seen) != docs*per {
		t.Fatalf("%d distinct chunks, want %d", len(seen), docs*per)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("chunk %s seen %d times", id, n)
		}
	}
	l, err := s.ListDocuments(ctx, "acme", c.ID)
	if err != nil || len(l) != docs || l[0].ID != "doc000" || l[docs-1].ID != "doc299" {
		t.Fatalf("ListDocuments = %d documents, %v", len(l), err)
	}
	if err := s.ScanChunks(ctx, "acme", "missing", func(collection.Chunk) error { return nil }); !errors.Is(err, collection.ErrNotFound) {
		t.Errorf("ScanChunks of a missing collection: %v", err)
	}
}

// TestChanges_WaitIsBounded: a waiting Changes on an empty feed returns empty after the wait, though the
// wait is longer than the store's timeout (the call's own deadline is the timeout plus the wait), and the
// caller's context ends it sooner.
func TestChanges_WaitIsBounded(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	// A reply later than the timeout after the wait (or a new connection slower than the timeout) fails
	// the call as it should, and proves nothing: then the test tries again with both doubled. A store that
	// bounded the call by its timeout alone fails every try, and so the test.
	for timeout := 200 * time.Millisecond; ; timeout *= 2 {
		wait := 3 * timeout
		st := open(t, valkey.Options{Timeout: timeout}, addr)
		s, _ := st.Collections()
		start := time.Now()
		ch, err := s.Changes(t.Context(), "", 10, wait)
		d := time.Since(start)
		if err == nil {
			if len(ch) != 0 {
				t.Fatalf("Changes on an empty feed = %v", ch)
			}
			if d < wait-wait/10 || d > wait+2*time.Minute { // waited, and not forever
				t.Errorf("waited %v for %v", d, wait)
			}
			break
		}
		if !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("Changes waiting %v with a timeout of %v: %v after %v", wait, timeout, err, d)
		}
		if timeout >= 10*time.Second {
			t.Fatalf("Changes waiting %v with a timeout of %v: %v after %v; no try got an answer", wait, timeout, err, d)
		}
		t.Logf("Changes waiting %v with a timeout of %v: %v after %v; trying longer ones", wait, timeout, err, d)
	}
	// The caller's context ends a wait of ten minutes, well before it is over.
	s, _ := open(t, valkey.Options{}, addr).Collections()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := s.Changes(ctx, "", 10, 10*time.Minute); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Changes past the caller's deadline: %v", err)
	}
	if d := time.Since(start); d > 2*time.Minute { // well before the wait's ten minutes
		t.Errorf("the caller's deadline ended the wait after %v", d)
	}
	if err := open(t, valkey.Options{}, addr).Ping(t.Context()); err != nil { // the server still works
		t.Fatal(err)
	}
}

// TestPutDocument_FeedFailure: when the change cannot be added (here the stream's key holds a string), a
// standalone server's script writes nothing, while on a cluster the document is stored and the error says
// the change was not published.
func TestPutDocument_FeedFailure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		cluster bool
	}{{"Standalone", false}, {"Cluster", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var addrs []string
			if tc.cluster {
				addrs = valkeytest.StartCluster(t, 3).Addrs()
			} else {
				addrs = []string{valkeytest.Start(t)}
			}
			prefix := fmt.Sprintf("feed%d", prefixes.Add(1))
			s := openColls(t, valkey.Options{Prefix: prefix}, addrs...)
			ctx := t.Context()
			c, err := s.CreateCollection(ctx, "acme", loom.Collection{Name: "docs"})
			if err != nil {
				t.Fatal(err)
			}
			// On a cluster only the node that holds the key's slot takes the SET (the others answer MOVED).
			planted := false
			for _, a := range addrs {
				if _, err := valkeytest.Do(a, "SET", prefix+":changes", "not a stream"); err == nil {
					planted = true
					break
				}
			}
			if !planted {
				t.Fatal("could not plant the string")
			}
			d, chunks := testDoc(c.ID, "d", "v1", 2, 3)
			changed, err := s.PutDocument(ctx, "acme", d, chunks)
			if err == nil {
				t.Fatal("PutDocument with a broken feed succeeded")
			}
			_, getErr := s.GetDocument(ctx, "acme", c.ID, "d")
			if tc.cluster {
				if !changed || getErr != nil || !strings.Contains(err.Error(), "not published") {
					t.Errorf("on a cluster: changed %v, %v; GetDocument: %v", changed, err, getErr)
				}
			} else if changed || !errors.Is(getErr, collection.ErrNotFound) {
				t.Errorf("standalone: changed %v, %v; GetDocument: %v (want nothing written)", changed, err, getErr)
			}
		})
	}
}

// TestCollections_StoredSize measures the memory of every key of a server of the test's own (MEMORY USAGE,
// SAMPLES 0: every element counted) after the suite's adversarial collections.
func TestCollections_StoredSize(t *testing.T) {
	t.Parallel()
	collectiontest.RunStoredSize(t, func(t *testing.T, opts store.Options) (collection.Store, collectiontest.Sizer) {
		addr := valkeytest.Start(t)
		return openColls(t, valkey.Options{Options: opts}, addr), func(t *testing.T) int64 {
			var total int64
			for cursor := "0"; ; {
				reply, err := valkeytest.Do(addr, "SCAN", cursor, "COUNT", "1000")
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range reply[1:] {
					n, err := valkeytest.Do(addr, "MEMORY", "USAGE", k, "SAMPLES", "0")
					if err != nil {
						t.Fatal(err)
					}
					v, err := strconv.ParseInt(n[0], 10, 64)
					if err != nil {
						t.Fatal(err)
					}
					total += v
				}
				if cursor = reply[0]; cursor == "0" {
					return total
				}
			}
		}
	})
}

// TestCollections_ReadsFormat1 reads chunks as an earlier Loom wrote them: records of format 1, each chunk
// with a copy of its document's metadata. They read as they did, and a new version of the document is
// written in format 2 and reads alike.
func TestCollections_ReadsFormat1(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	s := openColls(t, valkey.Options{Prefix: "old"}, addr)
	ctx := t.Context()
	if _, err := s.CreateCollection(ctx, "acme", loom.Collection{ID: "c1", Name: "docs"}); err != nil {
		t.Fatal(err)
	}
	str := func(s string) string { return string(rune(len(s))) + s } // lengths below 128: one byte
	// Version 1, one chunk: ID, content, Index 0, StartOffset 0, EndOffset 4, TokenCount 1 (zigzag
	// varints), three metadata pairs sorted by key, no vector.
	record := "\x01\x01" + str("guide#0") + str("text") + "\x00\x00\x08\x02" +
		"\x03" + str("headings") + str("Intro") + str("source") + str("guide.md") + str("title") + str("The guide") + "\x00"
	doc := `{"id":"guide","collection_id":"c1","source":"guide.md","hash":"h1","bytes":4,"chunks":1,"metadata":{"source":"guide.md","title":"The guide"}}`
	for _, cmd := range [][]string{
		{"HSET", "old:{t:acme:c:c1}:docs", "guide", doc},
		{"HSET", "old:{t:acme:c:c1}:chunks", "guide", record},
	} {
		if _, err := valkeytest.Do(addr, cmd...); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{"headings": "Intro", "source": "guide.md", "title": "The guide"}
	check := func(what string) {
		t.Helper()
		got, err := s.DocumentChunks(ctx, "acme", "c1", "guide")
		if err != nil || len(got) != 1 || got[0].Content != "text" || got[0].EndOffset != 4 || got[0].TokenCount != 1 || !maps.Equal(got[0].Metadata, want) {
			t.Fatalf("%s: DocumentChunks = %+v, %v", what, got, err)
		}
		n := 0
		err = s.ScanChunks(ctx, "acme", "c1", func(ch collection.Chunk) error {
			n++
			if !maps.Equal(ch.Metadata, want) || !maps.Equal(ch.DocumentMetadata, map[string]string{"source": "guide.md", "title": "The guide"}) {
				t.Errorf("%s: ScanChunks metadata %v, document's %v", what, ch.Metadata, ch.DocumentMetadata)
			}
			return nil
		})
		if err != nil || n != 1 {
			t.Fatalf("%s: ScanChunks saw %d chunks, %v", what, n, err)
		}
	}
	check("format 1")
	chunks, err := s.DocumentChunks(ctx, "acme", "c1", "guide")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.PutDocument(ctx, "acme", loom.Document{ID: "guide", CollectionID: "c1", Source: "guide.md", Hash: "h2",
		Metadata: map[string]string{"source": "guide.md", "title": "The guide"}}, chunks); err != nil {
		t.Fatal(err)
	}
	v, err := valkeytest.Do(addr, "HGET", "old:{t:acme:c:c1}:chunks", "guide")
	if err != nil || len(v) != 1 || v[0][0] != 2 || strings.Contains(v[0], "guide.md") {
		t.Fatalf("the new version's record: %q %v, want format 2 without the document's metadata", v, err)
	}
	check("format 2")
}

// TestReads_RideOutARestart: the scripts that only read (a document's chunks, a page of a scan, the newest
// messages within a budget) run as EVALSHA_RO, which the client retries after a network error, so a read
// right after the server restarted (with its data kept) answers rather than fail once on the broken
// connection, as plain reads do.
func TestReads_RideOutARestart(t *testing.T) {
	t.Parallel()
	srv := valkeytest.StartServer(t, "--appendonly", "yes", "--appendfsync", "always")
	st := open(t, valkey.Options{Timeout: 30 * time.Second}, srv.Addr)
	s, _ := st.Collections()
	ctx := t.Context()
	c, err := s.CreateCollection(ctx, "acme", loom.Collection{Name: "kb"})
	if err != nil {
		t.Fatal(err)
	}
	d, chunks := testDoc(c.ID, "doc", "v1", 3, 8)
	if _, err := s.PutDocument(ctx, "acme", d, chunks); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AppendMessages(ctx, "acme", "s", store.Message{Role: "user", Content: "kept"}); err != nil {
		t.Fatal(err)
	}
	reads := map[string]func() error{
		"DocumentChunks": func() error {
			got, err := s.DocumentChunks(ctx, "acme", c.ID, "doc")
			if err == nil && len(got) != 3 {
				err = fmt.Errorf("%d chunks", len(got))
			}
			return err
		},
		"ScanChunks": func() error {
			n := 0
			err := s.ScanChunks(ctx, "acme", c.ID, func(collection.Chunk) error { n++; return nil })
			if err == nil && n != 3 {
				err = fmt.Errorf("%d chunks", n)
			}
			return err
		},
		"Messages within a budget": func() error {
			got, err := st.Messages(ctx, "acme", "s", store.MessageQuery{MaxTokens: 100, Encoding: "o200k_base"})
			if err == nil && len(got) != 1 {
				err = fmt.Errorf("%d messages", len(got))
			}
			return err
		},
	}
	for name, read := range reads {
		if err := read(); err != nil { // warm every connection the reads use
			t.Fatalf("%s before the restart: %v", name, err)
		}
	}
	srv.Stop()
	srv.Restart()
	for name, read := range reads {
		if err := read(); err != nil {
			t.Errorf("%s right after the restart: %v", name, err)
		}
	}
}

// TestCreateCollection_RetryCompletesHalfCreated: a create is two steps on two slots (the tenant's index,
// the collection's keys), so a lost connection or a crash between them leaves a collection half created:
// invisible, its id and name free. A retry of the create completes it, as the states below show, whatever
// the half-created keys hold; a create of it again then fails with ErrExists and leaves it as it is.
func TestCreateCollection_RetryCompletesHalfCreated(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	old, err := json.Marshal(loom.Collection{ID: "kb", Name: "old name", CreatedAt: time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cmds func(prefix string) [][]string
	}{
		{"meta without index entry", func(p string) [][]string { // as the meta-first order left it
			return [][]string{{"HSET", p + ":{t:acme:c:kb}:meta", "c", string(old), "dims", "0"}}
		}},
		{"meta and documents without index entry", func(p string) [][]string { // a deletion cut short
			return [][]string{
				{"HSET", p + ":{t:acme:c:kb}:meta", "c", string(old), "dims", "3"},
				{"HSET", p + ":{t:acme:c:kb}:docs", "stale", `{"id":"stale","collection_id":"kb","hash":"h"}`},
				{"HSET", p + ":{t:acme:c:kb}:chunks", "stale", "x"},
			}
		}},
		{"index entry without meta", func(p string) [][]string { // a create cut short after the index
			return [][]string{{"HSET", p + ":{t:acme}:colls", "n:kb", "kb", "i:kb", "kb", "g:kb", "1", "gen", "1"}}
		}},
		{"index entry of the name for another id, without meta", func(p string) [][]string { // a create given no id
			return [][]string{{"HSET", p + ":{t:acme}:colls", "n:kb", "x1", "i:x1", "kb", "g:x1", "1", "gen", "1"}}
		}},
		{"index entry of the id for another name, without meta", func(p string) [][]string {
			return [][]string{{"HSET", p + ":{t:acme}:colls", "n:other", "kb", "i:kb", "other", "g:kb", "1", "gen", "1"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prefix := fmt.Sprintf("half%d", prefixes.Add(1))
			s := openColls(t, valkey.Options{Prefix: prefix}, addr)
			ctx := t.Context()
			for _, cmd := range tc.cmds(prefix) {
				if _, err := valkeytest.Do(addr, cmd...); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := s.GetCollection(ctx, "acme", "kb"); !errors.Is(err, collection.ErrNotFound) {
				t.Fatalf("the half-created collection: %v, want ErrNotFound", err)
			}
			want := loom.Collection{ID: "kb", Name: "kb"}
			if _, err := s.CreateCollection(ctx, "acme", want); err != nil {
				t.Fatalf("the retried create: %v", err)
			}
			check := func(what string) {
				t.Helper()
				for _, key := range []string{"kb"} {
					c, err := s.GetCollection(ctx, "acme", key)
					if err != nil || c.ID != "kb" || c.Name != "kb" || c.Dimensions != 0 {
						t.Fatalf("%s: GetCollection(%q) = %+v, %v", what, key, c, err)
					}
				}
				l, err := s.ListCollections(ctx, "acme")
				if err != nil || len(l) != 1 || l[0].ID != "kb" || l[0].Name != "kb" {
					t.Fatalf("%s: ListCollections = %+v, %v", what, l, err)
				}
				if docs, err := s.ListDocuments(ctx, "acme", "kb"); err != nil || len(docs) != 0 {
					t.Fatalf("%s: ListDocuments = %+v, %v, want none", what, docs, err)
				}
				for _, gone := range []string{"x1", "other", "old name"} {
					if _, err := s.GetCollection(ctx, "acme", gone); !errors.Is(err, collection.ErrNotFound) {
						t.Fatalf("%s: GetCollection(%q) = %v, want ErrNotFound", what, gone, err)
					}
				}
			}
			check("after the retry")
			if _, err := s.CreateCollection(ctx, "acme", want); !errors.Is(err, collection.ErrExists) {
				t.Fatalf("a create of the collection again: %v, want ErrExists", err)
			}
			check("after a clashing create")
		})
	}
}

// TestCreateCollection_ConcurrentIdentical: two identical creates at once, on a fresh id or on a
// half-created collection, give one success and one ErrExists, and leave the one collection.
func TestCreateCollection_ConcurrentIdentical(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	prefix := fmt.Sprintf("race%d", prefixes.Add(1))
	a, b := openColls(t, valkey.Options{Prefix: prefix}, addr), openColls(t, valkey.Options{Prefix: prefix}, addr)
	ctx := t.Context()
	const rounds = 48
	index := prefix + ":{t:acme}:colls"
	for i := range rounds {
		c := loom.Collection{ID: fmt.Sprintf("c%d", i), Name: fmt.Sprintf("n%d", i)}
		switch i % 4 {
		case 1: // half created: the meta of an earlier attempt
			js, _ := json.Marshal(c)
			if _, err := valkeytest.Do(addr, "HSET", prefix+":{t:acme:c:"+c.ID+"}:meta", "c", string(js), "dims", "0"); err != nil {
				t.Fatal(err)
			}
		case 2: // no id: each create is given one of its own, and the name decides
			c.ID = ""
		case 3: // no id, and the entry of an earlier attempt without its meta
			gen, err := valkeytest.Do(addr, "HINCRBY", index, "gen", "1")
			if err == nil {
				_, err = valkeytest.Do(addr, "HSET", index, "n:"+c.Name, c.ID, "i:"+c.ID, c.Name, "g:"+c.ID, gen[0])
			}
			if err != nil {
				t.Fatal(err)
			}
			c.ID = ""
		}
		start := make(chan struct{})
		errs := make(chan error, 2)
		for _, s := range []collection.Store{a, b} {
			go func() {
				<-start
				_, err := s.CreateCollection(ctx, "acme", c)
				errs <- err
			}()
		}
		close(start)
		var ok, clash int
		for range 2 {
			switch err := <-errs; {
			case err == nil:
				ok++
			case errors.Is(err, collection.ErrExists):
				clash++
			default:
				t.Fatalf("round %d: %v", i, err)
			}
		}
		if ok != 1 || clash != 1 {
			t.Fatalf("round %d: %d successes and %d clashes, want one of each", i, ok, clash)
		}
		if got, err := a.GetCollection(ctx, "acme", c.Name); err != nil || (c.ID != "" && got.ID != c.ID) {
			t.Fatalf("round %d: GetCollection = %+v, %v", i, got, err)
		}
	}
	l, err := a.ListCollections(ctx, "acme")
	if err != nil || len(l) != rounds {
		t.Fatalf("ListCollections: %d collections, %v; want %d", len(l), err, rounds)
	}
}
