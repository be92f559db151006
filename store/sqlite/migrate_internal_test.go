package sqlite

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/store"
)

// TestMigrate_FromVersion1 opens a file written before collections existed: its data stays, and
// collections work.
func TestMigrate_FromVersion1(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE schema_version (version INTEGER NOT NULL)`,
		`INSERT INTO schema_version (version) VALUES (1)`,
		migrations[1],
		`INSERT INTO agents (tenant, id, data) VALUES ('acme', 'support', '{"id":"support","instructions":"Be kind."}')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	_ = db.Close()
	s, err := Open(t.Context(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if a, err := s.GetAgent(t.Context(), "acme", "support"); err != nil || a.Instructions != "Be kind." {
		t.Fatalf("the version 1 agent after migrating: %+v %v", a, err)
	}
	if _, err := s.CreateCollection(t.Context(), "acme", collection.Collection{Name: "docs"}); err != nil {
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
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "loom.db"), store.Options{})
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
