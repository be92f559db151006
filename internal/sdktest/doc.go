// Package sdktest holds the assembler's provider formats to the official SDKs (openai-go,
// anthropic-sdk-go) and to the providers' conversation rules. It is a module of its own so that the SDKs,
// which only these tests use, stay out of Loom's go.mod; `make test` runs it.
package sdktest
