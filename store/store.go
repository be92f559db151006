// Package store holds the state an assembly reads: agent configurations, user memory, and per session the
// conversation, the tool outputs and pre-retrieved knowledge. Everything is scoped by tenant: a tenant can
// name any id and never reach another tenant's data.
//
// A [Store] is the front every caller uses: it applies the rules (valid ids, limits, timestamps, token
// counts, the selection of messages, the order of facts, ErrClosed after Close) once, for every backend,
// over a [Backend] that only keeps and reads. The backends are subpackages, each opened with
// Open(ctx, Options), which returns the Store over it: [github.com/context-loom/loom/store/memory] (in
// process), [github.com/context-loom/loom/store/sqlite] (the embedded default: one file),
// [github.com/context-loom/loom/store/valkey] (Loom's own key layout on a Valkey or Redis server,
// standalone, sentinel or cluster) and [github.com/context-loom/loom/store/valkey/cookbook] (the Valkey
// cookbook's key layout). A backend of one's own is put behind the front with [New]. Every Store passes the same conformance suite, [github.com/context-loom/loom/store/storetest],
// and every backend its narrower one (storetest.RunBackend).
package store

import (
	"time"

	"github.com/context-loom/loom"
)

// Errors every backend returns (wrapped, so match them with errors.Is). Each wraps the kind of package loom
// it is named for, so a caller may test either: errors.Is(err, store.ErrNotFound) or errors.Is(err,
// loom.ErrNotFound).
var (
	ErrNotFound    = loom.NewError(loom.ErrNotFound, "store: not found")
	ErrInvalid     = loom.NewError(loom.ErrInvalid, "store: invalid input")
	ErrTooLarge    = loom.NewError(loom.ErrTooLarge, "store: value too large")
	ErrClosed      = loom.NewError(loom.ErrClosed, "store: closed")
	ErrUnavailable = loom.NewError(loom.ErrUnavailable, "store: unavailable")
	// ErrUnsupported is returned by a backend that cannot do what is asked (the Valkey cookbook's key
	// layout holds one tenant, for one).
	ErrUnsupported = loom.NewError(loom.ErrUnsupported, "store: not supported by this backend")
)

// The state a store keeps is made of the types of package loom.
type (
	// Agent is an agent's configuration.
	Agent = loom.Agent
	// Fact is one thing remembered about a user: key, value, pinned, updated_at, source.
	Fact = loom.Fact
	// Knowledge is one pre-retrieved knowledge item of a session (the Valkey cookbook's kb:results).
	Knowledge = loom.Knowledge
	// Message is one message of a session's conversation; the store assigns its Seq and Time.
	Message = loom.Message
	// ToolOutput is one step of a session's tool use; the store assigns its Seq and Time.
	ToolOutput = loom.ToolOutput
)

// MessageQuery selects the newest messages of a session, or with Before the newest of those older than a
// seq: a session is read newest first, a page at a time, each page oldest first. The zero value selects
// them all. Every backend selects as [SelectMessages] does.
type MessageQuery struct {
	// Before, if positive, selects only the messages whose Seq is less than Before: the page older than one
	// whose oldest message has that Seq. 0 means from the newest message.
	Before int64
	// Limit keeps at most the newest Limit messages; 0 means no limit.
	Limit int
	// MaxTokens keeps the newest messages whose token counts (see [MessageTokens]) add up to at most
	// MaxTokens; 0 means no limit. Where a backend can, it reads the counts first and the rest of a message
	// only if it is kept.
	MaxTokens int
	// Encoding names the count MaxTokens uses: an encoding of package tokenizer, whose counts are cached on
	// each message (a message without one is counted when it is read), or EstimateEncoding for
	// tokenizer.Estimate of the content, cached under tokenizer.EstimateKey (a message without it, or with
	// the count of another rule, is estimated when it is read); "" means o200k_base. Any other name is an
	// error wrapping ErrInvalid.
	Encoding string
	// CountToolCalls makes MaxTokens count the least that a message's tool calls cost too, in an exact
	// encoding (see [MessageTokens]), for a rendering that shows them, as Loom's formats do.
	CountToolCalls bool
}

// EstimateEncoding is the MessageQuery.Encoding of models whose counts are estimated (tokenizer.Estimate).
const EstimateEncoding = "estimate"

// MessageOverhead is what [MessageQuery.MaxTokens] adds per message for its role and framing (OpenAI's
// chat format costs 3 tokens a message plus the role's 1).
const MessageOverhead = 4

// ToolCallBytesPerToken is how many bytes of a message's tool calls, as JSON, [MessageTokens] counts as
// one token: a token of Loom's encodings is at most 128 bytes of text, JSON takes at most 6 bytes for a
// byte of text, and each call's own keys (67 bytes) are fewer than the least the call costs, so every
// format that shows a call costs at least this.
const ToolCallBytesPerToken = 1024

// LoadQuery names the state one assembly needs. Empty ids are skipped.
type LoadQuery struct {
	Agent, User, Session string
	// MaxMessages is how many of the newest messages to read; 0 means DefaultLoadMessages.
	MaxMessages int
	// MaxTokens, Encoding and CountToolCalls bound the messages read as MessageQuery's fields of those
	// names do. A caller that learns its budget only from what Load returns (the agent's model and
	// max_tokens) reads on with Snapshot.NextBefore.
	MaxTokens      int
	Encoding       string
	CountToolCalls bool
	// Summary reads the session's running summary too (Snapshot.Summary), where the backend keeps one (a
	// [SummaryBackend]).
	Summary bool
	// CacheState reads the session's cache state too (Snapshot.CacheState), where the backend keeps one (a
	// [CacheStateBackend]).
	CacheState bool
}

// History is the MessageQuery that selects the messages q reads.
func (q LoadQuery) History() MessageQuery {
	limit := q.MaxMessages
	if limit <= 0 {
		limit = DefaultLoadMessages
	}
	return MessageQuery{Limit: limit, MaxTokens: q.MaxTokens, Encoding: q.Encoding, CountToolCalls: q.CountToolCalls}
}

// DefaultLoadMessages is how many of a session's newest messages a Load reads unless told otherwise; far
// more than a model's window holds.
const DefaultLoadMessages = 1000

// Source names one kind of state, for [Snapshot.Errors].
type Source string

// Sources of a Snapshot.
const (
	SourceAgent       Source = "agent"
	SourceMemory      Source = "memory"
	SourceHistory     Source = "history"
	SourceToolOutputs Source = "tool_outputs"
	SourceKnowledge   Source = "knowledge"
	SourceSummary     Source = "summary"
	SourceCacheState  Source = "cache_state"
)

// Snapshot is everything a Load read. A source that could not be read is absent and has its error in
// Errors; an agent that does not exist has ErrNotFound there.
type Snapshot struct {
	Agent    *Agent
	Facts    []Fact
	Messages []Message // oldest first
	// NextBefore is where the session's messages that the LoadQuery's bounds left out begin: read them
	// with MessageQuery.Before = NextBefore. 0 when Messages reaches back to the session's first message.
	NextBefore  int64
	ToolOutputs []ToolOutput
	Knowledge   []Knowledge
	// Summary is the session's running summary when LoadQuery.Summary asked for it and there is one.
	Summary *Summary
	// CacheState is the session's cache state when LoadQuery.CacheState asked for it and there is one.
	CacheState []byte
	Errors     map[Source]error
}

// Options are the settings of a Store and of every backend under one: the Store applies Limits, the
// backend SessionTTL and ChangesKept. Each backend's Open takes them in its own
// options. The zero value means the documented defaults.
type Options struct {
	// SessionTTL expires a session this long after its last write. 0 means never.
	SessionTTL time.Duration
	// Limits bound what one write may hold.
	Limits Limits
	// ChangesKept is about how many of the newest collection changes the change feed keeps (older ones
	// are trimmed); 0 means DefaultChangesKept. A follower that falls further behind gets
	// collection.ErrFeedTrimmed and rebuilds.
	ChangesKept int
}

// DefaultChangesKept is how many collection changes a store's change feed keeps by default.
const DefaultChangesKept = 100_000

// ChangesKeptOrDefault returns o.ChangesKept, or DefaultChangesKept if it is 0 or less.
func (o Options) ChangesKeptOrDefault() int {
	if o.ChangesKept <= 0 {
		return DefaultChangesKept
	}
	return o.ChangesKept
}

// Limits bound the input a store accepts; zero fields mean the Default* values.
type Limits struct {
	MaxIDBytes    int // tenant, agent, user, session ids and fact keys; default DefaultMaxIDBytes
	MaxValueBytes int // one message's content, one fact's value, one tool result, one knowledge item
	MaxBatch      int // messages in one append, knowledge items in one set
	// MaxMetadataBytes bounds the metadata of one document, and a chunk's own metadata, counted as the
	// bytes of the keys and values; default DefaultMaxMetadataBytes.
	MaxMetadataBytes int
	// MaxMetadataKeys bounds the keys of the metadata of one document, and of a chunk's own; default
	// DefaultMaxMetadataKeys.
	MaxMetadataKeys int
}

// Default limits.
const (
	DefaultMaxIDBytes    = 256
	DefaultMaxValueBytes = 4 << 20
	DefaultMaxBatch      = 1000
	// DefaultMaxMetadataBytes is 8 KiB: room for a source path, a title and a few dozen attributes.
	DefaultMaxMetadataBytes = 8 << 10
	DefaultMaxMetadataKeys  = 64
)

// WithDefaults returns l with zero fields set to the defaults.
func (l Limits) WithDefaults() Limits {
	if l.MaxIDBytes <= 0 {
		l.MaxIDBytes = DefaultMaxIDBytes
	}
	if l.MaxValueBytes <= 0 {
		l.MaxValueBytes = DefaultMaxValueBytes
	}
	if l.MaxBatch <= 0 {
		l.MaxBatch = DefaultMaxBatch
	}
	if l.MaxMetadataBytes <= 0 {
		l.MaxMetadataBytes = DefaultMaxMetadataBytes
	}
	if l.MaxMetadataKeys <= 0 {
		l.MaxMetadataKeys = DefaultMaxMetadataKeys
	}
	return l
}

// Summary is a session's running summary and its compaction's state (see [loom.Summary]).
type Summary = loom.Summary
