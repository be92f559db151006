package chunker

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// topicEmbedder embeds a text as the counts of three topic words, so that sentence windows about one topic
// are close and a change of topic is far.
type topicEmbedder struct{ calls int }

func (e *topicEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	e.calls++
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = []float32{
			float32(strings.Count(t, "cat")) + 0.01,
			float32(strings.Count(t, "rocket")) + 0.01,
			float32(strings.Count(t, "bread")) + 0.01,
		}
	}
	return out, nil
}

func topicText() (string, []int) {
	var b strings.Builder
	var topicStarts []int
	for _, topic := range []string{"cat", "rocket", "bread"} {
		topicStarts = append(topicStarts, b.Len())
		for i := range 8 {
			b.WriteString("The ")
			b.WriteString(topic)
			b.WriteString(" sentence number ")
			b.WriteString(strings.Repeat("x", i+1))
			b.WriteString(" talks about the ")
			b.WriteString(topic)
			b.WriteString(". ")
		}
	}
	return b.String(), topicStarts
}

func TestSemantic_BreaksWhereTheTopicChanges(t *testing.T) {
	t.Parallel()
	text, starts := topicText()
	emb := &topicEmbedder{}
	chunks, err := NewSemantic().Chunk(context.Background(), text, &Options{
		ChunkSize: 1000, Embedder: emb, BreakpointPercentile: 85,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, Semantic, text, Options{ChunkSize: 1000, Embedder: emb, BreakpointPercentile: 85}, chunks)
	if len(chunks) != 3 {
		t.Fatalf("%d chunks, want one per topic: %+v", len(chunks), chunks)
	}
	for i, ch := range chunks {
		// A break falls between the last sentence of a topic and the first of the next, give or take the
		// window of one sentence.
		if i > 0 && abs(ch.StartOffset-starts[i]) > 80 {
			t.Errorf("chunk %d starts at %d, topic %d at %d", i, ch.StartOffset, i, starts[i])
		}
		if ch.Metadata["group"] != string(rune('0'+i)) {
			t.Errorf("chunk %d group %q", i, ch.Metadata["group"])
		}
	}
	if emb.calls != 1 {
		t.Errorf("embedder called %d times, want one batch", emb.calls)
	}
}

func TestSemantic_CapsGroupsLargerThanTheSize(t *testing.T) {
	t.Parallel()
	text, _ := topicText()
	opts := Options{ChunkSize: 30, ChunkOverlap: 8, Embedder: &topicEmbedder{}}
	chunks, err := NewSemantic().Chunk(context.Background(), text, &opts)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, Semantic, text, opts, chunks)
	if len(chunks) < 6 {
		t.Errorf("%d chunks of at most 30 tokens", len(chunks))
	}
}

type failingEmbedder struct {
	err   error
	short bool
}

func (e failingEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	if e.short {
		return make([][]float32, len(texts)-1), nil
	}
	return nil, e.err
}

func TestSemantic_Errors(t *testing.T) {
	t.Parallel()
	text, _ := topicText()
	boom := errors.New("model server down")
	if _, err := NewSemantic().Chunk(context.Background(), text, &Options{Embedder: failingEmbedder{err: boom}}); !errors.Is(err, boom) {
		t.Errorf("embedder error: got %v", err)
	}
	if _, err := NewSemantic().Chunk(context.Background(), text, &Options{Embedder: failingEmbedder{short: true}}); err == nil {
		t.Error("an embedder returning too few vectors is not an error")
	}
	for _, p := range []float64{-1, 100.5} {
		if _, err := NewSemantic().Chunk(context.Background(), text, &Options{BreakpointPercentile: p}); !errors.Is(err, ErrBadPercentile) {
			t.Errorf("percentile %v: %v", p, err)
		}
	}
}

func TestPercentileOf(t *testing.T) {
	t.Parallel()
	values := []float64{5, 1, 4, 2, 3}
	for _, tc := range []struct{ p, want float64 }{{100, 5}, {50, 3}, {25, 2}, {90, 4.6}} {
		if got := percentileOf(values, tc.p); got < tc.want-1e-9 || got > tc.want+1e-9 {
			t.Errorf("percentile %v = %v, want %v", tc.p, got, tc.want)
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
