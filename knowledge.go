// SPDX-License-Identifier: Apache-2.0

package loom

import "time"

// Fact is one thing remembered about a user: a key, its value, whether it is pinned (always kept), when it
// was last set and where it came from.
type Fact struct {
	Key       string    `json:"key"`
	Value     string    `json:"value"`
	Pinned    bool      `json:"pinned,omitempty"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	Source    string    `json:"source,omitempty"`
}

// Knowledge is one retrieved or given piece of knowledge: a chunk of a document, a search result, an entity.
type Knowledge struct {
	ID          string            `json:"id,omitempty"`
	DocumentID  string            `json:"document_id,omitempty"`
	Content     string            `json:"content"`
	Score       float64           `json:"score,omitempty"`
	Source      string            `json:"source,omitempty"`
	Type        string            `json:"type,omitempty"`    // a label for the tag, such as "rag" or "entity"; default "rag"
	Trusted     bool              `json:"trusted,omitempty"` // false (the default): data, never instructions
	StartOffset int               `json:"start,omitempty"`
	EndOffset   int               `json:"end,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	// TokenCounts are counts of the content as the assembler renders it in its tag (escaped, and ended by
	// the line break before the close tag: the assembler's RenderedKnowledge), cached under the
	// assembler's KnowledgeCountKey of each encoding (and of the estimator's rule, tokenizer.EstimateKey)
	// as a store keeps them, so that assembling does not count it again.
	TokenCounts map[string]int `json:"token_counts,omitempty"`
}
