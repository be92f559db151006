package engine_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/retriever"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/memory"
	"github.com/context-loom/loom/store/storeurl"
)

// Assemble from stored state: seed 003's scenario on an SQLite file, one call per LLM turn, then Record the
// reply so that the next turn sees it.
func ExampleEngine_Assemble() {
	dir, _ := os.MkdirTemp("", "loom-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	st, err := storeurl.Open(ctx, "sqlite:"+filepath.Join(dir, "loom.db"), storeurl.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	st.PutAgent(ctx, "acme", store.Agent{ID: "demo_agent", Instructions: "You are a helpful AI assistant."})
	st.SetFact(ctx, "acme", "user_42", store.Fact{Key: "tier", Value: "free", Pinned: true})
	st.AppendMessages(ctx, "acme", "sess_42", store.Message{Role: "user", Content: "I want to upgrade to premium"})

	eng, err := engine.New(st)
	if err != nil {
		log.Fatal(err)
	}
	ctx = loom.WithTenant(ctx, "acme") // the engine's every call is the context's tenant's
	res, err := eng.Assemble(ctx, engine.Request{
		Agent: "demo_agent", User: "user_42", Session: "sess_42",
		Request: assembler.Request{Model: "gpt-4o", MaxTokens: 4000, Message: "How much does premium cost?"},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range res.Messages {
		fmt.Printf("%s: %q\n", m.Role, m.Content)
	}
	fmt.Println(res.TotalTokens <= res.Budget, len(res.Degraded))

	_, err = eng.Record(ctx, engine.Turn{Session: "sess_42",
		Message: "How much does premium cost?",
		Reply:   []store.Message{{Role: "assistant", Content: "Premium is $20 a month."}}})
	if err != nil {
		log.Fatal(err)
	}
	msgs, _ := st.Messages(ctx, "acme", "sess_42", store.MessageQuery{})
	fmt.Println(len(msgs), "messages stored")
	// Output:
	// system: "You are a helpful AI assistant.\n\n<user_memory pinned=\"true\" trusted=\"false\">\n- tier: free\n</user_memory>"
	// user: "I want to upgrade to premium"
	// user: "How much does premium cost?"
	// true 0
	// 3 messages stored
}

// Seed 000's full RAG pattern: retrieve from a collection for the tenant, assemble the chunks into a
// 3000-token budget, and put the context in the prompt.
func ExampleEngine_Retrieve() {
	st, err := memory.Open(context.Background(), memory.Options{})
	if err != nil {
		log.Fatal(err)
	}
	eng, err := engine.New(st)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	tenantID, userQuery := "acme", "How long is a password reset link valid?"
	ctx := context.Background()
	ctx = loom.WithTenant(ctx, tenantID)

	col, err := eng.CreateCollection(ctx, loom.Collection{Name: "manual", ChunkStrategy: "markdown", ChunkSize: 20})
	if err != nil {
		log.Fatal(err)
	}
	colID := col.ID
	eng.IngestText(ctx, colID, "manual.md", "manual.md", "", "# Manual\n\n## Billing\n\nInvoices go out monthly.\n\n"+
		"## Passwords\n\nA password reset link is valid for thirty minutes.", nil)

	// 1. Retrieve relevant chunks
	results, _ := eng.Retrieve(ctx, userQuery,
		engine.WithCollection(colID),
		engine.WithTopK(10),
		engine.WithMinScore(0.7),
	)

	// 2. Convert to retriever.Result for the assembler
	retResults := make([]retriever.Result, len(results))
	for i, r := range results {
		retResults[i] = retriever.Result{Chunk: r.Chunk, Score: r.Score}
	}

	// 3. Assemble context with 3000-token budget
	a := assembler.New(assembler.WithMaxTokens(3000))
	assembled, _ := a.Assemble(ctx, retResults)

	// 4. Pass to LLM
	prompt := fmt.Sprintf("Context:\n%s\n\nQuestion: %s", assembled.Context, userQuery)
	fmt.Println(prompt)
	fmt.Println(assembled.Citations[0].Metadata["source"], assembled.TotalTokens <= 3000)
	// Output:
	// Context:
	// ## Passwords
	//
	// A password reset link is valid for thirty minutes.
	//
	// Question: How long is a password reset link valid?
	// manual.md true
}
