package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"time"
	"unicode/utf8"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
)

// The rules the Store's collection store (Store.Collections) applies to what it is given, for every
// backend.

// prepareCollection validates c and returns it with an ID (a new one if empty) and CreatedAt (now, if
// zero, in UTC) set.
func prepareCollection(l Limits, now time.Time, c loom.Collection) (loom.Collection, error) {
	if c.Name == "" {
		return loom.Collection{}, fmt.Errorf("%w: a collection needs a name", ErrInvalid)
	}
	if err := ValidateID(l, "collection name", c.Name); err != nil {
		return loom.Collection{}, err
	}
	if c.ID == "" {
		c.ID = NewID(now)
	} else if err := ValidateID(l, "collection", c.ID); err != nil {
		return loom.Collection{}, err
	}
	for _, f := range []struct{ kind, v string }{{"chunk strategy", c.ChunkStrategy}, {"embedder", c.Embedder}} {
		if f.v != "" {
			if err := ValidateID(l, f.kind, f.v); err != nil {
				return loom.Collection{}, err
			}
		}
	}
	if c.ChunkSize < 0 || c.ChunkOverlap < 0 || c.Dimensions < 0 {
		return loom.Collection{}, fmt.Errorf("%w: collection %q: negative chunk size, overlap or dimensions", ErrInvalid, c.Name)
	}
	if err := validateWeights(c.KeywordWeight, c.VectorWeight); err != nil {
		return loom.Collection{}, fmt.Errorf("collection %q: %w", c.Name, err)
	}
	c.KeywordWeight, c.VectorWeight = copyWeight(c.KeywordWeight), copyWeight(c.VectorWeight)
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	c.CreatedAt = c.CreatedAt.UTC()
	return c, nil
}

// validateWeights returns an error wrapping ErrInvalid and loom.ErrInvalidFusionWeights for a fusion weight
// that is set and negative, NaN or infinite.
func validateWeights(keyword, vector *float64) error {
	for _, w := range []struct {
		what string
		v    *float64
	}{{"keyword", keyword}, {"vector", vector}} {
		if w.v == nil {
			continue
		}
		if err := loom.ValidateWeight(w.what, *w.v); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	}
	return nil
}

// copyWeight returns a copy of *w, or nil: a collection handed to a backend shares nothing with the caller.
func copyWeight(w *float64) *float64 {
	if w == nil {
		return nil
	}
	v := *w
	return &v
}

// NewID is a new collection id: 32 hex digits, the first 12 the time in milliseconds (so that ids sort by
// creation), the rest random.
func NewID(now time.Time) string {
	var b [16]byte
	ms := uint64(now.UnixMilli())
	for i := range 6 {
		b[i] = byte(ms >> (8 * (5 - i)))
	}
	_, _ = rand.Read(b[6:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// prepareDocument validates doc and its chunks and returns the length of their vectors (0 if none has
// one). The document's metadata and each chunk's own metadata (collection.OwnMetadata: what the chunk holds beyond
// the document's) may hold at most l.MaxMetadataKeys keys and l.MaxMetadataBytes bytes of keys and
// values (errors wrapping ErrTooLarge). A chunk's DocumentMetadata must be nil or doc.Metadata's
// entries, as the chunks a store reads carry it (ErrInvalid otherwise).
func prepareDocument(l Limits, doc loom.Document, chunks []collection.Chunk) (int, error) {
	l = l.WithDefaults()
	// The metadata first: the cheapest check of what is most likely too large.
	if err := ValidateMetadata(l, fmt.Sprintf("document %q", doc.ID), doc.Metadata); err != nil {
		return 0, err
	}
	if err := validateIDs(l, "collection", doc.CollectionID, "document", doc.ID, "document hash", doc.Hash); err != nil {
		return 0, err
	}
	if doc.Bytes < 0 {
		return 0, fmt.Errorf("%w: document %q: negative size", ErrInvalid, doc.ID)
	}
	for _, f := range []struct{ what, v string }{{"source", doc.Source}, {"content type", doc.ContentType}} {
		if err := validateText(l, "document "+f.what, f.v); err != nil {
			return 0, err
		}
	}
	dims := 0
	seen := make(map[string]struct{}, len(chunks))
	for i, ch := range chunks {
		what := fmt.Sprintf("document %q chunk %d", doc.ID, i)
		if ch.DocumentID != doc.ID {
			return 0, fmt.Errorf("%w: %s is document %q's", ErrInvalid, what, ch.DocumentID)
		}
		if err := ValidateID(l, "chunk", ch.ID); err != nil {
			return 0, fmt.Errorf("%s: %w", what, err)
		}
		if _, ok := seen[ch.ID]; ok {
			return 0, fmt.Errorf("%w: %s: chunk id %q used twice", ErrInvalid, what, ch.ID)
		}
		seen[ch.ID] = struct{}{}
		if err := validateText(l, what+" content", ch.Content); err != nil {
			return 0, err
		}
		if ch.Index < 0 || ch.StartOffset < 0 || ch.EndOffset < ch.StartOffset || ch.TokenCount < 0 {
			return 0, fmt.Errorf("%w: %s: negative index, offset or token count, or an end before the start", ErrInvalid, what)
		}
		if ch.DocumentMetadata != nil && !maps.Equal(ch.DocumentMetadata, doc.Metadata) {
			return 0, fmt.Errorf("%w: %s: its DocumentMetadata is not the document's metadata", ErrInvalid, what)
		}
		if err := ValidateMetadata(l, what+" (its own keys)", collection.OwnMetadata(doc.Metadata, ch.Metadata)); err != nil {
			return 0, err
		}
		if len(ch.Vector) == 0 {
			continue
		}
		if dims == 0 {
			dims = len(ch.Vector)
		} else if len(ch.Vector) != dims {
			return 0, fmt.Errorf("%w: %s: a vector of %d dimensions among vectors of %d", ErrInvalid, what, len(ch.Vector), dims)
		}
		for _, f := range ch.Vector {
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return 0, fmt.Errorf("%w: %s: the vector has NaN or infinite values", ErrInvalid, what)
			}
		}
	}
	return dims, nil
}

// ValidateMetadata checks the metadata of what (a document, or a chunk's own): at most l.MaxMetadataKeys
// keys and l.MaxMetadataBytes bytes of keys and values (errors wrapping ErrTooLarge), valid UTF-8
// (ErrInvalid). The sizes are checked before anything else is read.
func ValidateMetadata(l Limits, what string, m map[string]string) error {
	l = l.WithDefaults()
	if len(m) > l.MaxMetadataKeys {
		return fmt.Errorf("%w: the metadata of %s has %d keys, the limit is %d", ErrTooLarge, what, len(m), l.MaxMetadataKeys)
	}
	n := 0
	for k, v := range m {
		n += len(k) + len(v)
	}
	if n > l.MaxMetadataBytes {
		return fmt.Errorf("%w: the metadata of %s is %d bytes, the limit is %d", ErrTooLarge, what, n, l.MaxMetadataBytes)
	}
	for k, v := range m {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("%w: the metadata of %s is not valid UTF-8", ErrInvalid, what)
		}
	}
	return nil
}

// Dimensions is the length of the vectors of chunks that the Store's collection store hands a backend's
// PutDocument: of the first chunk that has one (they all have that length, or none), 0 if none has one.
func Dimensions(chunks []collection.Chunk) int {
	for _, ch := range chunks {
		if len(ch.Vector) > 0 {
			return len(ch.Vector)
		}
	}
	return 0
}

// collections is the collection.Store of Store.Collections: the rules above, then the backend.
type collections struct {
	s *Store
	b CollectionBackend
}

// epochCollections are the collections of a backend that is a collection.Epocher.
type epochCollections struct {
	collections
	collection.Epocher
}

var (
	_ collection.Store   = collections{}
	_ collection.Epocher = epochCollections{}
)

func newCollections(s *Store, b CollectionBackend) collection.Store {
	c := collections{s, b}
	if e, ok := b.(collection.Epocher); ok {
		return epochCollections{c, epocher{s, e}}
	}
	return c
}

// epocher is a backend's Epoch behind the Store's check.
type epocher struct {
	s *Store
	e collection.Epocher
}

func (e epocher) Epoch(ctx context.Context) (string, error) {
	if err := e.s.check(ctx); err != nil {
		return "", err
	}
	return e.e.Epoch(ctx)
}

// CreateCollection implements collection.Store: it assigns a new ID (NewID) when c.ID is empty and sets
// CreatedAt when it is zero. It returns an error wrapping ErrInvalid for a collection without a name or
// with a bad id, and collection.ErrExists when its name or id is taken (see collection.Store).
func (c collections) CreateCollection(ctx context.Context, tenant string, coll loom.Collection) (loom.Collection, error) {
	if err := c.s.check(ctx, "tenant", tenant); err != nil {
		return loom.Collection{}, err
	}
	coll, err := prepareCollection(c.s.limits, c.s.now(), coll)
	if err != nil {
		return loom.Collection{}, err
	}
	return c.b.CreateCollection(ctx, tenant, coll)
}

// GetCollection implements collection.Store.
func (c collections) GetCollection(ctx context.Context, tenant, idOrName string) (loom.Collection, error) {
	if err := c.s.check(ctx, "tenant", tenant, "collection", idOrName); err != nil {
		return loom.Collection{}, err
	}
	v, err := c.b.GetCollection(ctx, tenant, idOrName)
	return v, InTenant(tenant, err)
}

// ListCollections implements collection.Store.
func (c collections) ListCollections(ctx context.Context, tenant string) ([]loom.Collection, error) {
	if err := c.s.check(ctx, "tenant", tenant); err != nil {
		return nil, err
	}
	return c.b.ListCollections(ctx, tenant)
}

// SetFusionWeights implements collection.Store. It returns an error wrapping ErrInvalid (and
// loom.ErrInvalidFusionWeights) for a weight that is negative, NaN or infinite.
func (c collections) SetFusionWeights(ctx context.Context, tenant, id string, keyword, vector *float64) (loom.Collection, error) {
	if err := c.s.check(ctx, "tenant", tenant, "collection", id); err != nil {
		return loom.Collection{}, err
	}
	if err := validateWeights(keyword, vector); err != nil {
		return loom.Collection{}, fmt.Errorf("collection %q: %w", id, err)
	}
	v, err := c.b.SetFusionWeights(ctx, tenant, id, copyWeight(keyword), copyWeight(vector))
	return v, InTenant(tenant, err)
}

// DeleteCollection implements collection.Store.
func (c collections) DeleteCollection(ctx context.Context, tenant, id string) error {
	if err := c.s.check(ctx, "tenant", tenant, "collection", id); err != nil {
		return err
	}
	return InTenant(tenant, c.b.DeleteCollection(ctx, tenant, id))
}

// AllCollections implements collection.Store.
func (c collections) AllCollections(ctx context.Context) ([]collection.Ref, error) {
	if err := c.s.check(ctx); err != nil {
		return nil, err
	}
	return c.b.AllCollections(ctx)
}

// PutDocument implements collection.Store: doc and chunks are checked (see prepareDocument: errors
// wrapping ErrInvalid or ErrTooLarge) and doc.UpdatedAt set to now before the backend stores them.
func (c collections) PutDocument(ctx context.Context, tenant string, doc loom.Document, chunks []collection.Chunk) (bool, error) {
	if err := c.s.check(ctx, "tenant", tenant); err != nil {
		return false, err
	}
	if _, err := prepareDocument(c.s.limits, doc, chunks); err != nil {
		return false, err
	}
	doc.UpdatedAt = c.s.now().UTC()
	v, err := c.b.PutDocument(ctx, tenant, doc, chunks)
	return v, InTenant(tenant, err)
}

// GetDocument implements collection.Store.
func (c collections) GetDocument(ctx context.Context, tenant, collectionID, documentID string) (loom.Document, error) {
	if err := c.s.check(ctx, "tenant", tenant, "collection", collectionID, "document", documentID); err != nil {
		return loom.Document{}, err
	}
	v, err := c.b.GetDocument(ctx, tenant, collectionID, documentID)
	return v, InTenant(tenant, err)
}

// ListDocuments implements collection.Store.
func (c collections) ListDocuments(ctx context.Context, tenant, collectionID string) ([]loom.Document, error) {
	if err := c.s.check(ctx, "tenant", tenant, "collection", collectionID); err != nil {
		return nil, err
	}
	v, err := c.b.ListDocuments(ctx, tenant, collectionID)
	return v, InTenant(tenant, err)
}

// DeleteDocument implements collection.Store.
func (c collections) DeleteDocument(ctx context.Context, tenant, collectionID, documentID string) error {
	if err := c.s.check(ctx, "tenant", tenant, "collection", collectionID, "document", documentID); err != nil {
		return err
	}
	return InTenant(tenant, c.b.DeleteDocument(ctx, tenant, collectionID, documentID))
}

// DocumentChunks implements collection.Store.
func (c collections) DocumentChunks(ctx context.Context, tenant, collectionID, documentID string) ([]collection.Chunk, error) {
	if err := c.s.check(ctx, "tenant", tenant, "collection", collectionID, "document", documentID); err != nil {
		return nil, err
	}
	v, err := c.b.DocumentChunks(ctx, tenant, collectionID, documentID)
	return v, InTenant(tenant, err)
}

// ScanChunks implements collection.Store.
func (c collections) ScanChunks(ctx context.Context, tenant, collectionID string, fn func(collection.Chunk) error) error {
	if err := c.s.check(ctx, "tenant", tenant, "collection", collectionID); err != nil {
		return err
	}
	return InTenant(tenant, c.b.ScanChunks(ctx, tenant, collectionID, fn))
}

// Changes implements collection.Store. The feed's defaults are applied here, once for every backend: a
// limit of 0 or less is collection.DefaultChangesLimit and a negative wait is 0, do not wait.
func (c collections) Changes(ctx context.Context, after string, limit int, wait time.Duration) ([]collection.Change, error) {
	if err := c.s.check(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = collection.DefaultChangesLimit
	}
	return c.b.Changes(ctx, after, limit, max(wait, 0))
}

// LastChange implements collection.Store.
func (c collections) LastChange(ctx context.Context) (string, error) {
	if err := c.s.check(ctx); err != nil {
		return "", err
	}
	return c.b.LastChange(ctx)
}
