package sqlite

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/store"
)

// MaxKeywordTerms is how many distinct terms of a query SearchKeywords matches at most; the rest are
// ignored.
const MaxKeywordTerms = 64

// SearchKeywords implements collection.KeywordSearcher with the FTS5 index: it returns up to k chunk IDs
// of the collection that contain any of the query's words, ranked by BM25 (the negated bm25(), so higher
// is better), best first. The query is words, never FTS5 syntax: it is cut into runs of letters, digits
// and marks, common English stopwords are dropped, and each word is matched as a quoted string, so that
// quotes, operators (AND, OR, NOT, NEAR), prefixes (*) and column filters in it mean nothing. A query
// with no words left, or k == 0, matches nothing. It returns an error wrapping collection.ErrNotFound if
// the collection does not exist and store.ErrInvalid for a negative k.
func (s *Store) SearchKeywords(ctx context.Context, tenant, collectionID, query string, k int) ([]collection.ScoredID, error) {
	if err := store.ValidateIDs(s.opts.Limits, "tenant", tenant, "collection", collectionID); err != nil {
		return nil, err
	}
	if k < 0 {
		return nil, fmt.Errorf("%w: a negative k (%d)", store.ErrInvalid, k)
	}
	terms := keywordTerms(query)
	var out []collection.ScoredID
	err := s.read(ctx, "search keywords", func(t txn) error {
		key, _, err := collectionKey(t, tenant, collectionID)
		if err != nil || len(terms) == 0 || k == 0 {
			return err
		}
		lo, hi := chunkRowids(key)
		rows, err := t.query(qSearchKeywords, matchExpr(terms), lo, hi, k, tenant, collectionID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r collection.ScoredID
			if err := rows.Scan(&r.ID, &r.Score); err != nil {
				return err
			}
			r.Score = -r.Score
			out = append(out, r)
		}
		return rows.Err()
	})
	return out, err
}

// keywordTerms cuts query into its distinct words (runs of letters, digits and combining marks), without
// stopwords, at most MaxKeywordTerms of them.
func keywordTerms(query string) []string {
	var terms []string
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(query, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r) && !unicode.IsMark(r)
	}) {
		lw := strings.ToLower(w)
		if stopwords[lw] || seen[lw] {
			continue
		}
		seen[lw] = true
		terms = append(terms, w)
		if len(terms) == MaxKeywordTerms {
			break
		}
	}
	return terms
}

// matchExpr is the FTS5 query matching any of terms: every term a quoted string (quotes doubled), so that
// nothing in it is syntax.
func matchExpr(terms []string) string {
	var b strings.Builder
	for i, t := range terms {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteByte('"')
		b.WriteString(strings.ReplaceAll(t, `"`, `""`))
		b.WriteByte('"')
	}
	return b.String()
}

// stopwords are the English words too common to rank by (Lucene's English stop set).
var stopwords = map[string]bool{
	"a": true, "an": true, "and": true, "are": true, "as": true, "at": true, "be": true, "but": true, "by": true,
	"for": true, "if": true, "in": true, "into": true, "is": true, "it": true, "no": true, "not": true, "of": true,
	"on": true, "or": true, "such": true, "that": true, "the": true, "their": true, "then": true, "there": true,
	"these": true, "they": true, "this": true, "to": true, "was": true, "will": true, "with": true,
}
