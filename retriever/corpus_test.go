package retriever

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/embed"
)

// corpusSentences returns the sentences (or lines, for code) of the tokenizer's test corpus: real English,
// Go, Chinese, Japanese, Korean and Cyrillic text.
func corpusSentences(tb testing.TB) []string {
	tb.Helper()
	files, err := filepath.Glob("../tokenizer/testdata/corpus/*.txt")
	if err != nil || len(files) == 0 {
		tb.Fatalf("corpus: %v (%d files)", err, len(files))
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		text := strings.NewReplacer("。", "。\n", ". ", ".\n").Replace(string(b))
		for line := range strings.Lines(text) {
			if line = strings.TrimSpace(line); len(line) >= 20 {
				out = append(out, line)
			}
		}
	}
	return out
}

// corpusChunks makes n chunks of real text, each of a few sentences drawn at random (seeded) from the
// corpus, ten chunks to a document, with Lexical vectors and a "lang" metadata key cycling over three values.
func corpusChunks(tb testing.TB, n int) []collection.Chunk {
	tb.Helper()
	sentences := corpusSentences(tb)
	rng := rand.New(rand.NewSource(int64(n)))
	texts := make([]string, n)
	for i := range texts {
		var sb strings.Builder
		for range 2 + rng.Intn(4) {
			sb.WriteString(sentences[rng.Intn(len(sentences))])
			sb.WriteByte(' ')
		}
		texts[i] = sb.String()
	}
	vecs, err := embed.Default().Embed(context.Background(), texts)
	if err != nil {
		tb.Fatal(err)
	}
	chunks := make([]collection.Chunk, n)
	for i, text := range texts {
		chunks[i] = collection.Chunk{
			Chunk: loom.Chunk{
				ID:          fmt.Sprintf("c%d", i),
				DocumentID:  fmt.Sprintf("d%d", i/10),
				Content:     text,
				Index:       i % 10,
				StartOffset: 100 * (i % 10),
				EndOffset:   100*(i%10) + len(text),
				Metadata:    map[string]string{"source": fmt.Sprintf("doc%d.txt", i/10), "lang": []string{"en", "ru", "zh"}[i%3]},
			},
			Vector: vecs[i],
		}
	}
	return chunks
}

// corpusQueries makes n queries: short phrases cut from random corpus sentences, with their vectors.
func corpusQueries(tb testing.TB, n int) []Query {
	tb.Helper()
	sentences := corpusSentences(tb)
	rng := rand.New(rand.NewSource(7))
	texts := make([]string, n)
	for i := range texts {
		words := strings.Fields(sentences[rng.Intn(len(sentences))])
		start := rng.Intn(len(words))
		texts[i] = strings.Join(words[start:min(len(words), start+4)], " ")
	}
	vecs, err := embed.Default().Embed(context.Background(), texts)
	if err != nil {
		tb.Fatal(err)
	}
	qs := make([]Query, n)
	for i := range qs {
		qs[i] = Query{Text: texts[i], Vector: vecs[i]}
	}
	return qs
}
