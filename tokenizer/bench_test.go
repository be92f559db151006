package tokenizer

import (
	"os"
	"path/filepath"
	"testing"
)

var benchSink int

func benchCorpus(b *testing.B) map[string]string {
	b.Helper()
	out := map[string]string{}
	for _, name := range []string{"english.txt", "code.go.txt", "cjk.txt", "cyrillic.txt"} {
		data, err := os.ReadFile(filepath.Join("testdata", "corpus", name))
		if err != nil {
			b.Fatal(err)
		}
		out[name] = string(data)
	}
	return out
}

// BenchmarkCountCold counts each text with empty caches, as a single pass over text never seen before does.
// (bench/ compares the steady state, caches warm, with the peer.)
func BenchmarkCountCold(b *testing.B) {
	texts := benchCorpus(b)
	for _, e := range []*Encoding{CL100K(), O200K()} {
		for name, text := range texts {
			b.Run(e.Name()+"/"+name, func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				for b.Loop() {
					for len(e.vocab.freeCaches) > 0 {
						<-e.vocab.freeCaches
					}
					benchSink = e.Count(text)
				}
			})
		}
	}
}

func BenchmarkEncode(b *testing.B) {
	texts := benchCorpus(b)
	for _, e := range []*Encoding{CL100K(), O200K()} {
		for name, text := range texts {
			b.Run(e.Name()+"/"+name, func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				b.ReportAllocs()
				for b.Loop() {
					benchSink = len(e.Encode(text))
				}
			})
		}
	}
}

// BenchmarkCountShort counts a chat message: the per-call overhead.
func BenchmarkCountShort(b *testing.B) {
	e := O200K()
	text := "Can you summarise the attached report in three bullet points?"
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		benchSink = e.Count(text)
	}
}
