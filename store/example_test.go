package store_test

import (
	"context"
	"fmt"
	"log"

	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/memory"
	"github.com/context-loom/loom/tokenizer"
)

// countedLoads is a backend that counts the Loads that reach it: a wrapper of another backend, which keeps
// what it wraps and, by defining Load, is a store.Loader too.
type countedLoads struct {
	*memory.Backend
	loads int
}

func (c *countedLoads) Load(ctx context.Context, tenant string, q store.LoadQuery) (*store.Snapshot, error) {
	c.loads++
	return c.Backend.Load(ctx, tenant, q)
}

// A backend of one's own goes behind the front with New: the Store checks what it is given before the
// backend sees it, and reaches the backend only for what passes.
func ExampleNew() {
	ctx := context.Background()
	mem, err := memory.Open(ctx, memory.Options{})
	if err != nil {
		log.Fatal(err)
	}
	b := &countedLoads{Backend: mem.Backend().(*memory.Backend)}
	st, err := store.New(b, store.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	if _, err := st.AppendMessages(ctx, "acme", "sess_42", store.Message{Role: "user", Content: "Hi"}); err != nil {
		log.Fatal(err)
	}
	snap, err := st.Load(ctx, "acme", store.LoadQuery{Session: "sess_42"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(snap.Messages), "message,", b.loads, "load")
	_, err = st.Load(ctx, "acme", store.LoadQuery{Session: "bad\nid"})
	fmt.Println(err)
	fmt.Println(b.loads, "load")
	// Output:
	// 1 message, 1 load
	// store: invalid input: session id "bad\nid" has a control character
	// 1 load
}

// A store caches these counts on every message it writes: in each counted encoding, and the estimate
// under the name of the estimator's rule, for the models and formats whose counts are estimated.
func ExampleMessageCounts() {
	counts := store.MessageCounts("Where is my order?")
	fmt.Println(counts[tokenizer.O200KBase], counts[tokenizer.CL100KBase], counts[tokenizer.EstimateKey])
	// Output:
	// 5 5 5
}
