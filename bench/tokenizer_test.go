// Package bench measures Loom against its peers side by side, in the same run. It is a module of its own so
// the peers never become dependencies of Loom itself.
//
//	cd bench && go test -run '^$' -bench . -benchmem
package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/context-loom/loom/tokenizer"
	tiktokengo "github.com/tiktoken-go/tokenizer"
)

// corpus returns a committed corpus file of the tokenizer package.
func corpus(b *testing.B, name string) string {
	b.Helper()
	data, err := os.ReadFile(filepath.Join("..", "tokenizer", "testdata", "corpus", name))
	if err != nil {
		b.Fatal(err)
	}
	return string(data)
}

var texts = []struct{ name, file string }{
	{"english", "english.txt"},
	{"code", "code.go.txt"},
	{"cjk", "cjk.txt"},
	{"cyrillic", "cyrillic.txt"},
}

var sink int

// BenchmarkCount compares Loom's exact Count with github.com/tiktoken-go/tokenizer's on real text.
func BenchmarkCount(b *testing.B) {
	for _, enc := range []string{tokenizer.CL100KBase, tokenizer.O200KBase} {
		loom, err := tokenizer.Get(enc)
		if err != nil {
			b.Fatal(err)
		}
		peer, err := tiktokengo.Get(tiktokengo.Encoding(enc))
		if err != nil {
			b.Fatal(err)
		}
		for _, tc := range texts {
			text := corpus(b, tc.file)
			// The peer is measured for speed, not trusted for the count: say when it disagrees.
			if n, _ := peer.Count(text); n != loom.Count(text) {
				b.Logf("%s/%s: tiktoken-go counts %d, loom (= tiktoken) %d", enc, tc.name, n, loom.Count(text))
			}
			b.Run(enc+"/"+tc.name+"/loom", func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				for b.Loop() {
					sink = loom.Count(text)
				}
			})
			b.Run(enc+"/"+tc.name+"/tiktoken-go", func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				for b.Loop() {
					sink, _ = peer.Count(text)
				}
			})
		}
	}
}

// BenchmarkCountWorstCase measures the runs that make regex-based tokenizers quadratic.
func BenchmarkCountWorstCase(b *testing.B) {
	loom := tokenizer.CL100K()
	peer, err := tiktokengo.Get(tiktokengo.Cl100kBase)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		unit string
		size int
	}{
		{"letter", "a", 200 << 10},
		{"spaces", " ", 100 << 10},
		{"digits", "7", 100 << 10},
	} {
		for _, size := range []int{tc.size / 4, tc.size} {
			text := strings.Repeat(tc.unit, size)
			name := tc.name + "/" + byteSize(size)
			b.Run(name+"/loom", func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				for b.Loop() {
					sink = loom.Count(text)
				}
			})
			if size <= 50<<10 { // the peer is quadratic on these; the big sizes take minutes
				b.Run(name+"/tiktoken-go", func(b *testing.B) {
					b.SetBytes(int64(len(text)))
					b.ReportAllocs()
					for b.Loop() {
						sink, _ = peer.Count(text)
					}
				})
			}
		}
	}
}

func byteSize(n int) string { return strconv.Itoa(n>>10) + "KB" }
