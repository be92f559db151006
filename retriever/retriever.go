// Package retriever finds the chunks most relevant to a query. For now it holds the Result type; the
// retrieval strategies over an index come later.
package retriever

import "github.com/context-loom/loom/chunk"

// Result is one retrieved chunk and its relevance score: higher is more relevant. Scores are comparable
// only among the results of one retrieval. The assembler takes a []Result, includes chunks best score first,
// and cites each included one by its position in that slice.
type Result struct {
	Chunk *chunk.Chunk
	Score float64
}
