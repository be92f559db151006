package sqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/sqlite"
)

func ExampleOpen() {
	dir, err := os.MkdirTemp("", "loom")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	s, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(dir, "loom.db")})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	if err := s.PutAgent(ctx, "acme", store.Agent{ID: "support", Instructions: "You are a helpful AI assistant."}); err != nil {
		log.Fatal(err)
	}
	if err := s.SetFact(ctx, "acme", "user_42", store.Fact{Key: "name", Value: "Bob", Pinned: true}); err != nil {
		log.Fatal(err)
	}
	if _, err := s.AppendMessages(ctx, "acme", "sess_42",
		store.Message{Role: "user", Content: "Hi, I need help with my account"},
		store.Message{Role: "assistant", Content: "Sure! What do you need help with?"}); err != nil {
		log.Fatal(err)
	}

	snap, err := s.Load(ctx, "acme", store.LoadQuery{Agent: "support", User: "user_42", Session: "sess_42"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(snap.Agent.Instructions)
	fmt.Println(snap.Facts[0].Key, "=", snap.Facts[0].Value)
	for _, m := range snap.Messages {
		fmt.Printf("%d %s: %s (%d tokens)\n", m.Seq, m.Role, m.Content, m.TokenCounts["o200k_base"])
	}
	// Output:
	// You are a helpful AI assistant.
	// name = Bob
	// 1 user: Hi, I need help with my account (8 tokens)
	// 2 assistant: Sure! What do you need help with? (9 tokens)
}
