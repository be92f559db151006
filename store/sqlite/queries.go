package sqlite

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
	qInsertMessage  = `INSERT INTO messages (tenant, session, seq, role, content, name, tool_calls, tool_call_id, ts_s, ts_ns, tok_o200k, tok_cl100k, tok_other) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qNewestMessages = `SELECT seq, role, content, name, tool_calls, tool_call_id, ts_s, ts_ns, tok_o200k, tok_cl100k, tok_other
		FROM messages WHERE tenant = ? AND session = ? ORDER BY seq DESC LIMIT ?`
	qInsertToolOutput = `INSERT INTO tool_outputs (tenant, session, seq, tool, call_id, args, result, ts_s, ts_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qToolOutputs      = `SELECT seq, tool, call_id, args, result, ts_s, ts_ns FROM tool_outputs WHERE tenant = ? AND session = ? ORDER BY seq`
	qDeleteKnowledge  = `DELETE FROM knowledge WHERE tenant = ? AND session = ?`
	qInsertKnowledge  = `INSERT INTO knowledge (tenant, session, position, id, document_id, content, score, source, type, trusted,
		start_offset, end_offset, metadata, token_counts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qKnowledge = `SELECT id, document_id, content, score, source, type, trusted, start_offset, end_offset, metadata, token_counts
		FROM knowledge WHERE tenant = ? AND session = ? ORDER BY position`
)

var writeQueries = []string{
	qPutAgent, qDeleteAgent, qSetFact, qDeleteFact,
	qSession, qPutSession, qDeleteSession, qHasKnowledge, qDeleteExpired,
	qInsertMessage, qInsertToolOutput, qDeleteKnowledge, qInsertKnowledge,
}

var readQueries = []string{
	qPing, qGetAgent, qFacts, qLiveSession, qNewestMessages, qToolOutputs, qKnowledge,
}
