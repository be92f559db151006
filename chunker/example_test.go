package chunker_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/context-loom/loom/chunker"
	"github.com/context-loom/loom/tokenizer"
)

func ExampleNew() {
	text := "Loom keeps every byte.\n\nOffsets index the original text, so a chunk can be cited exactly.\n"
	c, err := chunker.New("recursive")
	if err != nil {
		panic(err)
	}
	chunks, err := c.Chunk(context.Background(), text, &chunker.Options{ChunkSize: 12, NoOverlap: true})
	if err != nil {
		panic(err)
	}
	for _, ch := range chunks {
		fmt.Printf("%d [%d:%d] %d tokens %q\n", ch.Index, ch.StartOffset, ch.EndOffset, ch.TokenCount, ch.Content)
	}
	// Output:
	// 0 [0:24] 6 tokens "Loom keeps every byte.\n\n"
	// 1 [24:80] 12 tokens "Offsets index the original text, so a chunk can be cited"
	// 2 [80:90] 2 tokens " exactly.\n"
}

// Example_readme runs the README's chunking lines, which readme_test.go finds here verbatim.
func Example_readme() {
	ctx := context.Background()
	text := strings.Repeat("Every byte of a document is in some chunk. ", 200)
	c, err := chunker.New("recursive") // or fixed, sliding, semantic, code, markdown
	chunks, err := c.Chunk(ctx, text, &chunker.Options{ChunkSize: 512, ChunkOverlap: 50})
	if err != nil {
		panic(err)
	}
	fmt.Println(len(chunks), chunks[0].TokenCount <= 512, chunks[len(chunks)-1].EndOffset == len(text))
	// Output:
	// 5 true true
}

func ExampleDefault() {
	text := strings.Repeat("one two three four five six seven eight nine ten ", 3)
	chunks, err := chunker.Default().Chunk(context.Background(), text, &chunker.Options{
		Strategy:     "fixed",
		ChunkSize:    12,
		ChunkOverlap: 2,
		Counter:      tokenizer.O200K(),
	})
	if err != nil {
		panic(err)
	}
	for _, ch := range chunks {
		fmt.Printf("%d tokens %q\n", ch.TokenCount, ch.Content)
	}
	// Output:
	// 12 tokens "one two three four five six seven eight nine ten one two"
	// 12 tokens " one two three four five six seven eight nine ten one two"
	// 11 tokens " one two three four five six seven eight nine ten "
}
