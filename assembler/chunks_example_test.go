package assembler_test

// The examples of the seed's chunk assembler reproduce, section by section, every snippet of the seed's
// "Context Assembler" page (seed 000), with retrieved results built by hand.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/retriever"
	"github.com/context-loom/loom/tokenizer"
)

// Basic usage.
func ExampleNew() {
	ctx := context.Background()
	// results is []retriever.Result from engine.Retrieve; here, built by hand.
	results := []retriever.Result{
		{Chunk: &loom.Chunk{ID: "c1", DocumentID: "memory-model", Content: "A data race is a write to a memory location happening concurrently with another read or write to that same location."}, Score: 0.87},
		{Chunk: &loom.Chunk{ID: "c2", DocumentID: "spec", Content: "Go is a general-purpose language designed with systems programming in mind."}, Score: 0.92},
	}

	a := assembler.New(
		assembler.WithMaxTokens(3000),
	)

	result, err := a.Assemble(ctx, results)
	if err != nil {
		panic(err)
	}

	fmt.Println(result.Context)        // formatted context string
	fmt.Println(result.TotalTokens)    // tokens consumed
	fmt.Println(result.TruncatedCount) // chunks dropped due to budget
	// Output:
	// Go is a general-purpose language designed with systems programming in mind.
	//
	// ---
	//
	// A data race is a write to a memory location happening concurrently with another read or write to that same location.
	// 36
	// 0
}

// Token budget: chunks go in score order; one that does not fit is skipped and counted in TruncatedCount,
// and later, smaller ones are still tried. TotalTokens counts the whole context, separators included.
func ExampleAssembler_Assemble_tokenBudget() {
	ctx := context.Background()
	results := []retriever.Result{
		{Chunk: &loom.Chunk{ID: "long", Content: strings.Repeat("A long passage that repeats itself. ", 400)}, Score: 0.95},
		{Chunk: &loom.Chunk{ID: "short", Content: "A short passage that fits."}, Score: 0.80},
	}

	a := assembler.New(assembler.WithMaxTokens(2000))

	result, _ := a.Assemble(ctx, results)
	if result.TruncatedCount > 0 {
		fmt.Printf("%d chunks dropped due to token budget\n", result.TruncatedCount)
	}
	fmt.Println(result.Context, result.TotalTokens)
	// Output:
	// 1 chunks dropped due to token budget
	// A short passage that fits. 6
}

// Citations: each included chunk becomes a Citation, in the order the chunks appear in the context.
func ExampleAssembler_Assemble_citations() {
	results := []retriever.Result{
		{Chunk: &loom.Chunk{ID: "c7", DocumentID: "d1", Content: "Offsets index the original text.", Metadata: map[string]string{"source": "chunking.md"}}, Score: 0.71},
		{Chunk: &loom.Chunk{ID: "c3", DocumentID: "d2", Content: "A budget is a promise.", Metadata: map[string]string{"source": "principles.md"}}, Score: 0.88},
	}
	result, err := assembler.New().Assemble(context.Background(), results)
	if err != nil {
		panic(err)
	}
	for _, c := range result.Citations {
		// ChunkIndex is the position in the original results slice.
		fmt.Printf("results[%d] %s/%s %.2f %s: %q\n", c.ChunkIndex, c.DocumentID, c.ChunkID, c.Score, c.Metadata["source"], c.Content)
	}
	// Output:
	// results[1] d2/c3 0.88 principles.md: "A budget is a promise."
	// results[0] d1/c7 0.71 chunking.md: "Offsets index the original text."
}

// Custom templates: the template carries its own separators, and its text is counted against the budget.
func ExampleNewTemplate() {
	results := []retriever.Result{
		{Chunk: &loom.Chunk{Content: "Retrieved text is data, never instructions."}, Score: 0.9},
		{Chunk: &loom.Chunk{Content: "Stable parts go first, volatile last."}, Score: 0.8},
	}

	tmpl := assembler.NewTemplate("--- Source {{.Index}} ---\n{{.Content}}\n")
	a := assembler.New(assembler.WithTemplate(tmpl))

	result, err := a.Assemble(context.Background(), results)
	if err != nil {
		panic(err)
	}
	fmt.Print(result.Context)
	fmt.Println(result.TotalTokens, "tokens")
	// Output:
	// --- Source 1 ---
	// Retrieved text is data, never instructions.
	// --- Source 2 ---
	// Stable parts go first, volatile last.
	// 28 tokens
}

// A template's fields: Index (from 1), Content, Score, Source (metadata "source", else the document id),
// Metadata, ChunkID and DocumentID. ParseTemplate reports a template that does not parse at once;
// NewTemplate leaves the error to Assemble.
func ExampleParseTemplate() {
	tmpl, err := assembler.ParseTemplate(`<source id="{{.Index}}" from="{{.Source}}" page="{{.Metadata.page}}">{{.Content}}</source>` + "\n")
	if err != nil {
		panic(err)
	}
	results := []retriever.Result{
		{Chunk: &loom.Chunk{DocumentID: "handbook", Content: "Holidays are booked in the portal.", Metadata: map[string]string{"page": "12"}}, Score: 0.7},
		{Chunk: &loom.Chunk{DocumentID: "faq", Content: "Ask HR.", Metadata: map[string]string{"source": "faq.md"}}, Score: 0.6},
	}
	result, err := assembler.New(assembler.WithTemplate(tmpl)).Assemble(context.Background(), results)
	if err != nil {
		panic(err)
	}
	fmt.Print(result.Context)

	_, err = assembler.ParseTemplate("{{.Content")
	fmt.Println(errors.Is(err, assembler.ErrTemplate))
	_, err = assembler.New(assembler.WithTemplate(assembler.NewTemplate("{{.Content"))).Assemble(context.Background(), results)
	fmt.Println(errors.Is(err, assembler.ErrTemplate))
	// Output:
	// <source id="1" from="handbook" page="12">Holidays are booked in the portal.</source>
	// <source id="2" from="faq.md" page="">Ask HR.</source>
	// true
	// true
}

// Simple assembly, without token budgeting.
func ExampleAssembleSimple() {
	results := []retriever.Result{
		{Chunk: &loom.Chunk{Content: "First chunk."}, Score: 0.5},
		{Chunk: &loom.Chunk{Content: "Second chunk."}, Score: 0.9},
	}

	context := assembler.AssembleSimple(results)
	// returns chunks joined with "\n\n---\n\n"

	fmt.Printf("%q\n", context)
	// Output:
	// "First chunk.\n\n---\n\nSecond chunk."
}

// The counter: exact cl100k_base by default; pass your model's encoding, or SimpleTokenCounter (the
// seed's default, an estimate) for models whose tokenizer is not public.
func ExampleWithTokenCounter() {
	results := []retriever.Result{{Chunk: &loom.Chunk{Content: "Context is a system, not a string. 上下文是一个系统，而不是一个字符串。"}, Score: 1}}
	for _, c := range []struct {
		name string
		tc   assembler.TokenCounter
	}{
		{"default (cl100k_base)", nil},
		{"o200k_base", tokenizer.O200K()},
		{"SimpleTokenCounter", assembler.SimpleTokenCounter{}},
	} {
		var opts []assembler.Option
		if c.tc != nil {
			opts = append(opts, assembler.WithTokenCounter(c.tc))
		}
		result, err := assembler.New(opts...).Assemble(context.Background(), results)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s: %d\n", c.name, result.TotalTokens)
	}
	fmt.Println(assembler.SimpleTokenCounter{}.Count("Hi!")) // the seed's counter said 0
	// Output:
	// default (cl100k_base): 22
	// o200k_base: 20
	// SimpleTokenCounter: 28
	// 2
}

// Invalid options do not panic: Assemble (and Err, to check early) returns the error.
func ExampleWithMaxTokens() {
	a := assembler.New(assembler.WithMaxTokens(0))
	_, err := a.Assemble(context.Background(), nil)
	fmt.Println(err)
	fmt.Println(errors.Is(a.Err(), assembler.ErrInvalidMaxTokens))
	// Output:
	// assembler: max tokens must be positive: got 0
	// true
}

// The seed's full RAG pattern, with the retrieved chunks built by hand so that this package's example
// stands alone. Retrieval itself is engine.Engine.Retrieve (with engine.WithCollection, engine.WithTopK and
// engine.WithMinScore), scoped to a tenant by loom.WithTenant (the seed's weave.WithTenant): engine's
// ExampleEngine_Retrieve runs the whole pattern against a real collection. The prompt is printed rather
// than sent to an LLM (llm.Complete).
func Example_fullRAG() {
	ctx := context.Background()
	userQuery := "What is a data race?"

	// 1. Retrieve relevant chunks (stand-ins for eng.Retrieve's results).
	results := []struct {
		Chunk *loom.Chunk
		Score float64
	}{
		{&loom.Chunk{ID: "m1", DocumentID: "memory-model", Content: "A data race is a write to a memory location happening concurrently with another read or write to that same location."}, 0.91},
		{&loom.Chunk{ID: "m2", DocumentID: "memory-model", Content: "Programs that modify data being simultaneously accessed by multiple goroutines must serialize such access."}, 0.84},
	}

	// 2. Convert to retriever.Result for the assembler
	retResults := make([]retriever.Result, len(results))
	for i, r := range results {
		retResults[i] = retriever.Result{Chunk: r.Chunk, Score: r.Score}
	}

	// 3. Assemble context with 3000-token budget
	a := assembler.New(assembler.WithMaxTokens(3000))
	assembled, err := a.Assemble(ctx, retResults)
	if err != nil {
		panic(err)
	}

	// 4. Pass to LLM
	prompt := fmt.Sprintf("Context:\n%s\n\nQuestion: %s", assembled.Context, userQuery)
	fmt.Println(prompt)
	fmt.Println(assembled.TotalTokens, "context tokens,", len(assembled.Citations), "citations")
	// Output:
	// Context:
	// A data race is a write to a memory location happening concurrently with another read or write to that same location.
	//
	// ---
	//
	// Programs that modify data being simultaneously accessed by multiple goroutines must serialize such access.
	//
	// Question: What is a data race?
	// 40 context tokens, 2 citations
}
