// Package collection holds knowledge: collections of documents, cut into chunks that are embedded and
// indexed for retrieval. The types and the storage interface are here; the stores that keep collections are
// the store backends that can (store/memory, store/sqlite, store/valkey), whose [Store] a store.Store serves
// (store.Store.Collections), and the conformance suite they pass is
// [github.com/context-loom/loom/collection/collectiontest].
//
// Everything is scoped by tenant: a tenant that names another tenant's collection or document id gets
// ErrNotFound, never the other tenant's data.
package collection

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/context-loom/loom"
)

// Errors every collection store returns (wrapped; match them with errors.Is). Stores also return the
// store package's ErrInvalid, ErrTooLarge, ErrUnavailable and ErrClosed.
var (
	ErrNotFound = loom.NewError(loom.ErrNotFound, "collection: not found")
	// ErrExists is CreateCollection's error for a name or ID that is the name or ID of one of the
	// tenant's collections.
	ErrExists = loom.NewError(loom.ErrExists, "collection: a collection of that name or id exists")
	// ErrFeedTrimmed is Changes' error when the feed no longer holds every change after the Seq asked
	// for (the reader fell further behind than the store keeps): the reader must rebuild from ScanChunks
	// and follow from the Seq LastChange gives before the scan.
	ErrFeedTrimmed = errors.New("collection: the change feed was trimmed past that seq")
)

// Chunk is a chunk as stored: the chunk and its vector. Chunk.ID is unique within the collection.
//
// A chunk's metadata is its document's metadata under the chunk's own keys (the heading path of its
// section, say), and the document's is stored once, with the document: PutDocument stores of each chunk
// only the entries of Metadata that the document's Metadata does not hold with the same value, so a chunk
// may be given with its own keys alone or with the document's too. The chunks a store reads back have the
// whole in Metadata and the document's alone in DocumentMetadata; both may be maps shared by all the
// chunks of one document, so read them and never change them.
type Chunk struct {
	loom.Chunk
	Vector []float32
	// DocumentMetadata is the metadata of the chunk's document, which Metadata includes below the chunk's
	// own keys. A reader that keeps many chunks (an index) keeps it once per document. PutDocument refuses
	// a chunk whose DocumentMetadata is neither nil nor the same as the document's Metadata.
	DocumentMetadata map[string]string
}

// OwnMetadata returns the chunk's own metadata: the entries of chunk that doc does not hold with the
// same value. It is chunk itself when doc holds none of them (no copy), nil when doc holds all.
func OwnMetadata(doc, chunk map[string]string) map[string]string {
	shared := 0
	for k, v := range chunk {
		if dv, ok := doc[k]; ok && dv == v {
			shared++
		}
	}
	switch shared {
	case 0:
		return chunk
	case len(chunk):
		return nil
	}
	own := make(map[string]string, len(chunk)-shared)
	for k, v := range chunk {
		if dv, ok := doc[k]; !ok || dv != v {
			own[k] = v
		}
	}
	return own
}

// MergeMetadata returns a chunk's metadata as a whole: doc, its document's, overlaid with own, its own.
// Without own keys it is doc itself, without document keys own itself; only a chunk that has both gets
// a map of its own. Stores hand it out shared, as Chunk says: never change it.
func MergeMetadata(doc, own map[string]string) map[string]string {
	switch {
	case len(own) == 0:
		return doc
	case len(doc) == 0:
		return own
	}
	m := make(map[string]string, len(doc)+len(own))
	maps.Copy(m, doc)
	maps.Copy(m, own)
	return m
}

// ClashError is the error a store's CreateCollection returns when c's name or id is have's name or id: it
// wraps ErrExists and says what clashed, naming have's id.
func ClashError(c, have loom.Collection) error {
	switch {
	case c.Name == have.Name:
		return fmt.Errorf("collection name %q is taken by the collection of id %q: %w", c.Name, have.ID, ErrExists)
	case c.ID == have.ID:
		return fmt.Errorf("collection id %q is taken by collection %q: %w", c.ID, have.Name, ErrExists)
	case c.Name == have.ID:
		return fmt.Errorf("collection name %q is the id of collection %q: %w", c.Name, have.Name, ErrExists)
	}
	return fmt.Errorf("collection id %q is the name of the collection of id %q: %w", c.ID, have.ID, ErrExists)
}

// Ref names one tenant's collection.
type Ref struct {
	Tenant string `json:"tenant"`
	ID     string `json:"id"`
}

// CompareRefs orders refs by tenant, then id: AllCollections' order.
func CompareRefs(a, b Ref) int {
	return cmp.Or(strings.Compare(a.Tenant, b.Tenant), strings.Compare(a.ID, b.ID))
}

// Change is one change to a collection's contents, as a store's change feed reports it, so that every
// server's in-memory index can follow what any server (or the CLI) wrote.
type Change struct {
	// Seq orders changes; a store's feed gives them in increasing Seq. Its format is the store's own.
	Seq          string `json:"seq"`
	Tenant       string `json:"tenant"`
	CollectionID string `json:"collection_id"`
	// DocumentID is the document put or deleted; "" when the whole collection was deleted.
	DocumentID string `json:"document_id,omitempty"`
	Op         string `json:"op"` // OpPut, OpDelete or OpDeleteCollection
}

// DefaultChangesLimit is how many changes Store.Changes returns at most when its limit is 0 or less.
const DefaultChangesLimit = 1000

// Change operations.
const (
	OpPut              = "put"
	OpDelete           = "delete"
	OpDeleteCollection = "delete_collection"
)

// Store keeps collections, documents and chunks.
type Store interface {
	// CreateCollection stores c (assigning an ID if empty) and returns it. Within a tenant, names and
	// ids are one namespace, since GetCollection takes either: it returns ErrExists if c.Name or c.ID is
	// the name or the ID of one of the tenant's collections (c's own ID may equal its own name), with a
	// message naming what clashed and the existing collection's ID. Other tenants' collections do not
	// count.
	CreateCollection(ctx context.Context, tenant string, c loom.Collection) (loom.Collection, error)
	// GetCollection returns the collection with the id, or else the name, idOrName; ErrNotFound if none.
	GetCollection(ctx context.Context, tenant, idOrName string) (loom.Collection, error)
	// ListCollections returns the tenant's collections ordered by name.
	ListCollections(ctx context.Context, tenant string) ([]loom.Collection, error)
	// SetFusionWeights sets the fusion weights of the collection of the id (loom.Collection.KeywordWeight
	// and VectorWeight, the settings a collection may change after it is created; nil unsets one) and
	// returns the collection as stored; ErrNotFound if none.
	SetFusionWeights(ctx context.Context, tenant, id string, keyword, vector *float64) (loom.Collection, error)
	// DeleteCollection deletes the collection, its documents and chunks; ErrNotFound if none.
	DeleteCollection(ctx context.Context, tenant, id string) error
	// AllCollections names every collection of every tenant, ordered by tenant and id, so that a server
	// can build its indexes at start. It crosses tenants: never hand its result to a tenant.
	AllCollections(ctx context.Context) ([]Ref, error)

	// PutDocument stores doc and its chunks in collection doc.CollectionID, atomically replacing the
	// document of the same ID and all of its old chunks. If the stored document has the same Hash, it
	// changes nothing and returns false. It sets the collection's Dimensions from the first vectors and
	// returns ErrInvalid for vectors of another length, or chunks that are not doc's.
	PutDocument(ctx context.Context, tenant string, doc loom.Document, chunks []Chunk) (changed bool, err error)
	// GetDocument returns ErrNotFound if the collection or document does not exist.
	GetDocument(ctx context.Context, tenant, collectionID, documentID string) (loom.Document, error)
	// ListDocuments returns the collection's documents ordered by ID.
	ListDocuments(ctx context.Context, tenant, collectionID string) ([]loom.Document, error)
	// DeleteDocument deletes the document and its chunks; ErrNotFound if none.
	DeleteDocument(ctx context.Context, tenant, collectionID, documentID string) error
	// DocumentChunks returns a document's chunks ordered by Index, with their metadata as a whole (see
	// Chunk).
	DocumentChunks(ctx context.Context, tenant, collectionID, documentID string) ([]Chunk, error)
	// ScanChunks calls fn for every chunk of the collection (in no particular order), to build an index;
	// the chunks have their metadata as DocumentChunks gives it.
	ScanChunks(ctx context.Context, tenant, collectionID string, fn func(Chunk) error) error

	// Changes returns the changes after the one with Seq after ("" for the start of the feed, which may
	// have been trimmed: build from ScanChunks, then follow from the Seq LastChange gave before the scan),
	// waiting up to wait for one if there is none; a wait of 0 or less means not to wait: it returns what
	// there is, or nothing, at once. It returns at most limit changes (DefaultChangesLimit when limit is 0 or
	// less). If some of the changes after after were trimmed it returns ErrFeedTrimmed (never a feed with a
	// silent gap).
	Changes(ctx context.Context, after string, limit int, wait time.Duration) ([]Change, error)
	// LastChange returns the Seq of the newest change, "" if none.
	LastChange(ctx context.Context) (string, error)
}

// Epocher is implemented by stores whose server can lose writes it acknowledged behind the store's back:
// a Valkey server restarted without persistence comes back empty, a failover may lose what the old primary
// had not replicated. Epoch checks the server and returns a value that changes whenever that may have
// happened since the store was opened. A reader holding state built from the store (an in-memory index, a
// position in the change feed) that sees Epoch change must rebuild it, as after ErrFeedTrimmed: the feed
// itself may have been lost with the rest. Stores that cannot lose acknowledged writes (a file) do not
// implement it.
type Epocher interface {
	Epoch(ctx context.Context) (string, error)
}
