// Package apilimit holds the default limits of Loom's two request surfaces, the HTTP API (server) and the
// MCP server (mcpserver), so that both say the same thing once.
package apilimit

import "time"

// The defaults: a request's body, one text of it, its items, and the time it may take.
const (
	MaxBodyBytes = 8 << 20
	MaxTextBytes = 1 << 20
	MaxItems     = 2000
	Timeout      = 30 * time.Second
)
