package tokenizer

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// vectors are token ids computed by OpenAI's tiktoken (npm tiktoken, its Rust core as WASM) with
// scripts/gen-tokenizer/gen.mjs; see that script for what each part covers.
type vectors struct {
	Reference string `json:"reference"`
	Unicode   string `json:"unicode"`
	Cases     []struct {
		Name  string `json:"name"`
		Text  string `json:"text"`
		CL100 []int  `json:"cl100k_base"`
		O200  []int  `json:"o200k_base"`
	} `json:"cases"`
	Special []struct {
		Text  string `json:"text"`
		CL100 []int  `json:"cl100k_base"`
		O200  []int  `json:"o200k_base"`
	} `json:"special"`
	Corpus []struct {
		File  string `json:"file"`
		CL100 []int  `json:"cl100k_base"`
		O200  []int  `json:"o200k_base"`
	} `json:"corpus"`
	CodepointProbe  string              `json:"codepointProbe"`
	CodepointBlocks map[string][]uint32 `json:"codepointBlocks"`
}

var loadVectors = sync.OnceValues(func() (*vectors, error) {
	f, err := os.Open(filepath.Join("testdata", "vectors.json.gz"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	var v vectors
	if err := json.NewDecoder(zr).Decode(&v); err != nil {
		return nil, err
	}
	return &v, nil
})

func testVectors(t testing.TB) *vectors {
	t.Helper()
	v, err := loadVectors()
	if err != nil {
		t.Fatalf("load test vectors: %v", err)
	}
	return v
}

// pick returns the ids for the named encoding.
func pick(name string, cl100, o200 []int) []int {
	if name == CL100KBase {
		return cl100
	}
	return o200
}

func forEachEncoding(t *testing.T, f func(t *testing.T, e *Encoding)) {
	for _, name := range Encodings() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e, err := Get(name)
			if err != nil {
				t.Fatal(err)
			}
			f(t, e)
		})
	}
}

func TestEncode_MatchesTiktokenOnCases(t *testing.T) {
	t.Parallel()
	v := testVectors(t)
	if v.Unicode != unicodeVersion {
		t.Fatalf("vectors made with Unicode %s, tables are %s: regenerate", v.Unicode, unicodeVersion)
	}
	forEachEncoding(t, func(t *testing.T, e *Encoding) {
		for _, c := range v.Cases {
			want := pick(e.Name(), c.CL100, c.O200)
			got := e.Encode(c.Text)
			if !slices.Equal(got, want) {
				t.Errorf("%s: Encode(%q)\n got %v\nwant %v", c.Name, c.Text, got, want)
				continue
			}
			if n := e.Count(c.Text); n != len(want) {
				t.Errorf("%s: Count = %d, want %d", c.Name, n, len(want))
			}
			if s := e.Decode(got); s != c.Text {
				t.Errorf("%s: Decode(Encode(s)) = %q, want %q", c.Name, s, c.Text)
			}
		}
	})
}

func TestEncode_MatchesTiktokenOnCorpus(t *testing.T) {
	t.Parallel()
	v := testVectors(t)
	forEachEncoding(t, func(t *testing.T, e *Encoding) {
		for _, c := range v.Corpus {
			text, err := os.ReadFile(filepath.Join("testdata", "corpus", c.File))
			if err != nil {
				t.Fatal(err)
			}
			want := pick(e.Name(), c.CL100, c.O200)
			got := e.Encode(string(text))
			if i := firstDiff(got, want); i >= 0 {
				t.Errorf("%s: first difference at token %d: got %v, want %v", c.File, i,
					got[i:min(i+5, len(got))], want[i:min(i+5, len(want))])
			}
			if n := e.Count(string(text)); n != len(want) {
				t.Errorf("%s: Count = %d, want %d", c.File, n, len(want))
			}
		}
	})
}

func TestEncodeSpecial_MatchesTiktoken(t *testing.T) {
	t.Parallel()
	v := testVectors(t)
	forEachEncoding(t, func(t *testing.T, e *Encoding) {
		for _, c := range v.Special {
			want := pick(e.Name(), c.CL100, c.O200)
			if got := e.EncodeSpecial(c.Text); !slices.Equal(got, want) {
				t.Errorf("EncodeSpecial(%q) = %v, want %v", c.Text, got, want)
			}
			if got := e.Decode(e.EncodeSpecial(c.Text)); got != c.Text {
				t.Errorf("Decode(EncodeSpecial(%q)) = %q", c.Text, got)
			}
		}
	})
}

// TestEncode_MatchesTiktokenOnEveryCodePoint runs a probe around every Unicode code point that exposes its
// pre-tokenizer classes (letter, number, space, case) and compares a hash of the ids, block by block. Under
// the race detector it checks every 16th block of 4096 code points (ASCII's among them): the sweep is one
// goroutine's deterministic work per encoding, in which the detector has nothing to find, and it would take
// most of the package's time there; `make test` sweeps every block in its run without the detector.
func TestEncode_MatchesTiktokenOnEveryCodePoint(t *testing.T) {
	if testing.Short() {
		t.Skip("sweeps 1.1M code points")
	}
	t.Parallel()
	v := testVectors(t)
	forEachEncoding(t, func(t *testing.T, e *Encoding) {
		want := v.CodepointBlocks[e.Name()]
		if len(want) != 0x110 {
			t.Fatalf("vectors have %d blocks, want %d", len(want), 0x110)
		}
		step := 1
		if raceEnabled {
			step = 16
		}
		for b := 0; b < 0x110; b += step {
			if got := probeBlock(e, v.CodepointProbe, b); got != want[b] {
				t.Errorf("code points %#x..%#x: hash %#x, want %#x", b*4096, b*4096+4095, got, want[b])
			}
		}
	})
}

func probeBlock(e *Encoding, probe string, block int) uint32 {
	h := uint32(0x811c9dc5)
	mix := func(ids []int) {
		for _, id := range ids {
			for k := range 4 {
				h ^= uint32(id>>(8*k)) & 0xff
				h *= 0x01000193
			}
		}
	}
	buf := make([]byte, 0, 64)
	for cp := rune(block * 4096); cp < rune((block+1)*4096); cp++ {
		if cp >= 0xd800 && cp <= 0xdfff {
			continue
		}
		buf = buf[:0]
		for _, c := range probe {
			if c == 'X' {
				buf = append(buf, string(cp)...)
			} else {
				buf = append(buf, string(c)...)
			}
		}
		mix(e.Encode(string(buf)))
		mix([]int{0xffffffff})
	}
	return h
}

func firstDiff(a, b []int) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}
