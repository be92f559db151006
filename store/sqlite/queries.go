package sqlite

import "strings"

// The SQL of the store, every value a parameter. Each statement is prepared at Open on the connections that
// run it: the writer's (writeQueries) or the read pool's (readQueries).

const (
	qPing = `SELECT version FROM schema_version`

	qGetAgent    = `SELECT data FROM agents WHERE tenant = ? AND id = ?`
	qPutAgent    = `INSERT INTO agents (tenant, id, data) VALUES (?, ?, ?) ON CONFLICT (tenant, id) DO UPDATE SET data = excluded.data`
	qDeleteAgent = `DELETE FROM agents WHERE tenant = ? AND id = ?`

	qFacts   = `SELECT key, value, pinned, updated_s, updated_ns, source FROM facts WHERE tenant = ? AND user = ? ORDER BY key`
	qSetFact = `INSERT INTO facts (tenant, user, key, value, pinned, updated_s, updated_ns, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, user, key) DO UPDATE SET value = excluded.value, pinned = excluded.pinned,
		updated_s = excluded.updated_s, updated_ns = excluded.updated_ns, source = excluded.source`
	qDeleteFact = `DELETE FROM facts WHERE tenant = ? AND user = ? AND key = ?`

	qSession     = `SELECT expires_at, next_msg, next_tool FROM sessions WHERE tenant = ? AND session = ?`
	qLiveSession = `SELECT expires_at, next_msg - 1 FROM sessions WHERE tenant = ? AND session = ?`
	qPutSession  = `INSERT INTO sessions (tenant, session, expires_at, next_msg, next_tool) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tenant, session) DO UPDATE SET expires_at = excluded.expires_at, next_msg = excluded.next_msg,
		next_tool = excluded.next_tool`
	qDeleteSession  = `DELETE FROM sessions WHERE tenant = ? AND session = ?`
	qHasKnowledge   = `SELECT EXISTS (SELECT 1 FROM knowledge WHERE tenant = ? AND session = ?)`
	qDeleteExpired  = `DELETE FROM sessions WHERE rowid IN (SELECT rowid FROM sessions WHERE expires_at > 0 AND expires_at <= ? LIMIT ?)`
	qInsertMessage  = `INSERT INTO messages (tenant, session, seq, role, content, name, tool_calls, tool_call_id, ts_s, ts_ns, tok_o200k, tok_cl100k, tok_estimate1, tok_other, parts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qNewestMessages = `SELECT seq, role, content, name, tool_calls, tool_call_id, ts_s, ts_ns, tok_o200k, tok_cl100k, tok_estimate1, tok_other, parts
		FROM messages WHERE tenant = ? AND session = ? AND seq >= ? AND seq < ? ORDER BY seq DESC`
	qMessageRange = `SELECT seq, role, content, name, tool_calls, tool_call_id, ts_s, ts_ns, tok_o200k, tok_cl100k, tok_estimate1, tok_other, parts
		FROM messages WHERE tenant = ? AND session = ? AND seq >= ? AND seq < ? ORDER BY seq`
	qInsertToolOutput = `INSERT INTO tool_outputs (tenant, session, seq, tool, call_id, args, result, ts_s, ts_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qToolOutputs      = `SELECT seq, tool, call_id, args, result, ts_s, ts_ns FROM tool_outputs WHERE tenant = ? AND session = ? ORDER BY seq`
	qDeleteKnowledge  = `DELETE FROM knowledge WHERE tenant = ? AND session = ?`
	qInsertKnowledge  = `INSERT INTO knowledge (tenant, session, position, id, document_id, content, score, source, type, trusted,
		start_offset, end_offset, metadata, token_counts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qKnowledge = `SELECT id, document_id, content, score, source, type, trusted, start_offset, end_offset, metadata, token_counts
		FROM knowledge WHERE tenant = ? AND session = ? ORDER BY position`
	qSummary    = `SELECT rev, data FROM summaries WHERE tenant = ? AND session = ?`
	qPutSummary = `INSERT INTO summaries (tenant, session, rev, data) VALUES (?, ?, ?, ?)
		ON CONFLICT (tenant, session) DO UPDATE SET rev = excluded.rev, data = excluded.data`
	qCacheState    = `SELECT data FROM cache_states WHERE tenant = ? AND session = ?`
	qPutCacheState = `INSERT INTO cache_states (tenant, session, data) VALUES (?, ?, ?)
		ON CONFLICT (tenant, session) DO UPDATE SET data = excluded.data`
	qLastAssembly   = `SELECT coalesce(max(seq), 0) FROM assemblies WHERE tenant = ? AND session = ?`
	qInsertAssembly = `INSERT INTO assemblies (tenant, session, seq, ts_s, ts_ns, data) VALUES (?, ?, ?, ?, ?, ?)`
	qTrimAssemblies = `DELETE FROM assemblies WHERE tenant = ? AND session = ? AND seq <= ?`
	qHasAssemblies  = `SELECT EXISTS (SELECT 1 FROM assemblies WHERE tenant = ? AND session = ?)`
	qAssemblies     = `SELECT seq, ts_s, ts_ns, data FROM assemblies WHERE tenant = ? AND session = ? ORDER BY seq DESC`
	// The tenant's live sessions with records (?1 tenant, ?2 now in Unix nanoseconds, ?3 limit), the most
	// recently recorded first, read in that order from the index sessions_recorded: each one's count and
	// newest seq, by seeks of the assemblies' primary key (the records themselves, the bulk of the table,
	// are not read). A session's seqs are contiguous (a trim deletes the oldest): its count is the newest
	// seq less the oldest, plus one.
	qAssemblySessions = `SELECT session, last - first + 1, last, recorded_at FROM (SELECT s.session, s.recorded_at,
			(SELECT seq FROM assemblies WHERE tenant = ?1 AND session = s.session ORDER BY seq DESC LIMIT 1) AS last,
			(SELECT seq FROM assemblies WHERE tenant = ?1 AND session = s.session ORDER BY seq LIMIT 1) AS first
		FROM sessions AS s INDEXED BY sessions_recorded
		WHERE s.tenant = ?1 AND s.recorded_at > 0 AND (s.expires_at = 0 OR s.expires_at > ?2)
		ORDER BY s.recorded_at DESC, s.session LIMIT ?3)`
	qSetRecordedAt = `UPDATE sessions SET recorded_at = ? WHERE tenant = ? AND session = ?`
)

// Collections (collection.Store).
const (
	collectionColumns = `key, id, name, chunk_strategy, chunk_size, chunk_overlap, embedder, dimensions, created_s, created_ns, keyword_weight, vector_weight`
	qCollectionByID   = `SELECT ` + collectionColumns + ` FROM collections WHERE tenant = ? AND id = ?`
	qCollectionByName = `SELECT ` + collectionColumns + ` FROM collections WHERE tenant = ? AND name = ?`
	qCollections      = `SELECT ` + collectionColumns + ` FROM collections WHERE tenant = ? ORDER BY name`
	qAllCollections   = `SELECT tenant, id FROM collections ORDER BY tenant, id`
	qCollectionKey    = `SELECT key, dimensions FROM collections WHERE tenant = ? AND id = ?`
	// qCollectionClash finds the tenant's collections whose name or id is a new one's name or id (parameters:
	// tenant, name, id, twice), each half a search of one unique index.
	qCollectionClash = `SELECT id, name FROM collections WHERE tenant = ? AND name IN (?, ?)
		UNION SELECT id, name FROM collections WHERE tenant = ? AND id IN (?, ?)`
	qInsertCollection    = `INSERT INTO collections (tenant, id, name, chunk_strategy, chunk_size, chunk_overlap, embedder, dimensions, created_s, created_ns, keyword_weight, vector_weight) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qSetFusionWeights    = `UPDATE collections SET keyword_weight = ?, vector_weight = ? WHERE tenant = ? AND id = ?`
	qSetDimensions       = `UPDATE collections SET dimensions = ? WHERE tenant = ? AND id = ?`
	qDeleteCollection    = `DELETE FROM collections WHERE tenant = ? AND id = ?`
	qDeleteCollChunks    = `DELETE FROM chunks WHERE tenant = ? AND collection_id = ?`
	qDeleteCollDocuments = `DELETE FROM documents WHERE tenant = ? AND collection_id = ?`

	documentColumns = `id, source, content_type, hash, bytes, chunks, metadata, updated_s, updated_ns`
	qDocument       = `SELECT ` + documentColumns + ` FROM documents WHERE tenant = ? AND collection_id = ? AND id = ?`
	qDocuments      = `SELECT ` + documentColumns + ` FROM documents WHERE tenant = ? AND collection_id = ? ORDER BY id`
	qDocumentHash   = `SELECT hash FROM documents WHERE tenant = ? AND collection_id = ? AND id = ?`
	qDocumentMeta   = `SELECT metadata FROM documents WHERE tenant = ? AND collection_id = ? AND id = ?`
	qPutDocument    = `INSERT INTO documents (tenant, collection_id, id, source, content_type, hash, bytes, chunks, metadata, updated_s, updated_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, collection_id, id) DO UPDATE SET source = excluded.source,
		content_type = excluded.content_type, hash = excluded.hash, bytes = excluded.bytes, chunks = excluded.chunks,
		metadata = excluded.metadata, updated_s = excluded.updated_s, updated_ns = excluded.updated_ns`
	qDeleteDocument  = `DELETE FROM documents WHERE tenant = ? AND collection_id = ? AND id = ?`
	qDeleteDocChunks = `DELETE FROM chunks WHERE tenant = ? AND collection_id = ? AND document_id = ?`
	chunkColumns     = `id, document_id, idx, start_offset, end_offset, token_count, content, metadata, vector`
	qLastChunkRowid  = `SELECT coalesce(max(rid), -1) FROM chunks WHERE rid BETWEEN ? AND ?`
	qDocumentChunks  = `SELECT ` + chunkColumns + ` FROM chunks WHERE tenant = ? AND collection_id = ? AND document_id = ? ORDER BY idx, id`
	// qCollectionChunks reads a collection's chunks a document after another (in the order of the index
	// chunks_document, no sort), so that each document's metadata is read once.
	qCollectionChunks = `SELECT ` + chunkColumns + ` FROM chunks WHERE tenant = ? AND collection_id = ? ORDER BY document_id, idx`

	qInsertChange = `INSERT INTO changes (tenant, collection_id, document_id, op, at) VALUES (?, ?, ?, ?, ?)`
	qTrimChanges  = `DELETE FROM changes WHERE seq <= ?`
	qChanges      = `SELECT seq, tenant, collection_id, document_id, op FROM changes WHERE seq > ? ORDER BY seq LIMIT ?`
	qLastChange   = `SELECT coalesce(max(seq), 0) FROM changes`
)

var writeQueries = append([]string{
	qCollectionKey, qCollectionByID, qCollectionClash, qInsertCollection, qSetFusionWeights, qSetDimensions, qDeleteCollection, qDeleteCollChunks, qDeleteCollDocuments,
	qDocumentHash, qPutDocument, qDeleteDocument, qDeleteDocChunks, qLastChunkRowid, qInsertChange, qTrimChanges,

	qPutAgent, qDeleteAgent, qSetFact, qDeleteFact,
	qSession, qPutSession, qDeleteSession, qHasKnowledge, qDeleteExpired,
	qInsertMessage, qInsertToolOutput, qDeleteKnowledge, qInsertKnowledge,
	qLiveSession, qSummary, qPutSummary, qPutCacheState,
	qLastAssembly, qInsertAssembly, qTrimAssemblies, qHasAssemblies, qSetRecordedAt,
}, insertChunks...)

var readQueries = []string{
	qPing, qGetAgent, qFacts, qLiveSession, qNewestMessages, qMessageRange, qToolOutputs, qKnowledge, qSummary, qCacheState, qAssemblies, qAssemblySessions,
	qCollectionByID, qCollectionByName, qCollections, qAllCollections, qCollectionKey, qDocument, qDocuments, qDocumentMeta,
	qDocumentChunks, qCollectionChunks, qChanges, qLastChange,
}

// insertChunks[i] inserts 1<<i chunks in one statement: a document's chunks are inserted in as few
// statements as their count has bits set (a 20-chunk document in two), not one a chunk.
var insertChunks = func() []string {
	const row = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qs := make([]string, maxChunkBatchBits+1)
	for i := range qs {
		qs[i] = `INSERT INTO chunks (rid, tenant, collection_id, id, document_id, idx, start_offset, end_offset, token_count, content, metadata, vector) VALUES ` +
			strings.Repeat(row+", ", 1<<i-1) + row
	}
	return qs
}()

// maxChunkBatchBits bounds a chunk INSERT to 1<<maxChunkBatchBits rows (of 12 parameters).
const maxChunkBatchBits = 6
