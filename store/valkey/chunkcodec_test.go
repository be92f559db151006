package valkey

import (
	"math"
	"reflect"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
)

func TestChunkCodec_RoundTrip(t *testing.T) {
	t.Parallel()
	in := []collection.Chunk{
		{Chunk: loom.Chunk{ID: "d#0", DocumentID: "d", Content: "nul:\x00 invalid:\xff ünï", Index: 0, StartOffset: 0, EndOffset: 22, TokenCount: 7,
			Metadata: map[string]string{"source": "d.md", "": "empty key", "z": ""}}, Vector: []float32{1, -0.5, float32(math.Inf(1)), math.SmallestNonzeroFloat32}},
		{Chunk: loom.Chunk{ID: "d#1", DocumentID: "d", Content: "", Index: 1, StartOffset: 1 << 40, EndOffset: 1 << 41}},
	}
	// Every field of chunk.Chunk is set in the first chunk, so a field added to the type and forgotten by
	// the codec fails this test.
	v := reflect.ValueOf(in[0].Chunk)
	for i := range v.NumField() {
		if v.Field(i).IsZero() && v.Type().Field(i).Name != "Index" && v.Type().Field(i).Name != "StartOffset" {
			t.Fatalf("the test leaves chunk.Chunk.%s unset", v.Type().Field(i).Name)
		}
	}
	enc := encodeChunks(in)
	if len(enc) > encodedChunksSize(in) {
		t.Fatalf("encoded %d bytes, the bound is %d", len(enc), encodedChunksSize(in))
	}
	var out []collection.Chunk
	if err := decodeChunks("d", string(enc), func(c collection.Chunk) error { out = append(out, c); return nil }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", out, in)
	}
	for cut := range len(enc) {
		if err := decodeChunks("d", string(enc[:cut]), func(collection.Chunk) error { return nil }); err == nil {
			t.Fatalf("a value cut at %d of %d bytes decoded", cut, len(enc))
		}
	}
}

func FuzzDecodeChunks(f *testing.F) {
	f.Add(string(encodeChunks([]collection.Chunk{{Chunk: loom.Chunk{ID: "a", Content: "text", Metadata: map[string]string{"k": "v"}}, Vector: []float32{1, 2}}})))
	f.Add("\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")
	f.Fuzz(func(t *testing.T, s string) {
		var got []collection.Chunk
		if err := decodeChunks("d", s, func(c collection.Chunk) error { got = append(got, c); return nil }); err != nil {
			return
		}
		// What decodes encodes to a value that decodes to the same chunks (compared by their encodings:
		// NaN is not equal to itself).
		enc := encodeChunks(got)
		var again []collection.Chunk
		if err := decodeChunks("d", string(enc), func(c collection.Chunk) error { again = append(again, c); return nil }); err != nil {
			t.Fatalf("the encoding of decoded chunks does not decode: %v", err)
		}
		if string(encodeChunks(again)) != string(enc) {
			t.Fatalf("decoded %+v, which does not survive a round trip", got)
		}
	})
}
