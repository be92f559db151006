package engine

import (
	"fmt"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/embed"
)

// ErrEmbedderMismatch is matched (errors.Is) by every *EmbedderMismatchError. It wraps loom.ErrInvalid;
// the HTTP API answers it with 409 Conflict.
var ErrEmbedderMismatch = loom.NewError(loom.ErrInvalid, "engine: the collection was built with another embedder")

// EmbedderMismatchError is returned by Retrieve, Ingest and the assemblies that retrieve when the
// collection's vectors were made by another embedder than the one the engine would use, or have other
// dimensions: comparing them would give scores that mean nothing, so nothing is compared. A collection
// records its embedder (loom.Collection.Embedder, embed.Embedder's Name, which names the model and not the
// server's address or key) when it is created, and its dimensions when its first vectors are stored.
type EmbedderMismatchError struct {
	// Collection is the collection's name.
	Collection string
	// Embedder and Dimensions are what the collection was built with (Dimensions 0: no vectors yet).
	Embedder   string
	Dimensions int
	// GotEmbedder and GotDimensions are what the engine has: its default embedder when the collection's
	// is not registered, else the collection's with the length of the vectors it returned (0: unknown).
	GotEmbedder   string
	GotDimensions int
}

func (e *EmbedderMismatchError) Error() string {
	return fmt.Sprintf("engine: collection %q was built with embedder %s, but this engine's embedder is %s: use the embedder it was built with, or another collection",
		e.Collection, describeEmbedder(e.Embedder, e.Dimensions), describeEmbedder(e.GotEmbedder, e.GotDimensions))
}

// Unwrap returns ErrEmbedderMismatch.
func (e *EmbedderMismatchError) Unwrap() error { return ErrEmbedderMismatch }

func describeEmbedder(name string, dims int) string {
	if dims == 0 {
		return fmt.Sprintf("%q", name)
	}
	return fmt.Sprintf("%q (%d dimensions)", name, dims)
}

// embedderOf returns the embedder of coll, or an *EmbedderMismatchError naming the engine's default
// embedder when the collection's is not registered.
func (e *Engine) embedderOf(coll loom.Collection) (embed.Embedder, error) {
	if emb := e.embedders[coll.Embedder]; emb != nil {
		return emb, nil
	}
	got := e.embedders[e.defaultEmbedder]
	return nil, &EmbedderMismatchError{Collection: coll.Name, Embedder: coll.Embedder, Dimensions: coll.Dimensions,
		GotEmbedder: got.Name(), GotDimensions: got.Dimensions()}
}

// checkDimensions returns an *EmbedderMismatchError when the collection has vectors of other dimensions
// than dims, the length of the vectors emb returned.
func checkDimensions(coll loom.Collection, emb embed.Embedder, dims int) error {
	if coll.Dimensions == 0 || dims == 0 || dims == coll.Dimensions {
		return nil
	}
	return &EmbedderMismatchError{Collection: coll.Name, Embedder: coll.Embedder, Dimensions: coll.Dimensions,
		GotEmbedder: emb.Name(), GotDimensions: dims}
}
