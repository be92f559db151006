package memory_test

import (
	"context"
	"fmt"
	"log"

	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/memory"
)

// An in-process store, with collections, for tests and for embedding Loom where nothing outlives the
// process.
func ExampleOpen() {
	ctx := context.Background()
	st, err := memory.Open(ctx, memory.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	if err := st.SetFact(ctx, "acme", "user_42", store.Fact{Key: "tier", Value: "free"}); err != nil {
		log.Fatal(err)
	}
	if err := st.SetFact(ctx, "acme", "user_42", store.Fact{Key: "name", Value: "Bob"}); err != nil {
		log.Fatal(err)
	}
	facts, err := st.Facts(ctx, "acme", "user_42")
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range facts {
		fmt.Println(f.Key, "=", f.Value)
	}
	_, ok := st.Collections()
	fmt.Println("collections:", ok)
	// Output:
	// name = Bob
	// tier = free
	// collections: true
}
