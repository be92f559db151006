package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/tokenizer"
)

// PutAgent implements store.Backend.
func (s *Backend) PutAgent(ctx context.Context, tenant string, a store.Agent) error {
	data, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("%w: agent %q: %w", store.ErrInvalid, a.ID, err)
	}
	return s.write(ctx, "put agent", func(t txn) error {
		_, err := t.exec(qPutAgent, tenant, a.ID, string(data))
		return err
	})
}

// GetAgent implements store.Backend. It returns an error wrapping store.ErrNotFound when there is no
// such agent.
func (s *Backend) GetAgent(ctx context.Context, tenant, id string) (store.Agent, error) {
	var a store.Agent
	err := s.read(ctx, "get agent", func(t txn) error {
		var err error
		a, err = getAgent(t, tenant, id)
		return err
	})
	return a, err
}

func getAgent(t txn, tenant, id string) (store.Agent, error) {
	var data string
	switch err := t.scan(qGetAgent, []any{tenant, id}, &data); {
	case errors.Is(err, sql.ErrNoRows):
		return store.Agent{}, fmt.Errorf("agent %q: %w", id, store.ErrNotFound)
	case err != nil:
		return store.Agent{}, err
	}
	var a store.Agent
	if err := json.Unmarshal([]byte(data), &a); err != nil {
		return store.Agent{}, &decodeError{fmt.Errorf("agent %q: %w", id, err)}
	}
	return a, nil
}

// DeleteAgent implements store.Backend. It returns an error wrapping store.ErrNotFound when there is no
// such agent.
func (s *Backend) DeleteAgent(ctx context.Context, tenant, id string) error {
	return s.write(ctx, "delete agent", func(t txn) error {
		return deleted(t.exec(qDeleteAgent, tenant, id))(fmt.Errorf("agent %q: %w", id, store.ErrNotFound))
	})
}

// deleted returns a func that returns notFound if the DELETE whose result it is deleted no row.
func deleted(res sql.Result, err error) func(notFound error) error {
	return func(notFound error) error {
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		switch {
		case err != nil:
			return err
		case n == 0:
			return notFound
		}
		return nil
	}
}

// SetFact implements store.Backend.
func (s *Backend) SetFact(ctx context.Context, tenant, user string, f store.Fact) error {
	return s.write(ctx, "set fact", func(t txn) error {
		_, err := t.exec(qSetFact, tenant, user, f.Key, f.Value, f.Pinned, f.UpdatedAt.Unix(), f.UpdatedAt.Nanosecond(), f.Source)
		return err
	})
}

// Facts implements store.Backend: ordered by key.
func (s *Backend) Facts(ctx context.Context, tenant, user string) ([]store.Fact, error) {
	var facts []store.Fact
	err := s.read(ctx, "facts", func(t txn) error {
		var err error
		facts, err = readFacts(t, tenant, user)
		return err
	})
	return facts, err
}

func readFacts(t txn, tenant, user string) ([]store.Fact, error) {
	rows, err := t.query(qFacts, tenant, user)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Fact
	var f store.Fact // made once, as are the other scan targets: each escapes to the heap
	var sec, nsec int64
	dest := []any{&f.Key, &f.Value, &f.Pinned, &sec, &nsec, &f.Source}
	for rows.Next() {
		f = store.Fact{}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		f.UpdatedAt = time.Unix(sec, nsec).UTC()
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil // by key (SQLite's BINARY collation is Go's order), as the Store orders them
}

// DeleteFact implements store.Backend. It returns an error wrapping store.ErrNotFound when the user has
// no such fact.
func (s *Backend) DeleteFact(ctx context.Context, tenant, user, key string) error {
	return s.write(ctx, "delete fact", func(t txn) error {
		return deleted(t.exec(qDeleteFact, tenant, user, key))(fmt.Errorf("fact %q: %w", key, store.ErrNotFound))
	})
}

// decodeError is a stored value that does not decode: Load reports it for its source alone.
type decodeError struct{ err error }

func (e *decodeError) Error() string { return "sqlite: decode " + e.err.Error() }
func (e *decodeError) Unwrap() error { return e.err }

// session is a session's row as a write sees it.
type session struct {
	exists            bool
	expires           int64 // Unix nanoseconds; 0: never
	nextMsg, nextTool int64
}

// touch reads the session for a write at now. An expired session is deleted (with its rows) and starts
// again; the expiry is refreshed if the store has a TTL. The caller saves it with put.
func (s *Backend) touch(t txn, tenant, id string, now time.Time) (session, error) {
	ss := session{exists: true}
	switch err := t.scan(qSession, []any{tenant, id}, &ss.expires, &ss.nextMsg, &ss.nextTool); {
	case errors.Is(err, sql.ErrNoRows):
		ss = session{}
	case err != nil:
		return session{}, err
	}
	if ss.exists && ss.expires != 0 && ss.expires <= now.UnixNano() {
		if _, err := t.exec(qDeleteSession, tenant, id); err != nil {
			return session{}, err
		}
		ss = session{}
	}
	if !ss.exists {
		ss.nextMsg, ss.nextTool = 1, 1
	}
	if s.opts.SessionTTL > 0 {
		ss.expires = now.Add(s.opts.SessionTTL).UnixNano()
	}
	return ss, nil
}

// put saves the session's row.
func (ss session) put(t txn, tenant, id string) error {
	_, err := t.exec(qPutSession, tenant, id, ss.expires, ss.nextMsg, ss.nextTool)
	return err
}

// live reports whether the session exists and has not expired at now, and how many messages it has.
func live(t txn, tenant, id string, now time.Time) (ok bool, messages int, err error) {
	var expires int64
	switch err := t.scan(qLiveSession, []any{tenant, id}, &expires, &messages); {
	case errors.Is(err, sql.ErrNoRows):
		return false, 0, nil
	case err != nil:
		return false, 0, err
	}
	return expires == 0 || expires > now.UnixNano(), messages, nil
}

// AppendMessages implements store.Backend: the messages get the session's next seqs in one
// transaction. It returns an error wrapping store.ErrInvalid or store.ErrTooLarge for bad messages (and
// then stores none of them).
func (s *Backend) AppendMessages(ctx context.Context, tenant, sessionID string, msgs []store.Message) ([]store.Message, error) {
	rows := make([]messageRow, len(msgs))
	var err error
	for i := range msgs {
		if rows[i], err = encodeMessage(msgs[i]); err != nil {
			return nil, err
		}
	}
	err = s.write(ctx, "append messages", func(t txn) error {
		ss, err := s.touch(t, tenant, sessionID, s.now())
		if err != nil {
			return err
		}
		first := ss.nextMsg
		ss.nextMsg += int64(len(msgs))
		if err := ss.put(t, tenant, sessionID); err != nil {
			return err
		}
		for i, r := range rows {
			m := msgs[i]
			if _, err := t.exec(qInsertMessage, tenant, sessionID, first+int64(i), m.Role, m.Content, m.Name, r.toolCalls,
				m.ToolCallID, m.Time.Unix(), m.Time.Nanosecond(), r.o200k, r.cl100k, r.estimate, r.other, r.parts); err != nil {
				return err
			}
		}
		for i := range msgs {
			msgs[i].Seq = first + int64(i)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return msgs, nil
}

// messageRow is what of a message is encoded for its columns.
type messageRow struct {
	toolCalls     string // JSON, "" for none
	parts         string // JSON, "" for none
	o200k, cl100k int    // -1: absent
	estimate      int    // the count under estimateColumnKey, -1: absent
	other         string // JSON of the other counts, "" for none
}

// estimateColumnKey is the key of the count that the column tok_estimate1 holds (step 11): the estimate of
// the rule that tokenizer.EstimateKey named then. Bound to that rule, not to tokenizer.EstimateKey, so that
// a later rule's key never reads the column's counts as its own: its counts go in tok_other until a step
// gives them a column.
const estimateColumnKey = "estimate/1"

func encodeMessage(m store.Message) (messageRow, error) {
	r := messageRow{o200k: -1, cl100k: -1, estimate: -1}
	if len(m.ToolCalls) > 0 {
		b, err := json.Marshal(m.ToolCalls)
		if err != nil {
			return r, fmt.Errorf("%w: tool calls: %w", store.ErrInvalid, err)
		}
		r.toolCalls = string(b)
	}
	if len(m.Parts) > 0 {
		b, err := json.Marshal(m.Parts)
		if err != nil {
			return r, fmt.Errorf("%w: content parts: %w", store.ErrInvalid, err)
		}
		r.parts = string(b)
	}
	other := maps.Clone(m.TokenCounts)
	// The two counted encodings and the estimate get columns of their own, unless a writer gave a negative
	// count (which the columns keep for "absent"): then every count goes in the JSON.
	if other[tokenizer.O200KBase] >= 0 && other[tokenizer.CL100KBase] >= 0 && other[estimateColumnKey] >= 0 {
		for _, c := range []struct {
			key string
			col *int
		}{{tokenizer.O200KBase, &r.o200k}, {tokenizer.CL100KBase, &r.cl100k}, {estimateColumnKey, &r.estimate}} {
			if n, ok := other[c.key]; ok {
				*c.col = n
				delete(other, c.key)
			}
		}
	}
	if len(other) > 0 {
		b, err := json.Marshal(other)
		if err != nil {
			return r, fmt.Errorf("%w: token counts: %w", store.ErrInvalid, err)
		}
		r.other = string(b)
	}
	return r, nil
}

// SelectMessages implements store.MessageSelector. With q.MaxTokens it reads newest first and stops at the
// first message that does not fit, which it counts but does not decode (see readMessages).
func (s *Backend) SelectMessages(ctx context.Context, tenant, sessionID string, q store.MessageQuery) ([]store.Message, int64, error) {
	var msgs []store.Message
	var next int64
	err := s.read(ctx, "messages", func(t txn) error {
		ok, n, err := live(t, tenant, sessionID, s.now())
		if err != nil || !ok {
			return err
		}
		msgs, next, err = readMessages(t, tenant, sessionID, q, n)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	return msgs, next, nil
}

// ReadMessages implements store.Backend: the range of seqs the page holds, in one query.
func (s *Backend) ReadMessages(ctx context.Context, tenant, sessionID string, before int64, n int) ([]store.Message, int64, error) {
	return s.SelectMessages(ctx, tenant, sessionID, store.MessageQuery{Before: before, Limit: n})
}

// readMessages answers q (a checked query) for a session of n messages, whose seqs are 1 to n, and
// returns the before of the messages it left out (0 if none). Without q.MaxTokens it reads the range q
// selects. With it, it reads the rows newest first (qNewestMessages) and counts each from its count columns
// (its content, in the estimate or when they have none) and the length of its tool calls, before it
// decodes the row; it stops at the first that does not fit. (A row's counts are stored after its content:
// reading them reads the row, so counting first in a query of its own would read each kept row twice.)
func readMessages(t txn, tenant, sessionID string, q store.MessageQuery, n int) ([]store.Message, int64, error) {
	before := int64(n) + 1
	if q.Before > 0 && q.Before < before {
		before = q.Before
	}
	from := int64(1) // the oldest seq to read
	if q.Limit > 0 {
		from = max(from, before-int64(q.Limit))
	}
	if from >= before {
		return nil, nextBefore(from), nil
	}
	if q.MaxTokens == 0 {
		rows, err := t.query(qMessageRange, tenant, sessionID, from, before)
		if err != nil {
			return nil, 0, err
		}
		defer rows.Close()
		msgs := make([]store.Message, 0, before-from)
		var r messageScan
		for rows.Next() {
			if err := r.scan(rows); err != nil {
				return nil, 0, err
			}
			m, err := r.message()
			if err != nil {
				return nil, 0, err
			}
			msgs = append(msgs, m)
		}
		if err := rows.Err(); err != nil {
			return nil, 0, err
		}
		return msgs, nextBefore(from), nil
	}
	rows, err := t.query(qNewestMessages, tenant, sessionID, from, before)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	msgs := make([]store.Message, 0, min(before-from, int64(q.MaxTokens/store.MessageOverhead)+1)) // what can fit
	var r messageScan
	sum, oldest := 0, before
	for rows.Next() {
		if err := r.scan(rows); err != nil {
			return nil, 0, err
		}
		cost, err := r.tokens(q)
		if err != nil {
			return nil, 0, err
		}
		if sum += cost; sum > q.MaxTokens {
			break
		}
		m, err := r.message()
		if err != nil {
			return nil, 0, err
		}
		msgs, oldest = append(msgs, m), m.Seq
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	slices.Reverse(msgs)
	return msgs, nextBefore(oldest), nil
}

// nextBefore is the before of the messages older than seq from: 0 when from is the first.
func nextBefore(from int64) int64 {
	if from <= 1 {
		return 0
	}
	return from
}

// messageScan holds a row of messageColumns as scanned, for counting before decoding. Its scan targets are
// made once: each that Scan is given escapes to the heap.
type messageScan struct {
	m                       store.Message // without its tool calls, parts and counts
	toolCalls, other, parts string
	sec, nsec               int64
	o200k, cl100k, estimate int
	dest                    []any
}

func (r *messageScan) scan(rows *sql.Rows) error {
	if r.dest == nil {
		r.dest = []any{&r.m.Seq, &r.m.Role, &r.m.Content, &r.m.Name, &r.toolCalls, &r.m.ToolCallID, &r.sec, &r.nsec, &r.o200k, &r.cl100k, &r.estimate, &r.other, &r.parts}
	}
	r.m = store.Message{}
	return rows.Scan(r.dest...)
}

// tokens is store.MessageTokens of the row for q, from its columns: the count of q's encoding (or the
// content counted), and the length of its tool calls' JSON, which is json.Marshal's of them.
func (r *messageScan) tokens(q store.MessageQuery) (int, error) {
	enc, count := q.Encoding, -1
	switch enc {
	case "", tokenizer.O200KBase:
		enc, count = tokenizer.O200KBase, r.o200k
	case tokenizer.CL100KBase:
		count = r.cl100k
	case store.EstimateEncoding:
		if tokenizer.EstimateKey == estimateColumnKey {
			count = r.estimate
		}
	}
	if count < 0 { // in the other counts, or counted now
		var counts map[string]int
		if r.other != "" {
			if err := json.Unmarshal([]byte(r.other), &counts); err != nil {
				return 0, &decodeError{fmt.Errorf("message %d: token counts: %w", r.m.Seq, err)}
			}
		}
		count = store.MessageTokens(store.Message{Content: r.m.Content, TokenCounts: counts}, enc, false) - store.MessageOverhead
	}
	n := count + store.MessageOverhead
	if q.CountToolCalls && enc != store.EstimateEncoding {
		n += len(r.toolCalls) / store.ToolCallBytesPerToken
	}
	return n, nil
}

// message decodes the row.
func (r *messageScan) message() (store.Message, error) {
	m := r.m // (decoded into variables of their own, which escape, so that m does not)
	m.Time = time.Unix(r.sec, r.nsec).UTC()
	if r.toolCalls != "" {
		var calls []loom.ToolCall
		if err := json.Unmarshal([]byte(r.toolCalls), &calls); err != nil {
			return store.Message{}, &decodeError{fmt.Errorf("message %d: tool calls: %w", m.Seq, err)}
		}
		m.ToolCalls = calls
	}
	if r.parts != "" {
		if err := json.Unmarshal([]byte(r.parts), &m.Parts); err != nil {
			return store.Message{}, &decodeError{fmt.Errorf("message %d: content parts: %w", m.Seq, err)}
		}
	}
	if r.other != "" {
		var counts map[string]int
		if err := json.Unmarshal([]byte(r.other), &counts); err != nil {
			return store.Message{}, &decodeError{fmt.Errorf("message %d: token counts: %w", m.Seq, err)}
		}
		m.TokenCounts = counts
	}
	if r.o200k >= 0 || r.cl100k >= 0 || r.estimate >= 0 {
		if m.TokenCounts == nil {
			m.TokenCounts = make(map[string]int, 3)
		}
		if r.o200k >= 0 {
			m.TokenCounts[tokenizer.O200KBase] = r.o200k
		}
		if r.cl100k >= 0 {
			m.TokenCounts[tokenizer.CL100KBase] = r.cl100k
		}
		if r.estimate >= 0 {
			m.TokenCounts[estimateColumnKey] = r.estimate
		}
	}
	return m, nil
}

// AppendToolOutput implements store.Backend.
func (s *Backend) AppendToolOutput(ctx context.Context, tenant, sessionID string, o store.ToolOutput) (store.ToolOutput, error) {
	err := s.write(ctx, "append tool output", func(t txn) error {
		ss, err := s.touch(t, tenant, sessionID, s.now())
		if err != nil {
			return err
		}
		seq := ss.nextTool
		ss.nextTool++
		if err := ss.put(t, tenant, sessionID); err != nil {
			return err
		}
		if _, err := t.exec(qInsertToolOutput, tenant, sessionID, seq, o.Tool, o.CallID, o.Args, o.Result, o.Time.Unix(), o.Time.Nanosecond()); err != nil {
			return err
		}
		o.Seq = seq
		return nil
	})
	if err != nil {
		return store.ToolOutput{}, err
	}
	return o, nil
}

// ToolOutputs implements store.Backend.
func (s *Backend) ToolOutputs(ctx context.Context, tenant, sessionID string) ([]store.ToolOutput, error) {
	var outs []store.ToolOutput
	err := s.read(ctx, "tool outputs", func(t txn) error {
		ok, _, err := live(t, tenant, sessionID, s.now())
		if err != nil || !ok {
			return err
		}
		outs, err = readToolOutputs(t, tenant, sessionID)
		return err
	})
	return outs, err
}

func readToolOutputs(t txn, tenant, sessionID string) ([]store.ToolOutput, error) {
	rows, err := t.query(qToolOutputs, tenant, sessionID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.ToolOutput
	var o store.ToolOutput // made once, as are the other scan targets: each escapes to the heap
	var sec, nsec int64
	dest := []any{&o.Seq, &o.Tool, &o.CallID, &o.Args, &o.Result, &sec, &nsec}
	for rows.Next() {
		o = store.ToolOutput{}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		o.Time = time.Unix(sec, nsec).UTC()
		out = append(out, o)
	}
	return out, rows.Err()
}

// SetKnowledge implements store.Backend.
func (s *Backend) SetKnowledge(ctx context.Context, tenant, sessionID string, items []store.Knowledge) error {
	rows := make([][]any, len(items))
	for i, k := range items {
		metadata, err := jsonOrEmpty(k.Metadata)
		if err != nil {
			return fmt.Errorf("%w: knowledge %d metadata: %w", store.ErrInvalid, i, err)
		}
		counts, err := jsonOrEmpty(k.TokenCounts)
		if err != nil {
			return fmt.Errorf("%w: knowledge %d token counts: %w", store.ErrInvalid, i, err)
		}
		rows[i] = []any{tenant, sessionID, i, k.ID, k.DocumentID, k.Content, k.Score, k.Source, k.Type, k.Trusted,
			k.StartOffset, k.EndOffset, metadata, counts}
	}
	return s.write(ctx, "set knowledge", func(t txn) error {
		ss, err := s.touch(t, tenant, sessionID, s.now())
		if err != nil {
			return err
		}
		if err := ss.put(t, tenant, sessionID); err != nil {
			return err
		}
		if _, err := t.exec(qDeleteKnowledge, tenant, sessionID); err != nil {
			return err
		}
		for _, args := range rows {
			if _, err := t.exec(qInsertKnowledge, args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// Knowledge implements store.Backend.
func (s *Backend) Knowledge(ctx context.Context, tenant, sessionID string) ([]store.Knowledge, error) {
	var items []store.Knowledge
	err := s.read(ctx, "knowledge", func(t txn) error {
		ok, _, err := live(t, tenant, sessionID, s.now())
		if err != nil || !ok {
			return err
		}
		items, err = readKnowledge(t, tenant, sessionID)
		return err
	})
	return items, err
}

func readKnowledge(t txn, tenant, sessionID string) ([]store.Knowledge, error) {
	rows, err := t.query(qKnowledge, tenant, sessionID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Knowledge
	var k store.Knowledge // made once, as are the other scan targets: each escapes to the heap
	var metadata, counts string
	dest := []any{&k.ID, &k.DocumentID, &k.Content, &k.Score, &k.Source, &k.Type, &k.Trusted, &k.StartOffset, &k.EndOffset, &metadata, &counts}
	for rows.Next() {
		k = store.Knowledge{}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		if metadata != "" {
			if err := json.Unmarshal([]byte(metadata), &k.Metadata); err != nil {
				return nil, &decodeError{fmt.Errorf("knowledge %d metadata: %w", len(out), err)}
			}
		}
		if counts != "" {
			if err := json.Unmarshal([]byte(counts), &k.TokenCounts); err != nil {
				return nil, &decodeError{fmt.Errorf("knowledge %d token counts: %w", len(out), err)}
			}
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// jsonOrEmpty is m as JSON, or "" if m is empty.
func jsonOrEmpty[M ~map[string]V, V any](m M) (string, error) {
	if len(m) == 0 {
		return "", nil
	}
	b, err := json.Marshal(m)
	return string(b), err
}

// DeleteSession implements store.Backend. It returns an error wrapping store.ErrNotFound when the
// session has no messages, tool outputs or knowledge (or has expired).
func (s *Backend) DeleteSession(ctx context.Context, tenant, sessionID string) error {
	notFound := fmt.Errorf("session %q: %w", sessionID, store.ErrNotFound)
	return s.write(ctx, "delete session", func(t txn) error {
		var ss session
		switch err := t.scan(qSession, []any{tenant, sessionID}, &ss.expires, &ss.nextMsg, &ss.nextTool); {
		case errors.Is(err, sql.ErrNoRows):
			return notFound
		case err != nil:
			return err
		}
		if ss.expires != 0 && ss.expires <= s.now().UnixNano() {
			return notFound // its rows go with the next cleanup or write
		}
		if ss.nextMsg == 1 && ss.nextTool == 1 {
			var has bool
			if err := t.scan(qHasKnowledge, []any{tenant, sessionID}, &has); err != nil {
				return err
			}
			if !has {
				if err := t.scan(qHasAssemblies, []any{tenant, sessionID}, &has); err != nil {
					return err
				}
			}
			if !has {
				return notFound
			}
		}
		_, err := t.exec(qDeleteSession, tenant, sessionID)
		return err
	})
}

// Load implements store.Loader: it reads every source q names in one read transaction, so the snapshot is
// consistent. A stored value that does not decode is reported in Snapshot.Errors for its source.
func (s *Backend) Load(ctx context.Context, tenant string, q store.LoadQuery) (*store.Snapshot, error) {
	history := q.History()
	snap := &store.Snapshot{Errors: map[store.Source]error{}}
	// source records err for src if it is a source's own (a missing agent, a value that does not decode)
	// and returns it otherwise, to fail the whole read.
	source := func(src store.Source, err error) error {
		var de *decodeError
		if errors.Is(err, store.ErrNotFound) || errors.As(err, &de) {
			snap.Errors[src] = err
			return nil
		}
		return err
	}
	err := s.read(ctx, "load", func(t txn) error {
		if q.Agent != "" {
			a, err := getAgent(t, tenant, q.Agent)
			if err := source(store.SourceAgent, err); err != nil {
				return err
			}
			if err == nil {
				snap.Agent = &a
			}
		}
		if q.User != "" {
			facts, err := readFacts(t, tenant, q.User)
			if err := source(store.SourceMemory, err); err != nil {
				return err
			}
			snap.Facts = facts
		}
		if q.Session == "" {
			return nil
		}
		ok, n, err := live(t, tenant, q.Session, s.now())
		if err != nil || !ok {
			return err
		}
		msgs, next, err := readMessages(t, tenant, q.Session, history, n)
		if err := source(store.SourceHistory, err); err != nil {
			return err
		}
		snap.Messages, snap.NextBefore = msgs, next
		outs, err := readToolOutputs(t, tenant, q.Session)
		if err := source(store.SourceToolOutputs, err); err != nil {
			return err
		}
		snap.ToolOutputs = outs
		items, err := readKnowledge(t, tenant, q.Session)
		if err := source(store.SourceKnowledge, err); err != nil {
			return err
		}
		snap.Knowledge = items
		if q.Summary {
			sum, err := readSummary(t, tenant, q.Session)
			switch {
			case err == nil:
				snap.Summary = &sum
			case errors.Is(err, store.ErrNotFound):
			default:
				if err := source(store.SourceSummary, err); err != nil {
					return err
				}
			}
		}
		if q.CacheState {
			state, err := readCacheState(t, tenant, q.Session)
			switch {
			case err == nil:
				snap.CacheState = state
			case errors.Is(err, store.ErrNotFound):
			default:
				if err := source(store.SourceCacheState, err); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return snap, nil
}

// readSummary reads the session's summary; ErrNotFound when there is none.
func readSummary(t txn, tenant, sessionID string) (store.Summary, error) {
	var rev int64
	var data string
	switch err := t.scan(qSummary, []any{tenant, sessionID}, &rev, &data); {
	case errors.Is(err, sql.ErrNoRows):
		return store.Summary{}, fmt.Errorf("summary of session %q: %w", sessionID, store.ErrNotFound)
	case err != nil:
		return store.Summary{}, err
	}
	var sum store.Summary
	if err := json.Unmarshal([]byte(data), &sum); err != nil {
		return store.Summary{}, &decodeError{fmt.Errorf("summary: %w", err)}
	}
	sum.Rev = rev
	return sum, nil
}

// Summary implements store.SummaryBackend.
func (s *Backend) Summary(ctx context.Context, tenant, sessionID string) (store.Summary, error) {
	var sum store.Summary
	err := s.read(ctx, "summary", func(t txn) error {
		ok, _, err := live(t, tenant, sessionID, s.now())
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("summary of session %q: %w", sessionID, store.ErrNotFound)
		}
		sum, err = readSummary(t, tenant, sessionID)
		return err
	})
	return sum, err
}

// SwapSummary implements store.SummaryBackend: the revision compared and the row written in one write
// transaction, which the file's write lock makes atomic against every process that has it open.
func (s *Backend) SwapSummary(ctx context.Context, tenant, sessionID string, rev int64, sum store.Summary) (bool, error) {
	data, err := json.Marshal(sum)
	if err != nil {
		return false, fmt.Errorf("sqlite: encode summary: %w", err)
	}
	done := false
	err = s.write(ctx, "swap summary", func(t txn) error {
		ok, n, err := live(t, tenant, sessionID, s.now())
		if err != nil {
			return err
		}
		if !ok || n == 0 {
			return fmt.Errorf("session %q: %w", sessionID, store.ErrNotFound)
		}
		var cur int64
		switch err := t.scan(qSummary, []any{tenant, sessionID}, &cur, new(string)); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		}
		if cur != rev {
			return nil
		}
		if _, err := t.exec(qPutSummary, tenant, sessionID, sum.Rev, string(data)); err != nil {
			return err
		}
		done = true
		return nil
	})
	return done, err
}

// readCacheState reads the session's cache state; ErrNotFound when there is none.
func readCacheState(t txn, tenant, sessionID string) ([]byte, error) {
	var data []byte
	switch err := t.scan(qCacheState, []any{tenant, sessionID}, &data); {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("cache state of session %q: %w", sessionID, store.ErrNotFound)
	case err != nil:
		return nil, err
	}
	return data, nil
}

// CacheState implements store.CacheStateBackend.
func (s *Backend) CacheState(ctx context.Context, tenant, sessionID string) ([]byte, error) {
	var state []byte
	err := s.read(ctx, "cache state", func(t txn) error {
		ok, _, err := live(t, tenant, sessionID, s.now())
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("cache state of session %q: %w", sessionID, store.ErrNotFound)
		}
		state, err = readCacheState(t, tenant, sessionID)
		return err
	})
	return state, err
}

// PutCacheState implements store.CacheStateBackend in one write transaction.
func (s *Backend) PutCacheState(ctx context.Context, tenant, sessionID string, state []byte) error {
	return s.write(ctx, "put cache state", func(t txn) error {
		ok, n, err := live(t, tenant, sessionID, s.now())
		if err != nil {
			return err
		}
		if !ok || n == 0 {
			return fmt.Errorf("session %q: %w", sessionID, store.ErrNotFound)
		}
		_, err = t.exec(qPutCacheState, tenant, sessionID, state)
		return err
	})
}

// RecordAssembly implements store.AssemblyBackend: the record written and the older ones trimmed in one
// write transaction, a write to the session like any other (its expiry refreshed).
func (s *Backend) RecordAssembly(ctx context.Context, tenant, sessionID string, rec store.AssemblyRecord, keep int) (store.AssemblyRecord, error) {
	err := s.write(ctx, "record assembly", func(t txn) error {
		ss, err := s.touch(t, tenant, sessionID, s.now())
		if err != nil {
			return err
		}
		if err := ss.put(t, tenant, sessionID); err != nil {
			return err
		}
		var last int64
		if err := t.scan(qLastAssembly, []any{tenant, sessionID}, &last); err != nil {
			return err
		}
		rec.Seq = last + 1
		if _, err := t.exec(qInsertAssembly, tenant, sessionID, rec.Seq, rec.Time.Unix(), rec.Time.Nanosecond(), string(rec.Data)); err != nil {
			return err
		}
		if _, err := t.exec(qSetRecordedAt, rec.Time.UnixNano(), tenant, sessionID); err != nil {
			return err
		}
		_, err = t.exec(qTrimAssemblies, tenant, sessionID, rec.Seq-int64(keep))
		return err
	})
	if err != nil {
		return store.AssemblyRecord{}, err
	}
	return rec, nil
}

// Assemblies implements store.AssemblyBackend.
func (s *Backend) Assemblies(ctx context.Context, tenant, sessionID string) ([]store.AssemblyRecord, error) {
	var recs []store.AssemblyRecord
	err := s.read(ctx, "assemblies", func(t txn) error {
		ok, _, err := live(t, tenant, sessionID, s.now())
		if err != nil || !ok {
			return err
		}
		rows, err := t.query(qAssemblies, tenant, sessionID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r store.AssemblyRecord
			var sec, nsec int64
			var data string
			if err := rows.Scan(&r.Seq, &sec, &nsec, &data); err != nil {
				return err
			}
			r.Time, r.Data = time.Unix(sec, nsec).UTC(), json.RawMessage(data)
			recs = append(recs, r)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// AssemblySessions implements store.AssemblyBackend with one query, which reads the newest limit of the
// tenant's recorded sessions by an index (see qAssemblySessions).
func (s *Backend) AssemblySessions(ctx context.Context, tenant string, limit int) ([]store.AssemblySession, error) {
	var out []store.AssemblySession
	err := s.read(ctx, "assembly sessions", func(t txn) error {
		rows, err := t.query(qAssemblySessions, tenant, s.now().UnixNano(), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var a store.AssemblySession
			var at int64
			if err := rows.Scan(&a.Session, &a.Assemblies, &a.LastSeq, &at); err != nil {
				return err
			}
			a.LastTime = time.Unix(0, at).UTC()
			out = append(out, a)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
