package conn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/context-loom/loom/store"
)

// Durability. A write the store acknowledges is in the server's memory; it outlives a restart of the server
// only as far as the server persists it (AOF, with its appendfsync, or RDB snapshots). A server restarted
// without persistence comes back empty, and the clients reconnect as if nothing had happened. So the store
// watches the life of each primary it writes to, told by the run_id of INFO server (new at every start of the
// server process): Dial, Ping and Check (the layouts' Epoch) read it from every primary. At the first sight
// of a primary the store logs how it persists (INFO persistence's aof_enabled, CONFIG GET save and
// appendfsync), with a warning when it persists nothing or cannot tell; when a primary's run_id has changed
// (a restart) or a primary appears at a new address (a failover, a node added to a cluster), anything
// acknowledged may be lost, and the store logs a warning and counts a new epoch (see Check), so that the
// engine rebuilds its search indexes from what the server holds now.
//
// On a cluster, run_id is per node: every primary the client knows of is asked (replicas are not written
// to, and a replica's restart loses nothing), and a restart of any one starts a new epoch. A primary that
// cannot be reached is skipped until it can be (first seen then, it counts as a new one). A FLUSHALL, or a
// restore from a backup behind a running server, changes no run_id and is not seen.

// serverWatch is what the store knows of the primaries' lives.
type serverWatch struct {
	log *slog.Logger

	mu     sync.Mutex
	runs   map[string]string // a primary's address -> its run_id
	seeded bool              // runs holds the primaries seen by the first check that reached one
	epoch  uint64            // how often a primary restarted or appeared since the first check
}

// node is what one check learned of one server.
type node struct {
	addr    string
	runID   string
	primary bool
	err     error
}

// Check asks every server the client knows of for its run_id (and, on a cluster, its role), updates the
// watch, logs what changed and returns the epoch. It fails only when no server could be asked: a server
// that could not is checked again next time.
func (c *Conn) Check(ctx context.Context) (uint64, error) {
	nodes := c.Client.Nodes()
	cluster := c.Client.Mode() == valkeygo.ClientModeCluster
	got := make([]node, 0, len(nodes))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for addr, cl := range nodes {
		wg.Go(func() {
			n := c.ask(ctx, addr, cl, cluster)
			mu.Lock()
			got = append(got, n)
			mu.Unlock()
		})
	}
	wg.Wait()
	var errs []error
	var fresh []node // primaries first seen, or seen with a new run_id
	var prev []string
	w := c.servers
	w.mu.Lock()
	reached := false
	for _, n := range got {
		if n.err != nil {
			errs = append(errs, n.err)
			continue
		}
		reached = true
		if !n.primary {
			continue
		}
		old, known := w.runs[n.addr]
		if known && old == n.runID {
			continue
		}
		w.runs[n.addr] = n.runID
		fresh = append(fresh, n)
		prev = append(prev, old)
		if w.seeded {
			w.epoch++
		}
	}
	if !reached {
		w.mu.Unlock()
		if len(errs) == 0 {
			return 0, fmt.Errorf("valkey: %w: the client knows of no server", store.ErrUnavailable)
		}
		return 0, errors.Join(errs...)
	}
	first := !w.seeded
	w.seeded = true
	epoch := w.epoch
	w.mu.Unlock()
	for i, n := range fresh {
		c.report(ctx, nodes[n.addr], n, prev[i], first)
	}
	return epoch, nil
}

// ask reads one server's run_id and role.
func (c *Conn) ask(ctx context.Context, addr string, cl valkeygo.Client, cluster bool) node {
	n := node{addr: addr, primary: true}
	cctx, cancel, err := c.Call(ctx)
	if err != nil {
		n.err = c.Fail(ctx, err)
		return n
	}
	defer cancel()
	cmds := []valkeygo.Completed{cl.B().Info().Section("server").Build()}
	if cluster {
		cmds = append(cmds, cl.B().Info().Section("replication").Build())
	}
	rs := cl.DoMulti(cctx, cmds...)
	info, err := rs[0].ToString()
	if err != nil {
		n.err = fmt.Errorf("valkey: INFO server on %s: %w", addr, c.Fail(ctx, err))
		return n
	}
	if n.runID = infoField(info, "run_id"); n.runID == "" {
		n.err = fmt.Errorf("valkey: INFO server on %s has no run_id", addr)
		return n
	}
	if cluster {
		repl, err := rs[1].ToString()
		if err != nil {
			n.err = fmt.Errorf("valkey: INFO replication on %s: %w", addr, c.Fail(ctx, err))
			return n
		}
		n.primary = infoField(repl, "role") == "master"
	}
	return n
}

// persistence is how a server persists, as far as it says.
type persistence struct {
	aof       bool   // appendonly yes (INFO persistence's aof_enabled)
	fsync     string // appendfsync: always, everysec or no; "" if CONFIG GET was refused
	save      string // the RDB snapshot points ("3600 1 300 100"); "" for none
	saveKnown bool   // CONFIG GET save answered
	configErr error  // why CONFIG GET was refused (managed services often disable or rename it)
}

// readPersistence asks a server how it persists. CONFIG GET may be refused (renamed, disabled or denied
// by an ACL): then what RDB does is unknown, and INFO persistence still tells whether AOF is on.
func (c *Conn) readPersistence(ctx context.Context, cl valkeygo.Client) (persistence, error) {
	var p persistence
	cctx, cancel, err := c.Call(ctx)
	if err != nil {
		return p, c.Fail(ctx, err)
	}
	defer cancel()
	rs := cl.DoMulti(cctx,
		cl.B().Info().Section("persistence").Build(),
		cl.B().ConfigGet().Parameter("save").Build(),
		cl.B().ConfigGet().Parameter("appendfsync").Build())
	info, err := rs[0].ToString()
	if err != nil {
		return p, c.Fail(ctx, err)
	}
	p.aof = infoField(info, "aof_enabled") == "1"
	if m, err := rs[1].AsStrMap(); err == nil {
		p.save, p.saveKnown = m["save"], true
	} else {
		p.configErr = err
	}
	if m, err := rs[2].AsStrMap(); err == nil {
		p.fsync = m["appendfsync"]
	}
	return p, nil
}

// report logs what the store learned of a primary seen for the first time, or with a new run_id (prev
// its old one, "" for a new address).
func (c *Conn) report(ctx context.Context, cl valkeygo.Client, n node, prev string, first bool) {
	log := c.servers.log
	attrs := []any{"server", n.addr, "run_id", n.runID}
	switch {
	case first:
	case prev != "":
		log.Warn("valkey: the server restarted (its run_id changed): what it had not persisted is lost, and Loom's search indexes are rebuilt",
			append(attrs, "previous_run_id", prev)...)
	default:
		log.Warn("valkey: a new primary (a failover, or a node added to the cluster): what the old primary had not replicated may be lost, and Loom's search indexes are rebuilt",
			attrs...)
	}
	p, err := c.readPersistence(ctx, cl)
	if err != nil {
		log.Warn("valkey: cannot read how the server persists", append(attrs, "err", err)...)
		return
	}
	attrs = append(attrs, "appendonly", yesNo(p.aof))
	if p.fsync != "" {
		attrs = append(attrs, "appendfsync", p.fsync)
	}
	switch {
	case p.aof:
		log.Info("valkey: the server persists with an append-only file (appendfsync always: an acknowledged write survives a crash; everysec: a crash may lose about the last second of writes; no: what the OS had not flushed)",
			append(attrs, "save", p.save)...)
	case !p.saveKnown:
		log.Warn("valkey: cannot tell whether the server persists: CONFIG GET is refused and appendonly is off; unless it takes RDB snapshots, a restart loses every write",
			append(attrs, "save", "unknown", "err", p.configErr)...)
	case p.save == "":
		log.Warn("valkey: the server persists nothing (appendonly no, save \"\"): a restart loses every write Loom acknowledged; turn on appendonly",
			append(attrs, "save", `""`)...)
	default:
		log.Info("valkey: the server persists with RDB snapshots only: a restart loses the writes since the last snapshot; turn on appendonly to keep them",
			append(attrs, "save", p.save)...)
	}
}

// infoField returns the value of a field of an INFO reply ("run_id:abc..."), "" if there is none.
func infoField(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), name+":"); ok {
			return v
		}
	}
	return ""
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
