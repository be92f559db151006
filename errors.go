// SPDX-License-Identifier: Apache-2.0

package loom

import (
	"errors"
	"fmt"
)

// The kinds of error. Every error a Loom package returns for one of these reasons wraps its kind, so a
// caller tests one thing (errors.Is(err, loom.ErrNotFound)) whichever package the error came from; a
// package's own sentinels (store.ErrNotFound, chunker.ErrOverlapTooLarge, ...) wrap their kind and can be
// tested too. An error that wraps none of them is a failure of Loom itself or of the caller's context
// (context.Canceled, context.DeadlineExceeded).
var (
	// ErrInvalid: the input is malformed or breaks a rule (a bad id, an unknown role, an overlap larger
	// than the chunk size). Asking again with the same input fails again.
	ErrInvalid = errors.New("loom: invalid input")
	// ErrNotFound: what was named does not exist for the tenant that asked.
	ErrNotFound = errors.New("loom: not found")
	// ErrExists: what was to be created exists (a collection name that is taken).
	ErrExists = errors.New("loom: already exists")
	// ErrTooLarge: the input is larger than a limit allows; the limit is checked before the work.
	ErrTooLarge = errors.New("loom: too large")
	// ErrUnsupported: the input is valid, but this build or backend cannot do it (the code chunker in a
	// build without cgo, more than one tenant on the Valkey cookbook's key layout).
	ErrUnsupported = errors.New("loom: not supported")
	// ErrUnavailable: something Loom depends on (a store, an embedder) cannot be reached or failed for a
	// while. Asking again later may work.
	ErrUnavailable = errors.New("loom: unavailable")
	// ErrClosed: the store, engine or server was closed.
	ErrClosed = errors.New("loom: closed")
	// ErrBudget: the required items of an assembly do not fit its budget. The error is a *BudgetError,
	// which says by how much.
	ErrBudget = errors.New("loom: over budget")
)

// NewError returns an error whose text is text and that wraps kind: a package's sentinel of that kind
// (var ErrOverlapTooLarge = loom.NewError(loom.ErrInvalid, "chunker: overlap must be smaller than the chunk size")).
func NewError(kind error, text string) error { return &kindError{kind: kind, text: text} }

type kindError struct {
	kind error
	text string
}

func (e *kindError) Error() string { return e.text }
func (e *kindError) Unwrap() error { return e.kind }

// BudgetError is returned when the required items (instructions, tools, the current message, the latest
// tool exchange) do not fit the budget. It matches ErrBudget with errors.Is.
type BudgetError struct {
	Required  int // tokens the required items need, with the format's overhead
	Available int // the budget
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("assembler: the required items need %d tokens, the budget is %d", e.Required, e.Available)
}

// Is reports whether target is ErrBudget.
func (e *BudgetError) Is(target error) bool { return target == ErrBudget }
