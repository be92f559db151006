package cookbook_test

import (
	"context"
	"fmt"

	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/valkey/cookbook"
)

// ExampleOpen reads what the Valkey cookbook's pipeline wrote for one assembly: its agent:config:,
// memory:, chat:, kb:results: and tool: keys, for the one tenant they hold.
func ExampleOpen() {
	ctx := context.Background()
	opts, err := cookbook.ParseURL("valkey://127.0.0.1:6379?layout=cookbook")
	if err != nil {
		panic(err)
	}
	s, err := cookbook.Open(ctx, opts)
	if err != nil {
		fmt.Println(err) // wraps store.ErrUnavailable when no server answers
		return
	}
	defer s.Close()
	snap, err := s.Load(ctx, cookbook.DefaultTenant, store.LoadQuery{Agent: "demo_agent", User: "user_42", Session: "sess_42"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(snap.Facts), "facts,", len(snap.Messages), "messages,", len(snap.ToolOutputs), "tool steps")
}
