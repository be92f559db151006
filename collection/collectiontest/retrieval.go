package collectiontest

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/embed"
	"github.com/context-loom/loom/retriever"
)

// parityDoc is a document of the retrieval-parity corpus: its chunks' texts and its metadata.
type parityDoc struct {
	id, lang, team string
	texts          []string
}

// parityCorpus is text in several languages and scripts: English with stop words, Japanese and Chinese
// (no spaces), Korean, Russian and German, accented Latin letters composed and decomposed, full-width
// letters, and three documents of the same text (ties in every ranking).
var parityCorpus = []parityDoc{
	{"paris", "en", "geo", []string{"Paris is the capital of France.", "The Louvre is in Paris, and the café culture is famous."}},
	{"tokyo", "ja", "geo", []string{"東京（ＴＯＫＹＯ）は日本の首都です。", "東京タワーは有名です。"}},
	{"kyoto", "ja", "geo", []string{"京都には古い寺がたくさんあります。"}},
	{"beijing", "zh", "geo", []string{"北京是中国的首都。"}},
	{"seoul", "ko", "geo", []string{"서울은 한국의 수도입니다."}},
	{"moscow", "ru", "geo", []string{"Москва — столица России. Привет!"}},
	{"berlin", "de", "geo", []string{"Berlin ist die Hauptstadt Deutschlands.", "Die Straße ist lang und die Bäume sind grün."}},
	{"cafe-nfd", "fr", "food", []string{"Le cafe\u0301 est bon, l'art nai\u0308f aussi."}},
	{"cafe-plain", "en", "food", []string{"A cafe on the corner sells naive art and coffee."}},
	{"fruit-1", "en", "food", []string{"The kumquat is a small citrus fruit."}},
	{"fruit-2", "en", "food", []string{"The kumquat is a small citrus fruit."}},
	{"fruit-3", "en", "food", []string{"The kumquat is a small citrus fruit."}},
	{"stop", "en", "misc", []string{"It is what it is, and that is that: to be or not to be."}},
}

// parityQueries are run in every mode that applies, with and without filters.
var parityQueries = []struct {
	text   string
	mode   string
	filter map[string]string
	topK   int
	min    float64
}{
	{text: "capital", mode: retriever.ModeKeyword},
	{text: "the capital of France", mode: retriever.ModeKeyword},
	{text: "首都", mode: retriever.ModeKeyword},
	{text: "東京", mode: retriever.ModeKeyword},
	{text: "古い寺", mode: retriever.ModeKeyword},
	{text: "tokyo", mode: retriever.ModeKeyword},
	{text: "cafe", mode: retriever.ModeKeyword},
	{text: "CAFÉ", mode: retriever.ModeKeyword},
	{text: "cafe\u0301 naive", mode: retriever.ModeKeyword},
	{text: "strasse straße", mode: retriever.ModeKeyword},
	{text: "привет", mode: retriever.ModeKeyword},
	{text: "한국의 수도입니다", mode: retriever.ModeKeyword},
	{text: "kumquat", mode: retriever.ModeKeyword},
	{text: "kumquat", mode: retriever.ModeKeyword, topK: 2},
	{text: "the of and to be", mode: retriever.ModeKeyword},
	{text: "capital of France", mode: retriever.ModeVector},
	{text: "日本の首都", mode: retriever.ModeVector},
	{text: "small citrus fruit", mode: retriever.ModeVector, topK: 4},
	{text: "capital", mode: retriever.ModeHybrid},
	{text: "首都 Tokyo", mode: retriever.ModeHybrid},
	{text: "café culture", mode: retriever.ModeHybrid, min: 0.3},
	{text: "citrus fruit", mode: retriever.ModeMMR, topK: 3},
	{text: "首都", mode: retriever.ModeKeyword, filter: map[string]string{"lang": "ja"}},
	{text: "東京 首都", mode: retriever.ModeHybrid, filter: map[string]string{"team": "geo", "lang": "zh"}},
	{text: "cafe", mode: retriever.ModeHybrid, filter: map[string]string{retriever.FilterDocumentID: "cafe-nfd"}},
	{text: "Paris", mode: retriever.ModeKeyword, filter: map[string]string{"section": "1"}},
	{text: "kumquat", mode: retriever.ModeVector, filter: map[string]string{"team": "food"}},
	{text: "kumquat", mode: retriever.ModeKeyword, filter: map[string]string{"lang": "xx"}},
}

// parityChunks returns the corpus's documents and chunks in collection collID, with Lexical vectors.
func parityChunks(t *testing.T, collID string) ([]loom.Document, [][]collection.Chunk) {
	t.Helper()
	docs := make([]loom.Document, len(parityCorpus))
	chunks := make([][]collection.Chunk, len(parityCorpus))
	for i, pd := range parityCorpus {
		vecs, err := embed.Default().Embed(t.Context(), pd.texts)
		check(t, err)
		meta := map[string]string{"lang": pd.lang, "team": pd.team, "source": pd.id + ".txt"}
		off := 0
		for j, text := range pd.texts {
			chunks[i] = append(chunks[i], collection.Chunk{Chunk: loom.Chunk{ID: fmt.Sprintf("%s#%d", pd.id, j), DocumentID: pd.id, Content: text,
				Index: j, StartOffset: off, EndOffset: off + len(text), TokenCount: len(text) / 4, Metadata: map[string]string{"section": fmt.Sprint(j)}},
				Vector: vecs[j], DocumentMetadata: meta})
			off += len(text) + 1
		}
		docs[i] = loom.Document{ID: pd.id, CollectionID: collID, Source: pd.id + ".txt", ContentType: "text", Hash: "h-" + pd.id,
			Bytes: off, Chunks: len(pd.texts), Metadata: meta}
	}
	return docs, chunks
}

// testRetrievalParity: an index of the chunks the store gives back ranks every query (English, Chinese
// and Japanese, accented letters, stop words, metadata filters; keyword, vector, hybrid and MMR) exactly as
// an index of the chunks given to the store: the same chunks, with the same text, offsets and metadata, in
// the same order, with bit-identical scores. The store is written to in an order of its own (documents
// replaced, one deleted, another tenant's collection of the same id beside), so that its scan order is
// not the reference's: every store's index of a collection ranks as every other store's does.
func testRetrievalParity(t *testing.T, s collection.Store) {
	ctx := t.Context()
	c := create(t, s, tenant, "parity")
	docs, chunks := parityChunks(t, c.ID)

	// Another tenant's collection of the same id and name, with the same words many times over: its
	// chunks must not count in the statistics of this one.
	other, err := s.CreateCollection(ctx, "globex", loom.Collection{ID: c.ID, Name: "parity"})
	check(t, err)
	for i := range 5 {
		text := strings.Repeat("capital 首都 cafe kumquat ", i+1)
		d := loom.Document{ID: fmt.Sprint("noise-", i), CollectionID: other.ID, Hash: "h", Chunks: 1}
		_, err := s.PutDocument(ctx, "globex", d, []collection.Chunk{{Chunk: loom.Chunk{ID: d.ID + "#0", DocumentID: d.ID, Content: text}}})
		check(t, err)
	}
	// Backwards, each document first with other text, then as it is; and one document put and deleted.
	for i := len(docs) - 1; i >= 0; i-- {
		old := docs[i]
		old.Hash = "old"
		stale := slices.Clone(chunks[i])
		for j := range stale {
			stale[j].Content = "stale text about capital cities"
		}
		_, err := s.PutDocument(ctx, tenant, old, stale)
		check(t, err)
		_, err = s.PutDocument(ctx, tenant, docs[i], chunks[i])
		check(t, err)
	}
	gone := loom.Document{ID: "gone", CollectionID: c.ID, Hash: "h", Chunks: 1}
	_, err = s.PutDocument(ctx, tenant, gone, []collection.Chunk{{Chunk: loom.Chunk{ID: "gone#0", DocumentID: "gone", Content: "capital kumquat 首都"}}})
	check(t, err)
	check(t, s.DeleteDocument(ctx, tenant, c.ID, "gone"))

	want := retriever.NewIndex(retriever.IndexOptions{})
	check(t, want.Add(slices.Concat(chunks...)...))
	got := retriever.NewIndex(retriever.IndexOptions{})
	check(t, s.ScanChunks(ctx, tenant, c.ID, func(ch collection.Chunk) error { return got.Add(ch) }))
	if got.Len() != want.Len() {
		t.Fatalf("the store's index holds %d chunks, want %d", got.Len(), want.Len())
	}

	results := map[string][]retriever.Result{}
	for _, pq := range parityQueries {
		q := retriever.Query{Text: pq.text, Mode: pq.mode, Filter: pq.filter, TopK: pq.topK, MinScore: pq.min}
		if pq.mode != retriever.ModeKeyword {
			vs, err := embed.Default().Embed(ctx, []string{pq.text})
			check(t, err)
			q.Vector = vs[0]
		}
		name := fmt.Sprintf("%s %q %v top %d min %v", pq.mode, pq.text, pq.filter, pq.topK, pq.min)
		wantRs, err := want.Search(ctx, q)
		check(t, err)
		gotRs, err := got.Search(ctx, q)
		check(t, err)
		if w, g := resultLines(wantRs), resultLines(gotRs); w != g {
			t.Errorf("%s: the store's chunks rank\n%s\nthe chunks given rank\n%s", name, g, w)
		}
		if pq.topK == 0 {
			results[pq.mode+" "+pq.text+" "+fmt.Sprint(pq.filter)] = wantRs
		}
	}

	// What the queries find, so that the parity is of rankings that find what they should.
	docsOf := func(key string) []string {
		var out []string
		for _, r := range results[key] {
			out = append(out, r.Chunk.DocumentID)
		}
		return out
	}
	for key, wantDocs := range map[string][]string{
		"keyword 首都 map[]":                      {"tokyo", "beijing", "kyoto"}, // 京都 holds 都
		"keyword 古い寺 map[]":                     {"kyoto"},
		"keyword tokyo map[]":                   {"tokyo"},
		"keyword cafe map[]":                    {"cafe-nfd", "cafe-plain", "paris"},
		"keyword CAFÉ map[]":                    {"cafe-nfd", "cafe-plain", "paris"},
		"keyword привет map[]":                  {"moscow"},
		"keyword 한국의 수도입니다 map[]":               {"seoul"},
		"keyword the of and to be map[]":        nil,
		"keyword kumquat map[]":                 {"fruit-1", "fruit-2", "fruit-3"},
		"keyword 首都 map[lang:ja]":               {"tokyo", "kyoto"},
		"keyword Paris map[section:1]":          {"paris"},
		"keyword kumquat map[lang:xx]":          nil,
		"hybrid cafe map[document_id:cafe-nfd]": {"cafe-nfd"},
	} {
		if _, ok := results[key]; !ok {
			t.Fatalf("no query %q", key)
		}
		got := docsOf(key)
		sorted := slices.Sorted(slices.Values(got))
		if fmt.Sprint(sorted) != fmt.Sprint(slices.Sorted(slices.Values(wantDocs))) {
			t.Errorf("%s: found %v, want %v", key, got, wantDocs)
		}
	}
	if got := docsOf("keyword 首都 map[]"); len(got) != 3 || got[2] != "kyoto" {
		t.Errorf("keyword 首都: %v, want the two capitals before kyoto", got)
	}
	if got := docsOf("keyword strasse straße map[]"); len(got) != 1 || got[0] != "berlin" {
		t.Errorf("keyword straße: %v, want berlin (ß is not folded to ss, but straße matches)", got)
	}
	for _, r := range results["keyword 首都 map[lang:ja]"] {
		if r.Chunk.Metadata["lang"] != "ja" {
			t.Errorf("filter lang=ja returned %s (%v)", r.Chunk.ID, r.Chunk.Metadata)
		}
	}
}

// resultLines renders results one a line with everything a result holds, every float as its bits.
func resultLines(rs []retriever.Result) string {
	var b strings.Builder
	for _, r := range rs {
		c := r.Chunk
		keys := slices.Sorted(maps.Keys(c.Metadata))
		meta := make([]string, len(keys))
		for i, k := range keys {
			meta[i] = k + "=" + c.Metadata[k]
		}
		fmt.Fprintf(&b, "%d %s doc=%s idx=%d [%d,%d) tokens=%d %q {%s} %s score=%.6g(%x) keyword=%x#%d vector=%x#%d\n", r.Rank, c.ID, c.DocumentID,
			c.Index, c.StartOffset, c.EndOffset, c.TokenCount, c.Content, strings.Join(meta, " "), r.Kind, r.Score, math.Float64bits(r.Score),
			math.Float64bits(r.Keyword), r.KeywordRank, math.Float64bits(r.Vector), r.VectorRank)
	}
	return b.String()
}
