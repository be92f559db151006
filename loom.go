// SPDX-License-Identifier: Apache-2.0

// Package loom is the root of Loom, a context-assembly engine for LLM applications. Before every model call,
// Loom gathers the instructions, tool definitions, user memory, retrieved knowledge, conversation history
// and tool outputs, fits them exactly into the model's token budget, and returns provider-ready messages with
// citations and a report of what was left out; as a Go library, an HTTP service and a command-line tool.
//
// The packages: [github.com/context-loom/loom/tokenizer] (exact counts), chunker and embed (documents),
// assembler (fitting a request into the budget), store and its backends (state), collection, ingest and
// retriever (knowledge), engine (ingestion, retrieval and assembly from stored state) and server (the HTTP
// API).
//
// Loom is licensed under the Apache License, Version 2.0 (the LICENSE file).
package loom

import "context"

// Version is the version of Loom: what `loom version` prints and the HTTP API's OpenAPI document says.
const Version = "0.1.0-dev"

// tenantKey is the context key of the tenant.
type tenantKey struct{}

// WithTenant returns a context that scopes every operation of the engine to tenantID: collections,
// documents, retrieval, agents, memory and sessions. An operation never reaches another tenant's data,
// whatever ids it names.
func WithTenant(ctx context.Context, tenantID string) context.Context {
	return context.WithValue(ctx, tenantKey{}, tenantID)
}

// DefaultTenant is the tenant of a context without one.
const DefaultTenant = "default"

// Tenant returns the tenant of ctx, or DefaultTenant if ctx has none.
func Tenant(ctx context.Context) string {
	if t, ok := ctx.Value(tenantKey{}).(string); ok && t != "" {
		return t
	}
	return DefaultTenant
}
