package sqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/context-loom/loom/chunk"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/sqlite"
)

func ExampleStore_SearchKeywords() {
	dir, err := os.MkdirTemp("", "loom")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(dir, "loom.db"), store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	c, err := s.CreateCollection(ctx, "acme", collection.Collection{Name: "help"})
	if err != nil {
		log.Fatal(err)
	}
	texts := []string{"A refund takes 14 days.", "Reset your password from the login page.", "Our refund policy covers every plan."}
	doc := collection.Document{ID: "faq.md", CollectionID: c.ID, Source: "faq.md", Hash: "sha256-of-faq"}
	var chunks []collection.Chunk
	for i, text := range texts {
		chunks = append(chunks, collection.Chunk{Chunk: chunk.Chunk{ID: fmt.Sprintf("faq.md#%d", i), DocumentID: doc.ID, Content: text, Index: i}})
	}
	if _, err := s.PutDocument(ctx, "acme", doc, chunks); err != nil {
		log.Fatal(err)
	}
	changed, err := s.PutDocument(ctx, "acme", doc, chunks) // the same hash: nothing to do
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("changed again:", changed)

	hits, err := s.SearchKeywords(ctx, "acme", c.ID, `refund "policy"`, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range hits {
		fmt.Println(h.ID)
	}
	// Output:
	// changed again: false
	// faq.md#2
	// faq.md#0
}
