// Package valkey is a store on a Valkey server, or any server that speaks the Redis protocol (Redis 6+ for
// RESP3; Redis 7+ for everything this package tests), standalone, behind Sentinel or as a cluster, through
// github.com/valkey-io/valkey-go, in Loom's own key layout. (The Valkey cookbook's key layout is package
// [github.com/context-loom/loom/store/valkey/cookbook].)
//
// # Key layout
//
// The layout keeps everything under a prefix (default "loom"), tenant-scoped, with every id escaped (see
// below):
//
//	loom:{t:<tenant>:s:<session>}:msgs   list: a session's messages as JSON (with "seq" and "token_counts"),
//	                                     oldest first
//	loom:{t:<tenant>:s:<session>}:tools  list: its tool outputs as JSON; seq = position + 1
//	loom:{t:<tenant>:s:<session>}:kb     list: its pre-retrieved knowledge as JSON
//	loom:{t:<tenant>:u:<user>}:mem       hash: fact key -> fact as JSON
//	loom:{t:<tenant>}:agent:<id>         hash: instructions, constraints, output_format, updated_at, and
//	                                     model, max_tokens, tools and policy (JSON) when set
//	loom:{t:<tenant>:s:<session>}:asms   list: its recorded assemblies as JSON, newest first
//	loom:{t:<tenant>}:recorded           sorted set: the tenant's sessions that have recorded assemblies,
//	                                     by their newest record's time (Unix microseconds); the newest
//	                                     1000 kept, and a session whose records are gone (expired or
//	                                     deleted) pruned when a listing meets it
//
// and, for collection.Store (collections.go has the details and the guarantees of the change feed):
//
//	loom:{t:<tenant>:c:<collection>}:meta    hash: the collection as JSON, its vectors' dimensions
//	loom:{t:<tenant>:c:<collection>}:docs    hash: document id -> the document as JSON
//	loom:{t:<tenant>:c:<collection>}:chunks  hash: document id -> its chunks and vectors, binary
//	loom:{t:<tenant>}:colls                  hash: the tenant's collections by name and by id
//	loom:changes                             stream: every change to every collection, for the
//	                                         in-memory indexes of all Loom servers to follow
//
// The part in braces is the key's hash tag: all keys of one session live in one cluster slot, so every
// write to a session is atomic and ends by refreshing the PEXPIRE of all three keys when
// store.Options.SessionTTL is set. Appending messages is one Lua script that numbers the batch from the
// list's length (contiguous seqs under any concurrency) and stores each seq in its message, so that
// reading the newest N is a bare LRANGE -N -1; tool outputs and knowledge are written in MULTI/EXEC. A
// Load reads the agent, the user's memory and the session with one DoMulti of single-key commands: one
// round trip to each node involved (at most three in a cluster, one on a standalone server). Sessions are
// listed only from the tenant's index of those that have recorded assemblies (:recorded; in another slot
// than the session's keys, it is written in the round trip after the record), and nothing a request
// needs is found by key pattern: no KEYS, and no SCAN (collections are
// listed from the tenant's index hash, documents and chunks with HSCAN of their collection's hashes). The
// one SCAN is AllCollections', which a server runs once at start to find every tenant's index hash. A
// session that expired or was deleted starts again from seq 1.
//
// Ids are escaped before they go into a key: '%', ':', '{', '}', space and control bytes become %XX (upper
// case hex), so no id can close a hash tag or pose as another tenant's or session's key.
//
// # Durability
//
// An acknowledged write is as durable as the server makes it: with appendonly yes and appendfsync always
// it survives a crash; with everysec a crash may lose about the last second; with RDB snapshots only, the
// writes since the last snapshot; without persistence, a restart loses everything. Open logs how each
// primary persists (Options.Logger), with a warning when it persists nothing or cannot tell (CONFIG
// disabled, as on some managed services). The store watches each primary's run_id (Open, Ping,
// [Backend.Epoch]): a restart, or a new primary after a failover, is logged as a warning and starts a new
// epoch, on which the engine rebuilds its search indexes from what the server holds.
//
// # Errors
//
// A server that cannot be reached, a timeout (Options.Timeout) and replies such as LOADING or CLUSTERDOWN
// give errors wrapping store.ErrUnavailable; calls after Close give store.ErrClosed. Passwords never appear
// in errors.
package valkey

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/valkey/internal/conn"
)

// DefaultPrefix starts every key unless Options.Prefix says otherwise.
const DefaultPrefix = "loom"

// DefaultTimeout bounds every call to the server unless Options.Timeout says otherwise.
const DefaultTimeout = conn.DefaultTimeout

// Errors of Open.
var (
	// ErrNoClientCache is returned by Open when Options.CacheAgents is set but the server cannot do
	// client-side caching (it needs RESP3 and CLIENT TRACKING: Redis 6 or later, or Valkey).
	ErrNoClientCache = conn.ErrNoClientCache
	// ErrBadOptions is wrapped by Open's and ParseURL's errors about options that cannot work.
	ErrBadOptions = conn.ErrBadOptions
)

// Options configure a Valkey store. The zero value of each field means its documented default, except
// Client.InitAddress, which must name at least one server.
type Options struct {
	// Options are the settings every store backend shares (session TTL, limits).
	store.Options
	// Client configures the connection: addresses (Client.InitAddress), credentials, TLS, Sentinel
	// (Client.Sentinel.MasterSet) or cluster (found by itself when the server is one). When CacheAgents is 0,
	// Open sets Client.DisableCache, so servers without RESP3 work too.
	Client valkeygo.ClientOption
	// Timeout bounds every call that reaches the server unless the caller's context ends sooner; 0 means
	// DefaultTimeout. A call that times out returns an error wrapping store.ErrUnavailable.
	Timeout time.Duration
	// Prefix starts every key; "" means DefaultPrefix. It may not contain '{' or '}' (they would move the
	// hash tag).
	Prefix string
	// CacheAgents, when positive, keeps agent configurations in a client-side cache (valkey-go's DoCache)
	// for up to this long. The server invalidates cached entries when an agent changes, so a change is seen
	// as soon as the invalidation arrives, and at the latest after CacheAgents. It needs RESP3 and CLIENT
	// TRACKING; Open returns ErrNoClientCache if the server has neither. 0 disables the cache.
	CacheAgents time.Duration
	// Logger receives what the store learns of the servers: how each primary persists (a warning when it
	// persists nothing, or cannot tell), and a warning when one restarted or a new one appeared (see
	// Backend.Epoch). nil means slog.Default().
	Logger *slog.Logger
}

var (
	_ store.Backend           = (*Backend)(nil)
	_ store.MessageSelector   = (*Backend)(nil)
	_ store.Loader            = (*Backend)(nil)
	_ store.CollectionBackend = (*Backend)(nil)
	_ store.SummaryBackend    = (*Backend)(nil)
	_ store.CacheStateBackend = (*Backend)(nil)
	_ store.AssemblyBackend   = (*Backend)(nil)
	_ collection.Epocher      = (*Backend)(nil)
)

// Open connects to the server opts.Client names and returns a store.Store over a [Backend]. It returns an
// error wrapping ErrBadOptions for options that cannot work, ErrNoClientCache (see Options.CacheAgents),
// or an error wrapping store.ErrUnavailable when the server cannot be reached.
func Open(ctx context.Context, opts Options) (*store.Store, error) {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(opts.Prefix, "{}") || strings.ContainsFunc(opts.Prefix, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, fmt.Errorf("%w: prefix %q has a brace or a control character", ErrBadOptions, opts.Prefix)
	}
	c, err := conn.Dial(ctx, conn.Settings{Client: opts.Client, Timeout: opts.Timeout, SessionTTL: opts.SessionTTL,
		CacheAgents: opts.CacheAgents, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	s, err := store.New(&Backend{conn: c, prefix: opts.Prefix, maxLen: strconv.Itoa(opts.ChangesKeptOrDefault())}, opts.Options)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return s, nil
}

// Ping implements store.Backend: PING, and the run_id of every primary (see Epoch).
func (n *Backend) Ping(ctx context.Context) error { return n.conn.Ping(ctx) }

// Close implements store.Backend: it closes the connections, waiting for calls in flight. Calls after Close
// return store.ErrClosed.
func (n *Backend) Close() error { return n.conn.Close() }
