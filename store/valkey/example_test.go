package valkey_test

import (
	"context"
	"fmt"

	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/valkey"
)

func ExampleParseURL() {
	opts, err := valkey.ParseURL("valkeys://loom:s3cret@cache.internal:6380/0?timeout=500ms&ttl=30m")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(opts.Client.InitAddress, opts.Client.Username, opts.Client.TLSConfig != nil, opts.Timeout, opts.SessionTTL)
	_, err = valkey.ParseURL("valkey://loom:s3cret@cache.internal:port")
	fmt.Println(err)
	// Output:
	// [cache.internal:6380] loom true 500ms 30m0s
	// valkey: bad options: store URL: cannot be parsed
}

// ExampleOpen opens a store on a local server and reads what one assembly needs in one round trip.
func ExampleOpen() {
	ctx := context.Background()
	opts, err := valkey.ParseURL("valkey://127.0.0.1:6379?prefix=loom")
	if err != nil {
		panic(err)
	}
	s, err := valkey.Open(ctx, opts)
	if err != nil {
		fmt.Println(err) // wraps store.ErrUnavailable when no server answers
		return
	}
	defer s.Close()
	snap, err := s.Load(ctx, "acme", store.LoadQuery{Agent: "support", User: "user_42", Session: "sess_42"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(snap.Messages), "messages")
}
