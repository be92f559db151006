package engine_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/embed"
	"github.com/context-loom/loom/engine"
)

// plainEmbedder is the lexical embedder under another name, without a fusion weight of its own.
type plainEmbedder struct{}

func (plainEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return embed.Default().Embed(ctx, texts)
}
func (plainEmbedder) Dimensions() int { return embed.Default().Dimensions() }
func (plainEmbedder) Name() string    { return "plain" }

// weightedEmbedder says its vectors are worth 3.
type weightedEmbedder struct{ plainEmbedder }

func (weightedEmbedder) Name() string          { return "weighted" }
func (weightedEmbedder) FusionWeight() float64 { return 3 }

// impliedVectorToKeyword recovers the ratio of the vector weight to the keyword weight that hybrid scores
// were fused with, from a result whose two relevances differ: score = (wk*k + wv*v) / (wk + wv).
func impliedVectorToKeyword(t *testing.T, eng *engine.Engine, coll, query string, opts ...engine.RetrieveOption) float64 {
	t.Helper()
	ctx := t.Context()
	kw, err := eng.Retrieve(ctx, query, engine.WithCollection(coll), engine.WithMode(engine.ModeKeyword))
	if err != nil || len(kw) == 0 {
		t.Fatalf("keyword: %v %v", kw, err)
	}
	rs, err := eng.Retrieve(ctx, query, append([]engine.RetrieveOption{engine.WithCollection(coll), engine.WithTopK(20)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		k := r.Keyword / kw[0].Score
		v := max(r.Vector, 0)
		if math.Abs(k-v) > 0.1 && math.Abs(v-r.Score) > 1e-9 {
			return (k - r.Score) / (r.Score - v) // wv/wk
		}
	}
	t.Fatalf("no result tells the weights apart: %+v", rs)
	return 0
}

// TestRetrieve_FusionWeightsComeFromQueryCollectionEmbedder: each weight is the query's, else the
// collection's, else the default (1 for the keywords, the embedder's own for the vectors, 1 for an embedder
// that does not say).
func TestRetrieve_FusionWeightsComeFromQueryCollectionEmbedder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	eng, err := testEngine(newMemory(), engine.WithEmbedder(embed.Default()), engine.WithEmbedder(plainEmbedder{}), engine.WithEmbedder(weightedEmbedder{}))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	text := "Raft elects a leader by votes. The leader replicates its log. Followers apply committed entries. " +
		"Paxos agrees on one value at a time. Gossip spreads membership."
	half := 0.5
	for _, c := range []loom.Collection{{Name: "lexical", Embedder: embed.Default().Name()}, {Name: "plain", Embedder: "plain"},
		{Name: "weighted", Embedder: "weighted"}, {Name: "own", Embedder: embed.Default().Name(), VectorWeight: &half}} {
		if _, err := eng.CreateCollection(ctx, c); err != nil {
			t.Fatal(err)
		}
		for i, part := range []string{"Raft elects a leader by votes.", "The leader replicates its log to followers.", "Paxos agrees on one value.", text} {
			if _, err := eng.IngestText(ctx, c.Name, string(rune('a'+i)), "", "text", part, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	const q = "how does the raft leader replicate the log"
	for _, tc := range []struct {
		coll string
		opts []engine.RetrieveOption
		want float64
	}{
		{"lexical", nil, embed.LexicalFusionWeight},
		{"plain", nil, embed.DefaultFusionWeight},
		{"weighted", nil, 3},
		{"own", nil, 0.5},
		{"own", []engine.RetrieveOption{engine.WithVectorWeight(2)}, 2},
		{"own", []engine.RetrieveOption{engine.WithKeywordWeight(2)}, 0.25},
		{"weighted", []engine.RetrieveOption{engine.WithKeywordWeight(3)}, 1},
	} {
		if got := impliedVectorToKeyword(t, eng, tc.coll, q, tc.opts...); math.Abs(got-tc.want) > 1e-6 {
			t.Errorf("%s: fused with vector/keyword %v, want %v", tc.coll, got, tc.want)
		}
	}
	// SetFusionWeights changes what the next retrieval uses; nil goes back to the default.
	four := 4.0
	if c, err := eng.SetFusionWeights(ctx, "own", nil, &four); err != nil || *c.VectorWeight != 4 {
		t.Fatalf("SetFusionWeights: %+v %v", c, err)
	}
	if got := impliedVectorToKeyword(t, eng, "own", q); math.Abs(got-4) > 1e-6 {
		t.Errorf("after SetFusionWeights: %v, want 4", got)
	}
	if _, err := eng.SetFusionWeights(ctx, "own", nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := impliedVectorToKeyword(t, eng, "own", q); math.Abs(got-embed.LexicalFusionWeight) > 1e-6 {
		t.Errorf("after unsetting: %v, want the embedder's %v", got, embed.LexicalFusionWeight)
	}
	// Weights that fuse nothing, and bad ones, are refused, saying where each came from.
	zero, neg, inf := 0.0, -1.0, math.Inf(1)
	for _, tc := range []struct {
		opts []engine.RetrieveOption
		msg  string
	}{
		{[]engine.RetrieveOption{engine.WithKeywordWeight(0), engine.WithVectorWeight(0)}, "both 0; at least one must be positive (the keyword weight is the query's, the vector weight the query's)"},
		{[]engine.RetrieveOption{engine.WithVectorWeight(math.NaN())}, "vector weight is NaN"},
		{[]engine.RetrieveOption{engine.WithKeywordWeight(-2)}, "keyword weight is -2"},
	} {
		_, err := eng.Retrieve(ctx, q, append([]engine.RetrieveOption{engine.WithCollection("own")}, tc.opts...)...)
		if !errors.Is(err, engine.ErrInvalidRequest) || !errors.Is(err, loom.ErrInvalidFusionWeights) || !contains(err, tc.msg) {
			t.Errorf("%s: error %v", tc.msg, err)
		}
	}
	if _, err := eng.SetFusionWeights(ctx, "own", &zero, &zero); !errors.Is(err, loom.ErrInvalidFusionWeights) {
		t.Errorf("SetFusionWeights 0, 0: %v", err)
	}
	if _, err := eng.SetFusionWeights(ctx, "own", &neg, nil); !errors.Is(err, engine.ErrInvalidRequest) {
		t.Errorf("SetFusionWeights -1: %v", err)
	}
	if _, err := eng.CreateCollection(ctx, loom.Collection{Name: "inf", VectorWeight: &inf}); !errors.Is(err, engine.ErrInvalidRequest) {
		t.Errorf("CreateCollection with an infinite weight: %v", err)
	}
	// A keyword weight of 0 alone is fine: the embedder's vector weight is not 0.
	if _, err := eng.CreateCollection(ctx, loom.Collection{Name: "vectors", KeywordWeight: &zero}); err != nil {
		t.Errorf("CreateCollection with keyword weight 0: %v", err)
	}
}

func contains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }

// TestEngine_KeepsCollectionsOfTheFirstLexicalEmbedder: a collection made with the lexical embedder's first
// version (the default before its second) is still ingested into and retrieved from, with its own vectors,
// while new collections take the second.
func TestEngine_KeepsCollectionsOfTheFirstLexicalEmbedder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	eng, err := testEngine(newMemory())
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	v1, err := embed.NewLexicalV1(0)
	if err != nil {
		t.Fatal(err)
	}
	old, err := eng.CreateCollection(ctx, loom.Collection{Name: "old", Embedder: v1.Name()})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := eng.CreateCollection(ctx, loom.Collection{Name: "new"}); err != nil || c.Embedder != embed.Default().Name() || c.Embedder == old.Embedder {
		t.Fatalf("a new collection: %+v %v", c, err)
	}
	if _, err := eng.IngestText(ctx, "old", "a", "", "text", "The leader replicates its log to the followers.", nil); err != nil {
		t.Fatal(err)
	}
	rs, err := eng.Retrieve(ctx, "leader log", engine.WithCollection("old"), engine.WithMode(engine.ModeVector))
	if err != nil || len(rs) != 1 {
		t.Fatalf("vector retrieval from the old collection: %v %v", rs, err)
	}
	want, _ := v1.Embed(ctx, []string{"leader log"})
	stored, _ := v1.Embed(ctx, []string{"The leader replicates its log to the followers."})
	if c := float64(embed.Cosine(want[0], stored[0])); math.Abs(rs[0].Score-c) > 1e-6 {
		t.Errorf("cosine %v, want the first version's %v", rs[0].Score, c)
	}
}
