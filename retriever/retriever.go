// Package retriever finds the chunks most relevant to a query.
//
// An [Index] holds one collection's chunks in memory: an inverted index for BM25 keyword scoring and the
// chunks' vectors for cosine similarity, searched exactly or, for large collections, through an HNSW graph
// that a goroutine of the index builds while searches go on (exactly until the graph is ready).
// [Index.Search] ranks by keywords, by vector, by both fused by a weighted mean of their relevances (the
// default; see loom.FusionWeights), or by maximal marginal relevance for diverse results. The engine builds one per collection from its store's
// chunks, whatever the store, so that keyword scores come from one analyzer ([Analyze]: words folded to
// lowercase without accents, Chinese and Japanese by characters and their pairs) and from the collection's
// own statistics alone.
package retriever

import (
	"github.com/context-loom/loom"
)

// Errors returned by this package (wrapped; match them with errors.Is).
var (
	// ErrInvalidChunk is returned by [Index.Add] for a chunk without an ID or with a vector holding a NaN or
	// an infinity.
	ErrInvalidChunk = loom.NewError(loom.ErrInvalid, "retriever: invalid chunk")
	// ErrDimensions is returned by [Index.Add] for a vector whose length differs from the index's vectors,
	// and by [Index.Search] for a query vector of another length.
	ErrDimensions = loom.NewError(loom.ErrInvalid, "retriever: wrong vector dimensions")
	// ErrInvalidQuery is returned by [Index.Search] for a query it cannot run; the message says why.
	ErrInvalidQuery = loom.NewError(loom.ErrInvalid, "retriever: invalid query")
)

// Search modes, the values of [Query.Mode].
const (
	// ModeHybrid fuses the keyword and the vector rankings by the weighted mean of their relevances (see
	// loom.FusionWeights and Query.Weights). It is the default.
	ModeHybrid = "hybrid"
	// ModeKeyword ranks by BM25 alone.
	ModeKeyword = "keyword"
	// ModeVector ranks by cosine similarity to [Query.Vector] alone.
	ModeVector = "vector"
	// ModeMMR picks diverse results from the hybrid candidates by maximal marginal relevance, their fused
	// score as their relevance, once duplicates and near-duplicates are removed.
	ModeMMR = "mmr"
)

// Score kinds, the values of [Result.Kind]: what a result's Score is.
const (
	KindBM25   = "bm25"   // a BM25 score: positive, unbounded, comparable within one query
	KindCosine = "cosine" // a cosine similarity in [-1, 1] (only positive ones are returned)
	KindFused  = "fused"  // a fused score in [0, 1]: the weighted mean of relative BM25 and cosine (loom.FusionWeights)
	KindMMR    = "mmr"    // a maximal marginal relevance score at the time the result was picked: lambda*fused - (1-lambda)*likeness
)

// Result is one retrieved chunk and its relevance score: higher is more relevant. Scores are comparable
// only among the results of one retrieval. The assembler takes a []Result, includes chunks best score first,
// and cites each included one by its position in that slice.
//
// Chunk and Score are all the assembler needs; the other fields say what Score is and where it came from.
type Result struct {
	Chunk *loom.Chunk
	Score float64

	// Kind says what Score is: KindBM25, KindCosine, KindFused or KindMMR. It is "" in results built by hand.
	Kind string
	// Rank is the result's position among the results, from 1.
	Rank int
	// Keyword is the chunk's BM25 score and KeywordRank its position in the keyword ranking, from 1. A
	// result of a fused mode that the vector ranking brought in has its BM25 score whatever its rank
	// (0 without the query's words) and KeywordRank 0; otherwise both are 0 outside the keyword ranking.
	Keyword     float64
	KeywordRank int
	// Vector is the cosine similarity of the chunk's vector to the query's vector, 0 when either has none;
	// VectorRank is the chunk's position in the vector ranking, from 1, or 0 when it was not in it.
	Vector     float64
	VectorRank int
	// Relevance is the result's score in the ranking of its mode relative to the best result's, from 0 to
	// 1 (1 for the best), what Query.MinScore is compared with in every mode (for MMR, the fused score's,
	// before diversity lowers Score).
	Relevance float64
}
