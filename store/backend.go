package store

import (
	"context"

	"github.com/context-loom/loom/collection"
)

// Backend is the raw persistence a [Store] sits on: it keeps what the Store hands it and reads it back,
// and applies none of the Store's rules. The Store calls a method only with a tenant and ids that
// [ValidateID] accepts, with values it has checked against its [Limits] and prepared (times set, in UTC;
// messages' token counts counted and their Seq zero; knowledge counted as the assembler renders it), with a
// context that is not done yet, and never after Close. Methods are called concurrently.
//
// A missing agent, fact or session is an error wrapping ErrNotFound; a server or file that cannot be
// reached, ErrUnavailable; a call that was in flight when Close was called may return ErrClosed. The Store
// returns a backend's errors to its caller as they are.
//
// A session expires its backend's session TTL (Options.SessionTTL) after its last write, which every write
// to it (messages, a tool output, knowledge) refreshes; reading it does not. An expired session reads as
// empty, and a write to it starts it again from seq 1.
//
// A backend may do more than this: see the optional interfaces [MessageSelector], [Loader],
// [OrderedFacts] and [CollectionBackend], which the Store uses when the backend implements them.
// [storetest.RunBackend] checks the contract.
//
// [storetest.RunBackend]: https://pkg.go.dev/github.com/context-loom/loom/store/storetest#RunBackend
type Backend interface {
	// PutAgent creates or replaces the agent a.ID.
	PutAgent(ctx context.Context, tenant string, a Agent) error
	// GetAgent returns the agent as PutAgent stored it; ErrNotFound when there is none.
	GetAgent(ctx context.Context, tenant, id string) (Agent, error)
	// DeleteAgent returns ErrNotFound when there is no such agent.
	DeleteAgent(ctx context.Context, tenant, id string) error

	// SetFact creates or replaces the fact f.Key of user.
	SetFact(ctx context.Context, tenant, user string, f Fact) error
	// Facts returns the user's facts in any order (the Store orders them); none for an unknown user.
	Facts(ctx context.Context, tenant, user string) ([]Fact, error)
	// DeleteFact returns ErrNotFound when the user has no such fact.
	DeleteFact(ctx context.Context, tenant, user, key string) error

	// AppendMessages appends msgs (one or more) to the session atomically and returns them as stored: with
	// the seqs after the session's newest message, contiguous and in order however many appends run at
	// once, and with Time as the backend keeps it (to the microsecond, say).
	AppendMessages(ctx context.Context, tenant, session string, msgs []Message) ([]Message, error)
	// ReadMessages reads a page of the session's messages, as a [PageReader] does: up to n of the newest
	// messages whose Seq is less than before (0, or a before past the newest: from the newest), oldest
	// first, and the before of the page older than it (0 when there is none). n is at least 1, and
	// math.MaxInt for all of them. None for an unknown session.
	ReadMessages(ctx context.Context, tenant, session string, before int64, n int) (page []Message, next int64, err error)
	// AppendToolOutput appends one tool step and returns it with its Seq (1, 2, ... in the session), and
	// Time as kept.
	AppendToolOutput(ctx context.Context, tenant, session string, o ToolOutput) (ToolOutput, error)
	// ToolOutputs returns the session's tool steps in order.
	ToolOutputs(ctx context.Context, tenant, session string) ([]ToolOutput, error)
	// SetKnowledge replaces the session's pre-retrieved knowledge; nil or none clears it.
	SetKnowledge(ctx context.Context, tenant, session string, items []Knowledge) error
	// Knowledge returns the session's knowledge in the order it was set.
	Knowledge(ctx context.Context, tenant, session string) ([]Knowledge, error)
	// DeleteSession deletes the session's messages, tool outputs and knowledge; ErrNotFound when it has
	// none of them.
	DeleteSession(ctx context.Context, tenant, session string) error

	// Ping checks that the backend is reachable: an error wrapping ErrUnavailable if not.
	Ping(ctx context.Context) error
	// Close releases the backend. The Store calls it once.
	Close() error
}

// MessageSelector is implemented by a backend that answers a [MessageQuery] itself, reading less than the
// pages of [ReadNewest] would: SQLite counts a row from its count columns before it decodes it, the Valkey
// layout counts on the server and sends only the messages it keeps, memory copies only what it selects.
// Without it the Store answers a query with ReadNewest over ReadMessages.
type MessageSelector interface {
	// SelectMessages answers q, which [CheckMessageQuery] accepts, as [SelectPage] would over all the
	// session's messages: the messages it selects (oldest first) and the before of those it left out.
	SelectMessages(ctx context.Context, tenant, session string, q MessageQuery) (msgs []Message, next int64, err error)
}

// Loader is implemented by a backend that reads everything one assembly needs at once: in one read
// transaction (SQLite), one round trip to each server (Valkey), under one lock (memory). Without it the
// Store's Load reads the sources one after another.
//
// (Before the Store was a type of its own, Loader was the interface of its Load; the method is the same.)
type Loader interface {
	// Load reads the sources q names (empty ids are skipped; the others are valid, and q.History() is a
	// checked query) as the Backend's methods would, the messages as SelectPage would select q.History()
	// of them, with Snapshot.NextBefore. An error of one source (ErrNotFound for a missing agent, a stored
	// value that does not decode) goes in Snapshot.Errors for that source; the error Load returns is for
	// the whole read (the backend is unreachable or closed, ctx is done). Facts may be in any order. A
	// backend that is a [SummaryBackend] reads the session's summary too when q.Summary says so (none:
	// Snapshot.Summary nil), and one that is a [CacheStateBackend] the session's cache state when
	// q.CacheState says so (none: Snapshot.CacheState nil).
	Load(ctx context.Context, tenant string, q LoadQuery) (*Snapshot, error)
}

// OrderedFacts is implemented by a backend whose users' facts have an order of their own, which the Store's
// Facts and Load keep instead of ordering them by key: the Valkey cookbook's memory hash, read in the order
// the server keeps it, which is the order the cookbook shows.
type OrderedFacts interface {
	// FactsOrdered reports whether the backend's order of facts is to be kept.
	FactsOrdered() bool
}

// CollectionBackend is implemented by a backend that also keeps collections, documents and chunks:
// [Store.Collections] serves them as a collection.Store, having checked first what it hands the backend:
// tenant and ids (ValidateID); a new collection's name, its ID (a new one, from [NewID], if it had none) and
// CreatedAt (now, if zero, in UTC); a document's ids, sizes and metadata (within Limits), its chunks (the
// document's, with distinct ids, their vectors of one length, see [Dimensions]) and its UpdatedAt (now).
// What depends on what is stored (a name taken, a collection that does not exist, vectors of a length
// other than the collection's, a chunk id another document has) is the backend's to check. Changes gets a
// limit above 0 (collection.DefaultChangesLimit for one of 0 or less) and a wait of 0 or more (0 for a
// negative one: do not wait). If the backend is a collection.Epocher, so is the collection store the Store
// serves.
type CollectionBackend interface {
	collection.Store
}

// SummaryBackend is implemented by a backend that keeps a running summary per session (see
// [loom.Summary]): memory, SQLite and Valkey's native layout do; the Valkey cookbook's layout, which has
// no key for one, does not. The summary lives and dies with its session: DeleteSession deletes it, and it
// expires with the session's messages.
type SummaryBackend interface {
	// Summary returns the session's summary as stored; ErrNotFound when there is none.
	Summary(ctx context.Context, tenant, session string) (Summary, error)
	// SwapSummary stores s as the session's summary if the stored one's Rev is rev (0: there is none), and
	// reports whether it did; it is atomic against every other write of the summary, by any server. s.Rev
	// is rev+1 (the Store sets it). A session without messages (none, or expired) is ErrNotFound.
	SwapSummary(ctx context.Context, tenant, session string, rev int64, s Summary) (bool, error)
}
