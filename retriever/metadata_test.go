package retriever

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
)

// TestIndex_DocumentMetadataOnce: chunks read from a store carry their document's metadata in
// DocumentMetadata (and in Metadata, under their own keys); the index keeps the document's once for all
// its chunks, an entry only its chunk's own keys, while filters and results see the whole, the chunk's
// keys over the document's.
func TestIndex_DocumentMetadataOnce(t *testing.T) {
	t.Parallel()
	docMeta := map[string]string{"source": "guide.md", "team": "docs", "title": "The guide"}
	read := func(i int, own map[string]string) collection.Chunk {
		// As a store reads them: the whole in Metadata (the document's map itself when there is no own key).
		m := docMeta
		if own != nil {
			m = maps.Clone(docMeta)
			maps.Copy(m, own)
		}
		return collection.Chunk{Chunk: loom.Chunk{ID: fmt.Sprint("guide#", i), DocumentID: "guide", Content: fmt.Sprint("refund words ", i),
			Index: i, Metadata: m}, DocumentMetadata: docMeta}
	}
	ix := NewIndex(IndexOptions{})
	for i, own := range []map[string]string{nil, {"headings": "Intro"}, {"team": "support"}, nil} {
		if err := ix.Add(read(i, own)); err != nil { // one at a time, as a build from ScanChunks adds them
			t.Fatal(err)
		}
	}
	// Given its own keys alone, with the document's beside them, as the engine gives what it ingests.
	other := collection.Chunk{Chunk: loom.Chunk{ID: "faq#0", DocumentID: "faq", Content: "refund words faq", Metadata: map[string]string{"headings": "FAQ"}},
		DocumentMetadata: map[string]string{"source": "faq.md", "team": "docs"}}
	if err := ix.Add(other); err != nil {
		t.Fatal(err)
	}

	first := reflect.ValueOf(ix.entries[0].doc).UnsafePointer()
	for i, e := range ix.entries[:4] {
		if reflect.ValueOf(e.doc).UnsafePointer() != first {
			t.Errorf("entry %d holds a copy of its document's metadata of its own", i)
		}
		if reflect.ValueOf(e.doc).UnsafePointer() == reflect.ValueOf(docMeta).UnsafePointer() {
			t.Errorf("entry %d holds the caller's map", i)
		}
	}
	if len(ix.entries[0].chunk.Metadata) != 0 || !maps.Equal(ix.entries[1].chunk.Metadata, map[string]string{"headings": "Intro"}) ||
		!maps.Equal(ix.entries[2].chunk.Metadata, map[string]string{"team": "support"}) {
		t.Errorf("entries keep more than their own keys: %v, %v, %v", ix.entries[0].chunk.Metadata, ix.entries[1].chunk.Metadata, ix.entries[2].chunk.Metadata)
	}

	for _, tc := range []struct {
		filter map[string]string
		want   []string
	}{
		{map[string]string{"team": "docs"}, []string{"faq#0", "guide#0", "guide#1", "guide#3"}},
		{map[string]string{"team": "support"}, []string{"guide#2"}},
		{map[string]string{"headings": "Intro", "title": "The guide"}, []string{"guide#1"}},
		{map[string]string{"source": "faq.md"}, []string{"faq#0"}},
		{map[string]string{"title": "The guide", FilterDocumentID: "faq"}, nil},
	} {
		got := ids(search(t, ix, Query{Text: "refund words", Mode: ModeKeyword, Filter: tc.filter, TopK: 10}))
		slices.Sort(got)
		if !slices.Equal(got, tc.want) {
			t.Errorf("filter %v: %v, want %v", tc.filter, got, tc.want)
		}
	}
	rs := search(t, ix, Query{Text: "refund words", Mode: ModeKeyword, TopK: 10})
	want := map[string]map[string]string{
		"guide#0": docMeta,
		"guide#1": {"source": "guide.md", "team": "docs", "title": "The guide", "headings": "Intro"},
		"guide#2": {"source": "guide.md", "team": "support", "title": "The guide"},
		"guide#3": docMeta,
		"faq#0":   {"source": "faq.md", "team": "docs", "headings": "FAQ"},
	}
	for _, r := range rs {
		if !maps.Equal(r.Chunk.Metadata, want[r.Chunk.ID]) {
			t.Errorf("result %s metadata %v, want %v", r.Chunk.ID, r.Chunk.Metadata, want[r.Chunk.ID])
		}
		r.Chunk.Metadata["team"] = "changed" // the caller's copy
	}
	if got := search(t, ix, Query{Text: "refund words", Mode: ModeKeyword, Filter: map[string]string{"team": "docs"}, TopK: 10}); len(got) != 4 {
		t.Errorf("changing results changed the index: %v", ids(got))
	}

	// A new version of the document with other metadata gets a map of its own; removing it forgets it.
	if n := ix.RemoveDocument("guide"); n != 4 {
		t.Fatalf("RemoveDocument removed %d", n)
	}
	if _, ok := ix.docMeta["guide"]; ok {
		t.Error("the removed document's metadata is still held")
	}
	renamed := read(0, nil)
	renamed.DocumentMetadata = map[string]string{"source": "guide-v2.md"}
	renamed.Metadata = renamed.DocumentMetadata
	if err := ix.Add(renamed); err != nil {
		t.Fatal(err)
	}
	rs = search(t, ix, Query{Text: "refund words", Mode: ModeKeyword, Filter: map[string]string{FilterDocumentID: "guide"}})
	if len(rs) != 1 || !maps.Equal(rs[0].Chunk.Metadata, map[string]string{"source": "guide-v2.md"}) {
		t.Fatalf("the new version: %+v", rs)
	}
}
