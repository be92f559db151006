package collectiontest

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/store"
)

// testMetadata: a document's metadata and each chunk's own are read back merged, the chunk's keys over
// the document's, whether the chunks were given their own keys alone or the document's too; a chunk's
// DocumentMetadata is the document's.
func testMetadata(t *testing.T, s collection.Store) {
	ctx := t.Context()
	c := create(t, s, tenant, "docs")
	docMeta := map[string]string{"source": "guide.md", "title": "The guide", "lang": "en"}
	d := loom.Document{ID: "guide", CollectionID: c.ID, Source: "guide.md", Hash: "h1", Metadata: maps.Clone(docMeta)}
	mk := func(i int, meta map[string]string) collection.Chunk {
		return collection.Chunk{Chunk: loom.Chunk{ID: fmt.Sprintf("guide#%d", i), DocumentID: "guide", Content: fmt.Sprint("text ", i), Index: i,
			Metadata: meta}, Vector: []float32{1, float32(i)}}
	}
	merged := maps.Clone(docMeta)
	merged["headings"] = "Intro"
	given := []collection.Chunk{
		mk(0, nil), // no keys of its own
		mk(1, map[string]string{"headings": "Intro"}), // its own keys alone
		mk(2, merged), // the document's too, as a caller that merged gives them
		mk(3, map[string]string{"lang": "fr", "headings": "Résumé"}), // a key of the document's, another value
	}
	given[1].DocumentMetadata = maps.Clone(docMeta) // as read chunks carry it
	want := []map[string]string{
		docMeta,
		{"source": "guide.md", "title": "The guide", "lang": "en", "headings": "Intro"},
		{"source": "guide.md", "title": "The guide", "lang": "en", "headings": "Intro"},
		{"source": "guide.md", "title": "The guide", "lang": "fr", "headings": "Résumé"},
	}
	_, err := s.PutDocument(ctx, tenant, d, given)
	check(t, err)
	checkChunks := func(what string, got []collection.Chunk) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d chunks, want %d", what, len(got), len(want))
		}
		for _, ch := range got {
			if !maps.Equal(ch.Metadata, want[ch.Index]) {
				t.Errorf("%s: chunk %d metadata %v, want %v", what, ch.Index, ch.Metadata, want[ch.Index])
			}
			if !maps.Equal(ch.DocumentMetadata, docMeta) {
				t.Errorf("%s: chunk %d DocumentMetadata %v, want the document's %v", what, ch.Index, ch.DocumentMetadata, docMeta)
			}
		}
	}
	stored, err := s.DocumentChunks(ctx, tenant, c.ID, "guide")
	check(t, err)
	checkChunks("DocumentChunks", stored)
	var scanned []collection.Chunk
	check(t, s.ScanChunks(ctx, tenant, c.ID, func(ch collection.Chunk) error { scanned = append(scanned, ch); return nil }))
	checkChunks("ScanChunks", scanned)
	got, err := s.GetDocument(ctx, tenant, c.ID, "guide")
	check(t, err)
	if !maps.Equal(got.Metadata, docMeta) {
		t.Errorf("GetDocument metadata %v, want %v", got.Metadata, docMeta)
	}

	// A new version of the document with other metadata: every chunk shows the new document's.
	d.Hash, d.Metadata = "h2", map[string]string{"source": "guide.md"}
	_, err = s.PutDocument(ctx, tenant, d, []collection.Chunk{mk(0, map[string]string{"headings": "Intro"})})
	check(t, err)
	stored, err = s.DocumentChunks(ctx, tenant, c.ID, "guide")
	check(t, err)
	if len(stored) != 1 || !maps.Equal(stored[0].Metadata, map[string]string{"source": "guide.md", "headings": "Intro"}) {
		t.Fatalf("after replacing the document: %+v", stored)
	}

	// A chunk whose DocumentMetadata is not its document's is refused, and nothing changes.
	bad := mk(0, nil)
	bad.DocumentMetadata = map[string]string{"source": "elsewhere.md"}
	_, err = s.PutDocument(ctx, tenant, loom.Document{ID: "guide", CollectionID: c.ID, Hash: "h3", Metadata: d.Metadata}, []collection.Chunk{bad})
	wantErr(t, err, store.ErrInvalid, "a chunk whose DocumentMetadata is another's")
	if got, err := s.GetDocument(ctx, tenant, c.ID, "guide"); err != nil || got.Hash != "h2" {
		t.Fatalf("a refused document was stored: %+v %v", got, err)
	}
}

// testMetadataLimits: a document's metadata, and a chunk's own, are bounded by MaxMetadataBytes (keys and
// values) and MaxMetadataKeys, with errors wrapping ErrTooLarge; at the limits they are stored.
func testMetadataLimits(t *testing.T, s collection.Store) {
	ctx := t.Context()
	c := create(t, s, tenant, "docs")
	chunks := func(id string, meta map[string]string) []collection.Chunk {
		return []collection.Chunk{{Chunk: loom.Chunk{ID: id + "#0", DocumentID: id, Content: "text", Metadata: meta}}}
	}
	atLimit := sizedMetadata(store.DefaultMaxMetadataKeys, store.DefaultMaxMetadataBytes)
	over := maps.Clone(atLimit)
	over["k00"] += "x"
	tooMany := sizedMetadata(store.DefaultMaxMetadataKeys+1, 1000)
	huge := map[string]string{"title": strings.Repeat("x", 1<<20)}
	for i, tc := range []struct {
		what            string
		doc, chunkOwn   map[string]string
		want            error // nil: stored
		wantInMessageOf string
	}{
		{"document metadata at both limits", atLimit, nil, nil, ""},
		{"a chunk's own metadata at both limits", nil, atLimit, nil, ""},
		{"a chunk given its document's metadata at the limits, and a key of its own", atLimit, mergedWith(atLimit, "headings", "Intro"), nil, ""},
		{"1 MiB of document metadata", huge, nil, store.ErrTooLarge, "bytes"},
		{"document metadata a byte over", over, nil, store.ErrTooLarge, "bytes"},
		{"document metadata a key over", tooMany, nil, store.ErrTooLarge, "keys"},
		{"a chunk's own metadata a byte over", nil, over, store.ErrTooLarge, "bytes"},
		{"a chunk's own metadata a key over", nil, tooMany, store.ErrTooLarge, "keys"},
	} {
		id := fmt.Sprintf("d%d", i)
		d := loom.Document{ID: id, CollectionID: c.ID, Hash: "h", Metadata: tc.doc}
		_, err := s.PutDocument(ctx, tenant, d, chunks(id, tc.chunkOwn))
		if tc.want == nil {
			check(t, err)
			got, err := s.DocumentChunks(ctx, tenant, c.ID, id)
			check(t, err)
			if len(got) != 1 || !maps.Equal(got[0].Metadata, mergedWith(tc.doc, "", "", tc.chunkOwn)) {
				t.Errorf("%s: read back %v", tc.what, got)
			}
			continue
		}
		wantErr(t, err, tc.want, tc.what)
		if !strings.Contains(err.Error(), tc.wantInMessageOf) {
			t.Errorf("%s: the error %q does not say %q", tc.what, err, tc.wantInMessageOf)
		}
		if _, err := s.GetDocument(ctx, tenant, c.ID, id); err == nil {
			t.Errorf("%s: the refused document was stored", tc.what)
		}
	}
}

// sizedMetadata returns metadata of n keys ("k00", "k01", ...) whose keys and values add up to size bytes.
func sizedMetadata(n, size int) map[string]string {
	m := make(map[string]string, n)
	left := size
	for i := range n {
		k := fmt.Sprintf("k%02d", i)
		v := (size - n*len(k)) / n
		if i == n-1 {
			v = left - len(k)
		}
		m[k] = strings.Repeat(string(rune('a'+i%26)), v)
		left -= len(k) + v
	}
	return m
}

// mergedWith returns a copy of m with k set to v (unless k is ""), and the entries of more over it.
func mergedWith(m map[string]string, k, v string, more ...map[string]string) map[string]string {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]string{}
	}
	if k != "" {
		out[k] = v
	}
	for _, o := range more {
		maps.Copy(out, o)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Sizer returns how many bytes a store takes now: its file, its server's memory for its keys, its heap.
type Sizer func(t *testing.T) int64

// NewSizedStore opens a fresh, empty collection store for one test, with its Sizer.
type NewSizedStore func(t *testing.T, opts store.Options) (collection.Store, Sizer)

// What a collection may take in a store, whatever its documents (within the limits): MaxGrowth times its
// documents' bytes (text and metadata), plus its vectors' 4 bytes a dimension, plus ChunkOverhead bytes a
// chunk for the chunk's ids, offsets and index entries (with ids of ordinary length: the ids a chunk row
// repeats are not bounded by this).
const (
	MaxGrowth     = 3
	ChunkOverhead = 256
)

// RunStoredSize stores adversarial collections (metadata at the limits, long heading paths, many small
// chunks) and checks that each takes no more than MaxGrowth, ChunkOverhead and its vectors allow. The Sizer
// must be exact enough to tell: the collections are megabytes.
func RunStoredSize(t *testing.T, newStore NewSizedStore) {
	for _, tc := range sizeCases() {
		t.Run(tc.name, func(t *testing.T) {
			s, size := newStore(t, store.Options{})
			ctx := t.Context()
			c := create(t, s, tenant, "docs")
			before := size(t)
			var docBytes, vecBytes, chunks int64
			// Made after the first measure and dropped before the second, so that a store that keeps
			// the strings it is given (the memory store) is measured with them.
			for _, d := range tc.docs() {
				d.doc.CollectionID = c.ID
				_, err := s.PutDocument(ctx, tenant, d.doc, d.chunks)
				check(t, err)
				docBytes += int64(d.doc.Bytes)
				for k, v := range d.doc.Metadata {
					docBytes += int64(len(k) + len(v))
				}
				for _, ch := range d.chunks {
					vecBytes += 4 * int64(len(ch.Vector))
				}
				chunks += int64(len(d.chunks))
			}
			grown := size(t) - before
			factor := float64(grown-vecBytes) / float64(docBytes)
			t.Logf("%s: %d chunks, documents %d bytes (text and metadata), vectors %d bytes; the store grew %d bytes: %.2fx the documents besides the vectors, or %.0f bytes a chunk beyond %dx",
				tc.name, chunks, docBytes, vecBytes, grown, factor, float64(grown-vecBytes-MaxGrowth*docBytes)/float64(chunks), MaxGrowth)
			if limit := MaxGrowth*docBytes + vecBytes + ChunkOverhead*chunks; grown > limit {
				t.Errorf("the collection takes %d bytes, more than %dx its documents, its vectors and %d bytes a chunk (%d bytes): %.2fx its documents besides its vectors",
					grown, MaxGrowth, ChunkOverhead, limit, factor)
			}
		})
	}
}

type sizedDoc struct {
	doc    loom.Document
	chunks []collection.Chunk
}

type sizeCase struct {
	name string
	docs func() []sizedDoc
}

// sizeCases are the adversarial collections of RunStoredSize.
func sizeCases() []sizeCase {
	r := rand.New(rand.NewPCG(11, 12))
	words := strings.Fields("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon")
	text := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteByte(' ')
		}
		return b.String()[:n]
	}
	vector := func() []float32 {
		v := make([]float32, 64)
		for i := range v {
			v[i] = r.Float32()
		}
		return v
	}
	// document makes a document of n chunks of size bytes, with meta, each chunk with own(i) as its own
	// metadata and given the document's too (as a caller that merges them would).
	document := func(id string, n, size int, meta map[string]string, own func(i int) map[string]string) sizedDoc {
		d := sizedDoc{doc: loom.Document{ID: id, Source: id, ContentType: "markdown", Hash: "h-" + id, Metadata: meta}}
		off := 0
		for i := range n {
			content := text(size)
			m := maps.Clone(meta)
			if m == nil {
				m = map[string]string{}
			}
			maps.Copy(m, own(i))
			d.chunks = append(d.chunks, collection.Chunk{Chunk: loom.Chunk{ID: fmt.Sprintf("%s#%d", id, i), DocumentID: id, Content: content,
				Index: i, StartOffset: off, EndOffset: off + size, TokenCount: size / 5, Metadata: m}, Vector: vector()})
			off += size
		}
		d.doc.Bytes, d.doc.Chunks = off, n
		return d
	}
	// Metadata at both limits: a long title, a source path and attributes.
	maxMeta := func(id string) map[string]string {
		m := sizedMetadata(store.DefaultMaxMetadataKeys-2, store.DefaultMaxMetadataBytes-4096-len("title")-len("source")-len(id))
		m["title"] = text(4096)
		m["source"] = id
		return m
	}
	// A heading path as the Markdown chunker gives it, of headings cut to a bound: h1, h2 and the two joined.
	headings := func(i int) map[string]string {
		h1, h2 := text(120), fmt.Sprintf("%d %s", i, text(120))
		return map[string]string{"h1": h1, "h2": h2, "headings": h1 + " > " + h2}
	}
	none := func(int) map[string]string { return nil }
	return []sizeCase{
		{"metadata at the limits", func() []sizedDoc {
			var docs []sizedDoc
			for i := range 16 {
				id := fmt.Sprintf("max-metadata-%02d.md", i)
				docs = append(docs, document(id, 16, 512, maxMeta(id), none))
			}
			return docs
		}},
		// Chunks of 64 bytes: about the 16 tokens of the engine's smallest chunk size.
		{"many small chunks", func() []sizedDoc { return []sizedDoc{document("small.md", 4000, 64, maxMeta("small.md"), none)} }},
		{"long heading paths", func() []sizedDoc {
			return []sizedDoc{document("headings.md", 500, 1024, maxMeta("headings.md"), headings)}
		}},
	}
}
