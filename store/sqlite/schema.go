package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// migrations are the schema, one step a version: migrations[i] takes the file from version i-1 to i. Steps
// are only ever appended; a released step never changes.
//
// Every table is keyed by tenant first, so no id of one tenant can name a row of another. A session's
// messages, tool outputs and knowledge reference its row in sessions and go when it goes (ON DELETE
// CASCADE). Times are kept as Unix seconds plus nanoseconds, exact for any time.Time; expires_at is Unix
// nanoseconds, 0 for never.
var migrations = []string{
	1: `
CREATE TABLE agents (
	tenant TEXT NOT NULL,
	id     TEXT NOT NULL,
	data   TEXT NOT NULL, -- the store.Agent as JSON
	PRIMARY KEY (tenant, id)
);
CREATE TABLE facts (
	tenant  TEXT NOT NULL,
	user    TEXT NOT NULL,
	key     TEXT NOT NULL,
	value   TEXT NOT NULL,
	pinned  INTEGER NOT NULL,
	updated_s  INTEGER NOT NULL,
	updated_ns INTEGER NOT NULL,
	source  TEXT NOT NULL,
	PRIMARY KEY (tenant, user, key)
);
CREATE TABLE sessions (
	tenant     TEXT NOT NULL,
	session    TEXT NOT NULL,
	expires_at INTEGER NOT NULL, -- Unix nanoseconds; 0: never
	next_msg   INTEGER NOT NULL, -- the seq the next message gets
	next_tool  INTEGER NOT NULL, -- the seq the next tool output gets
	PRIMARY KEY (tenant, session)
);
CREATE INDEX sessions_expiry ON sessions (expires_at) WHERE expires_at > 0;
CREATE TABLE messages (
	tenant       TEXT NOT NULL,
	session      TEXT NOT NULL,
	seq          INTEGER NOT NULL,
	role         TEXT NOT NULL,
	content      TEXT NOT NULL,
	name         TEXT NOT NULL,
	tool_calls   TEXT NOT NULL, -- JSON, '' for none
	tool_call_id TEXT NOT NULL,
	ts_s         INTEGER NOT NULL,
	ts_ns        INTEGER NOT NULL,
	tok_o200k    INTEGER NOT NULL, -- the o200k_base count, -1 if absent
	tok_cl100k   INTEGER NOT NULL, -- the cl100k_base count, -1 if absent
	tok_other    TEXT NOT NULL,    -- other counts as a JSON object, '' for none
	PRIMARY KEY (tenant, session, seq),
	FOREIGN KEY (tenant, session) REFERENCES sessions (tenant, session) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE TABLE tool_outputs (
	tenant  TEXT NOT NULL,
	session TEXT NOT NULL,
	seq     INTEGER NOT NULL,
	tool    TEXT NOT NULL,
	call_id TEXT NOT NULL,
	args    TEXT NOT NULL,
	result  TEXT NOT NULL,
	ts_s    INTEGER NOT NULL,
	ts_ns   INTEGER NOT NULL,
	PRIMARY KEY (tenant, session, seq),
	FOREIGN KEY (tenant, session) REFERENCES sessions (tenant, session) ON DELETE CASCADE
);
CREATE TABLE knowledge (
	tenant       TEXT NOT NULL,
	session      TEXT NOT NULL,
	position     INTEGER NOT NULL,
	id           TEXT NOT NULL,
	document_id  TEXT NOT NULL,
	content      TEXT NOT NULL,
	score        REAL NOT NULL,
	source       TEXT NOT NULL,
	type         TEXT NOT NULL,
	trusted      INTEGER NOT NULL,
	start_offset INTEGER NOT NULL,
	end_offset   INTEGER NOT NULL,
	metadata     TEXT NOT NULL, -- JSON, '' for none
	token_counts TEXT NOT NULL, -- JSON, '' for none
	PRIMARY KEY (tenant, session, position),
	FOREIGN KEY (tenant, session) REFERENCES sessions (tenant, session) ON DELETE CASCADE
) WITHOUT ROWID;
`,
	// Knowledge collections (collection.Store). A collection has an integer key besides its id, and its
	// chunks' rowids are in the range of the key (see chunkRowids), so that a keyword search reads only the
	// collection's part of the FTS5 index (rowid BETWEEN, which FTS5 applies while it matches) instead of
	// filtering every tenant's matches. chunks_fts is an external-content index over chunks.content, with
	// the chunks' rowids; the triggers keep it exact on every insert, delete (cascades included) and update.
	// The changes table is the change feed other stores and processes follow.
	2: `
CREATE TABLE collections (
	key            INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused: a rowid range is one collection's ever
	tenant         TEXT NOT NULL,
	id             TEXT NOT NULL,
	name           TEXT NOT NULL,
	chunk_strategy TEXT NOT NULL,
	chunk_size     INTEGER NOT NULL,
	chunk_overlap  INTEGER NOT NULL,
	embedder       TEXT NOT NULL,
	dimensions     INTEGER NOT NULL, -- 0 until the first vectors
	created_s      INTEGER NOT NULL,
	created_ns     INTEGER NOT NULL,
	UNIQUE (tenant, id),
	UNIQUE (tenant, name)
);
CREATE TABLE documents (
	tenant        TEXT NOT NULL,
	collection_id TEXT NOT NULL,
	id            TEXT NOT NULL,
	source        TEXT NOT NULL,
	content_type  TEXT NOT NULL,
	hash          TEXT NOT NULL,
	bytes         INTEGER NOT NULL,
	chunks        INTEGER NOT NULL,
	metadata      TEXT NOT NULL, -- JSON, '' for none
	updated_s     INTEGER NOT NULL,
	updated_ns    INTEGER NOT NULL,
	PRIMARY KEY (tenant, collection_id, id),
	FOREIGN KEY (tenant, collection_id) REFERENCES collections (tenant, id) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE TABLE chunks (
	rid           INTEGER PRIMARY KEY, -- the rowid in chunks_fts, in the collection's range
	tenant        TEXT NOT NULL,
	collection_id TEXT NOT NULL,
	id            TEXT NOT NULL,
	document_id   TEXT NOT NULL,
	idx           INTEGER NOT NULL,
	start_offset  INTEGER NOT NULL,
	end_offset    INTEGER NOT NULL,
	token_count   INTEGER NOT NULL,
	content       TEXT NOT NULL,
	metadata      TEXT NOT NULL, -- JSON, '' for none
	vector        BLOB,          -- little-endian float32s, NULL for none
	UNIQUE (tenant, collection_id, id),
	FOREIGN KEY (tenant, collection_id, document_id) REFERENCES documents (tenant, collection_id, id) ON DELETE CASCADE
);
CREATE INDEX chunks_document ON chunks (tenant, collection_id, document_id, idx);
CREATE VIRTUAL TABLE chunks_fts USING fts5 (content, content = 'chunks', content_rowid = 'rid',
	tokenize = 'unicode61 remove_diacritics 2');
CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN
	INSERT INTO chunks_fts (rowid, content) VALUES (new.rid, new.content);
END;
CREATE TRIGGER chunks_fts_delete AFTER DELETE ON chunks BEGIN
	INSERT INTO chunks_fts (chunks_fts, rowid, content) VALUES ('delete', old.rid, old.content);
END;
CREATE TRIGGER chunks_fts_update AFTER UPDATE ON chunks BEGIN
	INSERT INTO chunks_fts (chunks_fts, rowid, content) VALUES ('delete', old.rid, old.content);
	INSERT INTO chunks_fts (rowid, content) VALUES (new.rid, new.content);
END;
CREATE TABLE changes (
	seq           INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused, even after trimming
	tenant        TEXT NOT NULL,
	collection_id TEXT NOT NULL,
	document_id   TEXT NOT NULL, -- '' when the whole collection was deleted
	op            TEXT NOT NULL,
	at            INTEGER NOT NULL -- Unix nanoseconds
);
`,
	// Keyword search leaves SQLite for the engine's in-memory BM25 (statistics of one collection, never the
	// whole file's, and the same analyzer on every store): the FTS5 index and its triggers go. A chunk
	// keeps only its own metadata (the entries its document's metadata does not hold alike): the copies of
	// the document's that version 2 kept in every chunk go too, and reads merge the document's back.
	3: `
DROP TRIGGER chunks_fts_insert;
DROP TRIGGER chunks_fts_delete;
DROP TRIGGER chunks_fts_update;
DROP TABLE chunks_fts;
UPDATE chunks SET metadata = coalesce((
	SELECT nullif(json_group_object(m.key, m.value), '{}') FROM json_each(chunks.metadata) AS m
	WHERE NOT EXISTS (
		SELECT 1 FROM documents AS d, json_each(CASE d.metadata WHEN '' THEN '{}' ELSE d.metadata END) AS dm
		WHERE d.tenant = chunks.tenant AND d.collection_id = chunks.collection_id AND d.id = chunks.document_id
			AND dm.key = m.key AND dm.value = m.value)
	), '')
WHERE metadata != '';
`,
	// A collection's fusion weights (loom.Collection.KeywordWeight, VectorWeight), NULL when not set.
	4: `
ALTER TABLE collections ADD COLUMN keyword_weight REAL;
ALTER TABLE collections ADD COLUMN vector_weight REAL;
`,
	// A message's content parts (loom.Message.Parts) as JSON, '' for none: texts and images, an image's
	// data in base64.
	5: `
ALTER TABLE messages ADD COLUMN parts TEXT NOT NULL DEFAULT '';
`,
	// A session's running summary and its compaction's state (loom.Summary) as JSON, with its revision
	// apart for the compare-and-set of a write; it goes with its session.
	6: `
CREATE TABLE summaries (
	tenant  TEXT NOT NULL,
	session TEXT NOT NULL,
	rev     INTEGER NOT NULL,
	data    TEXT NOT NULL, -- the loom.Summary as JSON
	PRIMARY KEY (tenant, session),
	FOREIGN KEY (tenant, session) REFERENCES sessions (tenant, session) ON DELETE CASCADE
) WITHOUT ROWID;
`,
	// A session's cache state (store.CacheStateBackend): the hashes of its last assembly's stable parts,
	// opaque to the store; it goes with its session.
	7: cacheStatesTable,
	// A session's recent assemblies for the inspector (store.AssemblyRecord), the newest few kept; they go
	// with their session.
	8: `
CREATE TABLE assemblies (
	tenant  TEXT NOT NULL,
	session TEXT NOT NULL,
	seq     INTEGER NOT NULL,
	ts_s    INTEGER NOT NULL,
	ts_ns   INTEGER NOT NULL,
	data    TEXT NOT NULL, -- the record's JSON
	PRIMARY KEY (tenant, session, seq),
	FOREIGN KEY (tenant, session) REFERENCES sessions (tenant, session) ON DELETE CASCADE
) WITHOUT ROWID;
`,
	// Step 7 was empty in a build that already had step 8: a file it brought to version 8 has no
	// cache_states, which this step makes where it is missing.
	9: cacheStatesTable,
	// When each session last recorded an assembly (Unix nanoseconds; 0: never), so that the inspector's
	// list of recorded sessions (AssemblySessions) reads the newest few by an index, whatever the number
	// of sessions. A file's sessions with records get their newest record's time.
	10: `
ALTER TABLE sessions ADD COLUMN recorded_at INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET recorded_at = coalesce((SELECT max(ts_s * 1000000000 + ts_ns) FROM assemblies AS a
	WHERE a.tenant = sessions.tenant AND a.session = sessions.session), 0);
CREATE INDEX sessions_recorded ON sessions (tenant, recorded_at DESC, session) WHERE recorded_at > 0;
`,
	// A message's estimate (tokenizer.Estimate of its content) under the rule named estimate/1
	// (estimateColumnKey), -1 if absent: a message written before this step has none, and is estimated
	// when it is read. The estimates of another rule go in tok_other, under their key.
	11: `ALTER TABLE messages ADD COLUMN tok_estimate1 INTEGER NOT NULL DEFAULT -1;`,
}

// cacheStatesTable is step 7, made again by step 9 where it is missing.
const cacheStatesTable = `
CREATE TABLE IF NOT EXISTS cache_states (
	tenant  TEXT NOT NULL,
	session TEXT NOT NULL,
	data    BLOB NOT NULL,
	PRIMARY KEY (tenant, session),
	FOREIGN KEY (tenant, session) REFERENCES sessions (tenant, session) ON DELETE CASCADE
) WITHOUT ROWID;
`

// SchemaVersion is the schema version this package writes: a file at a later version (written by a newer
// Loom) is refused by Open.
const SchemaVersion = 11

// migrate brings the file to SchemaVersion in one write transaction. A file at SchemaVersion already (every
// open but the first) is only read: no write lock for the processes that open it at once to queue for.
func migrate(ctx context.Context, db *sql.DB) error {
	var have int
	if err := db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&have); err == nil {
		if have > SchemaVersion {
			return fmt.Errorf("%w: the file has schema version %d, this build knows up to %d", ErrNewerSchema, have, SchemaVersion)
		}
		if have == SchemaVersion {
			return nil
		}
	} // else most likely a new file, without the table: the transaction below creates it
	tx, err := db.BeginTx(ctx, nil) // BEGIN IMMEDIATE: see the writer's DSN
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return err
	}
	var version int
	switch err := tx.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&version); {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if version > SchemaVersion {
		return fmt.Errorf("%w: the file has schema version %d, this build knows up to %d", ErrNewerSchema, version, SchemaVersion)
	}
	if version == SchemaVersion {
		return tx.Commit()
	}
	for v := version + 1; v <= SchemaVersion; v++ {
		if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
			return fmt.Errorf("migration %d: %w", v, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = ?`, SchemaVersion); err != nil {
		return err
	}
	return tx.Commit()
}
