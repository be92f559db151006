package assembler_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/context-loom/loom/assembler"
)

// The anthropic format places cache breakpoints where the prompt before them reaches the model's minimum
// cacheable length: here the system prompt (which is then also written as a block) and the newest turn.
func ExampleCacheMinTokens() {
	fmt.Println(assembler.CacheMinTokens("claude-sonnet-4-5"), assembler.CacheMinTokens("claude-haiku-4-5"))
	req := &assembler.Request{Model: "claude-sonnet-4-5", Format: assembler.FormatAnthropic, CacheTTL: assembler.CacheTTL1h,
		Instructions: strings.Repeat("Give temperatures in Celsius. ", 300), Message: "Hi!"}
	res, err := assembler.AssembleRequest(context.Background(), req)
	if err != nil {
		panic(err)
	}
	fmt.Printf("system: %+v\n", res.SystemBlocks[0].CacheControl)
	fmt.Printf("%s: %q %+v\n", res.Messages[0].Role, res.Messages[0].Blocks[0].Text, res.Messages[0].Blocks[0].CacheControl)
	req.CacheBreakpoints, req.CacheTTL = assembler.CacheBreakpointsOff, ""
	if res, err = assembler.AssembleRequest(context.Background(), req); err != nil {
		panic(err)
	}
	fmt.Println(res.SystemBlocks == nil, res.Messages[0].Blocks[0].CacheControl == assembler.CacheControl{})
	// Output:
	// 1024 4096
	// system: {Type:ephemeral TTL:1h}
	// user: "Hi!" {Type:ephemeral TTL:1h}
	// true true
}

// A caller that keeps each session's last CacheState learns why the next call may miss the prompt cache:
// here the next turn shares the instructions and the whole previous history, and then the instructions
// are edited, which breaks the prefix at its start.
func ExampleCacheReport() {
	req := &assembler.Request{Model: "gpt-4o", Instructions: "You are a travel agent.", CacheReport: true,
		History: []assembler.Message{{Role: "user", Content: "Hi."}, {Role: "assistant", Content: "Hello! Where to?"}},
		Message: "Lisbon."}
	first, err := assembler.AssembleRequest(context.Background(), req)
	if err != nil {
		panic(err)
	}
	req.History = append(req.History, assembler.Message{Role: "user", Content: "Lisbon."},
		assembler.Message{Role: "assistant", Content: "When?"})
	req.Message, req.CachePrevious = "In May.", first.CacheState
	next, err := assembler.AssembleRequest(context.Background(), req)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%+v\n", *next.Cache)
	req.Instructions, req.CachePrevious = "You are a travel agent. Be brief.", next.CacheState
	edited, err := assembler.AssembleRequest(context.Background(), req)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%+v\n", *edited.Cache)
	// Output:
	// {SharedTokens:25 Region: Reason:}
	// {SharedTokens:0 Region:instructions Reason:instructions_edited}
}
