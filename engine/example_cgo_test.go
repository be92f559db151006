//go:build cgo

package engine_test

import (
	"context"
	"fmt"
	"log"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/chunker"
	"github.com/context-loom/loom/chunker/code"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store/memory"
)

// An engine chunks code with tree-sitter when its registry has the code strategy of package chunker/code
// (a build with cgo); without it, code is chunked as plain text.
func ExampleWithChunkers() {
	ctx := loom.WithTenant(context.Background(), "acme")
	st, err := memory.Open(ctx, memory.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	reg := chunker.NewRegistry()
	reg.Register(chunker.Code, code.New())
	eng, err := engine.New(st, engine.WithChunkers(reg))
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	c, err := eng.CreateCollection(ctx, loom.Collection{Name: "src", ChunkStrategy: chunker.Code})
	if err != nil {
		log.Fatal(err)
	}
	src := "package main\n\nfunc a() {}\n\nfunc b() {}\n"
	if _, err := eng.IngestText(ctx, c.ID, "main.go", "main.go", "code", src, nil); err != nil {
		log.Fatal(err)
	}
	docs, _ := eng.Documents(ctx, c.ID)
	fmt.Println(docs[0].ContentType, docs[0].Chunks > 0)
	// Output: code true
}
