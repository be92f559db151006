package valkey

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"

	"github.com/context-loom/loom/collection"
)

// A document's chunks are stored as one binary value (a field of the collection's chunks hash):
//
//	version byte (2), uvarint count, then per chunk, in order of Index:
//	  uvarint len, ID bytes
//	  uvarint len, Content bytes
//	  varint Index, StartOffset, EndOffset, TokenCount
//	  uvarint number of metadata pairs, then per pair (sorted by key): uvarint len, key, uvarint len, value
//	  uvarint dims, then dims float32 little-endian (IEEE 754 bits)
//
// Strings are kept byte for byte (no JSON escaping, no UTF-8 repair), and vectors cost 4 bytes a dimension.
// The metadata is the chunk's own (collection.OwnMetadata); the document's is in the document's JSON.
// Version 1, which Loom wrote before, has the same layout with a copy of the document's metadata in every
// chunk: it decodes as well, and merges with the document's to the same whole. (A Loom that knows version 1
// alone refuses version 2, rather than show chunks without their document's metadata.)
const (
	chunksFormat       = 2
	chunksFormatCopies = 1 // the metadata of each chunk holds its document's too
)

var errCorruptChunks = errors.New("valkey: corrupt chunk record")

// encodedChunksSize returns an upper bound of the encoded size of chunks.
func encodedChunksSize(chunks []collection.Chunk) int {
	n := 1 + binary.MaxVarintLen64
	for _, c := range chunks {
		n += 8*binary.MaxVarintLen64 + len(c.ID) + len(c.Content) + 4*len(c.Vector)
		for k, v := range c.Metadata {
			n += 2*binary.MaxVarintLen64 + len(k) + len(v)
		}
	}
	return n
}

// encodeChunks encodes a document's chunks, which must be in order of Index.
func encodeChunks(chunks []collection.Chunk) []byte {
	b := make([]byte, 0, encodedChunksSize(chunks))
	b = append(b, chunksFormat)
	b = binary.AppendUvarint(b, uint64(len(chunks)))
	var keys []string
	for _, c := range chunks {
		b = appendString(b, c.ID)
		b = appendString(b, c.Content)
		b = binary.AppendVarint(b, int64(c.Index))
		b = binary.AppendVarint(b, int64(c.StartOffset))
		b = binary.AppendVarint(b, int64(c.EndOffset))
		b = binary.AppendVarint(b, int64(c.TokenCount))
		keys = keys[:0]
		for k := range c.Metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = binary.AppendUvarint(b, uint64(len(keys)))
		for _, k := range keys {
			b = appendString(b, k)
			b = appendString(b, c.Metadata[k])
		}
		b = binary.AppendUvarint(b, uint64(len(c.Vector)))
		for _, f := range c.Vector {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
		}
	}
	return b
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// chunkDecoder reads an encoded value. Strings it returns share the value's memory (no copies).
type chunkDecoder struct {
	s   string
	err error
}

func (d *chunkDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	var x uint64
	var shift uint
	for i := 0; i < len(d.s) && i < binary.MaxVarintLen64; i++ {
		c := d.s[i]
		if c < 0x80 {
			d.s = d.s[i+1:]
			return x | uint64(c)<<shift
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
	d.err = errCorruptChunks
	return 0
}

func (d *chunkDecoder) varint() int {
	u := d.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return int(x)
}

func (d *chunkDecoder) string() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.s)) {
		d.err = errCorruptChunks
		return ""
	}
	s := d.s[:n]
	d.s = d.s[n:]
	return s
}

// count reads a count of items that take at least min bytes each, refusing counts the rest cannot hold.
func (d *chunkDecoder) count(min int) int {
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.s)/min) {
		d.err = errCorruptChunks
		return 0
	}
	return int(n)
}

// decodeChunks decodes the chunks of document docID, calling fn for each; their Metadata is what the value
// holds (see chunksFormat).
func decodeChunks(docID, value string, fn func(collection.Chunk) error) error {
	if len(value) == 0 || value[0] != chunksFormat && value[0] != chunksFormatCopies {
		return errCorruptChunks
	}
	d := &chunkDecoder{s: value[1:]}
	n := d.count(8)
	for range n {
		var c collection.Chunk
		c.DocumentID = docID
		c.ID = d.string()
		c.Content = d.string()
		c.Index = d.varint()
		c.StartOffset = d.varint()
		c.EndOffset = d.varint()
		c.TokenCount = d.varint()
		if m := d.count(2); m > 0 {
			c.Metadata = make(map[string]string, m)
			for range m {
				k := d.string()
				c.Metadata[k] = d.string()
			}
		}
		if dims := d.count(4); dims > 0 {
			c.Vector = make([]float32, dims)
			for i := range c.Vector {
				p := d.s[4*i : 4*i+4]
				c.Vector[i] = math.Float32frombits(uint32(p[0]) | uint32(p[1])<<8 | uint32(p[2])<<16 | uint32(p[3])<<24)
			}
			d.s = d.s[4*dims:]
		}
		if d.err != nil {
			return d.err
		}
		if err := fn(c); err != nil {
			return err
		}
	}
	if d.err == nil && len(d.s) != 0 {
		return errCorruptChunks
	}
	return d.err
}
