package sqlite

import (
	"database/sql"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/tokenizer"
)

// openWritten opens a backend over a new file that stmts wrote, as an older build left it.
func openWritten(t *testing.T, stmts []string) *Backend {
	t.Helper()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(q, err)
		}
	}
	_ = db.Close()
	s, err := openBackend(t.Context(), Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestMigrate_FromVersion1 opens a file written before collections existed: its data stays, and
// collections work.
func TestMigrate_FromVersion1(t *testing.T) {
	t.Parallel()
	s := openWritten(t, []string{
		`CREATE TABLE schema_version (version INTEGER NOT NULL)`,
		`INSERT INTO schema_version (version) VALUES (1)`,
		migrations[1],
		`INSERT INTO agents (tenant, id, data) VALUES ('acme', 'support', '{"id":"support","instructions":"Be kind."}')`,
	})
	if a, err := s.GetAgent(t.Context(), "acme", "support"); err != nil || a.Instructions != "Be kind." {
		t.Fatalf("the version 1 agent after migrating: %+v %v", a, err)
	}
	if _, err := s.CreateCollection(t.Context(), "acme", loom.Collection{ID: "c1", Name: "docs"}); err != nil {
		t.Fatal(err)
	}
	var v int
	if err := s.wdb.QueryRow(`SELECT version FROM schema_version`).Scan(&v); err != nil || v != SchemaVersion {
		t.Fatalf("schema version %d %v", v, err)
	}
}

// TestQueryPlans_UseTheIndexes keeps the collection reads off full scans: reads of a collection's or a
// document's chunks use an index, the collection's in the index's order (a document after another).
func TestQueryPlans_UseTheIndexes(t *testing.T) {
	t.Parallel()
	s, err := openBackend(t.Context(), Options{Path: filepath.Join(t.TempDir(), "loom.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct {
		query  string
		args   []any
		noSort bool // read in an index's order
	}{
		{qDocumentMeta, []any{"t", "c", "d"}, false},
		{qCollectionChunks, []any{"t", "c"}, true},
		{qDocumentChunks, []any{"t", "c", "d"}, false},
		{qDeleteCollChunks, []any{"t", "c"}, false},
		{qChanges, []any{0, 10}, false},
		{qCollectionClash, []any{"t", "n", "i", "t", "n", "i"}, false},
	} {
		rows, err := s.rdb.Query(`EXPLAIN QUERY PLAN `+tc.query, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		_ = rows.Close()
		joined := strings.Join(plan, "; ")
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN ") || tc.noSort && strings.Contains(step, "TEMP B-TREE") {
				t.Errorf("%s\nplan: %s", tc.query, joined)
			}
		}
		t.Logf("%.60s...: %s", tc.query, joined)
	}
}

// TestMigrate_FromVersion2 opens a file whose chunks hold copies of their document's metadata and an FTS5
// index, as version 2 wrote them: the index and its triggers go, each chunk row keeps its own entries
// alone, and the chunks read as before.
func TestMigrate_FromVersion2(t *testing.T) {
	t.Parallel()
	const docMeta = `{"source":"guide.md","title":"The guide"}`
	rows := []struct{ id, meta, want string }{
		{"guide#0", docMeta, ""}, // the document's alone
		{"guide#1", `{"headings":"Intro","source":"guide.md","title":"The guide"}`, `{"headings":"Intro"}`},
		{"guide#2", `{"source":"guide.md","title":"Another title"}`, `{"title":"Another title"}`}, // a value of its own
		{"guide#3", ``, ``}, // none at all
		{"guide#4", `{"only":"mine"}`, `{"only":"mine"}`}, // none of the document's
	}
	stmts := []string{
		`CREATE TABLE schema_version (version INTEGER NOT NULL)`,
		`INSERT INTO schema_version (version) VALUES (2)`,
		migrations[1], migrations[2],
		`INSERT INTO collections (key, tenant, id, name, chunk_strategy, chunk_size, chunk_overlap, embedder, dimensions, created_s, created_ns)
			VALUES (1, 'acme', 'c1', 'docs', 'auto', 512, 50, 'lexical', 0, 0, 0)`,
		`INSERT INTO documents (tenant, collection_id, id, source, content_type, hash, bytes, chunks, metadata, updated_s, updated_ns)
			VALUES ('acme', 'c1', 'guide', 'guide.md', 'markdown', 'h', 10, 5, '` + docMeta + `', 0, 0)`,
		`INSERT INTO documents (tenant, collection_id, id, source, content_type, hash, bytes, chunks, metadata, updated_s, updated_ns)
			VALUES ('acme', 'c1', 'bare', 'bare.md', 'markdown', 'h', 10, 1, '', 0, 0)`,
		`INSERT INTO chunks (rid, tenant, collection_id, id, document_id, idx, start_offset, end_offset, token_count, content, metadata, vector)
			VALUES (68719476741, 'acme', 'c1', 'bare#0', 'bare', 0, 0, 4, 1, 'bare', '{"k":"v"}', NULL)`,
	}
	for i, r := range rows {
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO chunks (rid, tenant, collection_id, id, document_id, idx, start_offset, end_offset, token_count, content, metadata, vector)
			VALUES (%d, 'acme', 'c1', '%s', 'guide', %d, 0, 4, 1, 'kumquat text', '%s', NULL)`, 1<<36+i, r.id, i, r.meta))
	}
	s := openWritten(t, stmts)
	var left int
	if err := s.rdb.QueryRow(`SELECT count(*) FROM sqlite_master WHERE name LIKE 'chunks_fts%'`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d FTS tables and triggers left (%v)", left, err)
	}
	for _, r := range rows {
		var meta string
		if err := s.rdb.QueryRow(`SELECT metadata FROM chunks WHERE id = ?`, r.id).Scan(&meta); err != nil {
			t.Fatal(err)
		}
		if meta != r.want {
			t.Errorf("chunk %s: metadata %q after migrating, want %q", r.id, meta, r.want)
		}
	}
	chunks, err := s.DocumentChunks(t.Context(), "acme", "c1", "guide")
	if err != nil || len(chunks) != len(rows) {
		t.Fatalf("DocumentChunks: %d chunks, %v", len(chunks), err)
	}
	for i, ch := range chunks {
		want, err := decodeMetadata(rows[i].meta)
		if err != nil {
			t.Fatal(err)
		}
		if rows[i].meta == "" || rows[i].id == "guide#4" {
			want = mergeWant(map[string]string{"source": "guide.md", "title": "The guide"}, want)
		}
		if !maps.Equal(ch.Metadata, want) {
			t.Errorf("chunk %s reads %v, want %v", ch.ID, ch.Metadata, want)
		}
	}
	bare, err := s.DocumentChunks(t.Context(), "acme", "c1", "bare")
	if err != nil || len(bare) != 1 || !maps.Equal(bare[0].Metadata, map[string]string{"k": "v"}) {
		t.Errorf("a document without metadata: %+v %v", bare, err)
	}
	var v int
	if err := s.wdb.QueryRow(`SELECT version FROM schema_version`).Scan(&v); err != nil || v != SchemaVersion {
		t.Fatalf("schema version %d %v", v, err)
	}
}

// mergeWant is doc under own.
func mergeWant(doc, own map[string]string) map[string]string {
	out := maps.Clone(doc)
	maps.Copy(out, own)
	return out
}

// TestMigrate_Version8WithoutCacheStates opens a file that a build whose step 7 was empty brought to
// version 8 (the inspector's assemblies, no cache_states): the next step makes the table, and a session's
// cache state is kept.
func TestMigrate_Version8WithoutCacheStates(t *testing.T) {
	t.Parallel()
	stmts := []string{`CREATE TABLE schema_version (version INTEGER NOT NULL)`, `INSERT INTO schema_version (version) VALUES (8)`}
	for v := 1; v <= 8; v++ {
		if v != 7 {
			stmts = append(stmts, migrations[v])
		}
	}
	s := openWritten(t, stmts)
	ctx := t.Context()
	if _, err := s.AppendMessages(ctx, "acme", "s", []store.Message{{Role: "user", Content: "hi"}}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutCacheState(ctx, "acme", "s", []byte("state")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.CacheState(ctx, "acme", "s"); err != nil || string(got) != "state" {
		t.Fatalf("cache state %q, %v", got, err)
	}
	var v int
	if err := s.wdb.QueryRow(`SELECT version FROM schema_version`).Scan(&v); err != nil || v != SchemaVersion {
		t.Fatalf("schema version %d %v", v, err)
	}
}

// TestMigrate_Version9RecordedSessions opens a file at version 9 whose sessions have assembly records:
// the next step gives each its newest record's time, so the list of recorded sessions is as it was.
func TestMigrate_Version9RecordedSessions(t *testing.T) {
	t.Parallel()
	stmts := []string{`CREATE TABLE schema_version (version INTEGER NOT NULL)`, `INSERT INTO schema_version (version) VALUES (9)`}
	stmts = append(stmts, migrations[1:10]...)
	for _, sess := range []string{"old", "new", "none"} {
		stmts = append(stmts, `INSERT INTO sessions (tenant, session, expires_at, next_msg, next_tool) VALUES ('acme', '`+sess+`', 0, 1, 1)`)
	}
	// "old" recorded at 100 s and 200 s, "new" at 300 s (and 5 ns), "none" never.
	stmts = append(stmts,
		`INSERT INTO assemblies (tenant, session, seq, ts_s, ts_ns, data) VALUES ('acme', 'old', 1, 100, 0, '{}'), ('acme', 'old', 2, 200, 0, '{}'), ('acme', 'new', 1, 300, 5, '{}')`)
	s := openWritten(t, stmts)
	got, err := s.AssemblySessions(t.Context(), "acme", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.AssemblySession{
		{Session: "new", Assemblies: 1, LastSeq: 1, LastTime: time.Unix(300, 5).UTC()},
		{Session: "old", Assemblies: 2, LastSeq: 2, LastTime: time.Unix(200, 0).UTC()},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("after the migration: %+v, want %+v", got, want)
	}
}

// TestMigrate_MessagesWithoutEstimates opens files written before messages kept their estimate (schema
// versions 9 and 10): their messages read as they were, without one (so an assembly whose counts are
// estimated counts them), a history selected by the estimate estimates them, and a message appended after
// the step keeps its estimate.
func TestMigrate_MessagesWithoutEstimates(t *testing.T) {
	t.Parallel()
	for _, from := range []int{9, 10} {
		t.Run(fmt.Sprint("version ", from), func(t *testing.T) {
			t.Parallel()
			old := []string{"The first message, written by an older build.", "Its answer, 日本語 too.", "And a third: 12345."}
			stmts := []string{`CREATE TABLE schema_version (version INTEGER NOT NULL)`, fmt.Sprintf(`INSERT INTO schema_version (version) VALUES (%d)`, from)}
			stmts = append(stmts, migrations[1:from+1]...)
			stmts = append(stmts, fmt.Sprintf(`INSERT INTO sessions (tenant, session, expires_at, next_msg, next_tool) VALUES ('acme', 's', 0, %d, 1)`, len(old)+1))
			for i, c := range old {
				stmts = append(stmts, fmt.Sprintf(`INSERT INTO messages (tenant, session, seq, role, content, name, tool_calls, tool_call_id, ts_s, ts_ns, tok_o200k, tok_cl100k, tok_other, parts)
					VALUES ('acme', 's', %d, '%s', '%s', '', '', '', 0, 0, %d, %d, '', '')`, i+1, []string{"user", "assistant"}[i%2], c,
					tokenizer.O200K().Count(c), tokenizer.CL100K().Count(c)))
			}
			s := openWritten(t, stmts)
			ctx := t.Context()
			added, err := s.AppendMessages(ctx, "acme", "s", []store.Message{{Role: "user", Content: "A new message, after the step.",
				TokenCounts: store.MessageCounts("A new message, after the step.")}})
			if err != nil {
				t.Fatal(err)
			}
			msgs, _, err := s.ReadMessages(ctx, "acme", "s", 0, 0)
			if err != nil || len(msgs) != len(old)+1 || added[0].Seq != int64(len(old)+1) {
				t.Fatalf("%d messages, %v", len(msgs), err)
			}
			for _, m := range msgs {
				n, cached := m.TokenCounts[tokenizer.EstimateKey]
				if old := m.Seq <= int64(len(old)); cached == old {
					t.Errorf("message %d (written before the step: %v) has an estimate: %v", m.Seq, old, cached)
				}
				if cached && n != tokenizer.Estimate(m.Content) {
					t.Errorf("message %d: estimate %d cached, Estimate says %d", m.Seq, n, tokenizer.Estimate(m.Content))
				}
				if m.TokenCounts[tokenizer.O200KBase] != tokenizer.O200K().Count(m.Content) {
					t.Errorf("message %d: o200k_base count %v", m.Seq, m.TokenCounts)
				}
			}
			// Selected by the estimate: the old messages estimated when they are read, the new one's cached.
			total := 0
			for _, m := range msgs {
				total += store.MessageTokens(store.Message{Content: m.Content}, store.EstimateEncoding, false)
			}
			for _, max := range []int{total, total - 1} {
				got, _, err := s.SelectMessages(ctx, "acme", "s", store.MessageQuery{MaxTokens: max, Encoding: store.EstimateEncoding})
				if want := store.SelectMessages(stripCounts(msgs), store.MessageQuery{MaxTokens: max, Encoding: store.EstimateEncoding}); err != nil || len(got) != len(want) {
					t.Errorf("max %d tokens by the estimate: %d messages, want %d (%v)", max, len(got), len(want), err)
				}
			}
			var v int
			if err := s.wdb.QueryRow(`SELECT version FROM schema_version`).Scan(&v); err != nil || v != SchemaVersion {
				t.Fatalf("schema version %d %v", v, err)
			}
		})
	}
}

// stripCounts returns copies of msgs without their cached counts.
func stripCounts(msgs []store.Message) []store.Message {
	out := make([]store.Message, len(msgs))
	for i, m := range msgs {
		m.TokenCounts = nil
		out[i] = m
	}
	return out
}
