// SPDX-License-Identifier: Apache-2.0

package loom

import (
	"fmt"
	"math"
)

// ErrInvalidFusionWeights is returned by [FusionWeights.Validate] for weights that fuse nothing: a negative,
// NaN or infinite weight, or both weights 0.
var ErrInvalidFusionWeights = NewError(ErrInvalid, "loom: invalid fusion weights")

// FusionWeights weigh the two rankings that hybrid and MMR retrieval fuse: Keyword the keyword (BM25) one,
// Vector the embedder's. A chunk's fused score is the weighted mean of its two relevances,
//
//	fused = (Keyword·k + Vector·v) / (Keyword + Vector)
//
// where k is its BM25 score divided by the best BM25 score of the query (1 for the best match, 0 for a
// chunk without the query's words) and v its cosine similarity to the query (0 when negative): a relevance
// in [0, 1]. Only the ratio of the weights matters: {1, 0} ranks by keywords alone, {0, 1} by vectors alone.
//
// The weights of a retrieval are, each on its own, the query's if it sets it, else its collection's
// (Collection.KeywordWeight, VectorWeight), else the default: 1 for the keywords and the embedder's own
// weight for the vectors (embed.FusionWeight: 0.4 for the offline lexical embedder, 1 for a model server's,
// 1 for an embedder that does not say). The zero value means "not set" where a FusionWeights is optional
// (retriever.Query.Weights). Weights in use must be finite, non-negative, and not both 0 (see Validate).
type FusionWeights struct {
	Keyword float64 `json:"keyword"`
	Vector  float64 `json:"vector"`
}

// ValidateWeight returns an error wrapping ErrInvalidFusionWeights unless the weight w, named what in the
// message, is finite and not negative.
func ValidateWeight(what string, w float64) error {
	if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
		return fmt.Errorf("%w: the %s weight is %v; a weight must be finite and not negative", ErrInvalidFusionWeights, what, w)
	}
	return nil
}

// IsZero reports whether w is the zero value, which means "not set".
func (w FusionWeights) IsZero() bool { return w == FusionWeights{} }

// Validate returns an error wrapping ErrInvalidFusionWeights, saying why, unless both weights are finite
// and non-negative and at least one is positive.
func (w FusionWeights) Validate() error {
	if err := ValidateWeight("keyword", w.Keyword); err != nil {
		return err
	}
	if err := ValidateWeight("vector", w.Vector); err != nil {
		return err
	}
	if w.Keyword == 0 && w.Vector == 0 {
		return fmt.Errorf("%w: the keyword and vector weights are both 0; at least one must be positive", ErrInvalidFusionWeights)
	}
	return nil
}
