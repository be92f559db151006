// Package embed turns texts into vectors whose cosine similarity says how alike the texts are.
//
// An [Embedder] maps a batch of texts to vectors of one fixed dimension. Two implementations are provided:
//
//   - [Lexical], the offline default ([Default]): a deterministic, hashed bag of words, word pairs and
//     character 3-grams. It needs no model and no network, and it is lexical, not semantic: texts that share
//     words or parts of words are close, synonyms and paraphrases are not.
//   - [OpenAI], a client for the OpenAI embeddings API (POST {base}/embeddings) as spoken by OpenAI, Ollama
//     (at /v1), vLLM, LM Studio and other compatible servers, with batching and retries.
//
// [Cosine] compares two vectors and [Normalize] scales one to unit length.
//
// Every type in this package is safe for concurrent use.
package embed

import (
	"context"
	"math"

	"github.com/context-loom/loom"
)

// Embedder maps texts to vectors.
//
// Embed returns one vector for each text, in the order of texts, all of length Dimensions(). Texts that are
// alike get vectors with a high [Cosine] similarity; what "alike" means depends on the implementation. Embed
// of no texts returns an empty slice and no error. The returned vectors belong to the caller. Callers hand
// Embed all the texts they have (the engine, all the chunks of a document): an implementation whose server
// takes fewer in one request batches them itself, as [OpenAI] does by its BatchSize.
//
// Dimensions is the length of the vectors, or 0 while an implementation does not yet know it (an [OpenAI]
// embedder without configured dimensions, before its first response).
//
// Name identifies the vector space: vectors from embedders with different names must not be compared.
//
// Implementations must be safe for concurrent use.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
	Dimensions() int
	Name() string
}

var (
	_ Embedder = (*Lexical)(nil)
	_ Embedder = (*OpenAI)(nil)

	_ FusionWeighter = (*Lexical)(nil)
	_ FusionWeighter = (*OpenAI)(nil)
)

// FusionWeighter is implemented by an [Embedder] that says how much its ranking is worth where hybrid and
// MMR retrieval fuse it with the keyword (BM25) ranking, whose weight is 1. A fused score is
// (1·k + w·v) / (1 + w), k the chunk's BM25 score relative to the query's best and v its cosine similarity
// to the query (see loom.FusionWeights): a weight w of 1 counts both alike, 0.2 makes the vectors a
// tie-breaker among chunks of close keyword scores, 3 makes the keywords one.
//
// FusionWeight returns a finite, non-negative weight. The weight is the embedder's default: a collection
// or a query can set weights of its own.
type FusionWeighter interface {
	FusionWeight() float64
}

// Fusion weights of the embedders of this package, and of those that do not say.
const (
	// DefaultFusionWeight is [FusionWeight] of an embedder that is not a [FusionWeighter], or that gives
	// a weight that is negative, NaN or infinite: the vectors count as much as the keywords, as for a
	// semantic model.
	DefaultFusionWeight = 1.0
	// LexicalFusionWeight is [Lexical]'s: little, since its vectors are a weaker kind of keyword match.
	// Measured on Loom's evaluation set (package eval's dev questions): with the vectors weighted from
	// 0.35 to 0.45, hybrid search ranks the answer higher than the keywords alone do for 3 to 5 questions
	// of 86 and lower for none; from 0.5 on, the vectors start to push good keyword matches down (at 1,
	// 6 questions rank lower and 7 higher).
	LexicalFusionWeight = 0.4
	// LexicalV1FusionWeight is the weight of [NewLexicalV1]'s vectors, measured alike: from 0.15 to 0.2
	// none ranks lower, from 0.25 on some do.
	LexicalV1FusionWeight = 0.2
	// DefaultOpenAIFusionWeight is [OpenAI]'s when OpenAIConfig.FusionWeight is 0: a semantic model's
	// ranking counts as much as the keywords'.
	DefaultOpenAIFusionWeight = 1.0
)

// FusionWeight returns emb's fusion weight: its own if it is a [FusionWeighter] that gives a finite,
// non-negative one, else [DefaultFusionWeight].
func FusionWeight(emb Embedder) float64 {
	if fw, ok := emb.(FusionWeighter); ok {
		if w := fw.FusionWeight(); w >= 0 && !math.IsInf(w, 0) {
			return w
		}
	}
	return DefaultFusionWeight
}

// Errors returned by this package. Errors from a server's HTTP status are [*APIError] values. Each wraps a
// kind of package loom: a bad configuration loom.ErrInvalid, a server that cannot be reached or answers
// wrongly loom.ErrUnavailable.
var (
	// ErrInvalidConfig is returned by [NewLexical] and [NewOpenAI] for a configuration they cannot use; the
	// message names the field.
	ErrInvalidConfig = loom.NewError(loom.ErrInvalid, "embed: invalid configuration")
	// ErrResponse is returned by [OpenAI.Embed] for a response that is not a valid embeddings response:
	// malformed or oversized JSON, the wrong number of embeddings, an index missing, repeated or out of range.
	ErrResponse = loom.NewError(loom.ErrUnavailable, "embed: malformed response")
	// ErrDimensions is returned by [OpenAI.Embed] when the server returns vectors of different lengths, or of a
	// length other than the configured (or first seen) dimensions.
	ErrDimensions = loom.NewError(loom.ErrUnavailable, "embed: wrong vector dimensions")
	// ErrUnavailable is returned, wrapping the cause, when the embedding server cannot be reached or does not
	// answer in time (after the retries).
	ErrUnavailable = loom.NewError(loom.ErrUnavailable, "embed: the embedding server is unavailable")
)

// Cosine returns the cosine similarity of a and b, in [-1, 1]: 1 for vectors pointing the same way, 0 for
// orthogonal ones. It is 0 when either vector is all zeros (as [Lexical] gives for text without words) and when
// the lengths differ, since such vectors come from different embedders and are not comparable.
// It works on vectors of any length, normalized or not.
func Cosine(a, b []float32) float32 {
	if len(a) != len(b) {
		return 0
	}
	var dot, na, nb float64
	for i, x := range a {
		y := float64(b[i])
		dot += float64(x) * y
		na += float64(x) * float64(x)
		nb += y * y
	}
	if na == 0 || nb == 0 {
		return 0
	}
	c := dot / (math.Sqrt(na) * math.Sqrt(nb))
	return float32(max(-1, min(1, c)))
}

// Normalize scales v in place to unit Euclidean length. A vector of zeros, or one holding a NaN or an
// infinity, is left unchanged.
func Normalize(v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 || math.IsInf(s, 0) || math.IsNaN(s) {
		return
	}
	inv := 1 / math.Sqrt(s)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
}
