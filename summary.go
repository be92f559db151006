// SPDX-License-Identifier: Apache-2.0

package loom

import "time"

// Summary is a session's running summary and the state of its compaction: the text that stands for the
// session's messages From to To (their seqs) in an assembly, made by a model from the previous summary
// and the messages cut since, and the record of the compactions that made it or failed to. A session has
// at most one. The zero Summary covers nothing.
type Summary struct {
	// Text is the summary; blank when it covers nothing yet (To is 0).
	Text string `json:"text,omitempty"`
	// From and To are the seqs of the first and the last message the summary covers; 0 and 0 when it
	// covers none. A later summary covers at least as far: it is made from this one and the messages
	// after To.
	From int64 `json:"from,omitempty"`
	To   int64 `json:"to,omitempty"`
	// Model names the model that wrote the text.
	Model string `json:"model,omitempty"`
	// UpdatedAt is when the record was last written (the store sets it).
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	// Rev numbers the record's writes from 1 (the store sets it): a write names the revision it read and
	// fails if another write came between (compare-and-set), so that two servers never both compact the
	// same range nor replace a newer summary with an older one.
	Rev int64 `json:"rev"`

	// Claim names the compaction under way, if one is (its owner's token), until ClaimExpires: no other
	// starts before then.
	Claim        string    `json:"claim,omitempty"`
	ClaimExpires time.Time `json:"claim_expires,omitzero"`
	// Failures counts the compactions that failed since the last that succeeded, LastError says why the
	// last of them failed, and RetryAt is when the next may start (a backoff that grows with Failures).
	Failures  int       `json:"failures,omitempty"`
	LastError string    `json:"last_error,omitempty"`
	RetryAt   time.Time `json:"retry_at,omitzero"`
}
