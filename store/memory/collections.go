package memory

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/store"
)

// The change feed.
const (
	// trimEvery is how many changes past store.Options.ChangesKept the feed grows before it is trimmed.
	trimEvery = 1024
)

// collections hold a Backend's collections, behind their own lock. The zero value is empty and ready.
type collections struct {
	mu     sync.RWMutex
	byID   map[key]*coll  // by tenant and collection id
	byName map[key]string // tenant and name to id
	feed   []change       // oldest first: seqs first, first+1, ...
	seq    uint64         // the newest change's seq; 0 for none
	kept   int            // how many changes the feed keeps; 0 means store.DefaultChangesKept
	wake   chan struct{}  // closed at the next change; nil while nobody waits
}

type coll struct {
	c     loom.Collection
	docs  map[string]*storedDoc
	owner map[string]string // chunk id to its document's id
}

// storedDoc is a document and its chunks as stored: never changed, only replaced. The document's metadata
// is held once, in d; each chunk holds its own keys only (collection.OwnMetadata), and no
// DocumentMetadata.
type storedDoc struct {
	d      loom.Document
	chunks []collection.Chunk // ordered by Index
}

// readChunk returns a copy of the stored chunk ch of d as a read gives it: its metadata as a whole, with
// meta (a copy of d's metadata that the caller makes once for all the chunks it reads of d) shared.
func (d *storedDoc) readChunk(ch collection.Chunk, meta map[string]string) collection.Chunk {
	ch.DocumentMetadata = meta
	if len(meta) == 0 {
		ch.Metadata = maps.Clone(ch.Metadata)
	} else {
		ch.Metadata = collection.MergeMetadata(meta, ch.Metadata) // meta itself, or a new map
	}
	ch.Vector = slices.Clone(ch.Vector)
	return ch
}

type change struct {
	seq uint64
	c   collection.Change
}

// CreateCollection implements store.CollectionBackend. It returns an error wrapping collection.ErrExists
// if c's name or ID is the name or ID of one of the tenant's collections.
func (s *Backend) CreateCollection(ctx context.Context, tenant string, c loom.Collection) (loom.Collection, error) {
	cs := &s.colls
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.byID == nil {
		cs.byID, cs.byName = map[key]*coll{}, map[key]string{}
	}
	if err := cs.clash(tenant, c); err != nil {
		return loom.Collection{}, err
	}
	cs.byID[key{tenant, c.ID}] = &coll{c: c, docs: map[string]*storedDoc{}, owner: map[string]string{}}
	cs.byName[key{tenant, c.Name}] = c.ID
	return copyCollection(c), nil
}

// copyCollection returns a copy of c that shares no memory with it: a caller's change to its weights never
// reaches the stored collection.
func copyCollection(c loom.Collection) loom.Collection {
	for _, w := range []**float64{&c.KeywordWeight, &c.VectorWeight} {
		if *w != nil {
			v := **w
			*w = &v
		}
	}
	return c
}

// SetFusionWeights implements store.CollectionBackend. It returns an error wrapping collection.ErrNotFound if
// the tenant has no collection of the id.
func (s *Backend) SetFusionWeights(ctx context.Context, tenant, id string, keyword, vector *float64) (loom.Collection, error) {
	cs := &s.colls
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c, ok := cs.byID[key{tenant, id}]
	if !ok {
		return loom.Collection{}, fmt.Errorf("collection %q: %w", id, collection.ErrNotFound)
	}
	c.c.KeywordWeight, c.c.VectorWeight = keyword, vector
	c.c = copyCollection(c.c)
	return copyCollection(c.c), nil
}

// clash returns an error wrapping collection.ErrExists if c's name or id is the name or id of one of the
// tenant's collections (names and ids are one namespace: GetCollection takes either), naming what
// clashed; the caller holds mu.
func (cs *collections) clash(tenant string, c loom.Collection) error {
	// The same name first: the clash most likely, and the one to report if there are several.
	for _, k := range []string{c.Name, c.ID} {
		if id, ok := cs.byName[key{tenant, k}]; ok {
			return collection.ClashError(c, cs.byID[key{tenant, id}].c)
		}
	}
	for _, k := range []string{c.ID, c.Name} {
		if have, ok := cs.byID[key{tenant, k}]; ok {
			return collection.ClashError(c, have.c)
		}
	}
	return nil
}

// GetCollection implements store.CollectionBackend. It returns an error wrapping collection.ErrNotFound if the
// tenant has no collection with the id or name idOrName.
func (s *Backend) GetCollection(ctx context.Context, tenant, idOrName string) (loom.Collection, error) {
	cs := &s.colls
	cs.mu.RLock()
	defer cs.mu.RUnlock()
	c, ok := cs.byID[key{tenant, idOrName}]
	if !ok {
		c, ok = cs.byID[key{tenant, cs.byName[key{tenant, idOrName}]}]
	}
	if !ok {
		return loom.Collection{}, fmt.Errorf("collection %q: %w", idOrName, collection.ErrNotFound)
	}
	return copyCollection(c.c), nil
}

// ListCollections implements store.CollectionBackend.
func (s *Backend) ListCollections(ctx context.Context, tenant string) ([]loom.Collection, error) {
	cs := &s.colls
	cs.mu.RLock()
	defer cs.mu.RUnlock()
	var out []loom.Collection
	for k, c := range cs.byID {
		if k.tenant == tenant {
			out = append(out, copyCollection(c.c))
		}
	}
	slices.SortFunc(out, func(a, b loom.Collection) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// AllCollections implements store.CollectionBackend.
func (s *Backend) AllCollections(ctx context.Context) ([]collection.Ref, error) {
	cs := &s.colls
	cs.mu.RLock()
	out := make([]collection.Ref, 0, len(cs.byID))
	for k := range cs.byID {
		out = append(out, collection.Ref{Tenant: k.tenant, ID: k.id})
	}
	cs.mu.RUnlock()
	slices.SortFunc(out, collection.CompareRefs)
	return out, nil
}

// DeleteCollection implements store.CollectionBackend: it deletes the collection, its documents and chunks, and
// records an OpDeleteCollection change. It returns an error wrapping collection.ErrNotFound if the tenant
// has no collection with the id.
func (s *Backend) DeleteCollection(ctx context.Context, tenant, id string) error {
	cs := &s.colls
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c, ok := cs.byID[key{tenant, id}]
	if !ok {
		return fmt.Errorf("collection %q: %w", id, collection.ErrNotFound)
	}
	delete(cs.byID, key{tenant, id})
	delete(cs.byName, key{tenant, c.c.Name})
	cs.addChange(tenant, id, "", collection.OpDeleteCollection)
	return nil
}

// PutDocument implements store.CollectionBackend. It replaces the document doc.ID and all of its chunks with doc
// and chunks, sets the collection's Dimensions from the first vectors, and records an OpPut change; if the
// stored document has doc's Hash, it does nothing and returns false. doc.Chunks is set to len(chunks). A
// chunk without a vector is stored without one.
//
// It returns an error wrapping collection.ErrNotFound if the collection does not exist, store.ErrInvalid
// for a chunk ID another document of the collection has, or vectors of a length other than the
// collection's.
func (s *Backend) PutDocument(ctx context.Context, tenant string, doc loom.Document, chunks []collection.Chunk) (bool, error) {
	dims := store.Dimensions(chunks)
	cs := &s.colls
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c, ok := cs.byID[key{tenant, doc.CollectionID}]
	if !ok {
		return false, fmt.Errorf("collection %q: %w", doc.CollectionID, collection.ErrNotFound)
	}
	old := c.docs[doc.ID]
	if old != nil && old.d.Hash == doc.Hash {
		return false, nil
	}
	if dims > 0 && c.c.Dimensions != 0 && c.c.Dimensions != dims {
		return false, fmt.Errorf("%w: document %q: vectors of %d dimensions, the collection's have %d", store.ErrInvalid, doc.ID, dims, c.c.Dimensions)
	}
	for _, ch := range chunks {
		if owner, ok := c.owner[ch.ID]; ok && owner != doc.ID {
			return false, fmt.Errorf("%w: chunk %q is another document's", store.ErrInvalid, ch.ID)
		}
	}
	// Checked: nothing below fails.
	if dims > 0 && c.c.Dimensions == 0 {
		c.c.Dimensions = dims
	}
	if old != nil {
		for _, ch := range old.chunks {
			delete(c.owner, ch.ID)
		}
	}
	nd := &storedDoc{d: doc, chunks: make([]collection.Chunk, len(chunks))}
	nd.d.Metadata = maps.Clone(doc.Metadata)
	nd.d.Chunks = len(chunks)
	for i, ch := range chunks {
		ch.Metadata = maps.Clone(collection.OwnMetadata(doc.Metadata, ch.Metadata))
		ch.DocumentMetadata = nil
		ch.Vector = slices.Clone(ch.Vector)
		nd.chunks[i] = ch
		c.owner[ch.ID] = doc.ID
	}
	slices.SortStableFunc(nd.chunks, func(a, b collection.Chunk) int {
		if a.Index != b.Index {
			return a.Index - b.Index
		}
		return strings.Compare(a.ID, b.ID)
	})
	c.docs[doc.ID] = nd
	cs.addChange(tenant, doc.CollectionID, doc.ID, collection.OpPut)
	return true, nil
}

// GetDocument implements store.CollectionBackend. It returns an error wrapping collection.ErrNotFound if the
// collection or the document does not exist.
func (s *Backend) GetDocument(ctx context.Context, tenant, collectionID, documentID string) (loom.Document, error) {
	d, err := s.document(ctx, tenant, collectionID, documentID)
	if err != nil {
		return loom.Document{}, err
	}
	out := d.d
	out.Metadata = maps.Clone(out.Metadata)
	return out, nil
}

// document returns the stored document; the caller must not change it.
func (s *Backend) document(ctx context.Context, tenant, collectionID, documentID string) (*storedDoc, error) {
	cs := &s.colls
	cs.mu.RLock()
	defer cs.mu.RUnlock()
	if c, ok := cs.byID[key{tenant, collectionID}]; ok {
		if d, ok := c.docs[documentID]; ok {
			return d, nil
		}
	}
	return nil, fmt.Errorf("document %q of collection %q: %w", documentID, collectionID, collection.ErrNotFound)
}

// ListDocuments implements store.CollectionBackend. It returns an error wrapping collection.ErrNotFound if the
// collection does not exist.
func (s *Backend) ListDocuments(ctx context.Context, tenant, collectionID string) ([]loom.Document, error) {
	cs := &s.colls
	cs.mu.RLock()
	defer cs.mu.RUnlock()
	c, ok := cs.byID[key{tenant, collectionID}]
	if !ok {
		return nil, fmt.Errorf("collection %q: %w", collectionID, collection.ErrNotFound)
	}
	out := make([]loom.Document, 0, len(c.docs))
	for _, d := range c.docs {
		doc := d.d
		doc.Metadata = maps.Clone(doc.Metadata)
		out = append(out, doc)
	}
	slices.SortFunc(out, func(a, b loom.Document) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// DeleteDocument implements store.CollectionBackend: it deletes the document and its chunks and records an
// OpDelete change. It returns an error wrapping collection.ErrNotFound if there is no such document.
func (s *Backend) DeleteDocument(ctx context.Context, tenant, collectionID, documentID string) error {
	cs := &s.colls
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c, ok := cs.byID[key{tenant, collectionID}]
	var d *storedDoc
	if ok {
		d, ok = c.docs[documentID]
	}
	if !ok {
		return fmt.Errorf("document %q of collection %q: %w", documentID, collectionID, collection.ErrNotFound)
	}
	for _, ch := range d.chunks {
		delete(c.owner, ch.ID)
	}
	delete(c.docs, documentID)
	cs.addChange(tenant, collectionID, documentID, collection.OpDelete)
	return nil
}

// DocumentChunks implements store.CollectionBackend. It returns an error wrapping collection.ErrNotFound if the
// collection or the document does not exist.
func (s *Backend) DocumentChunks(ctx context.Context, tenant, collectionID, documentID string) ([]collection.Chunk, error) {
	d, err := s.document(ctx, tenant, collectionID, documentID)
	if err != nil {
		return nil, err
	}
	out := make([]collection.Chunk, len(d.chunks))
	meta := maps.Clone(d.d.Metadata)
	for i, ch := range d.chunks {
		out[i] = d.readChunk(ch, meta)
	}
	return out, nil
}

// ScanChunks implements store.CollectionBackend: it calls fn with a copy of each of the collection's chunks as
// they were when it was called, without holding the store's lock, so fn may call the store. It returns
// fn's error as is, and an error wrapping collection.ErrNotFound if the collection does not exist.
func (s *Backend) ScanChunks(ctx context.Context, tenant, collectionID string, fn func(collection.Chunk) error) error {
	cs := &s.colls
	cs.mu.RLock()
	c, ok := cs.byID[key{tenant, collectionID}]
	var docs []*storedDoc // stored documents are never changed, only replaced: safe to read unlocked
	if ok {
		docs = slices.Collect(maps.Values(c.docs))
	}
	cs.mu.RUnlock()
	if !ok {
		return fmt.Errorf("collection %q: %w", collectionID, collection.ErrNotFound)
	}
	for _, d := range docs {
		meta := maps.Clone(d.d.Metadata)
		for _, ch := range d.chunks {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(d.readChunk(ch, meta)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Changes implements store.CollectionBackend. Seqs are decimal numbers of 20 digits, increasing; after is one of
// them, or "" for the start of the feed; limit is above 0 (the Store's front sees to it). While there is no
// change after after, it waits for one until wait has passed. It returns an error wrapping store.ErrInvalid for a
// Seq that is not one, and collection.ErrFeedTrimmed when changes after after were dropped (the feed keeps
// about store.Options.ChangesKept).
func (s *Backend) Changes(ctx context.Context, after string, limit int, wait time.Duration) ([]collection.Change, error) {
	var from uint64
	if after != "" {
		n, err := strconv.ParseUint(after, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: change seq %q is not a decimal number", store.ErrInvalid, after)
		}
		from = n
	}
	var deadline <-chan time.Time
	cs := &s.colls
	for {
		cs.mu.Lock()
		if len(cs.feed) > 0 && from > 0 && from+1 < cs.feed[0].seq {
			cs.mu.Unlock()
			return nil, fmt.Errorf("%w: changes %d to %d are gone", collection.ErrFeedTrimmed, from+1, cs.feed[0].seq-1)
		}
		out := cs.after(from, limit)
		if len(out) > 0 || wait <= 0 {
			cs.mu.Unlock()
			return out, nil
		}
		if cs.wake == nil {
			cs.wake = make(chan struct{})
		}
		wake := cs.wake
		cs.mu.Unlock()
		if deadline == nil {
			timer := time.NewTimer(wait)
			defer timer.Stop()
			deadline = timer.C
		}
		select {
		case <-wake:
		case <-deadline:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// LastChange implements store.CollectionBackend: the Seq of the newest change, "" if there is none.
func (s *Backend) LastChange(ctx context.Context) (string, error) {
	cs := &s.colls
	cs.mu.RLock()
	defer cs.mu.RUnlock()
	if cs.seq == 0 {
		return "", nil
	}
	return formatSeq(cs.seq), nil
}

// after returns up to limit changes after seq from; the caller holds mu.
func (cs *collections) after(from uint64, limit int) []collection.Change {
	if len(cs.feed) == 0 || from >= cs.seq {
		return nil
	}
	i := 0
	if first := cs.feed[0].seq; from >= first {
		i = int(from - first + 1)
	}
	n := min(limit, len(cs.feed)-i)
	out := make([]collection.Change, n)
	for j := range n {
		out[j] = cs.feed[i+j].c
	}
	return out
}

// addChange records a change and wakes the Changes calls that wait; the caller holds mu.
func (cs *collections) addChange(tenant, collectionID, documentID, op string) {
	cs.seq++
	cs.feed = append(cs.feed, change{cs.seq, collection.Change{Seq: formatSeq(cs.seq), Tenant: tenant, CollectionID: collectionID, DocumentID: documentID, Op: op}})
	kept := cmp.Or(cs.kept, store.DefaultChangesKept)
	if len(cs.feed) >= kept+min(trimEvery, kept) {
		cs.feed = slices.Clone(cs.feed[len(cs.feed)-kept:]) // a copy: the old array is freed
	}
	if cs.wake != nil {
		close(cs.wake)
		cs.wake = nil
	}
}

func formatSeq(n uint64) string { return fmt.Sprintf("%020d", n) }
