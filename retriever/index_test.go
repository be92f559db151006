package retriever

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/embed"
	"golang.org/x/text/unicode/norm"
)

func mk(id, doc, text string, vec []float32, meta ...string) collection.Chunk {
	m := map[string]string{"source": doc + ".txt"}
	for i := 0; i+1 < len(meta); i += 2 {
		m[meta[i]] = meta[i+1]
	}
	return collection.Chunk{Chunk: loom.Chunk{ID: id, DocumentID: doc, Content: text, StartOffset: 3, EndOffset: 3 + len(text), Metadata: m}, Vector: vec}
}

func ids(rs []Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Chunk.ID
	}
	return out
}

func search(t *testing.T, ix *Index, q Query) []Result {
	t.Helper()
	rs, err := ix.Search(context.Background(), q)
	if err != nil {
		t.Fatalf("Search(%+v): %v", q, err)
	}
	return rs
}

// TestBM25_MatchesFormula checks the keyword scores against BM25 computed here from its definition, over a
// corpus whose words are plain lowercase words (so that strings.Fields tokenizes it as the index does).
func TestBM25_MatchesFormula(t *testing.T) {
	t.Parallel()
	docs := []string{
		"apple banana apple cherry",
		"banana banana durian",
		"cherry cherry cherry apple elder fig grape",
		"fig",
		"grape apple banana kiwi lemon mango",
	}
	ix := NewIndex(IndexOptions{})
	for i, d := range docs {
		if err := ix.Add(mk(fmt.Sprint(i), "d", d, nil)); err != nil {
			t.Fatal(err)
		}
	}
	// BM25 with k1 = 1.2, b = 0.75 and idf = ln(1 + (N - df + 0.5)/(df + 0.5)).
	want := func(query string, doc int) float64 {
		N := float64(len(docs))
		total := 0
		for _, d := range docs {
			total += len(strings.Fields(d))
		}
		avgdl := float64(total) / N
		words := strings.Fields(docs[doc])
		seen := map[string]bool{}
		score := 0.0
		for _, q := range strings.Fields(query) {
			if seen[q] {
				continue
			}
			seen[q] = true
			df, tf := 0.0, 0.0
			for _, d := range docs {
				if strings.Contains(" "+d+" ", " "+q+" ") {
					df++
				}
			}
			for _, w := range words {
				if w == q {
					tf++
				}
			}
			idf := math.Log(1 + (N-df+0.5)/(df+0.5))
			score += idf * tf * 2.2 / (tf + 1.2*(1-0.75+0.75*float64(len(words))/avgdl))
		}
		return score
	}
	for _, query := range []string{"apple", "banana cherry", "fig grape", "apple apple kiwi", "durian"} {
		rs := search(t, ix, Query{Text: query, Mode: ModeKeyword})
		n := 0
		for i := range docs {
			if want(query, i) > 0 {
				n++
			}
		}
		if len(rs) != n {
			t.Fatalf("%q: %d results, want %d", query, len(rs), n)
		}
		for i, r := range rs {
			var doc int
			fmt.Sscan(r.Chunk.ID, &doc)
			if w := want(query, doc); math.Abs(r.Score-w) > 1e-9 {
				t.Errorf("%q: doc %d scored %v, want %v", query, doc, r.Score, w)
			}
			if r.Kind != KindBM25 || r.Keyword != r.Score || r.KeywordRank != i+1 || r.Rank != i+1 {
				t.Errorf("%q: result %d = %+v", query, i, r)
			}
			if i > 0 && r.Score > rs[i-1].Score {
				t.Errorf("%q: not sorted", query)
			}
		}
	}
}

func TestAnalyze(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"The Quick, brown FOX!", []string{"quick", "brown", "fox"}},
		{"e-mail x2 café naïve", []string{"e", "mail", "x2", "cafe", "naive"}},
		// Accents of Latin letters go, composed or not; other scripts keep theirs.
		{"Café CAFÉ cafe\u0301 Ångström Dvořák São", []string{"cafe", "cafe", "cafe", "angstrom", "dvorak", "sao"}},
		{"İstanbul Straße æther smørrebrød q\u0303", []string{"istanbul", "straße", "æther", "smørrebrød", "q"}},
		{"Привет, Мир, й и\u0306 ά", []string{"привет", "мир", "й", "й", "ά"}},
		{"thé", nil}, // folded to a stopword
		// NFKC: full-width and half-width forms are their ordinary ones, ligatures their letters.
		{"ＡＢＣ ｄｅｆ ｶﾀｶﾅ ﬁne", []string{"abc", "def", "カ", "タ", "カタ", "カ", "タカ", "ナ", "カナ", "fine"}},
		{"人权宣言", []string{"人", "权", "人权", "宣", "权宣", "言", "宣言"}},
		{"東京は日本の首都です。", []string{"東", "京", "東京", "は", "京は", "日", "は日", "本", "日本", "の", "本の", "首", "の首", "都", "首都", "で", "都で", "す", "です"}},
		{"カ\u3099ス", []string{"ガ", "ス", "ガス"}}, // a decomposed voiced mark is composed first
		{"go语言 ok", []string{"go", "语", "言", "语言", "ok"}},
		{"한국어 텍스트", []string{"한국어", "텍스트"}},
		{"", nil},
		{"the and of", nil},
		{"\xff\xfeabc", []string{"abc"}},
		{strings.Repeat("x", MaxTermRunes+1) + " y", []string{"y"}},
	}
	for _, tt := range tests {
		got := Analyze(tt.in)
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("Analyze(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestSearch_FoldsDiacritics: a keyword query with or without accents finds a text with or without them.
func TestSearch_FoldsDiacritics(t *testing.T) {
	t.Parallel()
	ix := NewIndex(IndexOptions{})
	if err := ix.Add(mk("accented", "a", "Un café crème, s'il vous plaît.", nil), mk("plain", "p", "The cafe on the corner.", nil),
		mk("decomposed", "d", "Nai\u0308ve cafe\u0301 art.", nil), mk("other", "o", "Tea and biscuits.", nil)); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"cafe", "café", "CAFÉ", "cafe\u0301"} {
		got := ids(search(t, ix, Query{Text: q, Mode: ModeKeyword}))
		slices.Sort(got)
		if fmt.Sprint(got) != "[accented decomposed plain]" {
			t.Errorf("keyword %q: %v, want the three cafés", q, got)
		}
	}
}

func FuzzAnalyze(f *testing.F) {
	for _, s := range []string{"Hello, World", "人权宣言 go语言", "ÀÉÎ\u0301x", "\xff", "a1_b2", "İstanbul ǅ", "ｶﾞｽ ﬁ ①", "e\u0301\u0301"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		terms := Analyze(s)
		for _, w := range terms {
			if w == "" || !utf8.ValidString(w) || utf8.RuneCountInString(w) > MaxTermRunes {
				t.Fatalf("term %q from %q", w, s)
			}
			if IsStopword(w) {
				t.Fatalf("stopword %q from %q", w, s)
			}
			// A term is its own last term (a CJK pair gives its characters and itself), and a word its only.
			again := Analyze(w)
			if len(again) == 0 || again[len(again)-1] != w {
				t.Fatalf("terms of term %q = %q", w, again)
			}
			if r, _ := utf8.DecodeRuneInString(w); !isCJK(r) && len(again) != 1 {
				t.Fatalf("terms of word %q = %q", w, again)
			}
		}
		// The terms are those of the text made valid and NFKC, and canonically equivalent texts have the same.
		if want, _ := appendTerms(nil, norm.NFKC.String(strings.ToValidUTF8(s, "\uFFFD")), false); fmt.Sprint(want) != fmt.Sprint(terms) {
			t.Fatalf("Analyze(%q) = %q, but its NFKC has %q", s, terms, want)
		}
		for _, form := range []norm.Form{norm.NFC, norm.NFD} {
			if other := Analyze(form.String(s)); fmt.Sprint(other) != fmt.Sprint(terms) {
				t.Fatalf("Analyze(%q) = %q, but %q in another form gives %q", s, terms, form.String(s), other)
			}
		}
	})
}

func TestFuse_RRF(t *testing.T) {
	t.Parallel()
	a := []ScoredID{{ID: "x", Score: 9}, {ID: "y", Score: 5}, {ID: "z", Score: 1}}
	b := []ScoredID{{ID: "z", Score: 0.9}, {ID: "y", Score: 0.8}, {ID: "w", Score: 0.1}}
	got := Fuse(a, b)
	// z: 1/63+1/61 (a little more than y's 2/62); y: 1/62+1/62; x: 1/61; w: 1/63.
	wantIDs := []string{"z", "y", "x", "w"}
	wantScores := []float64{1.0/63 + 1.0/61, 2.0 / 62, 1.0 / 61, 1.0 / 63}
	for i, s := range got {
		if s.ID != wantIDs[i] || math.Abs(s.Score-wantScores[i]) > 1e-15 {
			t.Fatalf("Fuse = %v, want ids %v scores %v", got, wantIDs, wantScores)
		}
	}
	if len(Fuse()) != 0 {
		t.Fatal("Fuse() not empty")
	}
}

// vec2 gives a 3-d vector at angle deg in the x-y plane.
func vec2(deg float64) []float32 {
	r := deg * math.Pi / 180
	return []float32{float32(math.Cos(r)), float32(math.Sin(r)), 0}
}

func TestSearch_HybridFusesBothRankings(t *testing.T) {
	t.Parallel()
	angles := map[string][]float32{"kw": vec2(80), "both": vec2(10), "vec": vec2(0), "none": vec2(100)}
	ix := NewIndex(IndexOptions{})
	err := ix.Add(
		mk("kw", "d1", "raft consensus leader election", vec2(80)),
		mk("both", "d2", "raft consensus", vec2(10)),
		mk("vec", "d3", "unrelated words here", vec2(0)),
		mk("none", "d4", "nothing at all", vec2(100)),
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []loom.FusionWeights{{}, {Keyword: 1, Vector: 0.2}, {Keyword: 0.5, Vector: 2}} {
		rs := search(t, ix, Query{Text: "raft consensus", Vector: vec2(0), Weights: w})
		// "none" points away from the query and has none of its words: a fused score of 0, not returned.
		if got := ids(rs); got[0] != "both" || len(got) != 3 || slices.Contains(got, "none") {
			t.Fatalf("weights %+v: hybrid = %v", w, got)
		}
		eff := w
		if eff.IsZero() {
			eff = DefaultFusionWeights
		}
		bm25 := map[string]float64{}
		for _, r := range search(t, ix, Query{Text: "raft consensus", Mode: ModeKeyword}) {
			bm25[r.Chunk.ID] = r.Score
		}
		top := bm25["both"] // the shorter chunk of the same words
		for i, r := range rs {
			if r.Kind != KindFused {
				t.Fatalf("kind %q", r.Kind)
			}
			cos := float64(embed.Cosine(vec2(0), angles[r.Chunk.ID]))
			if math.Abs(r.Vector-cos) > 1e-6 {
				t.Fatalf("%s: cosine %v, want %v", r.Chunk.ID, r.Vector, cos)
			}
			if math.Abs(r.Keyword-bm25[r.Chunk.ID]) > 1e-12 {
				t.Fatalf("%s: keyword %v, want its BM25 score %v", r.Chunk.ID, r.Keyword, bm25[r.Chunk.ID])
			}
			want := (eff.Keyword*bm25[r.Chunk.ID]/top + eff.Vector*max(cos, 0)) / (eff.Keyword + eff.Vector)
			if math.Abs(r.Score-want) > 1e-6 {
				t.Fatalf("weights %+v, %s: fused %v, want %v", w, r.Chunk.ID, r.Score, want)
			}
			if i > 0 && r.Score > rs[i-1].Score {
				t.Fatalf("weights %+v: not ordered by fused score: %+v", w, rs)
			}
		}
	}
}

func TestSearch_FusionWeightsShiftTheRanking(t *testing.T) {
	t.Parallel()
	ix := NewIndex(IndexOptions{})
	err := ix.Add(
		mk("kw", "d1", "raft consensus", vec2(80)),
		mk("vec", "d2", "raft", vec2(0)),
	)
	if err != nil {
		t.Fatal(err)
	}
	q := Query{Text: "raft consensus", Vector: vec2(0)}
	for _, tc := range []struct {
		w    loom.FusionWeights
		want string
	}{
		{loom.FusionWeights{Keyword: 1, Vector: 0}, "[kw vec]"},
		{loom.FusionWeights{Keyword: 1, Vector: 0.1}, "[kw vec]"},
		{loom.FusionWeights{Keyword: 0.1, Vector: 1}, "[vec kw]"},
		{loom.FusionWeights{Keyword: 0, Vector: 1}, "[vec kw]"},
	} {
		q.Weights = tc.w
		for _, mode := range []string{ModeHybrid, ModeMMR} {
			q.Mode = mode
			q.MMRLambda = 1
			if got := fmt.Sprint(ids(search(t, ix, q))); got != tc.want {
				t.Errorf("%s, weights %+v: %s, want %s", mode, tc.w, got, tc.want)
			}
		}
	}
}

func TestSearch_FusionLeavesOutASideTheQueryLacks(t *testing.T) {
	t.Parallel()
	ix := NewIndex(IndexOptions{})
	if err := ix.Add(mk("a", "d1", "raft consensus", vec2(0)), mk("b", "d2", "raft", vec2(60))); err != nil {
		t.Fatal(err)
	}
	// No vector: the fused score is the relative BM25 score, the best 1, whatever the weights.
	rs := search(t, ix, Query{Text: "raft consensus", Weights: loom.FusionWeights{Keyword: 1, Vector: 3}})
	if len(rs) != 2 || math.Abs(rs[0].Score-1) > 1e-12 {
		t.Fatalf("keyword side alone: %+v", rs)
	}
	// No words (only punctuation): the fused score is the cosine.
	rs = search(t, ix, Query{Text: "?!", Vector: vec2(0), Weights: loom.FusionWeights{Keyword: 3, Vector: 1}})
	if len(rs) != 2 || math.Abs(rs[0].Score-1) > 1e-6 || math.Abs(rs[1].Score-0.5) > 1e-6 {
		t.Fatalf("vector side alone: %+v", rs)
	}
	// A zero query vector is like none.
	rs = search(t, ix, Query{Text: "raft consensus", Vector: []float32{0, 0, 0}})
	if len(rs) != 2 || math.Abs(rs[0].Score-1) > 1e-12 {
		t.Fatalf("zero vector: %+v", rs)
	}
	// The only side the weights keep, missing: nothing.
	if rs := search(t, ix, Query{Text: "raft", Weights: loom.FusionWeights{Vector: 1}}); len(rs) != 0 {
		t.Fatalf("vector weight alone without a vector: %+v", rs)
	}
}

func TestQuery_ValidateRefusesBadWeights(t *testing.T) {
	t.Parallel()
	for _, w := range []loom.FusionWeights{{Keyword: -1, Vector: 1}, {Keyword: 1, Vector: math.NaN()}, {Keyword: math.Inf(1), Vector: 1}} {
		err := Query{Weights: w}.Validate()
		if !errors.Is(err, ErrInvalidQuery) || !errors.Is(err, loom.ErrInvalidFusionWeights) || !errors.Is(err, loom.ErrInvalid) {
			t.Errorf("weights %+v: error %v", w, err)
		}
	}
	if err := (Query{}).Validate(); err != nil {
		t.Errorf("unset weights: %v", err)
	}
}

func TestSearch_MMRSeparatesNearDuplicates(t *testing.T) {
	t.Parallel()
	ix := NewIndex(IndexOptions{})
	err := ix.Add(
		mk("a", "d1", "alpha", vec2(0)),
		mk("a-copy", "d2", "alpha again", vec2(1)),
		mk("b", "d3", "beta", vec2(40)),
		mk("c", "d4", "gamma", vec2(85)),
	)
	if err != nil {
		t.Fatal(err)
	}
	q := Query{Vector: vec2(2), TopK: 2}
	q.Mode = ModeVector
	if got := fmt.Sprint(ids(search(t, ix, q))); got != "[a-copy a]" {
		t.Fatalf("vector top 2 = %v, want both near-duplicates", got)
	}
	q.Mode, q.MMRLambda = ModeMMR, 0.3
	rs := search(t, ix, q)
	if got := ids(rs); len(got) != 2 || got[0] != "a-copy" || got[1] == "a" {
		t.Fatalf("mmr top 2 = %v, want a-copy then not its near-duplicate", got)
	}
	if rs[0].Kind != KindMMR || rs[0].Score <= rs[1].Score {
		t.Fatalf("mmr results %+v", rs)
	}
	q.MMRLambda = 1 // relevance only
	if got := fmt.Sprint(ids(search(t, ix, q))); got != "[a-copy a]" {
		t.Fatalf("mmr lambda 1 = %v", got)
	}
}

func TestSearch_Filter(t *testing.T) {
	t.Parallel()
	ix := NewIndex(IndexOptions{})
	var chunks []collection.Chunk
	for i := range 30 {
		// Texts of their own: MMR would drop copies of the same text.
		chunks = append(chunks, mk(fmt.Sprint(i), fmt.Sprint("d", i%3), fmt.Sprint("shared words everywhere, chunk ", i), vec2(float64(i)), "lang", []string{"en", "de"}[i%2]))
	}
	if err := ix.Add(chunks...); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{ModeHybrid, ModeKeyword, ModeVector, ModeMMR} {
		for _, f := range []map[string]string{{"lang": "de"}, {"document_id": "d1"}, {"lang": "en", "document_id": "d2"}, {"lang": "fr"}, {"missing": ""}} {
			rs := search(t, ix, Query{Text: "shared", Vector: vec2(0), Mode: mode, Filter: f, TopK: 30})
			want := 0
			for i := range 30 {
				if (f["lang"] == "" || f["lang"] == []string{"en", "de"}[i%2]) && (f["document_id"] == "" || f["document_id"] == fmt.Sprint("d", i%3)) && f["missing"] == "" && len(f) > 0 && f["lang"] != "fr" {
					if _, miss := f["missing"]; !miss {
						want++
					}
				}
			}
			if len(rs) != want {
				t.Errorf("%s %v: %d results, want %d", mode, f, len(rs), want)
			}
			for _, r := range rs {
				if v, ok := f["lang"]; ok && r.Chunk.Metadata["lang"] != v {
					t.Errorf("%s %v: got %v", mode, f, r.Chunk.Metadata)
				}
				if v, ok := f["document_id"]; ok && r.Chunk.DocumentID != v {
					t.Errorf("%s %v: got doc %v", mode, f, r.Chunk.DocumentID)
				}
			}
		}
	}
}

func TestIndex_RemoveDocumentAndReplace(t *testing.T) {
	t.Parallel()
	ix := NewIndex(IndexOptions{})
	for i := range 20 {
		if err := ix.Add(mk(fmt.Sprint("c", i), fmt.Sprint("d", i/2), fmt.Sprintf("common token%d", i), vec2(float64(i))), mk("x", "dx", "lonely", nil)); err != nil {
			t.Fatal(err)
		}
	}
	if ix.Len() != 21 {
		t.Fatalf("Len = %d, want 21 (x replaced each time)", ix.Len())
	}
	if n := ix.RemoveDocument("d3"); n != 2 {
		t.Fatalf("RemoveDocument = %d", n)
	}
	if n := ix.RemoveDocument("d3"); n != 0 {
		t.Fatalf("RemoveDocument again = %d", n)
	}
	for _, mode := range []string{ModeHybrid, ModeKeyword, ModeVector} {
		for _, r := range search(t, ix, Query{Text: "common token6", Vector: vec2(6), Mode: mode, TopK: 100}) {
			if r.Chunk.DocumentID == "d3" {
				t.Fatalf("%s: removed chunk %s found", mode, r.Chunk.ID)
			}
		}
	}
	// Remove most documents: the index compacts, and what is left is still found, with BM25 statistics
	// of the live chunks only.
	for d := range 9 {
		ix.RemoveDocument(fmt.Sprint("d", d))
	}
	if ix.Len() != 3 || ix.dead*5 > len(ix.entries) {
		t.Fatalf("Len = %d, dead %d of %d slots", ix.Len(), ix.dead, len(ix.entries))
	}
	fresh := NewIndex(IndexOptions{})
	fresh.Add(mk("c18", "d9", "common token18", vec2(18)), mk("c19", "d9", "common token19", vec2(19)), mk("x", "dx", "lonely", nil))
	for _, q := range []string{"common", "token19", "lonely"} {
		a, b := search(t, ix, Query{Text: q, Mode: ModeKeyword}), search(t, fresh, Query{Text: q, Mode: ModeKeyword})
		if fmt.Sprint(ids(a)) != fmt.Sprint(ids(b)) || len(a) == 0 || math.Abs(a[0].Score-b[0].Score) > 1e-12 {
			t.Fatalf("%q after removals: %v %v, fresh index: %v %v", q, ids(a), a[0].Score, ids(b), b[0].Score)
		}
	}
	// Replacing a chunk moves it to its new document and text.
	ix.Add(mk("c19", "d42", "brand new", vec2(19)))
	if rs := search(t, ix, Query{Text: "brand", Mode: ModeKeyword}); len(rs) != 1 || rs[0].Chunk.DocumentID != "d42" {
		t.Fatalf("replaced chunk: %v", rs)
	}
	if rs := search(t, ix, Query{Text: "token19", Mode: ModeKeyword}); len(rs) != 0 {
		t.Fatalf("old text still found: %v", ids(rs))
	}
	if ix.RemoveDocument("d9") != 1 || ix.Len() != 2 {
		t.Fatalf("d9 should have kept only c18; Len %d", ix.Len())
	}
}

func TestSearch_ResultsAreCopies(t *testing.T) {
	t.Parallel()
	ix := NewIndex(IndexOptions{})
	c := mk("id1", "doc1", "some text", vec2(0), "k", "v")
	ix.Add(c)
	c.Metadata["k"] = "changed by caller"
	rs := search(t, ix, Query{Text: "text", Vector: vec2(0)})
	got := rs[0].Chunk
	if got.ID != "id1" || got.DocumentID != "doc1" || got.StartOffset != 3 || got.EndOffset != 12 || got.Content != "some text" ||
		got.Metadata["source"] != "doc1.txt" || got.Metadata["k"] != "v" {
		t.Fatalf("chunk = %+v", got)
	}
	got.Metadata["k"] = "changed by reader"
	if rs := search(t, ix, Query{Text: "text"}); rs[0].Chunk.Metadata["k"] != "v" {
		t.Fatal("a result shares its metadata with the index")
	}
}

func TestSearch_MinScore(t *testing.T) {
	t.Parallel()
	ix := NewIndex(IndexOptions{})
	ix.Add(
		mk("close", "d", "alpha beta", vec2(10)), // cosine 0.98
		mk("far", "d", "alpha", vec2(60)),        // cosine 0.5
		mk("kwonly", "d", "beta beta beta", nil), // no vector
		mk("other", "d", "gamma", vec2(89)),      // cosine 0.017
	)
	tests := []struct {
		mode string
		want string
	}{
		{ModeVector, "[close]"},
		{ModeKeyword, "[kwonly]"}, // relative BM25: only the best is above 0.7
		{ModeHybrid, "[close]"},   // the mean of the two: strong on both sides
		{ModeMMR, "[close]"},
	}
	for _, tt := range tests {
		rs := search(t, ix, Query{Text: "beta", Vector: vec2(0), Mode: tt.mode, MinScore: 0.7})
		if got := fmt.Sprint(ids(rs)); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.mode, got, tt.want)
		}
	}
}

// TestSearch_MinScoreIsTheRelevance: MinScore means the same thing in every mode: it keeps exactly the
// results whose score in the mode's ranking is at least MinScore times the best result's (for MMR, the
// hybrid ranking's), which is Result.Relevance, in [0, 1]; so the best result is always kept, whatever the
// mode and the scale of its scores. (Comparing MinScore with the cosine similarity kept nothing in vector
// mode for the queries whose best cosine is under it, while hybrid mode kept results of that cosine.)
func TestSearch_MinScoreIsTheRelevance(t *testing.T) {
	t.Parallel()
	ix := NewIndex(IndexOptions{})
	chunks := corpusChunks(t, 300)
	if err := ix.Add(chunks...); err != nil {
		t.Fatal(err)
	}
	weights := []loom.FusionWeights{{}, {Keyword: 1, Vector: 0.2}, {Keyword: 1, Vector: 3}}
	for qi, q := range corpusQueries(t, 12) {
		q.TopK, q.Weights = 40, weights[qi%len(weights)]
		for _, mode := range []string{ModeKeyword, ModeVector, ModeHybrid, ModeMMR} {
			q.Mode, q.MinScore = mode, 0
			all := search(t, ix, q)
			// The relevance of each chunk in this mode: its score over the best's.
			relOf := map[string]float64{}
			ranking := all
			if mode == ModeMMR { // MMR's chunks are hybrid candidates, relevant as they are there
				h := q
				h.Mode, h.TopK = ModeHybrid, 1000
				ranking = search(t, ix, h)
			}
			for _, r := range ranking {
				relOf[r.Chunk.ID] = r.Score / ranking[0].Score
			}
			if len(all) == 0 {
				continue
			}
			for _, r := range all {
				if rel, ok := relOf[r.Chunk.ID]; !ok || !(rel >= 0 && rel <= 1+1e-9) || math.Abs(r.Relevance-rel) > 1e-9 {
					t.Fatalf("%s: %s has relevance %v, Relevance %v (known %v)", mode, r.Chunk.ID, rel, r.Relevance, ok)
				}
			}
			for _, min := range []float64{0.05, 0.3, 0.5, 0.8, 1} {
				q.MinScore = min
				got := search(t, ix, q)
				if len(got) == 0 || got[0].Chunk.ID != all[0].Chunk.ID {
					t.Fatalf("%s, MinScore %v: %d results; the best result must be kept", mode, min, len(got))
				}
				for _, r := range got {
					if r.Relevance < min {
						t.Fatalf("%s, MinScore %v: %s kept with relevance %v", mode, min, r.Chunk.ID, r.Relevance)
					}
				}
				if mode == ModeMMR {
					continue // MMR picks among the kept; which it picks depends on what is left
				}
				want := 0
				for _, r := range all {
					if r.Relevance >= min {
						want++
					}
				}
				if len(got) != want {
					t.Fatalf("%s, MinScore %v: %d results, want the %d of relevance %v or more", mode, min, len(got), want, min)
				}
			}
		}
	}
}

func TestSearch_Errors(t *testing.T) {
	t.Parallel()
	ix := NewIndex(IndexOptions{})
	if err := ix.Add(mk("a", "d", "x", []float32{1, 0, 0})); err != nil {
		t.Fatal(err)
	}
	nan := float32(math.NaN())
	for _, tt := range []struct {
		q    Query
		want error
	}{
		{Query{Mode: "fuzzy"}, ErrInvalidQuery},
		{Query{TopK: -1}, ErrInvalidQuery},
		{Query{Candidates: -1}, ErrInvalidQuery},
		{Query{MMRLambda: 1.5}, ErrInvalidQuery},
		{Query{MMRLambda: math.NaN()}, ErrInvalidQuery},
		{Query{MinScore: -0.1}, ErrInvalidQuery},
		{Query{MinScore: 1.5}, ErrInvalidQuery},
		{Query{MinScore: math.NaN()}, ErrInvalidQuery},
		{Query{Mode: ModeVector, Text: "x"}, ErrInvalidQuery},
		{Query{Vector: []float32{nan, 0, 0}}, ErrInvalidQuery},
		{Query{Vector: []float32{1, 0}}, ErrDimensions},
	} {
		if _, err := ix.Search(context.Background(), tt.q); !errors.Is(err, tt.want) {
			t.Errorf("Search(%+v) = %v, want %v", tt.q, err, tt.want)
		}
		// Validate refuses the settings alone; the vectors are Search's to check.
		if err := tt.q.Validate(); (err != nil) != (tt.want == ErrInvalidQuery && tt.q.Vector == nil && tt.q.Mode != ModeVector) {
			t.Errorf("Validate(%+v) = %v", tt.q, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := ix.Search(ctx, Query{Text: "x"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	for _, tt := range []struct {
		c    collection.Chunk
		want error
	}{
		{mk("", "d", "x", nil), ErrInvalidChunk},
		{mk("b", "d", "x", []float32{1, 2}), ErrDimensions},
		{mk("b", "d", "x", []float32{1, float32(math.Inf(1)), 0}), ErrInvalidChunk},
	} {
		if err := ix.Add(mk("ok", "d", "fine", nil), tt.c); !errors.Is(err, tt.want) {
			t.Errorf("Add(%+v) = %v, want %v", tt.c, err, tt.want)
		}
	}
	if ix.Len() != 1 {
		t.Fatalf("a failed Add added chunks: Len %d", ix.Len())
	}
	// An empty index and empty queries give no results, not errors.
	empty := NewIndex(IndexOptions{})
	for _, q := range []Query{{}, {Text: "the"}, {Vector: []float32{1}}, {Mode: ModeMMR, Text: "x"}} {
		if rs := search(t, empty, q); len(rs) != 0 {
			t.Fatalf("%+v: %v", q, rs)
		}
	}
}

func TestIndex_ConcurrentAddAndSearch(t *testing.T) {
	t.Parallel()
	chunks := corpusChunks(t, 300)
	ix := NewIndex(IndexOptions{HNSWThreshold: 100})
	qs := corpusQueries(t, 20)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < len(chunks); i += 4 {
				if err := ix.Add(chunks[i]); err != nil {
					t.Error(err)
					return
				}
				if i%50 == 0 {
					ix.RemoveDocument(chunks[i].DocumentID)
				}
			}
		})
		wg.Go(func() {
			for i := range 20 {
				q := qs[i%len(qs)]
				q.Mode = []string{ModeHybrid, ModeKeyword, ModeVector, ModeMMR}[i%4]
				if _, err := ix.Search(context.Background(), q); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := ix.WaitGraph(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ix.Len() == 0 || ix.graph == nil {
		t.Fatalf("Len %d, graph %v", ix.Len(), ix.graph != nil)
	}
}

// TestHNSW_AgreesWithExact checks that approximate vector search finds most of the exact top 10, also
// after removals (dead nodes stay in the graph until compaction) and with a filter.
func TestHNSW_AgreesWithExact(t *testing.T) {
	t.Parallel()
	n, nq := 3000, 50
	if raceEnabled {
		n, nq = 600, 10
	}
	ix := NewIndex(IndexOptions{HNSWThreshold: n / 3})
	if err := ix.Add(corpusChunks(t, n)...); err != nil {
		t.Fatal(err)
	}
	if err := ix.WaitGraph(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ix.graph == nil {
		t.Fatal("no graph above the threshold")
	}
	for d := 0; d < n/60; d++ { // a sixth of the chunks, under a fifth: no compaction
		ix.RemoveDocument(fmt.Sprint("d", d*3))
	}
	if ix.dead == 0 {
		t.Fatal("compacted too early")
	}
	for _, filter := range []map[string]string{nil, {"lang": "ru"}} {
		r := recallAt10(t, ix, corpusQueries(t, nq), filter)
		t.Logf("recall@10 filter %v: %.3f", filter, r)
		if r < 0.9 {
			t.Errorf("recall@10 with filter %v = %.3f, want >= 0.9", filter, r)
		}
	}
}

// recallAt10 returns the share of the exact top 10 that approximate search finds, over the queries.
func recallAt10(tb testing.TB, ix *Index, qs []Query, filter map[string]string) float64 {
	tb.Helper()
	found, total := 0, 0
	for _, q := range qs {
		q.Mode, q.TopK, q.Filter = ModeVector, 10, filter
		approx, err := ix.Search(context.Background(), q)
		if err != nil {
			tb.Fatal(err)
		}
		q.Exact = true
		exact, err := ix.Search(context.Background(), q)
		if err != nil {
			tb.Fatal(err)
		}
		in := map[string]bool{}
		for _, r := range approx {
			in[r.Chunk.ID] = true
		}
		for _, r := range exact {
			total++
			if in[r.Chunk.ID] {
				found++
			}
		}
	}
	return float64(found) / float64(total)
}

// TestLatinBase: latinBase's tables hold every letter that decomposes into a Latin letter and accents, of
// all the runes NFKC text can hold.
func TestLatinBase(t *testing.T) {
	t.Parallel()
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) || !norm.NFKC.IsNormalString(string(r)) {
			continue
		}
		if got, want := latinBase(r), decomposedBase(r); got != want {
			t.Errorf("latinBase(%U) = %U, want %U", r, got, want)
		}
	}
	if latinBase('é') != 'e' || latinBase('Ǻ') != 'A' || latinBase('ø') != 'ø' || latinBase('й') != 'й' {
		t.Error("latinBase of é, Ǻ, ø, й")
	}
}

func TestIsLatin(t *testing.T) {
	t.Parallel()
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if got, want := isLatin(r), unicode.Is(unicode.Latin, r); got != want {
			t.Errorf("isLatin(%U) = %v, want %v", r, got, want)
		}
	}
}

// TestNFKCClass: a text whose runes are ASCII or of class nfkcStarter is NFKC, whatever their neighbours;
// a rune of class nfkcSeparator is a separator before and after normalization, next to any rune.
func TestNFKCClass(t *testing.T) {
	if raceEnabled {
		t.Skip("one goroutine's sweep of every code point, 150 s under the race detector: make test runs it without it")
	}
	t.Parallel()
	var n [3]int
	neighbours := []string{"a", "e", "\u1100", "\uAC00", "\u0915", "\u0301", "\u3099", "東", "\uFF21"}
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		class := nfkcClass(r)
		n[class]++
		switch class {
		case nfkcStarter:
			for _, before := range neighbours {
				if s := before + string(r); !norm.NFKC.IsNormalString(s) && norm.NFKC.IsNormalString(before) {
					t.Fatalf("%+q holds %U, of class nfkcStarter, but is not NFKC", s, r)
				}
			}
			for _, after := range []string{"a", "東", "é", "\uAC00"} { // starters
				if s := string(r) + after; !norm.NFKC.IsNormalString(norm.NFKC.String(string(r)) + after) {
					t.Fatalf("%+q holds %U, of class nfkcStarter, but is not NFKC", s, r)
				}
			}
		case nfkcSeparator:
			for _, nb := range neighbours {
				for _, s := range []string{nb + string(r) + nb, string(r) + nb, nb + string(r)} {
					if got, want := Analyze(s), Analyze(norm.NFKC.String(s)); fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("Analyze(%+q) = %q, of its NFKC %q", s, got, want)
					}
				}
			}
		}
	}
	if n[nfkcStarter] < 100000 || n[nfkcSeparator] < 100 || nfkcClass('\uFFFD') != nfkcOther || nfkcClass('\u0301') != nfkcOther ||
		nfkcClass('\uFF21') != nfkcOther || nfkcClass('\u1161') != nfkcOther || nfkcClass('，') != nfkcSeparator || nfkcClass('東') != nfkcStarter {
		t.Fatalf("classes: %v, or a rune's is wrong", n)
	}
}

// TestSearch_TiesByChunkID: chunks of equal scores rank by chunk ID, so that indexes of the same chunks
// added in different orders (as different stores scan them), or with replacements between, rank alike.
func TestSearch_TiesByChunkID(t *testing.T) {
	t.Parallel()
	var chunks []collection.Chunk
	for i := range 12 {
		text := []string{"the same words", "the same words again", "other words"}[i%3]
		chunks = append(chunks, mk(fmt.Sprintf("c%02d", (i*7)%12), fmt.Sprint("d", i), text, []float32{1, float32(i % 2), 0}))
	}
	forward := NewIndex(IndexOptions{})
	if err := forward.Add(chunks...); err != nil {
		t.Fatal(err)
	}
	backward := NewIndex(IndexOptions{})
	// Every chunk once as something else, then the chunks in reverse order: dead slots, other slots.
	for i := len(chunks) - 1; i >= 0; i-- {
		c := chunks[i]
		decoy := c
		decoy.Content, decoy.Vector = "nothing alike", []float32{0, 0, 1}
		if err := backward.Add(decoy); err != nil {
			t.Fatal(err)
		}
		if err := backward.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []Query{
		{Text: "same words", Mode: ModeKeyword}, {Text: "words", Mode: ModeKeyword, TopK: 5},
		{Vector: []float32{1, 0, 0}, Mode: ModeVector}, {Vector: []float32{1, 1, 0}, Mode: ModeVector, TopK: 3},
		{Text: "same", Vector: []float32{1, 0, 0}}, {Text: "words", Vector: []float32{1, 1, 0}, Mode: ModeMMR},
	} {
		a, b := search(t, forward, q), search(t, backward, q)
		if len(a) == 0 || fmt.Sprint(scoresOf(a)) != fmt.Sprint(scoresOf(b)) {
			t.Errorf("%+v:\n%v\nafter other insertions:\n%v", q, scoresOf(a), scoresOf(b))
		}
		for i := 1; i < len(a); i++ {
			if a[i].Score == a[i-1].Score && a[i].Chunk.ID < a[i-1].Chunk.ID && q.Mode != ModeMMR && q.Mode != "" {
				t.Errorf("%+v: a tie not in chunk ID order: %v", q, scoresOf(a))
			}
		}
	}
}

func scoresOf(rs []Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%s %x %x %d %x %d", r.Chunk.ID, math.Float64bits(r.Score), math.Float64bits(r.Keyword), r.KeywordRank, math.Float64bits(r.Vector), r.VectorRank)
	}
	return out
}
