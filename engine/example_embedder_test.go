package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/embed"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store/memory"
)

// A collection remembers the embedder it was built with: an engine with another one is refused a vector
// query (and an ingest), and keyword retrieval still works.
func ExampleEmbedderMismatchError() {
	ctx := loom.WithTenant(context.Background(), "acme")
	st, err := memory.Open(ctx, memory.Options{})
	if err != nil {
		log.Fatal(err)
	}
	small, err := embed.NewLexical(64)
	if err != nil {
		log.Fatal(err)
	}
	built, err := engine.New(st, engine.WithEmbedder(small))
	if err != nil {
		log.Fatal(err)
	}
	defer built.Close()
	if _, err := built.CreateCollection(ctx, loom.Collection{Name: "manual"}); err != nil {
		log.Fatal(err)
	}
	if _, err := built.IngestText(ctx, "manual", "reset.md", "reset.md", "", "A password reset link is valid for thirty minutes.", nil); err != nil {
		log.Fatal(err)
	}

	other, err := engine.New(st) // the offline default, lexical2-384
	if err != nil {
		log.Fatal(err)
	}
	defer other.Close()
	_, err = other.Retrieve(ctx, "password reset", engine.WithCollection("manual"))
	var mismatch *engine.EmbedderMismatchError
	fmt.Println(errors.As(err, &mismatch), mismatch.Embedder, mismatch.Dimensions, mismatch.GotEmbedder)
	fmt.Println(err)
	res, err := other.Retrieve(ctx, "password reset", engine.WithCollection("manual"), engine.WithMode(engine.ModeKeyword))
	fmt.Println(len(res), err)
	// Output:
	// true lexical2-64 64 lexical2-384
	// engine: collection "manual" was built with embedder "lexical2-64" (64 dimensions), but this engine's embedder is "lexical2-384" (384 dimensions): use the embedder it was built with, or another collection
	// 1 <nil>
}
