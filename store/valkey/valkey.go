// Package valkey is a store.Store on a Valkey server, or any server that speaks the Redis protocol
// (Redis 6+ for RESP3; Redis 7+ for everything this package tests), standalone, behind Sentinel or as a
// cluster, through github.com/valkey-io/valkey-go.
//
// # Native layout
//
// The default layout ([LayoutNative]) keeps everything under a prefix (default "loom"), tenant-scoped, with
// every id escaped (see below):
//
//	loom:{t:<tenant>:s:<session>}:msgs   list: a session's messages as JSON (with "seq" and "token_counts"),
//	                                     oldest first
//	loom:{t:<tenant>:s:<session>}:tools  list: its tool outputs as JSON; seq = position + 1
//	loom:{t:<tenant>:s:<session>}:kb     list: its pre-retrieved knowledge as JSON
//	loom:{t:<tenant>:u:<user>}:mem       hash: fact key -> fact as JSON
//	loom:{t:<tenant>}:agent:<id>         hash: instructions, constraints, output_format, updated_at, and
//	                                     model, max_tokens, tools and policy (JSON) when set
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
// never listed, and nothing a request needs is found by key pattern: no KEYS, and no SCAN (collections are
// listed from the tenant's index hash, documents and chunks with HSCAN of their collection's hashes). The
// one SCAN is AllCollections', which a server runs once at start to find every tenant's index hash. A
// session that expired or was deleted starts again from seq 1.
//
// Ids are escaped before they go into a key: '%', ':', '{', '}', space and control bytes become %XX (upper
// case hex), so no id can close a hash tag or pose as another tenant's or session's key.
//
// # Cookbook layout
//
// [LayoutCookbook] reads and writes the keys of the Valkey cookbook's context assembly pipeline (seed 003) as
// that Python code does, so its users can point Loom at their server unchanged:
//
//	agent:config:<agent>       hash: role (Agent.Instructions), constraints, output_format; Loom adds model,
//	                           max_tokens, tools, policy and updated_at when it writes one
//	memory:<user>              hash: fact key -> value; Facts come in the server's order (insertion order
//	                           for small hashes), not sorted, so the cookbook's output is reproduced
//	chat:<session>             list of JSON {"role", "content", "ts"}; seq = position + 1; token counts are
//	                           counted on read (other programs write these keys, so none are trusted)
//	kb:results:<session>       list of JSON {"title", "content", ...}; the title is Metadata["title"], and
//	                           Source unless a "source" is given; an untitled entry's "source" is
//	                           Metadata["source"] (and it renders as the seed's "Doc")
//	tool:<session>:step_<n>    hash: tool, result, timestamp (and call_id, args when Loom writes them); found
//	                           with SCAN MATCH, never KEYS, and ordered by n as a number, so step_2 comes
//	                           before step_10 (the cookbook sorts them as strings, which puts step_10 first)
//
// Entries written by other tools are read leniently, one at a time, as the seed's Python reads them: numbers
// may be numeric strings, metadata values of any JSON type are kept (as JSON text), and an entry that is not
// an object, or a chat entry without role and content, is skipped rather than failing its whole source (see
// cookbook.go).
//
// The cookbook's keys carry no tenant, so this layout holds the single tenant "default" ([DefaultTenant]);
// any other tenant gets an error wrapping store.ErrUnsupported. Its Load takes more than one round trip:
// the tool steps must be found with SCAN before they can be read (concurrently with the other sources).
//
// # Durability
//
// An acknowledged write is as durable as the server makes it: with appendonly yes and appendfsync always
// it survives a crash; with everysec a crash may lose about the last second; with RDB snapshots only, the
// writes since the last snapshot; without persistence, a restart loses everything. Open logs how each
// primary persists (Options.Logger), with a warning when it persists nothing or cannot tell (CONFIG
// disabled, as on some managed services). The store watches each primary's run_id (Open, Ping,
// [Backend.Epoch]): a restart, or a new primary after a failover, is logged as a warning and starts a new
// epoch, on which the engine rebuilds its search indexes from what the server holds (servers.go has the
// details).
//
// # Errors
//
// A server that cannot be reached, a timeout (Options.Timeout) and replies such as LOADING or CLUSTERDOWN
// give errors wrapping store.ErrUnavailable; calls after Close give store.ErrClosed. Passwords never appear
// in errors.
package valkey

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/store"
)

// Layout names a key layout.
type Layout string

// Layouts.
const (
	// LayoutNative is Loom's own tenant-scoped, cluster-ready layout (the default).
	LayoutNative Layout = "native"
	// LayoutCookbook reads and writes seed 003's keys; it holds the single tenant DefaultTenant.
	LayoutCookbook Layout = "cookbook"
)

// Defaults of Options.
const (
	DefaultPrefix  = "loom"
	DefaultTimeout = 2 * time.Second
	// DefaultTenant is the only tenant LayoutCookbook holds.
	DefaultTenant = "default"
)

// Errors of Open.
var (
	// ErrNoClientCache is returned by Open when Options.CacheAgents is set but the server cannot do
	// client-side caching (it needs RESP3 and CLIENT TRACKING: Redis 6 or later, or Valkey).
	ErrNoClientCache = loom.NewError(loom.ErrUnsupported, "valkey: CacheAgents needs a server with RESP3 and CLIENT TRACKING (Redis 6+ or Valkey); set CacheAgents to 0")
	// ErrBadOptions is wrapped by Open's and ParseURL's errors about options that cannot work.
	ErrBadOptions = loom.NewError(loom.ErrInvalid, "valkey: bad options")
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
	// Prefix starts every key of LayoutNative; "" means DefaultPrefix. It may not contain '{' or '}' (they
	// would move the hash tag). LayoutCookbook uses the seed's keys as they are and takes no prefix.
	Prefix string
	// Layout is the key layout; "" means LayoutNative.
	Layout Layout
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
	_ collection.Epocher      = (*Backend)(nil)
)

// dialRetries is how often a call retries a dial that failed before it gives up.
const dialRetries = 3

// retryDelay is the store's valkey-go RetryDelay. The client retries read-only commands after network
// errors until the call's deadline, backing off up to 1 s; a server that refuses connections (stopped,
// restarting) then holds every call for the whole timeout. A failed dial is retried dialRetries times
// (after 1, 2 and 4 ms, which rides out a blip) and then the call fails: an outage is a quick
// ErrUnavailable, a 503 with Retry-After from the server, rather than a queue of stalled calls. Other
// network errors back off as valkey-go's default does: 2^attempts µs with as much jitter, at most 1 s.
// valkey-go numbers attempts from 1.
func retryDelay(attempts int, _ valkeygo.Completed, err error) time.Duration {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		if attempts > dialRetries {
			return -1
		}
		return time.Duration(1<<(max(attempts, 1)-1)) * time.Millisecond
	}
	base := int64(1) << min(max(attempts, 0), 20)
	return min(time.Second, time.Duration(base+rand.Int64N(base))*time.Microsecond)
}

// conn is the connection and the settings a layout shares.
type conn struct {
	client   valkeygo.Client
	ttl      time.Duration // session TTL; 0: none
	timeout  time.Duration
	cacheTTL time.Duration // agents' client-side cache; 0: none
	closed   atomic.Bool
	servers  *serverWatch // the primaries' lives (servers.go)
}

// Open connects to the server opts.Client names and returns a store.Store over the layout opts.Layout names
// (a [Backend] for LayoutNative). It returns an error wrapping ErrBadOptions for options that cannot work,
// ErrNoClientCache (see Options.CacheAgents), or an error wrapping store.ErrUnavailable when the server
// cannot be reached.
func Open(ctx context.Context, opts Options) (*store.Store, error) {
	if opts.Timeout < 0 || opts.CacheAgents < 0 || opts.SessionTTL < 0 {
		return nil, fmt.Errorf("%w: negative Timeout, CacheAgents or SessionTTL", ErrBadOptions)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if len(opts.Client.InitAddress) == 0 {
		return nil, fmt.Errorf("%w: no server address (Client.InitAddress)", ErrBadOptions)
	}
	switch opts.Layout {
	case "", LayoutNative:
		if opts.Prefix == "" {
			opts.Prefix = DefaultPrefix
		}
		if strings.ContainsAny(opts.Prefix, "{}") || strings.ContainsFunc(opts.Prefix, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return nil, fmt.Errorf("%w: prefix %q has a brace or a control character", ErrBadOptions, opts.Prefix)
		}
	case LayoutCookbook:
		if opts.Prefix != "" {
			return nil, fmt.Errorf("%w: the cookbook layout uses the seed's keys and takes no prefix", ErrBadOptions)
		}
	default:
		return nil, fmt.Errorf("%w: unknown layout %q (known: native, cookbook)", ErrBadOptions, opts.Layout)
	}
	copt := opts.Client
	copt.DisableCache = opts.CacheAgents == 0
	if copt.Dialer.Timeout == 0 || copt.Dialer.Timeout > opts.Timeout {
		copt.Dialer.Timeout = opts.Timeout
	}
	if copt.Sentinel.MasterSet != "" && (copt.Sentinel.Dialer.Timeout == 0 || copt.Sentinel.Dialer.Timeout > opts.Timeout) {
		copt.Sentinel.Dialer.Timeout = opts.Timeout // asking the Sentinels is bounded like every call
	}
	if copt.RetryDelay == nil {
		copt.RetryDelay = retryDelay
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	client, err := valkeygo.NewClient(copt)
	if err != nil {
		if errors.Is(err, valkeygo.ErrNoCache) {
			return nil, ErrNoClientCache
		}
		return nil, fmt.Errorf("valkey: connect: %w", classify(err))
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &conn{client: client, ttl: opts.SessionTTL, timeout: opts.Timeout,
		cacheTTL: opts.CacheAgents, servers: &serverWatch{log: log, runs: map[string]string{}}}
	var b store.Backend
	if opts.Layout == LayoutCookbook {
		b = &cookbook{conn: c}
	} else {
		b = &Backend{conn: c, prefix: opts.Prefix, maxLen: strconv.Itoa(opts.ChangesKeptOrDefault())}
	}
	if err := c.ping(ctx); err != nil {
		client.Close()
		return nil, err
	}
	s, err := store.New(b, opts.Options)
	if err != nil {
		client.Close()
		return nil, err
	}
	return s, nil
}

// call returns a context for one call to the server, bounded by the store's timeout, or an error if the
// store is closed or ctx is done.
func (c *conn) call(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if err := c.alive(ctx); err != nil {
		return nil, nil, err
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= c.timeout {
		ctx, cancel := context.WithCancel(ctx)
		return ctx, cancel, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	return ctx, cancel, nil
}

// alive returns store.ErrClosed after Close, else ctx's error.
func (c *conn) alive(ctx context.Context) error {
	if c.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}

// fail maps an error of a call made with a context from call(parent) to the store's errors: ErrClosed after
// Close, the parent's own error when it ended, ErrUnavailable for the network, timeouts and a server that
// cannot serve.
func (c *conn) fail(parent context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case c.closed.Load():
		return store.ErrClosed
	case parent.Err() != nil:
		return fmt.Errorf("valkey: %w", parent.Err())
	}
	return fmt.Errorf("valkey: %w", classify(err))
}

// classify wraps err in store.ErrUnavailable when it means the server cannot be reached or cannot serve now.
func classify(err error) error {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, valkeygo.ErrClosing) || errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	if ve, ok := valkeygo.IsValkeyErr(err); ok {
		for _, p := range []string{"LOADING", "CLUSTERDOWN", "MASTERDOWN", "TRYAGAIN", "BUSY", "NOREPLICAS", "READONLY"} {
			if strings.HasPrefix(ve.Error(), p) {
				return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
			}
		}
	}
	return err
}

// do sends one command.
func (c *conn) do(ctx context.Context, cmd valkeygo.Completed) (valkeygo.ValkeyResult, error) {
	cctx, cancel, err := c.call(ctx)
	if err != nil {
		return valkeygo.ValkeyResult{}, c.fail(ctx, err)
	}
	defer cancel()
	r := c.client.Do(cctx, cmd)
	if err := r.NonValkeyError(); err != nil {
		return r, c.fail(ctx, err)
	}
	return r, nil
}

// doMulti sends cmds in one pipeline. It fails if any reply is a network error; replies that are server
// errors are left to the caller.
func (c *conn) doMulti(ctx context.Context, cmds ...valkeygo.Completed) ([]valkeygo.ValkeyResult, error) {
	cctx, cancel, err := c.call(ctx)
	if err != nil {
		return nil, c.fail(ctx, err)
	}
	defer cancel()
	rs := c.client.DoMulti(cctx, cmds...)
	for _, r := range rs {
		if err := r.NonValkeyError(); err != nil {
			return nil, c.fail(ctx, err)
		}
	}
	return rs, nil
}

// doGroups sends groups of commands, each of which stays in one slot (a MULTI/EXEC transaction may be one):
// as one DoMulti, except on a cluster, where a DoMulti cannot mix a transaction with other slots' commands;
// there each group is a DoMulti of its own, all sent concurrently.
func (c *conn) doGroups(ctx context.Context, groups ...[]valkeygo.Completed) ([][]valkeygo.ValkeyResult, error) {
	out := make([][]valkeygo.ValkeyResult, len(groups))
	if c.client.Mode() != valkeygo.ClientModeCluster {
		var all []valkeygo.Completed
		for _, g := range groups {
			all = append(all, g...)
		}
		rs, err := c.doMulti(ctx, all...)
		if err != nil {
			return nil, err
		}
		for i, g := range groups {
			out[i], rs = rs[:len(g)], rs[len(g):]
		}
		return out, nil
	}
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Go(func() { out[i], errs[i] = c.doMulti(ctx, g...) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// tx runs cmds in one MULTI/EXEC transaction and returns their replies. A server error of any command is
// returned (mapped) as the error.
func (c *conn) tx(ctx context.Context, cmds ...valkeygo.Completed) ([]valkeygo.ValkeyMessage, error) {
	all := make([]valkeygo.Completed, 0, len(cmds)+2)
	all = append(all, c.client.B().Multi().Build())
	all = append(all, cmds...)
	all = append(all, c.client.B().Exec().Build())
	rs, err := c.doMulti(ctx, all...)
	if err != nil {
		return nil, err
	}
	return c.execReplies(ctx, rs[0], rs[len(rs)-1], len(cmds))
}

// execReplies checks a MULTI and its EXEC's replies and returns the n replies of the transaction.
func (c *conn) execReplies(ctx context.Context, multi, exec valkeygo.ValkeyResult, n int) ([]valkeygo.ValkeyMessage, error) {
	if err := multi.Error(); err != nil {
		return nil, c.fail(ctx, err)
	}
	arr, err := exec.ToArray()
	if err != nil {
		return nil, c.fail(ctx, err)
	}
	if len(arr) != n {
		return nil, fmt.Errorf("valkey: a transaction of %d commands returned %d replies", n, len(arr))
	}
	for _, m := range arr {
		if err := m.Error(); err != nil {
			return nil, c.fail(ctx, err)
		}
	}
	return arr, nil
}

// whole reports whether a mapped error ends a whole read rather than one source of it.
func whole(err error) bool {
	return errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrClosed) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// ping sends PING, then reads the run_id of every primary as Epoch does (logging a restart it finds), and
// returns an error wrapping store.ErrUnavailable if no reply comes within the timeout, or store.ErrClosed
// after Close.
func (c *conn) ping(ctx context.Context) error {
	if _, err := c.do(ctx, c.client.B().Ping().Build()); err != nil {
		return err
	}
	_, err := c.check(ctx)
	return err
}

// close closes the connections, waiting for calls in flight; closing twice does nothing.
func (c *conn) close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.client.Close()
	return nil
}

// Ping implements store.Backend: PING, and the run_id of every primary (see Epoch).
func (n *Backend) Ping(ctx context.Context) error { return n.ping(ctx) }

// Close implements store.Backend: it closes the connections, waiting for calls in flight. Calls after Close
// return store.ErrClosed.
func (n *Backend) Close() error { return n.close() }
