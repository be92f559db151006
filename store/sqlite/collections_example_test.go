package sqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/store/sqlite"
)

// A document's metadata is stored once, with the document; a chunk keeps its own keys. Reads give each
// chunk the whole.
func Example_documentChunks() {
	dir, err := os.MkdirTemp("", "loom")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(dir, "loom.db")})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	s, _ := st.Collections() // a SQLite store keeps collections

	c, err := s.CreateCollection(ctx, "acme", loom.Collection{Name: "help"})
	if err != nil {
		log.Fatal(err)
	}
	doc := loom.Document{ID: "faq.md", CollectionID: c.ID, Source: "faq.md", Hash: "sha256-of-faq",
		Metadata: map[string]string{"source": "faq.md", "title": "FAQ"}}
	chunks := []collection.Chunk{
		{Chunk: loom.Chunk{ID: "faq.md#0", DocumentID: doc.ID, Content: "# FAQ", Index: 0}},
		{Chunk: loom.Chunk{ID: "faq.md#1", DocumentID: doc.ID, Content: "A refund takes 14 days.", Index: 1,
			Metadata: map[string]string{"headings": "FAQ > Refunds"}}},
	}
	if _, err := s.PutDocument(ctx, "acme", doc, chunks); err != nil {
		log.Fatal(err)
	}
	changed, err := s.PutDocument(ctx, "acme", doc, chunks) // the same hash: nothing to do
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("changed again:", changed)

	stored, err := s.DocumentChunks(ctx, "acme", c.ID, doc.ID)
	if err != nil {
		log.Fatal(err)
	}
	for _, ch := range stored {
		fmt.Println(ch.ID, ch.Metadata)
	}
	// Output:
	// changed again: false
	// faq.md#0 map[source:faq.md title:FAQ]
	// faq.md#1 map[headings:FAQ > Refunds source:faq.md title:FAQ]
}
