// SPDX-License-Identifier: Apache-2.0

package loom

import "time"

// Collection is a set of documents chunked and embedded alike. Zero chunk fields take the engine's
// defaults when the collection is created (engine.DefaultChunkSize 512; engine.DefaultChunkOverlap 50, or
// a fifth of a smaller chunk size; engine.StrategyAuto, which chunks each document by its kind), and are
// stored as resolved. A negative ChunkOverlap asks for none; the chunk size must be at least
// engine.MinChunkSize (16).
type Collection struct {
	// ID is assigned by the store when empty.
	ID   string `json:"id"`
	Name string `json:"name"`
	// ChunkStrategy names the chunker: "auto", a built-in strategy (recursive, fixed, sliding, semantic,
	// code, markdown) or one registered with engine.WithChunker.
	ChunkStrategy string `json:"chunk_strategy,omitempty"`
	ChunkSize     int    `json:"chunk_size,omitempty"`
	ChunkOverlap  int    `json:"chunk_overlap,omitempty"`
	// Embedder names the embedder (embed.Embedder's Name) whose vectors the collection holds; vectors of
	// another embedder are never compared with them. "" means the engine's default.
	Embedder string `json:"embedder,omitempty"`
	// Dimensions is the length of the collection's vectors, set when the first document is stored.
	Dimensions int `json:"dimensions,omitempty"`
	// KeywordWeight and VectorWeight weigh the keyword and the vector rankings where hybrid and MMR
	// retrieval fuse them (see FusionWeights for the formula); nil means the default: 1 for the keywords,
	// the embedder's own weight for the vectors (embed.FusionWeight). A query may set weights of its own.
	// They are the settings a collection may change after it is created (engine.SetFusionWeights).
	KeywordWeight *float64  `json:"keyword_weight,omitempty"`
	VectorWeight  *float64  `json:"vector_weight,omitempty"`
	CreatedAt     time.Time `json:"created_at,omitzero"`
}

// Document is one ingested document: its identity, where it came from and the hash that makes ingesting
// it again a no-op. Its text lives in its chunks, whose offsets index the document's text as extracted.
type Document struct {
	// ID identifies the document in its collection (by default the source path, or the content's hash).
	ID           string `json:"id"`
	CollectionID string `json:"collection_id"`
	// Source is where the document came from: a path or URL. Chunks carry it as Metadata["source"].
	Source string `json:"source,omitempty"`
	// ContentType is how the text was read: "text", "markdown", "html" or "code".
	ContentType string `json:"content_type,omitempty"`
	// Hash is the SHA-256 (hex) of the document's raw bytes and the settings it was chunked with.
	Hash   string `json:"hash"`
	Bytes  int    `json:"bytes"`  // size of the extracted text
	Chunks int    `json:"chunks"` // how many chunks it was cut into
	// Metadata describes the whole document; it is stored once, with the document, and every chunk of
	// the document shows it (see Chunk). Stores bound it (store.Limits.MaxMetadataBytes and
	// MaxMetadataKeys).
	Metadata  map[string]string `json:"metadata,omitempty"`
	UpdatedAt time.Time         `json:"updated_at,omitzero"`
}

// Chunk is a piece of a document: the unit that is embedded, indexed, retrieved and cited. It is a plain
// data type with no behaviour; the chunker makes chunks, the stores keep them, the assembler cites them.
type Chunk struct {
	// ID identifies the chunk within its collection.
	ID string
	// DocumentID identifies the document the chunk was cut from.
	DocumentID string
	// Content is the chunk's text: the bytes Document[StartOffset:EndOffset] of the original document.
	Content string
	// Index is the chunk's position among its document's chunks, from 0.
	Index int
	// StartOffset and EndOffset are byte offsets into the original document (not into trimmed or
	// normalised text): the chunk is Document[StartOffset:EndOffset].
	StartOffset int
	EndOffset   int
	// TokenCount is Content's token count as counted at ingestion, in the counter of the collection it was
	// ingested into; 0 if unknown. It is a hint: a budget must be checked with the counter it is spent in.
	TokenCount int
	// Metadata holds free-form attributes, such as "source" (a file name or URL, which the assembler cites).
	Metadata map[string]string
}
