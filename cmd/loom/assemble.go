package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/context-loom/loom/assembler"
)

const assembleUsage = `Usage: loom assemble --request FILE.json [--format openai|anthropic|text]

Assemble fits a request (FILE.json, "-" for standard input) into its token budget and prints the result
as one JSON object: the provider-ready messages (or system and messages for anthropic, or text), the
exact total_tokens, the citations, the stable prefix's hash and a report of every item kept or dropped.

The request:

	{"model": "gpt-4o", "max_tokens": 8000, "reserve_output": 1000, "format": "openai",
	 "instructions": "...", "tools": [{"type": "function", "function": {...}}],
	 "memory": [{"key", "value", "pinned"}], "knowledge": [{"id", "content", "score", "source", "type",
	 "trusted", "metadata"}], "history": [{"role", "content", "tool_calls", "tool_call_id", "name"}],
	 "tool_outputs": [{"tool", "call_id", "result"}], "message": "...", "policy": {...}}

Exit status: 0 on success; 1 if the file cannot be read; 2 for a malformed request or bad usage; 3 when
the required items (instructions, tools, the message, the latest tool exchange) do not fit the budget.
`

// exitBudget is the exit status for a budget the required items cannot meet.
const exitBudget = 3

// maxRequestBytes bounds what loom assemble reads.
const maxRequestBytes = 64 << 20

func runAssemble(ctx context.Context, args []string, s streams) error {
	fs, help := newFlagSet("assemble", assembleUsage, s)
	path := fs.String("request", "", "the request `FILE`, or - for standard input")
	format := fs.String("format", "", "the output format, overriding the request's")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if *path == "" || fs.NArg() > 0 {
		return usageError(errors.New("assemble: want --request FILE.json (or -) and no other arguments"))
	}
	var r io.Reader = s.stdin
	if *path != "-" {
		f, err := os.Open(*path)
		if err != nil {
			return fmt.Errorf("assemble: %w", err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxRequestBytes+1))
	if err != nil {
		return fmt.Errorf("assemble: %w", err)
	}
	if len(data) > maxRequestBytes {
		return usageError(fmt.Errorf("assemble: request is larger than %d bytes", maxRequestBytes))
	}
	req, err := decodeRequest(data)
	if err != nil {
		return usageError(fmt.Errorf("assemble: malformed request: %w", err))
	}
	if *format != "" {
		req.Format = *format
	}
	res, err := assembler.AssembleRequest(ctx, req)
	var be *assembler.BudgetError
	switch {
	case errors.As(err, &be):
		return &exitError{code: exitBudget, err: fmt.Errorf("assemble: the required items need %d tokens, the budget is %d", be.Required, be.Available)}
	case err != nil:
		return usageError(fmt.Errorf("assemble: %w", err))
	}
	enc := json.NewEncoder(s.stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(res)
}

// decodeRequest parses a request strictly: unknown fields and trailing data are errors.
func decodeRequest(data []byte) (*assembler.Request, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var req assembler.Request
	if err := dec.Decode(&req); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the request object")
	}
	return &req, nil
}
