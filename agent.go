// SPDX-License-Identifier: Apache-2.0

package loom

import "time"

// Agent is an agent's configuration: what its instructions say, the tools it may call, the model it talks to
// and how its budget is shared.
type Agent struct {
	ID string `json:"id"`
	// Instructions is the agent's role (the Valkey cookbook's "role").
	Instructions string `json:"instructions,omitempty"`
	Constraints  string `json:"constraints,omitempty"`
	OutputFormat string `json:"output_format,omitempty"`
	Tools        []Tool `json:"tools,omitempty"`
	Model        string `json:"model,omitempty"`
	// MaxTokens is the agent's prompt budget; 0 leaves it to the request or the model's window.
	MaxTokens int     `json:"max_tokens,omitempty"`
	Policy    *Policy `json:"policy,omitempty"`
	// CacheBreakpoints and CacheTTL are the defaults of the agent's requests' cache_breakpoints and
	// cache_ttl (see CheckCacheOptions), which a request's own override: "" leaves them to the request.
	// The TTL applies to the requests in the anthropic format whose breakpoints are not "off".
	CacheBreakpoints string    `json:"cache_breakpoints,omitempty"`
	CacheTTL         string    `json:"cache_ttl,omitempty"`
	UpdatedAt        time.Time `json:"updated_at,omitzero"`
}

// SystemPrompt is the agent's instructions as a model reads them: the role, then "Constraints: ..." and
// "Format: ..." lines when set. With all three set it is exactly the Valkey cookbook's system prompt.
func (a Agent) SystemPrompt() string {
	s := a.Instructions
	if a.Constraints == "" && a.OutputFormat == "" {
		return s
	}
	s += "\n\n"
	if a.Constraints != "" {
		s += "Constraints: " + a.Constraints
		if a.OutputFormat != "" {
			s += "\n"
		}
	}
	if a.OutputFormat != "" {
		s += "Format: " + a.OutputFormat
	}
	return s
}

// Knowledge orders: how included knowledge is laid out.
const (
	OrderScore           = "score"              // best first
	OrderDocument        = "document"           // by document, then position in it
	OrderLostInTheMiddle = "lost_in_the_middle" // best at both ends, weakest in the middle
)

// Policy sets how the optional regions (memory, knowledge, history, tool outputs) share what the required
// items leave of the budget. Each region first gets its minimum share (if it has that much to put in), then
// regions in priority order get up to their maximum share, then what is left goes to regions that still
// have items, in priority order, past their maximum. Shares are fractions of the space left after the
// required items. Zero fields mean the assembler's DefaultPolicy.
type Policy struct {
	Regions []RegionPolicy `json:"regions,omitempty"`
	// KnowledgeOrder is how included knowledge is laid out: "score" (default), "document" or
	// "lost_in_the_middle".
	KnowledgeOrder string `json:"knowledge_order,omitempty"`
	// MinScore drops knowledge scored below it (reason "below_min_score"). 0 keeps everything.
	MinScore float64 `json:"min_score,omitempty"`
	// NearDuplicate is the similarity (0..1, Jaccard of word 3-shingles) from which a knowledge item is a
	// near-duplicate of a better one and dropped. 0 means 0.9; 1 drops only exact duplicates.
	NearDuplicate float64 `json:"near_duplicate,omitempty"`
	// MaxToolOutputTokens caps one tool output; longer ones keep their head and tail around a marker.
	// 0 means 1000.
	MaxToolOutputTokens int `json:"max_tool_output_tokens,omitempty"`
	// Margin is kept free when the budget comes from the model's window. 0 means 1% of the window.
	Margin int `json:"margin,omitempty"`

	// HistoryTrim is how the history is cut when it does not fit: "steps" (the default, [HistoryTrimSteps])
	// or "turns" ([HistoryTrimTurns]).
	HistoryTrim string `json:"history_trim,omitempty"`
	// HistoryFloor is, for "steps", the share (0..1) of the history that fits (the newest turns, as many
	// as fit its share of the budget: what "turns" keeps) that a cut keeps at least, in tokens: the lower,
	// the longer the kept history's start stays the same, and the less of its room it uses on average.
	// 0 means 0.3; 1 cuts as "turns" does.
	HistoryFloor float64 `json:"history_floor,omitempty"`
	// KeepToolResults, when positive, keeps the results of the newest that many tool exchanges of the
	// history as they are and clears the older ones: each becomes a short placeholder that names the tool
	// and the call and says how many tokens were cleared, its call kept, so that the pair stays valid for
	// every provider. 0 clears none by age.
	KeepToolResults int `json:"keep_tool_results,omitempty"`
	// ClearToolResultsOver, when positive, clears the history's tool results that count more than that many
	// tokens. With KeepToolResults too, a result is cleared only when both say so: old and long. The latest
	// tool exchange, which an assembly always keeps, is never cleared, nor is a result that its placeholder
	// would not make shorter.
	ClearToolResultsOver int `json:"clear_tool_results_over,omitempty"`
	// Compaction sets when and how a session's cut turns are summarized, where a summarizer is
	// configured; nil means the defaults of [Compaction].
	Compaction *Compaction `json:"compaction,omitempty"`
}

// Compaction is an agent's policy for summarizing its sessions' older turns: once the history that no
// summary covers costs more than TriggerTokens (or TriggerShare of the budget), the turns older than the
// newest KeepTokens are summarized into the session's running summary, with the previous summary. Zero
// fields mean the defaults named.
type Compaction struct {
	// TriggerTokens starts a compaction when the messages no summary covers cost more than this many
	// tokens. 0: TriggerShare decides.
	TriggerTokens int `json:"trigger_tokens,omitempty"`
	// TriggerShare starts a compaction when those messages cost more than this share (0 to 1) of the
	// agent's prompt budget; 0 means 0.6, used when TriggerTokens is 0.
	TriggerShare float64 `json:"trigger_share,omitempty"`
	// KeepTokens is how many tokens of the newest messages stay verbatim, never summarized (whole turns:
	// at least this much); 0 means a quarter of the budget.
	KeepTokens int `json:"keep_tokens,omitempty"`
	// Instructions tell the summarizer what to keep; "" means the engine's default instructions.
	Instructions string `json:"instructions,omitempty"`
	// MaxSummaryTokens bounds the summary the model writes; 0 means 1000.
	MaxSummaryTokens int `json:"max_summary_tokens,omitempty"`
}

// History trims (Policy.HistoryTrim).
const (
	// HistoryTrimSteps cuts the history in steps that keep its start fixed over the turns that follow: the
	// cut is at the first turn (a user or system message) from the roundest position of the session's
	// messages (their Seq, or their place in the history when they have none: a multiple of the highest
	// power of two) at or after the oldest message that fits, that still keeps Policy.HistoryFloor of what
	// fits. The next turns then append to the same prompt, which a provider's prompt cache serves, until
	// the oldest message kept no longer fits. The messages cut for that, which would have fitted, are
	// reported with the reason "step". A history whose first message has a Seq over 1 (the newest part of
	// a longer session, as a store reads it) is cut so even when all of it fits.
	HistoryTrimSteps = "steps"
	// HistoryTrimTurns drops the oldest turns, one at a time, until the rest fits: the history uses all of
	// its room, and its start moves on every turn once it is full.
	HistoryTrimTurns = "turns"
)

// RegionPolicy is one optional region's share.
type RegionPolicy struct {
	Name     Region  `json:"name"`
	Priority int     `json:"priority"` // lower first
	MinShare float64 `json:"min_share,omitempty"`
	MaxShare float64 `json:"max_share,omitempty"` // 0 means 1
}
