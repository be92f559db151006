package engine

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/chunker"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/embed"
	"github.com/context-loom/loom/ingest"
	"github.com/context-loom/loom/retriever"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/tokenizer"
)

// Collection defaults, applied to a collection's zero fields when it is created (as Weave's chunker documentation gives them): the chunker's
// defaults, under the names Weave's engine gives them. A zero ChunkOverlap takes DefaultChunkOverlap, or a
// fifth of the chunk size when that is smaller (an overlap of 50 would be most of a 64-token chunk); a
// negative one means no overlap.
const (
	DefaultChunkSize    = chunker.DefaultChunkSize    // 512
	DefaultChunkOverlap = chunker.DefaultChunkOverlap // 50
	// StrategyAuto chunks each document by its kind: Markdown and HTML (extracted as Markdown) by their
	// sections, source code with the "code" strategy of the engine's registry (by its syntax where the
	// tree-sitter chunker of chunker/code is registered, see WithChunkers; else as plain text, each chunk
	// saying so), plain text with the recursive chunker. It is the strategy of a collection that names
	// none, unless WithChunker set a custom default.
	StrategyAuto = "auto"
	// StrategyCustom is the name under which WithChunker registers its chunker.
	StrategyCustom = "custom"
)

// Limits on what ingestion makes, so that one request cannot make millions of chunks.
const (
	// MinChunkSize is the smallest chunk size, in tokens, a collection may have.
	MinChunkSize = 16
	// DefaultMaxDocumentChunks is how many chunks one document may make (see WithMaxDocumentChunks): at the
	// default chunk size about 40 MB of text.
	DefaultMaxDocumentChunks = 20_000
)

// WithMaxDocumentChunks sets how many chunks one document may make; ingesting one that makes more fails
// with an error wrapping store.ErrTooLarge (the server's 413). 0 or less means DefaultMaxDocumentChunks.
func WithMaxDocumentChunks(n int) Option {
	return func(e *Engine) error {
		e.maxDocChunks = n
		return nil
	}
}

// ErrNoCollections is returned by the collection methods when the engine's store keeps no collections.
var ErrNoCollections = loom.NewError(loom.ErrUnsupported, "engine: the store keeps no collections")

// WithChunker registers c as the engine's custom chunker: collections created without a ChunkStrategy use
// it (their strategy is stored as "custom"), as Weave's chunker documentation promises. Without it, such
// collections chunk each document by its kind (StrategyAuto).
func WithChunker(c chunker.Chunker) Option {
	return WithNamedChunker(StrategyCustom, c)
}

// WithNamedChunker registers c under name in the engine's registry of chunkers (see WithChunkers), for
// collections whose ChunkStrategy is name. Registering StrategyCustom makes it the default of new
// collections. The name must be its own: not auto nor a built-in strategy (to put a chunker of your own in
// place of a built-in one, such as the tree-sitter chunker of package chunker/code for "code", register it
// in the registry given to WithChunkers).
func WithNamedChunker(name string, c chunker.Chunker) Option {
	return func(e *Engine) error {
		if c == nil || name == "" || name == StrategyAuto || slices.Contains(chunker.Strategies(), name) {
			return fmt.Errorf("%w: a chunker needs a name of its own (not auto or a built-in strategy) and a value", ErrInvalidRequest)
		}
		e.named = append(e.named, namedChunker{name, c})
		return nil
	}
}

// namedChunker is a chunker WithNamedChunker registers once the options are applied.
type namedChunker struct {
	name string
	c    chunker.Chunker
}

// WithChunkers makes r the engine's registry of chunkers, which resolves the collections' chunk strategies
// (chunker.NewRegistry() when it is not given); WithChunker and WithNamedChunker register in it. Its "code"
// strategy chunks the code documents of StrategyAuto: chunker.NewRegistry's chunks code as plain text (and
// says so in each chunk's metadata: "parse" "fallback", "parse_reason" "unavailable"); register
// chunker/code's tree-sitter chunker in r in its place to have code parsed.
func WithChunkers(r *chunker.Registry) Option {
	return func(e *Engine) error {
		if r == nil {
			return fmt.Errorf("%w: nil registry of chunkers", ErrInvalidRequest)
		}
		e.chunkers = r
		return nil
	}
}

// Chunkers returns the engine's registry of chunkers (see WithChunkers).
func (e *Engine) Chunkers() *chunker.Registry { return e.chunkers }

// autoStrategy is the strategy StrategyAuto chunks d with: by its kind, the sections of Markdown and HTML
// (whose Text is Markdown), the syntax of code (with Metadata["language"] as the language), and plain text
// with the recursive strategy.
func autoStrategy(d ingest.Document) string {
	switch d.ContentType {
	case ingest.TypeMarkdown, ingest.TypeHTML:
		return chunker.Markdown
	case ingest.TypeCode:
		return chunker.Code
	default:
		return chunker.Recursive
	}
}

// WithEmbedder registers emb under its Name; the first one registered (or embed.Default() when none is)
// is the default of new collections. Every engine also knows the first version of the lexical embedder
// (embed.NewLexicalV1(0), "lexical-384"), the default of collections made before "lexical2-384", so that
// they keep working; a collection of another embedder needs it registered under its name.
func WithEmbedder(emb embed.Embedder) Option {
	return func(e *Engine) error {
		if emb == nil || emb.Name() == "" {
			return fmt.Errorf("%w: an embedder needs a name", ErrInvalidRequest)
		}
		if e.defaultEmbedder == "" {
			e.defaultEmbedder = emb.Name()
		}
		e.embedders[emb.Name()] = emb
		return nil
	}
}

// WithIndexOptions sets the options of the in-memory search indexes (HNSW threshold, M, ef).
func WithIndexOptions(o retriever.IndexOptions) Option {
	return func(e *Engine) error {
		e.indexOpts = o
		return nil
	}
}

// collections returns the store's collection store.
func (e *Engine) collections() (collection.Store, error) {
	if e.colls == nil {
		return nil, ErrNoCollections
	}
	return e.colls, nil
}

// CreateCollection creates a collection for the context's tenant (loom.WithTenant), with zero fields set to
// the defaults, and returns it. It returns collection.ErrExists for a name in use, and errors wrapping
// ErrInvalidRequest for settings no chunker or embedder here can use and for fusion weights that are
// negative, NaN, infinite, or both 0 once the unset one takes its default (wrapping
// loom.ErrInvalidFusionWeights too). Unset fusion weights stay unset: they follow the defaults.
func (e *Engine) CreateCollection(ctx context.Context, c loom.Collection) (loom.Collection, error) {
	cs, err := e.collections()
	if err != nil {
		return loom.Collection{}, err
	}
	if c.ChunkStrategy == "" {
		c.ChunkStrategy = StrategyAuto
		if _, err := e.chunkers.Lookup(StrategyCustom); err == nil {
			c.ChunkStrategy = StrategyCustom
		}
	}
	if c.ChunkSize == 0 {
		c.ChunkSize = DefaultChunkSize
	}
	switch {
	case c.ChunkOverlap == 0:
		c.ChunkOverlap = min(DefaultChunkOverlap, c.ChunkSize/5)
	case c.ChunkOverlap < 0:
		c.ChunkOverlap = 0 // asked for none
	}
	if c.Embedder == "" {
		c.Embedder = e.defaultEmbedder
	}
	switch {
	case c.ChunkSize < MinChunkSize:
		return loom.Collection{}, fmt.Errorf("%w: chunk size %d is below the least, %d tokens", ErrInvalidRequest, c.ChunkSize, MinChunkSize)
	case c.ChunkOverlap >= c.ChunkSize:
		return loom.Collection{}, fmt.Errorf("%w: chunk overlap %d must be smaller than the chunk size %d", ErrInvalidRequest, c.ChunkOverlap, c.ChunkSize)
	case c.ChunkStrategy != StrategyAuto && !slices.Contains(e.chunkers.Strategies(), c.ChunkStrategy):
		return loom.Collection{}, fmt.Errorf("%w: unknown chunk strategy %q (known: auto, %s)", ErrInvalidRequest, c.ChunkStrategy, strings.Join(e.chunkers.Strategies(), ", "))
	case e.embedders[c.Embedder] == nil:
		return loom.Collection{}, fmt.Errorf("%w: unknown embedder %q (register it with WithEmbedder)", ErrInvalidRequest, c.Embedder)
	}
	if _, err := fusionWeights(nil, nil, c, e.embedders[c.Embedder]); err != nil {
		return loom.Collection{}, err
	}
	created, err := cs.CreateCollection(ctx, loom.Tenant(ctx), c)
	if err != nil {
		return loom.Collection{}, err
	}
	// An index still loaded under the id is of a collection the store lost (a server restarted without
	// persistence): the new collection is empty.
	e.dropIndex(loom.Tenant(ctx), created.ID)
	return created, nil
}

// SetFusionWeights sets the fusion weights of the tenant's collection (by id or name), the weights of its
// keyword and vector rankings in hybrid and mmr retrieval (see loom.FusionWeights), and returns the
// collection: both weights, nil putting one back to its default (1 for the keywords, the embedder's for
// the vectors). The next retrieval uses them, on every engine over the store. Weights that are negative,
// NaN, infinite, or both 0 once defaults are applied, are refused with an error wrapping
// ErrInvalidRequest and loom.ErrInvalidFusionWeights.
func (e *Engine) SetFusionWeights(ctx context.Context, idOrName string, keyword, vector *float64) (loom.Collection, error) {
	c, err := e.Collection(ctx, idOrName)
	if err != nil {
		return loom.Collection{}, err
	}
	c.KeywordWeight, c.VectorWeight = keyword, vector
	if _, err := fusionWeights(nil, nil, c, e.embedders[c.Embedder]); err != nil {
		return loom.Collection{}, err
	}
	return e.colls.SetFusionWeights(ctx, loom.Tenant(ctx), c.ID, keyword, vector)
}

// Collection returns the tenant's collection with the id, or else the name, idOrName.
func (e *Engine) Collection(ctx context.Context, idOrName string) (loom.Collection, error) {
	cs, err := e.collections()
	if err != nil {
		return loom.Collection{}, err
	}
	return cs.GetCollection(ctx, loom.Tenant(ctx), idOrName)
}

// Collections returns the tenant's collections ordered by name.
func (e *Engine) Collections(ctx context.Context) ([]loom.Collection, error) {
	cs, err := e.collections()
	if err != nil {
		return nil, err
	}
	return cs.ListCollections(ctx, loom.Tenant(ctx))
}

// DeleteCollection deletes the tenant's collection (by id or name), its documents, chunks and index.
func (e *Engine) DeleteCollection(ctx context.Context, idOrName string) error {
	c, err := e.Collection(ctx, idOrName)
	if err != nil {
		return err
	}
	tenant := loom.Tenant(ctx)
	if err := e.colls.DeleteCollection(ctx, tenant, c.ID); err != nil {
		return err
	}
	e.dropIndex(tenant, c.ID)
	return nil
}

// IngestResult says what ingesting one document did.
type IngestResult struct {
	DocumentID string `json:"document_id"`
	Source     string `json:"source,omitempty"`
	// Changed is false when the document was stored before with the same content and settings: nothing
	// was chunked, embedded or written.
	Changed bool `json:"changed"`
	Chunks  int  `json:"chunks"`
	Bytes   int  `json:"bytes"`
}

// Ingest chunks, embeds and stores documents in the collection (by id or name), each replacing the
// document of the same ID with its old chunks, and makes them retrievable at once. A document whose bytes and
// the collection's settings are unchanged is left as it is (IngestResult.Changed false). A document whose
// metadata is over the store's default limits (store.DefaultMaxMetadataBytes, DefaultMaxMetadataKeys) is
// refused with an error wrapping store.ErrTooLarge before it is chunked. The document's metadata is stored
// once; each chunk keeps the chunker's own (its heading path, say), and is retrieved with both. A
// collection built with another embedder than the engine has, or whose vectors have other dimensions than
// the embedder's, is refused an ingest, unchanged documents included, with an *EmbedderMismatchError.
func (e *Engine) Ingest(ctx context.Context, collectionID string, docs ...ingest.Document) ([]IngestResult, error) {
	coll, err := e.Collection(ctx, collectionID)
	if err != nil {
		return nil, err
	}
	out := make([]IngestResult, 0, len(docs))
	for _, d := range docs {
		r, err := e.ingestOne(ctx, coll, d)
		if err != nil {
			return out, fmt.Errorf("ingest %s: %w", d.ID, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// IngestText ingests text as a document of the given content type ("text", "markdown", "html" or "code";
// "" detects it from source and the text, see ingest.Read), with id (or source, or the text's hash, when
// empty). A type given is the document's, whatever source's extension or the text's first bytes: a
// "notes.md" given as text is text (see ingest.ReadAs). The metadata is the
// document's, beside what ingestion finds (its source, title, format, ...): all of it within the store's
// default limits (store.DefaultMaxMetadataBytes and DefaultMaxMetadataKeys), or an error wrapping
// store.ErrTooLarge before anything is read.
func (e *Engine) IngestText(ctx context.Context, collectionID, id, source, contentType, text string, metadata map[string]string) (IngestResult, error) {
	if err := store.ValidateMetadata(store.Limits{}, fmt.Sprintf("document %q", cmp.Or(id, source)), metadata); err != nil {
		return IngestResult{}, err
	}
	d, err := ingest.ReadAs(cmp.Or(source, id), contentType, []byte(text))
	if err != nil {
		return IngestResult{}, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	d.Source = source
	if source != "" {
		d.Metadata["source"] = source
	} else {
		delete(d.Metadata, "source")
	}
	d.ID = id
	if d.ID == "" {
		d.ID = source
	}
	if d.ID == "" {
		d.ID = d.Hash[:16]
	}
	for k, v := range metadata {
		d.Metadata[k] = v
	}
	rs, err := e.Ingest(ctx, collectionID, d)
	if err != nil {
		return IngestResult{}, err
	}
	return rs[0], nil
}

// settingsHash is the hash a document is stored with: its bytes and everything that shapes its chunks and
// vectors, so that re-ingesting it after a change of settings re-chunks it. That includes the chunker ck of
// the strategy, when it is not the built-in one of its name (the tree-sitter code chunker in place of the
// plain-text one, say): the same bytes ingested again by a build that parses code are parsed.
func settingsHash(coll loom.Collection, d ingest.Document, strategy string, ck chunker.Chunker) string {
	h := sha256.New()
	for _, s := range []string{"loom-ingest-v1", d.Hash, strategy, strconv.Itoa(coll.ChunkSize), strconv.Itoa(coll.ChunkOverlap), coll.Embedder, d.Metadata["language"]} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	if builtin, err := chunker.New(strategy); err == nil && reflect.TypeOf(builtin) != reflect.TypeOf(ck) {
		fmt.Fprintf(h, "chunker=%T\x00", ck)
	}
	keys := slices.Sorted(maps.Keys(d.Metadata))
	for _, k := range keys {
		h.Write([]byte(k + "=" + d.Metadata[k] + "\x00"))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func (e *Engine) ingestOne(ctx context.Context, coll loom.Collection, d ingest.Document) (IngestResult, error) {
	tenant := loom.Tenant(ctx)
	// Before any work, an unchanged document's included: vectors of another embedder are never mixed in.
	emb, err := e.embedderOf(coll)
	if err == nil {
		err = checkDimensions(coll, emb, emb.Dimensions()) // when it knows them; else after the embedding
	}
	if err != nil {
		return IngestResult{}, err
	}
	if err := store.ValidateID(store.Limits{}, "document", d.ID); err != nil {
		return IngestResult{}, err
	}
	// Before any work: what the store would refuse after the chunking and the embedding.
	if err := store.ValidateMetadata(store.Limits{}, fmt.Sprintf("document %q", d.ID), d.Metadata); err != nil {
		return IngestResult{}, err
	}
	strategy := coll.ChunkStrategy
	if strategy == StrategyAuto {
		strategy = autoStrategy(d)
	}
	ck, lookupErr := e.chunkers.Lookup(strategy) // an error once the document is known to have changed
	hash := settingsHash(coll, d, strategy, ck)
	res := IngestResult{DocumentID: d.ID, Source: d.Source, Bytes: len(d.Text)}
	if old, err := e.colls.GetDocument(ctx, tenant, coll.ID, d.ID); err == nil && old.Hash == hash {
		res.Chunks = old.Chunks
		return res, nil
	}
	if lookupErr != nil {
		return IngestResult{}, fmt.Errorf("%w: %w", ErrInvalidRequest, lookupErr)
	}
	opts := &chunker.Options{ChunkSize: coll.ChunkSize, ChunkOverlap: coll.ChunkOverlap, Counter: tokenizer.CL100K()}
	if strategy == chunker.Code {
		opts.Language = d.Metadata["language"]
	}
	if coll.ChunkOverlap == 0 {
		opts.NoOverlap = true
	}
	// The chunker stops as soon as the document passes the limit (a custom chunker may not: the check
	// after it stays).
	limit := cmp.Or(max(e.maxDocChunks, 0), DefaultMaxDocumentChunks)
	opts.MaxChunks = limit
	pieces, err := ck.Chunk(ctx, d.Text, opts)
	if errors.Is(err, chunker.ErrTooManyChunks) {
		return IngestResult{}, fmt.Errorf("%w: document %q makes more than %d chunks (use a larger chunk size)", store.ErrTooLarge, d.ID, limit)
	}
	if err != nil {
		return IngestResult{}, err
	}
	if len(pieces) > limit {
		return IngestResult{}, fmt.Errorf("%w: document %q makes %d chunks, more than the limit of %d (use a larger chunk size)",
			store.ErrTooLarge, d.ID, len(pieces), limit)
	}
	texts := make([]string, len(pieces))
	for i, p := range pieces {
		texts[i] = p.Content
	}
	vectors, err := embedAll(ctx, emb, texts)
	if err != nil {
		return IngestResult{}, fmt.Errorf("embed: %w", err)
	}
	if len(vectors) > 0 {
		if err := checkDimensions(coll, emb, len(vectors[0])); err != nil {
			return IngestResult{}, err
		}
	}
	// Each chunk has the chunker's metadata (its heading path, say), and the document's once for all: the
	// store keeps that once, the index too, and both show a chunk the whole.
	chunks := make([]collection.Chunk, len(pieces))
	for i, p := range pieces {
		chunks[i] = collection.Chunk{Chunk: loom.Chunk{ID: d.ID + "#" + strconv.Itoa(p.Index), DocumentID: d.ID, Content: p.Content,
			Index: p.Index, StartOffset: p.StartOffset, EndOffset: p.EndOffset, TokenCount: p.TokenCount, Metadata: p.Metadata},
			Vector: vectors[i], DocumentMetadata: d.Metadata}
	}
	doc := loom.Document{ID: d.ID, CollectionID: coll.ID, Source: d.Source, ContentType: d.ContentType, Hash: hash,
		Bytes: len(d.Text), Chunks: len(chunks), Metadata: d.Metadata}
	changed, err := e.colls.PutDocument(ctx, tenant, doc, chunks)
	if err != nil {
		return IngestResult{}, err
	}
	res.Changed, res.Chunks = changed, len(chunks)
	if changed {
		e.indexPut(tenant, coll.ID, d.ID, chunks)
	}
	return res, nil
}

// embedAll embeds a document's chunks in one call: the embedder owns its batching (an embed.OpenAI sends
// requests of its BatchSize), so the engine does not cut the texts into batches of its own.
func embedAll(ctx context.Context, emb embed.Embedder, texts []string) ([][]float32, error) {
	out, err := emb.Embed(ctx, texts)
	if err != nil {
		return nil, err
	}
	if len(out) != len(texts) {
		return nil, fmt.Errorf("the embedder returned %d vectors for %d texts", len(out), len(texts))
	}
	return out, nil
}

// DeleteDocument deletes a document and its chunks from the collection (by id or name).
func (e *Engine) DeleteDocument(ctx context.Context, collectionID, documentID string) error {
	coll, err := e.Collection(ctx, collectionID)
	if err != nil {
		return err
	}
	tenant := loom.Tenant(ctx)
	if err := e.colls.DeleteDocument(ctx, tenant, coll.ID, documentID); err != nil {
		return err
	}
	e.indexDelete(tenant, coll.ID, documentID)
	return nil
}

// Documents returns the collection's documents.
func (e *Engine) Documents(ctx context.Context, collectionID string) ([]loom.Document, error) {
	coll, err := e.Collection(ctx, collectionID)
	if err != nil {
		return nil, err
	}
	return e.colls.ListDocuments(ctx, loom.Tenant(ctx), coll.ID)
}

// RetrieveOption configures Retrieve.
type RetrieveOption func(*retrieveConfig)

type retrieveConfig struct {
	collection string
	q          retriever.Query
	// The query's own fusion weights, nil where it sets none.
	keywordWeight, vectorWeight *float64
}

// WithCollection names the collection (by id or name) to retrieve from. Required.
func WithCollection(id string) RetrieveOption { return func(c *retrieveConfig) { c.collection = id } }

// WithTopK sets how many results to return (default 10).
func WithTopK(k int) RetrieveOption { return func(c *retrieveConfig) { c.q.TopK = k } }

// WithMinScore drops results less relevant than s, relevance meaning the same in every mode (see
// retriever.Query.MinScore): the score of the mode's ranking (BM25 in keyword mode, cosine similarity in
// vector mode, the fused score in hybrid and mmr mode) relative to the best result's, from 0 to 1. So 0.5
// keeps the results at least half as good as the best, and the best is always kept.
func WithMinScore(s float64) RetrieveOption { return func(c *retrieveConfig) { c.q.MinScore = s } }

// WithMode sets the retrieval mode: "hybrid" (BM25 and vectors fused by the weighted mean of their
// relevances, the default), "keyword", "vector" or "mmr" (hybrid candidates, duplicates removed, re-ranked
// for diversity).
func WithMode(m string) RetrieveOption { return func(c *retrieveConfig) { c.q.Mode = m } }

// WithFilter keeps only chunks whose metadata has every key with the given value ("document_id" matches
// the chunk's document).
func WithFilter(f map[string]string) RetrieveOption {
	return func(c *retrieveConfig) { c.q.Filter = f }
}

// WithMMRLambda weighs relevance against diversity in mmr mode (0..1, default retriever.DefaultMMRLambda,
// 0.7).
func WithMMRLambda(l float64) RetrieveOption { return func(c *retrieveConfig) { c.q.MMRLambda = l } }

// WithKeywordWeight sets the weight of the keyword ranking in hybrid and mmr mode, in place of the
// collection's (loom.Collection.KeywordWeight), or else the default 1. See loom.FusionWeights.
func WithKeywordWeight(w float64) RetrieveOption {
	return func(c *retrieveConfig) { c.keywordWeight = &w }
}

// WithVectorWeight sets the weight of the vector ranking in hybrid and mmr mode, in place of the
// collection's (loom.Collection.VectorWeight), or else its embedder's (embed.FusionWeight). See
// loom.FusionWeights.
func WithVectorWeight(w float64) RetrieveOption {
	return func(c *retrieveConfig) { c.vectorWeight = &w }
}

// fusionWeights resolves the weights of a retrieval from coll with embedder emb, each weight the query's
// (kw, vec) if set, else the collection's, else the default (1 for the keywords, embed.FusionWeight(emb)
// for the vectors). It returns an error wrapping ErrInvalidRequest and loom.ErrInvalidFusionWeights for a
// weight that is negative, NaN or infinite, or a pair that is both 0, naming where each weight came from.
func fusionWeights(kw, vec *float64, coll loom.Collection, emb embed.Embedder) (loom.FusionWeights, error) {
	w := loom.FusionWeights{Keyword: 1, Vector: embed.DefaultFusionWeight}
	if emb != nil {
		w.Vector = embed.FusionWeight(emb)
	}
	from := [2]string{"the default", "the embedder's"}
	for i, f := range []struct {
		query, coll *float64
		dst         *float64
	}{{kw, coll.KeywordWeight, &w.Keyword}, {vec, coll.VectorWeight, &w.Vector}} {
		switch {
		case f.query != nil:
			*f.dst, from[i] = *f.query, "the query's"
		case f.coll != nil:
			*f.dst, from[i] = *f.coll, "the collection's"
		}
	}
	if err := w.Validate(); err != nil {
		return w, fmt.Errorf("%w: %w (the keyword weight is %s, the vector weight %s)", ErrInvalidRequest, err, from[0], from[1])
	}
	return w, nil
}

// Retrieval modes.
const (
	ModeHybrid  = retriever.ModeHybrid
	ModeKeyword = retriever.ModeKeyword
	ModeVector  = retriever.ModeVector
	ModeMMR     = retriever.ModeMMR
)

// MaxTopK bounds WithTopK: a retrieval asking for more is refused with ErrInvalidRequest.
const MaxTopK = 1000

// Retrieve returns the chunks of a collection most relevant to query, best first, for the context's tenant.
// Each result's Chunk keeps its id, document id, offsets and metadata (with "source"); its Kind says what
// its Score is. Hybrid and mmr retrieval fuse the keyword and vector rankings with the query's weights
// (WithKeywordWeight, WithVectorWeight), else the collection's, else the defaults (see loom.FusionWeights).
// Settings that retriever.Query.Validate refuses, and a TopK over MaxTopK, are refused with an error
// wrapping ErrInvalidRequest (and retriever.ErrInvalidQuery for the former), and so are fusion weights
// that are negative, NaN, infinite or both 0 (wrapping loom.ErrInvalidFusionWeights too). A retrieval in
// any mode but keyword from a collection built with another embedder than the engine has, or whose vectors
// have other dimensions than the query's, is refused with an *EmbedderMismatchError (ErrEmbedderMismatch).
func (e *Engine) Retrieve(ctx context.Context, query string, opts ...RetrieveOption) ([]retriever.Result, error) {
	var cfg retrieveConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.collection == "" {
		return nil, fmt.Errorf("%w: retrieve needs a collection (engine.WithCollection)", ErrInvalidRequest)
	}
	// The query's settings are the retriever's to check (before the query is embedded); the engine bounds
	// only what one retrieval may cost.
	if err := cfg.q.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if cfg.q.TopK > MaxTopK {
		return nil, fmt.Errorf("%w: top_k %d is over the limit of %d", ErrInvalidRequest, cfg.q.TopK, MaxTopK)
	}
	if len(query) > store.DefaultMaxValueBytes {
		return nil, fmt.Errorf("%w: the query is %d bytes", store.ErrTooLarge, len(query))
	}
	coll, err := e.Collection(ctx, cfg.collection)
	if err != nil {
		return nil, err
	}
	tenant := loom.Tenant(ctx)
	q := cfg.q
	q.Text = query
	emb := e.embedders[coll.Embedder]
	if q.Weights, err = fusionWeights(cfg.keywordWeight, cfg.vectorWeight, coll, emb); err != nil {
		return nil, err
	}
	if q.Mode != ModeKeyword {
		if emb, err = e.embedderOf(coll); err != nil {
			return nil, err
		}
		vs, err := emb.Embed(ctx, []string{query})
		if err != nil {
			return nil, fmt.Errorf("embed the query: %w", err)
		}
		if err := checkDimensions(coll, emb, len(vs[0])); err != nil {
			return nil, err
		}
		q.Vector = vs[0]
	}
	// Every store's collections are ranked by the collection's in-memory index: keyword statistics are the
	// collection's own, whoever else shares the store, and the analyzer is the same on every store.
	return e.search(ctx, tenant, coll.ID, q)
}

// Hit is a retrieval result flattened for JSON: one line of loom retrieve, one result of POST
// /v1/retrieve. Start and End are byte offsets of Text in the document's text; the ranking's detail
// (Keyword and Vector scores and ranks) is there when the mode had it.
type Hit struct {
	Rank        int               `json:"rank"`
	Score       float64           `json:"score"`
	Kind        string            `json:"kind"`
	ChunkID     string            `json:"chunk_id"`
	DocumentID  string            `json:"document_id"`
	Source      string            `json:"source"`
	Start       int               `json:"start"`
	End         int               `json:"end"`
	Text        string            `json:"text"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	Keyword     float64           `json:"keyword,omitempty"`
	KeywordRank int               `json:"keyword_rank,omitempty"`
	Vector      float64           `json:"vector,omitempty"`
	VectorRank  int               `json:"vector_rank,omitempty"`
	// Relevance is what min_score is compared with: the score relative to the best result's (see
	// retriever.Result.Relevance).
	Relevance float64 `json:"relevance"`
}

// NewHit flattens r.
func NewHit(r retriever.Result) Hit {
	c := r.Chunk
	return Hit{Rank: r.Rank, Score: r.Score, Kind: r.Kind, ChunkID: c.ID, DocumentID: c.DocumentID,
		Source: c.Metadata["source"], Start: c.StartOffset, End: c.EndOffset, Text: c.Content, Metadata: c.Metadata,
		Keyword: r.Keyword, KeywordRank: r.KeywordRank, Vector: r.Vector, VectorRank: r.VectorRank, Relevance: r.Relevance}
}

// followBackoff bounds the pause after a failed read of the change feed.
const followBackoff = 2 * time.Second

// IngestOptions configure IngestPaths.
type IngestOptions struct {
	// Walk chooses and bounds the files (patterns, size limit). Its Skipped is called too.
	Walk ingest.WalkOptions
	// Progress, when not nil, is told about each file after it is stored (or skipped).
	Progress func(IngestProgress)
}

// IngestProgress is the state of an IngestPaths run after one more file.
type IngestProgress struct {
	Path    string // the file just handled
	Bytes   int64  // its text's size in bytes
	Files   int    // files handled so far, stored or skipped
	Skipped bool   // the file was skipped (see IngestSummary.Skipped)
}

// IngestSummary says what IngestPaths did.
type IngestSummary struct {
	Files     int      `json:"files"`     // files read and stored (changed or not)
	Changed   int      `json:"changed"`   // of which new or different
	Unchanged int      `json:"unchanged"` // of which the same as stored
	Chunks    int      `json:"chunks"`    // chunks of the changed files
	Bytes     int64    `json:"bytes"`     // text bytes of all files read
	Skipped   []string `json:"skipped,omitempty"`
}

// IngestPaths ingests files and directories (walked in lexical order, hidden files left out, symbolic
// links not followed: see ingest.Walk) into the collection. A document's ID is its path as walked, with
// forward slashes ("docs/intro.md" for the root "docs"), so that running the same command again from the
// same directory finds the same documents. Files that cannot be read as text are skipped and listed.
func (e *Engine) IngestPaths(ctx context.Context, collectionID string, paths []string, opts IngestOptions) (IngestSummary, error) {
	var sum IngestSummary
	coll, err := e.Collection(ctx, collectionID)
	if err != nil {
		return sum, err
	}
	walk := opts.Walk
	userSkipped := walk.Skipped
	walk.Skipped = func(path string, err error) {
		sum.Skipped = append(sum.Skipped, fmt.Sprintf("%s: %v", path, err))
		if userSkipped != nil {
			userSkipped(path, err)
		}
		if opts.Progress != nil {
			opts.Progress(IngestProgress{Path: path, Files: sum.Files + len(sum.Skipped), Skipped: true})
		}
	}
	for _, root := range paths {
		err := ingest.Walk(ctx, root, walk, func(d ingest.Document) error {
			d.ID = filepath.ToSlash(filepath.Clean(d.Source))
			r, err := e.ingestOne(ctx, coll, d)
			if err != nil {
				return fmt.Errorf("ingest %s: %w", d.Source, err)
			}
			sum.Files++
			sum.Bytes += int64(r.Bytes)
			if r.Changed {
				sum.Changed++
				sum.Chunks += r.Chunks
			} else {
				sum.Unchanged++
			}
			if opts.Progress != nil {
				opts.Progress(IngestProgress{Path: d.Source, Bytes: int64(r.Bytes), Files: sum.Files + len(sum.Skipped)})
			}
			return nil
		})
		if err != nil {
			return sum, err
		}
	}
	return sum, nil
}
