package mcpserver_test

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/mcpserver"
	"github.com/context-loom/loom/store/memory"
)

// A tenant's MCP server, called by the SDK's client over an in-memory transport (loom mcp uses standard
// input and output; loom serve, streamable HTTP at /mcp).
func ExampleServer_ForTenant() {
	ctx := context.Background()
	st, _ := memory.Open(ctx, memory.Options{})
	eng, _ := engine.New(st)
	defer eng.Close()
	ms, _ := mcpserver.New(mcpserver.Config{Engine: eng})

	ct, tr := mcp.NewInMemoryTransports()
	if _, err := ms.ForTenant("acme").Connect(ctx, tr, nil); err != nil {
		panic(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		panic(err)
	}
	defer cs.Close()

	cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolRemember,
		Arguments: map[string]any{"user": "u1", "key": "language", "value": "Go"}})
	res, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolRecall, Arguments: map[string]any{"user": "u1"}})
	fmt.Println(res.IsError, len(res.Content))
	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolCountTokens, Arguments: map[string]any{"text": "Hello, world!", "model": "gpt-4o"}})
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	res, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolAssemble, Arguments: map[string]any{}})
	fmt.Println(res.IsError, res.Content[0].(*mcp.TextContent).Text)
	// Output:
	// false 1
	// {"tokens":4,"encoding":"o200k_base","model":"gpt-4o","exact":true,"bytes":13}
	// true validating "arguments": validating root: required: missing properties: ["message"]
}
