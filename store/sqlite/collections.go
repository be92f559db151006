package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/store"
)

// The change feed.
const (
	// trimEvery is how often (in changes) the feed deletes those older than the newest
	// store.Options.ChangesKept.
	trimEvery = 1024
	// changesPoll is how often a waiting Changes looks for the changes of other processes.
	changesPoll = 25 * time.Millisecond
)

// CreateCollection implements store.CollectionBackend. It returns an error wrapping collection.ErrExists
// if c's name or ID is the name or ID of one of the tenant's collections.
func (s *Backend) CreateCollection(ctx context.Context, tenant string, c loom.Collection) (loom.Collection, error) {
	err := s.write(ctx, "create collection", func(t txn) error {
		// In the write transaction: no other writer, of this process or another, comes between the check
		// and the insert.
		if err := clash(t, tenant, c); err != nil {
			return err
		}
		res, err := t.exec(qInsertCollection, tenant, c.ID, c.Name, c.ChunkStrategy, c.ChunkSize, c.ChunkOverlap, c.Embedder,
			c.Dimensions, c.CreatedAt.Unix(), c.CreatedAt.Nanosecond(), nullWeight(c.KeywordWeight), nullWeight(c.VectorWeight))
		if isConstraint(err) { // clash found none: it cannot be, but the constraints hold anyway
			return fmt.Errorf("collection %q (id %q): %w", c.Name, c.ID, collection.ErrExists)
		}
		if err != nil {
			return err
		}
		if key, err := res.LastInsertId(); err != nil || key > maxCollectionKey {
			return fmt.Errorf("%w: the file has created all the %d collections it can (%w)", store.ErrTooLarge, maxCollectionKey, err)
		}
		return nil
	})
	if err != nil {
		return loom.Collection{}, err
	}
	return c, nil
}

// clash returns an error wrapping collection.ErrExists if c's name or id is the name or id of one of the
// tenant's collections (names and ids are one namespace: GetCollection takes either), naming what
// clashed.
func clash(t txn, tenant string, c loom.Collection) error {
	rows, err := t.query(qCollectionClash, tenant, c.Name, c.ID, tenant, c.Name, c.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	var found *loom.Collection
	for rows.Next() {
		var have loom.Collection
		if err := rows.Scan(&have.ID, &have.Name); err != nil {
			return err
		}
		// The same name is the clash to report if there are several: the one most likely.
		if found == nil || have.Name == c.Name {
			found = &have
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if found != nil {
		return collection.ClashError(c, *found)
	}
	return nil
}

// GetCollection implements store.CollectionBackend. It returns an error wrapping collection.ErrNotFound if the
// tenant has no collection with the id or name idOrName.
func (s *Backend) GetCollection(ctx context.Context, tenant, idOrName string) (loom.Collection, error) {
	var c loom.Collection
	err := s.read(ctx, "get collection", func(t txn) error {
		var err error
		c, _, err = scanCollection(func(dest ...any) error { return t.scan(qCollectionByID, []any{tenant, idOrName}, dest...) })
		if errors.Is(err, sql.ErrNoRows) {
			c, _, err = scanCollection(func(dest ...any) error { return t.scan(qCollectionByName, []any{tenant, idOrName}, dest...) })
		}
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("collection %q: %w", idOrName, collection.ErrNotFound)
		}
		return err
	})
	return c, err
}

// ListCollections implements store.CollectionBackend.
func (s *Backend) ListCollections(ctx context.Context, tenant string) ([]loom.Collection, error) {
	var out []loom.Collection
	err := s.read(ctx, "list collections", func(t txn) error {
		rows, err := t.query(qCollections, tenant)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			c, _, err := scanCollection(rows.Scan)
			if err != nil {
				return err
			}
			out = append(out, c)
		}
		return rows.Err()
	})
	return out, err
}

// AllCollections implements store.CollectionBackend.
func (s *Backend) AllCollections(ctx context.Context) ([]collection.Ref, error) {
	var out []collection.Ref
	err := s.read(ctx, "list all collections", func(t txn) error {
		rows, err := t.query(qAllCollections)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r collection.Ref
			if err := rows.Scan(&r.Tenant, &r.ID); err != nil {
				return err
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	return out, err
}

// DeleteCollection implements store.CollectionBackend: it deletes the collection, its documents and chunks, and
// records an OpDeleteCollection change, in one transaction. It returns an error
// wrapping collection.ErrNotFound if the tenant has no collection with the id.
func (s *Backend) DeleteCollection(ctx context.Context, tenant, id string) error {
	err := s.write(ctx, "delete collection", func(t txn) error {
		// Chunks first, then documents: the foreign keys would cascade, but explicitly is cheaper to follow.
		if _, err := t.exec(qDeleteCollChunks, tenant, id); err != nil {
			return err
		}
		if _, err := t.exec(qDeleteCollDocuments, tenant, id); err != nil {
			return err
		}
		if err := deleted(t.exec(qDeleteCollection, tenant, id))(fmt.Errorf("collection %q: %w", id, collection.ErrNotFound)); err != nil {
			return err
		}
		return s.addChange(t, tenant, id, "", collection.OpDeleteCollection)
	})
	if err == nil {
		s.notify()
	}
	return err
}

// PutDocument implements store.CollectionBackend. In one write transaction it replaces the document doc.ID and
// all of its chunks with doc and chunks (the document's metadata once, in its row; of each chunk's, its
// own entries alone: see collection.Chunk), sets the collection's Dimensions from
// the first vectors, and records an OpPut change; if the stored document has doc's Hash, it does nothing
// and returns false. doc.Chunks is set to len(chunks). A chunk without a vector is stored without one.
//
// It returns an error wrapping collection.ErrNotFound if the collection does not exist, store.ErrInvalid
// for a chunk ID another document of the collection has, or vectors of a length other than the
// collection's.
func (s *Backend) PutDocument(ctx context.Context, tenant string, doc loom.Document, chunks []collection.Chunk) (bool, error) {
	dims := store.Dimensions(chunks)
	meta, err := encodeMetadata(doc.Metadata)
	if err != nil {
		return false, err
	}
	doc.Chunks = len(chunks)
	changed := false
	err = s.write(ctx, "put document", func(t txn) error {
		var key int64
		var have int
		switch err := t.scan(qCollectionKey, []any{tenant, doc.CollectionID}, &key, &have); {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("collection %q: %w", doc.CollectionID, collection.ErrNotFound)
		case err != nil:
			return err
		}
		var hash string
		exists := true
		switch err := t.scan(qDocumentHash, []any{tenant, doc.CollectionID, doc.ID}, &hash); {
		case errors.Is(err, sql.ErrNoRows):
			exists = false
		case err != nil:
			return err
		case hash == doc.Hash:
			return nil // the same document: nothing to do
		}
		switch {
		case dims == 0:
		case have == 0:
			if _, err := t.exec(qSetDimensions, dims, tenant, doc.CollectionID); err != nil {
				return err
			}
		case have != dims:
			return fmt.Errorf("%w: document %q: vectors of %d dimensions, the collection's have %d", store.ErrInvalid, doc.ID, dims, have)
		}
		if exists {
			if _, err := t.exec(qDeleteDocChunks, tenant, doc.CollectionID, doc.ID); err != nil {
				return err
			}
		}
		if _, err := t.exec(qPutDocument, tenant, doc.CollectionID, doc.ID, doc.Source, doc.ContentType, doc.Hash, doc.Bytes,
			doc.Chunks, meta, doc.UpdatedAt.Unix(), doc.UpdatedAt.Nanosecond()); err != nil {
			return err
		}
		rid, err := nextChunkRowid(t, key, len(chunks))
		if err != nil {
			return err
		}
		args := make([]any, 0, 12<<maxChunkBatchBits)
		for rest := chunks; len(rest) > 0; {
			bits := min(maxChunkBatchBits, bitsLen(len(rest))-1)
			batch := rest[:1<<bits]
			rest = rest[len(batch):]
			args = args[:0]
			for _, ch := range batch {
				cmeta, err := encodeMetadata(collection.OwnMetadata(doc.Metadata, ch.Metadata))
				if err != nil {
					return err
				}
				args = append(args, rid, tenant, doc.CollectionID, ch.ID, doc.ID, ch.Index, ch.StartOffset, ch.EndOffset,
					ch.TokenCount, ch.Content, cmeta, encodeVector(ch.Vector))
				rid++
			}
			_, err := t.exec(insertChunks[bits], args...)
			if isConstraint(err) {
				return fmt.Errorf("%w: document %q: a chunk id is another document's of the collection", store.ErrInvalid, doc.ID)
			}
			if err != nil {
				return err
			}
		}
		if err := s.addChange(t, tenant, doc.CollectionID, doc.ID, collection.OpPut); err != nil {
			return err
		}
		changed = true
		return nil
	})
	if err != nil {
		return false, err
	}
	if changed {
		s.notify()
	}
	return changed, nil
}

// GetDocument implements store.CollectionBackend. It returns an error wrapping collection.ErrNotFound if the
// collection or the document does not exist.
func (s *Backend) GetDocument(ctx context.Context, tenant, collectionID, documentID string) (loom.Document, error) {
	var d loom.Document
	err := s.read(ctx, "get document", func(t txn) error {
		var err error
		d, err = scanDocument(func(dest ...any) error {
			return t.scan(qDocument, []any{tenant, collectionID, documentID}, dest...)
		})
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("document %q of collection %q: %w", documentID, collectionID, collection.ErrNotFound)
		}
		d.CollectionID = collectionID
		return err
	})
	return d, err
}

// ListDocuments implements store.CollectionBackend. It returns an error wrapping collection.ErrNotFound if the
// collection does not exist.
func (s *Backend) ListDocuments(ctx context.Context, tenant, collectionID string) ([]loom.Document, error) {
	var out []loom.Document
	err := s.read(ctx, "list documents", func(t txn) error {
		if _, _, err := collectionKey(t, tenant, collectionID); err != nil {
			return err
		}
		rows, err := t.query(qDocuments, tenant, collectionID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			d, err := scanDocument(rows.Scan)
			if err != nil {
				return err
			}
			d.CollectionID = collectionID
			out = append(out, d)
		}
		return rows.Err()
	})
	return out, err
}

// DeleteDocument implements store.CollectionBackend: it deletes the document and its chunks and records an
// OpDelete change, in one transaction. It returns an error wrapping collection.ErrNotFound
// if there is no such document.
func (s *Backend) DeleteDocument(ctx context.Context, tenant, collectionID, documentID string) error {
	err := s.write(ctx, "delete document", func(t txn) error {
		if _, err := t.exec(qDeleteDocChunks, tenant, collectionID, documentID); err != nil {
			return err
		}
		notFound := fmt.Errorf("document %q of collection %q: %w", documentID, collectionID, collection.ErrNotFound)
		if err := deleted(t.exec(qDeleteDocument, tenant, collectionID, documentID))(notFound); err != nil {
			return err
		}
		return s.addChange(t, tenant, collectionID, documentID, collection.OpDelete)
	})
	if err == nil {
		s.notify()
	}
	return err
}

// DocumentChunks implements store.CollectionBackend. It returns an error wrapping collection.ErrNotFound if the
// collection or the document does not exist.
func (s *Backend) DocumentChunks(ctx context.Context, tenant, collectionID, documentID string) ([]collection.Chunk, error) {
	var out []collection.Chunk
	err := s.read(ctx, "document chunks", func(t txn) error {
		var r chunkRow
		switch err := r.document(t, tenant, collectionID, documentID); {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("document %q of collection %q: %w", documentID, collectionID, collection.ErrNotFound)
		case err != nil:
			return err
		}
		rows, err := t.query(qDocumentChunks, tenant, collectionID, documentID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			ch, err := r.scan(rows)
			if err != nil {
				return err
			}
			out = append(out, ch)
		}
		return rows.Err()
	})
	return out, err
}

// ScanChunks implements store.CollectionBackend: it reads the collection's chunks in one read transaction (one
// consistent snapshot), a document after another, and calls fn with each as it is read, so no more than
// one chunk (and its document's metadata) is held at a time.
// It returns fn's error as is, and an error wrapping collection.ErrNotFound if the collection does not
// exist.
func (s *Backend) ScanChunks(ctx context.Context, tenant, collectionID string, fn func(collection.Chunk) error) error {
	var fnErr error
	err := s.read(ctx, "scan chunks", func(t txn) error {
		if _, _, err := collectionKey(t, tenant, collectionID); err != nil {
			return err
		}
		rows, err := t.query(qCollectionChunks, tenant, collectionID)
		if err != nil {
			return err
		}
		defer rows.Close()
		var r chunkRow
		for rows.Next() {
			if err := rows.Scan(r.targets()...); err != nil {
				return err
			}
			if r.doc != r.ch.DocumentID {
				// The document's row is there: the chunks' foreign key is its primary key, in this snapshot.
				if err := r.document(t, tenant, collectionID, r.ch.DocumentID); err != nil {
					return err
				}
			}
			ch, err := r.decode()
			if err != nil {
				return err
			}
			if fnErr = fn(ch); fnErr != nil {
				return fnErr
			}
		}
		return rows.Err()
	})
	if fnErr != nil {
		return fnErr
	}
	return err
}

// Changes implements store.CollectionBackend. Seqs are decimal numbers, increasing; after is one of them, or ""
// for the start of the feed; limit is above 0 (the Store's front sees to it). While there is no change after after,
// it looks again when this Backend writes one and every 25 ms (for other processes' writes) until wait has
// passed. It returns an error wrapping store.ErrInvalid for a Seq that is not one, and
// collection.ErrFeedTrimmed when changes after after were deleted (the feed keeps about
// store.Options.ChangesKept).
func (s *Backend) Changes(ctx context.Context, after string, limit int, wait time.Duration) ([]collection.Change, error) {
	from, err := parseSeq(after)
	if err != nil {
		return nil, err
	}
	var deadline <-chan time.Time
	var poll *time.Ticker
	for {
		s.feedMu.Lock()
		wake := s.feed // taken before reading: a change committed after the read closes it
		s.feedMu.Unlock()
		var out []collection.Change
		err := s.read(ctx, "changes", func(t txn) error {
			rows, err := t.query(qChanges, from, limit)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var seq int64
				var c collection.Change
				if err := rows.Scan(&seq, &c.Tenant, &c.CollectionID, &c.DocumentID, &c.Op); err != nil {
					return err
				}
				c.Seq = strconv.FormatInt(seq, 10)
				out = append(out, c)
			}
			return rows.Err()
		})
		if err == nil && len(out) > 0 && from > 0 && out[0].Seq != strconv.FormatInt(from+1, 10) {
			// Seqs are AUTOINCREMENT rowids of committed inserts, so the only holes are trimmed changes.
			return nil, fmt.Errorf("%w: the next change after %d is %s", collection.ErrFeedTrimmed, from, out[0].Seq)
		}
		if err != nil || len(out) > 0 || wait <= 0 {
			return out, err
		}
		if deadline == nil {
			timer := time.NewTimer(wait)
			defer timer.Stop()
			deadline = timer.C
			poll = time.NewTicker(changesPoll)
			defer poll.Stop()
		}
		select {
		case <-wake:
		case <-poll.C:
		case <-deadline:
			return nil, nil
		case <-ctx.Done():
			return nil, s.wrap(ctx, "changes", ctx.Err())
		}
	}
}

// LastChange implements store.CollectionBackend: the Seq of the newest change, "" if there is none.
func (s *Backend) LastChange(ctx context.Context) (string, error) {
	var seq int64
	err := s.read(ctx, "last change", func(t txn) error { return t.scan(qLastChange, nil, &seq) })
	if err != nil || seq == 0 {
		return "", err
	}
	return strconv.FormatInt(seq, 10), nil
}

// addChange records a change in t and, every trimEvery changes, deletes those older than the newest
// store.Options.ChangesKept.
func (s *Backend) addChange(t txn, tenant, collectionID, documentID, op string) error {
	res, err := t.exec(qInsertChange, tenant, collectionID, documentID, op, s.now().UnixNano())
	if err != nil {
		return err
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return err
	}
	kept := int64(s.opts.ChangesKeptOrDefault())
	if seq%min(trimEvery, kept) == 0 && seq > kept {
		_, err = t.exec(qTrimChanges, seq-kept)
	}
	return err
}

// notify wakes the Changes calls waiting for a change.
func (s *Backend) notify() {
	s.feedMu.Lock()
	close(s.feed)
	s.feed = make(chan struct{})
	s.feedMu.Unlock()
}

func parseSeq(seq string) (int64, error) {
	if seq == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(seq, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: change seq %q is not a decimal number", store.ErrInvalid, seq)
	}
	return n, nil
}

// A collection's chunks have rowids in [key<<chunkRowidBits, (key+1)<<chunkRowidBits): 2^36 chunks stored
// over a collection's life (rowids of deleted chunks at the top of the range are used again), and 2^27
// collections created over the file's life.
const (
	chunkRowidBits   = 36
	maxCollectionKey = 1<<(63-chunkRowidBits) - 1
)

// chunkRowids is the range of rowids of the chunks of the collection with key.
func chunkRowids(key int64) (lo, hi int64) {
	return key << chunkRowidBits, (key+1)<<chunkRowidBits - 1
}

// nextChunkRowid returns the first of n free rowids for chunks of the collection with key: after its
// highest.
func nextChunkRowid(t txn, key int64, n int) (int64, error) {
	lo, hi := chunkRowids(key)
	var last int64
	if err := t.scan(qLastChunkRowid, []any{lo, hi}, &last); err != nil {
		return 0, err
	}
	next := max(last+1, lo)
	if next+int64(n)-1 > hi {
		return 0, fmt.Errorf("%w: the collection has used all its %d chunk rowids", store.ErrTooLarge, int64(1)<<chunkRowidBits)
	}
	return next, nil
}

// collectionKey returns the collection's key and dimensions; collection.ErrNotFound if there is none.
func collectionKey(t txn, tenant, id string) (key int64, dims int, err error) {
	err = t.scan(qCollectionKey, []any{tenant, id}, &key, &dims)
	if errors.Is(err, sql.ErrNoRows) {
		err = fmt.Errorf("collection %q: %w", id, collection.ErrNotFound)
	}
	return key, dims, err
}

func scanCollection(scan func(dest ...any) error) (loom.Collection, int64, error) {
	var c loom.Collection
	var key, sec, nsec int64
	var kw, vec sql.NullFloat64
	if err := scan(&key, &c.ID, &c.Name, &c.ChunkStrategy, &c.ChunkSize, &c.ChunkOverlap, &c.Embedder, &c.Dimensions, &sec, &nsec, &kw, &vec); err != nil {
		return loom.Collection{}, 0, err
	}
	c.CreatedAt = time.Unix(sec, nsec).UTC()
	if kw.Valid {
		c.KeywordWeight = &kw.Float64
	}
	if vec.Valid {
		c.VectorWeight = &vec.Float64
	}
	return c, key, nil
}

// nullWeight is a fusion weight as a column value: NULL when not set.
func nullWeight(w *float64) sql.NullFloat64 {
	if w == nil {
		return sql.NullFloat64{}
	}
	return sql.NullFloat64{Float64: *w, Valid: true}
}

// SetFusionWeights implements store.CollectionBackend. It returns an error wrapping collection.ErrNotFound if
// the tenant has no collection of the id.
func (s *Backend) SetFusionWeights(ctx context.Context, tenant, id string, keyword, vector *float64) (loom.Collection, error) {
	var c loom.Collection
	err := s.write(ctx, "set fusion weights", func(t txn) error {
		res, err := t.exec(qSetFusionWeights, nullWeight(keyword), nullWeight(vector), tenant, id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return fmt.Errorf("collection %q: %w", id, collection.ErrNotFound)
		}
		c, _, err = scanCollection(func(dest ...any) error { return t.scan(qCollectionByID, []any{tenant, id}, dest...) })
		return err
	})
	if err != nil {
		return loom.Collection{}, err
	}
	return c, nil
}

func scanDocument(scan func(dest ...any) error) (loom.Document, error) {
	var d loom.Document
	var meta string
	var sec, nsec int64
	if err := scan(&d.ID, &d.Source, &d.ContentType, &d.Hash, &d.Bytes, &d.Chunks, &meta, &sec, &nsec); err != nil {
		return loom.Document{}, err
	}
	var err error
	if d.Metadata, err = decodeMetadata(meta); err != nil {
		return loom.Document{}, &decodeError{fmt.Errorf("document %q metadata: %w", d.ID, err)}
	}
	d.UpdatedAt = time.Unix(sec, nsec).UTC()
	return d, nil
}

// chunkRow holds the scan targets of a chunk's row, made once for all the rows of a query, and the
// metadata of the document whose chunks are being read.
type chunkRow struct {
	ch      collection.Chunk
	meta    string
	vector  []byte
	dest    []any
	doc     string            // the document whose metadata docMeta is
	docMeta map[string]string // shared by the chunks of doc
}

// document reads the metadata of the document id into r, for the chunks read next; sql.ErrNoRows if there
// is no such document.
func (r *chunkRow) document(t txn, tenant, collectionID, id string) error {
	var meta string
	if err := t.scan(qDocumentMeta, []any{tenant, collectionID, id}, &meta); err != nil {
		return err
	}
	m, err := decodeMetadata(meta)
	if err != nil {
		return &decodeError{fmt.Errorf("document %q metadata: %w", id, err)}
	}
	r.doc, r.docMeta = id, m
	return nil
}

func (r *chunkRow) targets() []any {
	if r.dest == nil {
		c := &r.ch.Chunk
		r.dest = []any{&c.ID, &c.DocumentID, &c.Index, &c.StartOffset, &c.EndOffset, &c.TokenCount, &c.Content, &r.meta, &r.vector}
	}
	return r.dest
}

// scan reads the next row of rows, a chunk of the document r has the metadata of.
func (r *chunkRow) scan(rows *sql.Rows) (collection.Chunk, error) {
	if err := rows.Scan(r.targets()...); err != nil {
		return collection.Chunk{}, err
	}
	return r.decode()
}

// decode returns the chunk last scanned, with its metadata as a whole.
func (r *chunkRow) decode() (collection.Chunk, error) {
	ch := r.ch
	own, err := decodeMetadata(r.meta)
	if err != nil {
		return collection.Chunk{}, &decodeError{fmt.Errorf("chunk %q metadata: %w", ch.ID, err)}
	}
	ch.Metadata, ch.DocumentMetadata = collection.MergeMetadata(r.docMeta, own), r.docMeta
	if ch.Vector, err = decodeVector(r.vector); err != nil {
		return collection.Chunk{}, &decodeError{fmt.Errorf("chunk %q vector: %w", ch.ID, err)}
	}
	return ch, nil
}

// bitsLen is the number of bits n takes.
func bitsLen(n int) int { return bits.Len(uint(n)) }

// encodeVector is v as little-endian float32s; nil for none (stored as NULL).
func encodeVector(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func decodeVector(b []byte) ([]float32, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("%d bytes is not a whole number of float32s", len(b))
	}
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}

func encodeMetadata(m map[string]string) (string, error) {
	if len(m) == 0 {
		return "", nil
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("%w: metadata: %w", store.ErrInvalid, err)
	}
	return string(b), nil
}

func decodeMetadata(s string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	var m map[string]string
	err := json.Unmarshal([]byte(s), &m)
	return m, err
}

// isConstraint reports whether err is SQLite's constraint violation (a UNIQUE or PRIMARY KEY conflict).
func isConstraint(err error) bool {
	var coded interface{ Code() int }
	return errors.As(err, &coded) && coded.Code()&0xff == 19 // SQLITE_CONSTRAINT and its extended codes
}
