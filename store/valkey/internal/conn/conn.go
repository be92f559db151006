// Package conn is what the Valkey key layouts share: the connection to the servers with its timeouts and
// retries, the mapping of errors to the store's, the watch on the primaries' lives (servers.go), the
// parsing of store URLs (url.go) and the helpers both layouts' keys use (keys.go). Package
// store/valkey (Loom's own layout) and package store/valkey/cookbook (the Valkey cookbook's) are built on
// it.
package conn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/store"
)

// DefaultTimeout is the Timeout of a Conn whose Settings leave it 0.
const DefaultTimeout = 2 * time.Second

// Errors of Dial, which the layouts' packages name too.
var (
	// ErrNoClientCache is returned by Dial when Settings.CacheAgents is set but the server cannot do
	// client-side caching (it needs RESP3 and CLIENT TRACKING: Redis 6 or later, or Valkey).
	ErrNoClientCache = loom.NewError(loom.ErrUnsupported, "valkey: CacheAgents needs a server with RESP3 and CLIENT TRACKING (Redis 6+ or Valkey); set CacheAgents to 0")
	// ErrBadOptions is wrapped by the errors about options that cannot work (of Dial, the layouts' Open
	// and ParseURL).
	ErrBadOptions = loom.NewError(loom.ErrInvalid, "valkey: bad options")
)

// Settings are what a Conn is made of: the layouts' Options hold them.
type Settings struct {
	Client      valkeygo.ClientOption
	Timeout     time.Duration // 0: DefaultTimeout
	SessionTTL  time.Duration
	CacheAgents time.Duration
	Logger      *slog.Logger // nil: slog.Default()
}

// Dial connects to the servers s.Client names and pings them (reading every primary's run_id and how it
// persists, see servers.go). It returns an error wrapping ErrBadOptions for settings that cannot work,
// ErrNoClientCache (see Settings.CacheAgents), or an error wrapping store.ErrUnavailable when the server
// cannot be reached.
func Dial(ctx context.Context, s Settings) (*Conn, error) {
	if s.Timeout < 0 || s.CacheAgents < 0 || s.SessionTTL < 0 {
		return nil, fmt.Errorf("%w: negative Timeout, CacheAgents or SessionTTL", ErrBadOptions)
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
	}
	if len(s.Client.InitAddress) == 0 {
		return nil, fmt.Errorf("%w: no server address (Client.InitAddress)", ErrBadOptions)
	}
	copt := s.Client
	copt.DisableCache = s.CacheAgents == 0
	if copt.Dialer.Timeout == 0 || copt.Dialer.Timeout > s.Timeout {
		copt.Dialer.Timeout = s.Timeout
	}
	if copt.Sentinel.MasterSet != "" && (copt.Sentinel.Dialer.Timeout == 0 || copt.Sentinel.Dialer.Timeout > s.Timeout) {
		copt.Sentinel.Dialer.Timeout = s.Timeout // asking the Sentinels is bounded like every call
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
		return nil, fmt.Errorf("valkey: connect: %w", Classify(err))
	}
	log := s.Logger
	if log == nil {
		log = slog.Default()
	}
	c := &Conn{Client: client, TTL: s.SessionTTL, Timeout: s.Timeout, CacheTTL: s.CacheAgents,
		servers: &serverWatch{log: log, runs: map[string]string{}}}
	if err := c.Ping(ctx); err != nil {
		client.Close()
		return nil, err
	}
	return c, nil
}

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

// Conn is the connection to the servers and the settings that a key layout shares.
type Conn struct {
	Client   valkeygo.Client
	TTL      time.Duration // the session TTL; 0: none
	Timeout  time.Duration // of every call (Call)
	CacheTTL time.Duration // of the agents' client-side cache; 0: none
	closed   atomic.Bool
	servers  *serverWatch // the primaries' lives (servers.go)
}

// Call returns a context for one call to the server, bounded by the store's timeout, or an error if the
// store is closed or ctx is done.
func (c *Conn) Call(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if err := c.Alive(ctx); err != nil {
		return nil, nil, err
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= c.Timeout {
		ctx, cancel := context.WithCancel(ctx)
		return ctx, cancel, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	return ctx, cancel, nil
}

// Alive returns store.ErrClosed after Close, else ctx's error.
func (c *Conn) Alive(ctx context.Context) error {
	if c.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}

// Fail maps an error of a call made with a context from call(parent) to the store's errors: ErrClosed after
// Close, the parent's own error when it ended, ErrUnavailable for the network, timeouts and a server that
// cannot serve.
func (c *Conn) Fail(parent context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case c.closed.Load():
		return store.ErrClosed
	case parent.Err() != nil:
		return fmt.Errorf("valkey: %w", parent.Err())
	}
	return fmt.Errorf("valkey: %w", Classify(err))
}

// Classify wraps err in store.ErrUnavailable when it means the server cannot be reached or cannot serve now.
func Classify(err error) error {
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

// Do sends one command.
func (c *Conn) Do(ctx context.Context, cmd valkeygo.Completed) (valkeygo.ValkeyResult, error) {
	cctx, cancel, err := c.Call(ctx)
	if err != nil {
		return valkeygo.ValkeyResult{}, c.Fail(ctx, err)
	}
	defer cancel()
	r := c.Client.Do(cctx, cmd)
	if err := r.NonValkeyError(); err != nil {
		return r, c.Fail(ctx, err)
	}
	return r, nil
}

// DoMulti sends cmds in one pipeline. It fails if any reply is a network error; replies that are server
// errors are left to the caller.
func (c *Conn) DoMulti(ctx context.Context, cmds ...valkeygo.Completed) ([]valkeygo.ValkeyResult, error) {
	cctx, cancel, err := c.Call(ctx)
	if err != nil {
		return nil, c.Fail(ctx, err)
	}
	defer cancel()
	rs := c.Client.DoMulti(cctx, cmds...)
	for _, r := range rs {
		if err := r.NonValkeyError(); err != nil {
			return nil, c.Fail(ctx, err)
		}
	}
	return rs, nil
}

// DoGroups sends groups of commands, each of which stays in one slot (a MULTI/EXEC transaction may be one):
// as one DoMulti, except on a cluster, where a DoMulti cannot mix a transaction with other slots' commands;
// there each group is a DoMulti of its own, all sent concurrently.
func (c *Conn) DoGroups(ctx context.Context, groups ...[]valkeygo.Completed) ([][]valkeygo.ValkeyResult, error) {
	out := make([][]valkeygo.ValkeyResult, len(groups))
	if c.Client.Mode() != valkeygo.ClientModeCluster {
		var all []valkeygo.Completed
		for _, g := range groups {
			all = append(all, g...)
		}
		rs, err := c.DoMulti(ctx, all...)
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
		wg.Go(func() { out[i], errs[i] = c.DoMulti(ctx, g...) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// Tx runs cmds in one MULTI/EXEC transaction and returns their replies. A server error of any command is
// returned (mapped) as the error.
func (c *Conn) Tx(ctx context.Context, cmds ...valkeygo.Completed) ([]valkeygo.ValkeyMessage, error) {
	all := make([]valkeygo.Completed, 0, len(cmds)+2)
	all = append(all, c.Client.B().Multi().Build())
	all = append(all, cmds...)
	all = append(all, c.Client.B().Exec().Build())
	rs, err := c.DoMulti(ctx, all...)
	if err != nil {
		return nil, err
	}
	return c.ExecReplies(ctx, rs[0], rs[len(rs)-1], len(cmds))
}

// ExecReplies checks a MULTI and its EXEC's replies and returns the n replies of the transaction.
func (c *Conn) ExecReplies(ctx context.Context, multi, exec valkeygo.ValkeyResult, n int) ([]valkeygo.ValkeyMessage, error) {
	if err := multi.Error(); err != nil {
		return nil, c.Fail(ctx, err)
	}
	arr, err := exec.ToArray()
	if err != nil {
		return nil, c.Fail(ctx, err)
	}
	if len(arr) != n {
		return nil, fmt.Errorf("valkey: a transaction of %d commands returned %d replies", n, len(arr))
	}
	for _, m := range arr {
		if err := m.Error(); err != nil {
			return nil, c.Fail(ctx, err)
		}
	}
	return arr, nil
}

// Whole reports whether a mapped error ends a whole read rather than one source of it.
func Whole(err error) bool {
	return errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrClosed) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Ping sends PING, then reads the run_id of every primary as Epoch does (logging a restart it finds), and
// returns an error wrapping store.ErrUnavailable if no reply comes within the timeout, or store.ErrClosed
// after Close.
func (c *Conn) Ping(ctx context.Context) error {
	if _, err := c.Do(ctx, c.Client.B().Ping().Build()); err != nil {
		return err
	}
	_, err := c.Check(ctx)
	return err
}

// Close closes the connections, waiting for calls in flight; closing twice does nothing.
func (c *Conn) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.Client.Close()
	return nil
}

// Deleted turns the count a DEL or HDEL returned into ErrNotFound when it is 0.
func (c *Conn) Deleted(ctx context.Context, r valkeygo.ValkeyResult, err error, kind, id string) error {
	if err != nil {
		return err
	}
	k, err := r.AsInt64()
	if err != nil {
		return c.Fail(ctx, err)
	}
	if k == 0 {
		return fmt.Errorf("%s %q: %w", kind, id, store.ErrNotFound)
	}
	return nil
}
