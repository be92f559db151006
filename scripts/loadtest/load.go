package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"sync"
	"time"
)

// loadResult is one store's sustained load run.
type loadResult struct {
	store    string
	seeded   string // what was seeded, for the report
	shape    string // what one assembly returns, for the report
	cpu      string // the cores each process kept busy during the measured run
	elapsed  time.Duration
	tally    *tally
	degraded int // 200s flagged degraded: a source the assembly went without
	stopErr  error
}

// runLoadPhase runs the same sustained load on the Valkey store and on the SQLite store and reports them
// side by side.
func runLoadPhase(ctx context.Context, env *environment, sec *section) error {
	sec.printf("%d clients (half per tenant, spread over %d sessions each) send `POST /v1/assemble` back to back for %v "+
		"after a %v warm-up, assembling from stored state: the agent (instructions, 2 tools), the user's 8 memory facts "+
		"(2 pinned), the session's %d messages (with tool calls), 3 tool outputs and 5 knowledge items, for %s in a "+
		"%d-token budget (so history is trimmed). Latency is measured by the client, request sent to body read, over "+
		"loopback; only 2xx responses count toward it.\n\n",
		env.cfg.concurrency, env.cfg.sessions, env.cfg.duration, env.cfg.warmup, env.cfg.messages, model, maxTokens)
	var results []loadResult
	for _, kind := range []string{"valkey", "sqlite"} {
		env.logf("load on %s", kind)
		r, err := loadOnStore(ctx, env, kind, sec)
		if err != nil {
			sec.fail("load on %s: %v", kind, err)
			continue
		}
		results = append(results, r)
	}
	if len(results) == 0 {
		return nil
	}
	writeLoadTable(sec, results)
	for _, r := range results {
		sec.check(r.tally.total() > 0 && r.tally.failed() == 0, "%s: every assembly answered 200 (%s)", r.store, r.tally.statusList())
		sec.check(r.degraded == 0, "%s: no assembly degraded (%d were)", r.store, r.degraded)
		sec.check(r.stopErr == nil, "%s: loom serve stopped cleanly on SIGTERM after the load (%v)", r.store, errText(r.stopErr))
	}
	return nil
}

// loadOnStore starts a store and loom serve on it, seeds both tenants and runs the load.
func loadOnStore(ctx context.Context, env *environment, kind string, sec *section) (loadResult, error) {
	res := loadResult{store: kind}
	storeURL := "sqlite:" + env.path("load.db")
	names, pids := []string{"generator"}, []int{os.Getpid()}
	if kind == "valkey" {
		v, err := startValkey(ctx, env, "valkey-load", false)
		if err != nil {
			return res, err
		}
		defer v.proc.kill()
		storeURL = v.url()
		names, pids = append(names, "valkey"), append(pids, v.proc.cmd.Process.Pid)
	}
	srv, err := startLoom(ctx, env, "loom-load-"+kind, storeURL)
	if err != nil {
		return res, err
	}
	defer srv.proc.kill()
	names, pids = append([]string{"loom serve"}, names...), append([]int{srv.proc.cmd.Process.Pid}, pids...)
	a := &audit{}
	hc := newHTTPClient(env.cfg.concurrency)
	defer hc.CloseIdleConnections()
	clients := []*client{newClient(srv, keyA, hc, a), newClient(srv, keyB, hc, a)}
	start := time.Now()
	var fixtures []fixture
	for i, c := range clients {
		fx, err := seedTenant(ctx, c, []string{tenantA, tenantB}[i], env.cfg.sessions, env.cfg.messages, uint64(i+1))
		if err != nil {
			return res, err
		}
		fixtures = append(fixtures, fx)
	}
	res.seeded = fmt.Sprintf("%d tenants x %d sessions x %d messages in %.1f s", len(fixtures), env.cfg.sessions, env.cfg.messages, time.Since(start).Seconds())
	if res.shape, err = assemblyShape(ctx, clients[0], fixtures[0]); err != nil {
		return res, err
	}
	assemble := func(ctx context.Context, w, iter int, t *tally) bool {
		fx, c := fixtures[w%2], clients[w%2]
		r := c.send(ctx, http.MethodPost, "/v1/assemble", assembleBody(fx, (w/2+iter)%len(fx.sessions), false))
		t.add(r)
		if r.status == http.StatusOK && bytes.Contains(r.body, []byte(`"degraded":[`)) {
			t.degraded++
		}
		return true
	}
	hammer(ctx, env.cfg.concurrency, env.cfg.warmup, assemble)
	cpu := startCPU(names, pids)
	res.tally, res.elapsed = hammer(ctx, env.cfg.concurrency, env.cfg.duration, assemble)
	res.cpu = cpu.String()
	res.degraded = res.tally.degraded
	a.check(sec, kind)
	res.stopErr = srv.stop()
	return res, nil
}

// assemblyShape assembles once for fx's first session and describes the result.
func assemblyShape(ctx context.Context, c *client, fx fixture) (string, error) {
	var out struct {
		TotalTokens int               `json:"total_tokens"`
		Messages    []json.RawMessage `json:"messages"`
		Citations   []json.RawMessage `json:"citations"`
		Degraded    []json.RawMessage `json:"degraded"`
		Report      struct {
			Regions []struct {
				Name     string   `json:"name"`
				Included []string `json:"included"`
				Dropped  []any    `json:"dropped"`
			} `json:"regions"`
		} `json:"report"`
	}
	if err := c.call(ctx, http.MethodPost, "/v1/assemble", assembleBody(fx, 0, true), &out); err != nil {
		return "", fmt.Errorf("a first assembly: %w", err)
	}
	history := ""
	for _, r := range out.Report.Regions {
		if r.Name == "history" {
			history = fmt.Sprintf("%d history messages kept, %d dropped", len(r.Included), len(r.Dropped))
		}
	}
	return fmt.Sprintf("%d tokens in %d messages, %d citations, %s", out.TotalTokens, len(out.Messages), len(out.Citations), history), nil
}

// hammer runs n workers for d: each calls do with its number and an iteration count until d has passed or
// do returns false. It returns the workers' merged tallies and the time until the last one finished.
// Requests in flight at the deadline complete and count.
func hammer(ctx context.Context, n int, d time.Duration, do func(ctx context.Context, worker, iter int, t *tally) bool) (*tally, time.Duration) {
	start := time.Now()
	deadline := start.Add(d)
	tallies := make([]*tally, n)
	var wg sync.WaitGroup
	for w := range n {
		tallies[w] = newTally()
		wg.Go(func() {
			for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				if !do(ctx, w, i, tallies[w]) {
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	all := newTally()
	for _, t := range tallies {
		all.merge(t)
	}
	return all, elapsed
}

// writeLoadTable writes the runs side by side, one column per store.
func writeLoadTable(sec *section, results []loadResult) {
	header := []string{""}
	sums := make([]latencySummary, len(results))
	for i, r := range results {
		header = append(header, r.store)
		sums[i] = r.tally.summary()
	}
	row := func(name string, f func(i int, r loadResult) string) []string {
		out := []string{name}
		for i, r := range results {
			out = append(out, f(i, r))
		}
		return out
	}
	rows := [][]string{
		row("seeded", func(_ int, r loadResult) string { return r.seeded }),
		row("one assembly", func(_ int, r loadResult) string { return r.shape }),
		row("requests (measured)", func(_ int, r loadResult) string { return fmt.Sprint(r.tally.total()) }),
		row("throughput", func(_ int, r loadResult) string {
			return fmt.Sprintf("**%.0f req/s**", float64(r.tally.total())/r.elapsed.Seconds())
		}),
		row("p50", func(i int, _ loadResult) string { return "**" + ms(sums[i].p50) + "**" }),
		row("p90", func(i int, _ loadResult) string { return ms(sums[i].p90) }),
		row("p99", func(i int, _ loadResult) string { return "**" + ms(sums[i].p99) + "**" }),
		row("max", func(i int, _ loadResult) string { return ms(sums[i].mx) }),
		row("mean", func(i int, _ loadResult) string { return ms(sums[i].mean) }),
		row("responses by status", func(_ int, r loadResult) string { return r.tally.statusList() }),
		row("degraded 200s", func(_ int, r loadResult) string { return fmt.Sprint(r.degraded) }),
		row(fmt.Sprintf("cores busy (of %d)", runtime.NumCPU()), func(_ int, r loadResult) string { return r.cpu }),
	}
	sec.table(header, rows)
}

// errText formats err for a check, "ok" for nil.
func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}
