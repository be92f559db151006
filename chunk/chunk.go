// Package chunk defines Chunk, a piece of a document as it is stored, retrieved and cited.
package chunk

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
