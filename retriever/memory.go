package retriever

import "unsafe"

// The index counts the heap memory it holds as it changes, so that MemoryBytes answers at once however large
// the index is: what each write allocates (a chunk's strings and metadata, the new terms and the growth of the
// postings) is added to ix.heap by the write; the maps, the entries, the vector pages and the graph are
// counted from their sizes when asked. Dead slots keep their memory until a compaction drops them, and a
// compaction counts the index again from scratch.

// Sizes of what the index allocates, on a 64-bit platform.
const (
	sliceHeader  = int64(unsafe.Sizeof([]byte(nil)))
	stringHeader = int64(unsafe.Sizeof(""))
	entrySize    = int64(unsafe.Sizeof(entry{}))
	fpSize       = int64(unsafe.Sizeof(fingerprint{}))
	termSize     = int64(unsafe.Sizeof(term{}))
	postingSize  = int64(unsafe.Sizeof(posting{}))
	// mapHeader is what a map costs besides its slots: the map's own struct and its table's.
	mapHeader = 48 + 32
)

// mapBytes estimates the memory of a map of n entries whose key and value together take slot bytes: Go's
// maps keep at most 7 entries in 8 slots, in groups of 8 with a control byte a slot, and double as they
// grow. A map never shrinks, so after many deletions it holds more than this says.
func mapBytes(n int, slot int64) int64 {
	if n == 0 {
		return 0
	}
	slots := int64(8)
	for slots*7/8 < int64(n) {
		slots *= 2
	}
	return mapHeader + slots*(slot+1)
}

// metadataBytes is the memory of a copy of a metadata map: its slots, keys and values (nil holds none).
func metadataBytes(m map[string]string) int64 {
	if m == nil {
		return 0
	}
	b := mapBytes(len(m), 2*stringHeader)
	if len(m) == 0 {
		b = mapHeader
	}
	for k, v := range m {
		b += int64(len(k) + len(v))
	}
	return b
}

// entryBytes is what an entry holds outside the entries slice: its chunk's strings and own metadata.
func entryBytes(e *entry) int64 {
	c := &e.chunk
	return int64(len(c.ID)+len(c.DocumentID)+len(c.Content)) + metadataBytes(c.Metadata)
}

// MemoryBytes estimates the heap memory the index holds: its chunks' text and metadata, the BM25 terms
// and postings, the vectors, the HNSW graph once built, and the scratch space of a search. It is an
// estimate from the sizes of what the index allocated, measured within a few tens of percent of the heap's
// growth (see TestMemoryBytes_AgreesWithTheHeap), and it answers in constant time.
func (ix *Index) MemoryBytes() int64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	b := ix.heap
	b += int64(cap(ix.entries))*entrySize + int64(cap(ix.fps))*fpSize
	b += int64(cap(ix.byID)+cap(ix.ord)) * 4
	// The BM25 accumulator a search keeps in a pool, a float64 a slot.
	b += int64(len(ix.entries)) * 8
	b += mapBytes(len(ix.ids), stringHeader+4)
	b += mapBytes(len(ix.docs), stringHeader+sliceHeader)
	b += mapBytes(len(ix.docMeta), stringHeader+8)
	b += mapBytes(len(ix.terms), stringHeader+8)
	b += int64(cap(ix.pages))*sliceHeader + int64(len(ix.pages))*int64(pageRows*ix.dims)*4
	if ix.graph != nil {
		b += ix.graph.bytes
		// The visited marks a search keeps in a pool, a uint32 a slot and a quarter more.
		b += int64(len(ix.graph.links)+len(ix.graph.links)/4) * 4
	}
	return b
}

// recount counts ix.heap again from what the index holds; the caller holds ix.mu.
func (ix *Index) recount() {
	var b int64
	for i := range ix.entries {
		b += entryBytes(&ix.entries[i])
	}
	for w, t := range ix.terms {
		b += int64(len(w)) + termSize + int64(cap(t.postings))*postingSize
	}
	for _, slots := range ix.docs {
		b += int64(cap(slots)) * 4
	}
	for _, m := range ix.docMeta {
		b += metadataBytes(m)
	}
	ix.heap = b
}
