package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Request kinds of the outage phase.
const (
	kindAppend         = "append"
	kindAssembleStrict = "assemble (strict)"
	kindAssemble       = "assemble (default)"
	kindReadyz         = "GET /readyz"
)

// outageKinds are the kinds in the order the report lists them.
var outageKinds = []string{kindAppend, kindAssembleStrict, kindAssemble, kindReadyz}

// Timing of the outage phase around the outage itself.
const (
	outageBefore     = 3 * time.Second // normal traffic before the stop
	outageAfter      = 4 * time.Second // traffic after the first acknowledged append since the restart
	recoveryDeadline = 20 * time.Second
	retryPause       = 100 * time.Millisecond // a client's pause after a failed request
	stableGrace      = 2 * time.Second        // after the first 201, everything must succeed
)

// timeline is when the Valkey server went away and came back.
type timeline struct {
	stopAt    time.Time // SIGTERM sent
	downAt    time.Time // the process had exited
	restartAt time.Time // the new process was started
	readyAt   time.Time // it answered PING
}

// event is one request of the outage phase, reduced to what the checks need.
type event struct {
	kind       string
	status     int // 0: transport error
	retryAfter string
	degraded   bool
	start, end time.Time
}

// window says where an event falls: before the stop, inside the outage (started after the server was gone,
// ended before it was started again), after the server was ready again, or across a transition.
func (t timeline) window(e event) string {
	switch {
	case e.end.Before(t.stopAt):
		return "before"
	case !e.start.Before(t.downAt) && !e.end.After(t.restartAt):
		return "outage"
	case !e.start.Before(t.readyAt):
		return "after"
	}
	return "transition"
}

// msgKey names a message by its tenant, session and (unique) content.
type msgKey struct{ tenant, session, content string }

// ack is a message whose append was acknowledged with 201.
type ack struct {
	tenant, session, content string
	seq                      int64
	writer                   int
}

// outageRun is what the outage phase's clients saw.
type outageRun struct {
	mu        sync.Mutex
	events    []event
	acks      []ack
	attempted []msgKey // appends that were not acknowledged
}

func (o *outageRun) record(e event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, e)
}

// firstSince returns the first event of kind with a 2xx status that started at or after t.
func (o *outageRun) firstSince(kind string, t time.Time) (event, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var best event
	found := false
	for _, e := range o.events {
		if e.kind == kind && e.status/100 == 2 && !e.start.Before(t) && (!found || e.end.Before(best.end)) {
			best, found = e, true
		}
	}
	return best, found
}

// runOutagePhase stops the Valkey server for cfg.outage under appends and assemblies, restarts it on the
// same port and checks the 503s, the recovery and that every acknowledged append survived.
func runOutagePhase(ctx context.Context, env *environment, sec *section) error {
	v, err := startValkey(ctx, env, "valkey-outage", true)
	if err != nil {
		return err
	}
	defer v.proc.kill()
	srv, err := startLoom(ctx, env, "loom-outage", v.url())
	if err != nil {
		return err
	}
	defer srv.proc.kill()
	a := &audit{}
	hc := newHTTPClient(env.cfg.outageWriters + 4)
	defer hc.CloseIdleConnections()
	clients := []*client{newClient(srv, keyA, hc, a), newClient(srv, keyB, hc, a)}
	var fixtures []fixture
	for i, c := range clients {
		fx, err := seedTenant(ctx, c, []string{tenantA, tenantB}[i], 1, 50, uint64(10+i))
		if err != nil {
			return err
		}
		fixtures = append(fixtures, fx)
	}
	sec.printf("Valkey (`%s --appendonly yes --appendfsync always`: every write is fsynced to the append-only file "+
		"before Valkey replies) behind `loom serve --store valkey://...`. %d clients append one message each per request "+
		"(a unique content, to 2 sessions per tenant), one client assembles with `\"strict\": true`, one without, "+
		"one polls `/readyz`; after a failed request a client waits %v and tries again with a new message. After %v the "+
		"Valkey server is stopped with **SIGTERM** (a real stop: the process exits, the port refuses connections), "+
		"kept down %v, then started again with the same command line **on the same port** and the same data directory. "+
		"\"Outage\" below counts requests that started after the process had exited and ended before the new one was "+
		"started; requests across a stop or start are \"transition\".\n\n",
		env.valkeyBin, env.cfg.outageWriters, retryPause, outageBefore, env.cfg.outage)

	run := &outageRun{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	startOutageClients(ctx, &wg, stop, run, clients, fixtures, env.cfg.outageWriters)
	tl, err := outage(ctx, env, v, run)
	close(stop)
	wg.Wait()
	if err != nil {
		return err
	}
	reportOutage(sec, run, tl)
	checkDurability(ctx, sec, run, clients)
	a.check(sec, "valkey")
	sec.check(srv.panics() == 0, "no panic in loom serve's log")
	return srv.stop()
}

// outage runs the timeline: normal traffic, the stop, the outage, the restart, and traffic until appends
// have been acknowledged again for a while.
func outage(ctx context.Context, env *environment, v *valkeyServer, run *outageRun) (timeline, error) {
	var tl timeline
	if err := sleep(ctx, outageBefore); err != nil {
		return tl, err
	}
	env.logf("stopping Valkey (SIGTERM)")
	tl.stopAt = time.Now()
	if err := v.stop(); err != nil {
		return tl, err
	}
	tl.downAt = time.Now()
	if err := sleep(ctx, env.cfg.outage); err != nil {
		return tl, err
	}
	env.logf("restarting Valkey on %s", v.addr)
	tl.restartAt = time.Now()
	if err := v.start(ctx); err != nil {
		return tl, fmt.Errorf("restart Valkey on the same port: %w", err)
	}
	tl.readyAt = time.Now()
	deadline := time.Now().Add(recoveryDeadline)
	for {
		if first, ok := run.firstSince(kindAppend, tl.readyAt); ok {
			return tl, sleep(ctx, time.Until(first.end.Add(outageAfter)))
		}
		if time.Now().After(deadline) {
			return tl, nil // the report says there was no recovery
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return tl, err
		}
	}
}

// startOutageClients starts the appenders, the two assemblers and the readiness poller; they run until
// stop is closed.
func startOutageClients(ctx context.Context, wg *sync.WaitGroup, stop <-chan struct{}, run *outageRun, clients []*client, fixtures []fixture, writers int) {
	for w := range writers {
		t := w % 2
		c, tenant, session := clients[t], fixtures[t].tenant, fmt.Sprintf("outage_%d", (w/2)%2)
		wg.Go(func() {
			for n := 0; !stopped(stop); n++ {
				content := fmt.Sprintf("outage message %d of writer %d in %s: the customer asks about invoice INV-%05d", n, w, session, n)
				r := c.send(ctx, http.MethodPost, "/v1/sessions/"+session+"/messages", map[string]string{"role": "user", "content": content})
				run.record(eventOf(kindAppend, r))
				seq, ok := ackedSeq(r)
				run.mu.Lock()
				if ok {
					run.acks = append(run.acks, ack{tenant: tenant, session: session, content: content, seq: seq, writer: w})
				} else {
					run.attempted = append(run.attempted, msgKey{tenant, session, content})
				}
				run.mu.Unlock()
				pauseAfterFailure(r, stop)
			}
		})
	}
	loop := func(kind string, send func() response) {
		wg.Go(func() {
			for !stopped(stop) {
				r := send()
				run.record(eventOf(kind, r))
				pauseAfterFailure(r, stop)
			}
		})
	}
	loop(kindAssembleStrict, func() response {
		return clients[0].send(ctx, http.MethodPost, "/v1/assemble", assembleBody(fixtures[0], 0, true))
	})
	loop(kindAssemble, func() response {
		return clients[1].send(ctx, http.MethodPost, "/v1/assemble", assembleBody(fixtures[1], 0, false))
	})
	loop(kindReadyz, func() response {
		r := clients[0].do(ctx, http.MethodGet, "/readyz", nil, nil)
		if r.status == http.StatusOK {
			wait(stop, 200*time.Millisecond)
		}
		return r
	})
}

// eventOf reduces r to an event of kind.
func eventOf(kind string, r response) event {
	e := event{kind: kind, status: r.status, start: r.start, end: r.end()}
	if r.header != nil {
		e.retryAfter = r.header.Get("Retry-After")
	}
	e.degraded = r.status == http.StatusOK && bytes.Contains(r.body, []byte(`"degraded":[`))
	return e
}

// ackedSeq returns the seq of the message a 201 append stored.
func ackedSeq(r response) (int64, bool) {
	if r.status != http.StatusCreated {
		return 0, false
	}
	var body struct {
		Messages []struct {
			Seq int64 `json:"seq"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(r.body, &body); err != nil || len(body.Messages) != 1 {
		return 0, false
	}
	return body.Messages[0].Seq, true
}

// pauseAfterFailure waits retryPause after a request that did not succeed, as a client backing off would.
func pauseAfterFailure(r response, stop <-chan struct{}) {
	if r.status/100 != 2 {
		wait(stop, retryPause)
	}
}

// stopped reports whether stop is closed.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}

// wait waits d or until stop is closed.
func wait(stop <-chan struct{}, d time.Duration) {
	select {
	case <-stop:
	case <-time.After(d):
	}
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// reportOutage writes the timeline, the statuses per window and kind, and checks the outage's 503s and
// the recovery.
func reportOutage(sec *section, run *outageRun, tl timeline) {
	at := func(t time.Time) string { return fmt.Sprintf("%+.2f s", t.Sub(tl.stopAt).Seconds()) }
	sec.printf("Timeline (relative to the SIGTERM): process exited %s, restarted %s, answered PING %s.\n\n",
		at(tl.downAt), at(tl.restartAt), at(tl.readyAt))

	byWindow := map[string]map[string]*tally{}
	for _, e := range run.events {
		w := tl.window(e)
		if byWindow[w] == nil {
			byWindow[w] = map[string]*tally{}
		}
		t := byWindow[w][e.kind]
		if t == nil {
			t = newTally()
			byWindow[w][e.kind] = t
		}
		t.statuses[statusKey(e.status)]++
		t.latencies = append(t.latencies, e.end.Sub(e.start))
		if e.degraded {
			t.degraded++
		}
	}
	windows := []string{"before", "transition", "outage", "after"}
	var rows [][]string
	for _, kind := range outageKinds {
		row := []string{kind}
		for _, w := range windows {
			cell := "-"
			if t := byWindow[w][kind]; t != nil {
				cell = t.statusList()
				if t.degraded > 0 {
					cell += fmt.Sprintf(" (%d degraded)", t.degraded)
				}
			}
			row = append(row, cell)
		}
		lat := "-"
		if t := byWindow["outage"][kind]; t != nil {
			s := t.summary()
			lat = ms(s.p50) + " / " + ms(s.mx)
		}
		rows = append(rows, append(row, lat))
	}
	sec.printf("Responses by status, and how long the responses during the outage took:\n\n")
	sec.table([]string{"request", "before the stop", "transition", "during the outage", "after the restart", "latency during the outage (p50 / max)"}, rows)
	checkOutageWindow(sec, run, tl)
	checkRecovery(sec, run, tl)
}

// statusKey is a status as a tally counts it.
func statusKey(status int) string {
	if status == 0 {
		return "transport"
	}
	return fmt.Sprint(status)
}

// checkOutageWindow checks the responses of the outage: appends, strict assemblies and /readyz get 503 with
// Retry-After; default assemblies get a degraded 200 (or 503).
func checkOutageWindow(sec *section, run *outageRun, tl timeline) {
	counts := map[string]int{}
	bad := map[string]int{}
	noRetryAfter := 0
	retryAfter := map[string]int{}
	for _, e := range run.events {
		if tl.window(e) != "outage" {
			continue
		}
		counts[e.kind]++
		switch {
		case e.status == http.StatusServiceUnavailable:
			if e.retryAfter == "" {
				noRetryAfter++
			}
			retryAfter[e.retryAfter]++
		case e.kind == kindAssemble && e.degraded:
		default:
			bad[e.kind]++
		}
	}
	for _, kind := range []string{kindAppend, kindReadyz} {
		sec.check(counts[kind] > 0 && bad[kind] == 0, "during the outage every %s got 503 (%d of %d did not)", kind, bad[kind], counts[kind])
	}
	// An assembly waits up to the source timeout for the store, so a short outage may hold none whole.
	for _, kind := range []string{kindAssembleStrict, kindAssemble} {
		if counts[kind] == 0 {
			sec.note("no %s fell wholly inside the outage (each waits up to --source-timeout); see the transition column", kind)
		}
	}
	sec.check(bad[kindAssembleStrict] == 0, "during the outage every %s got 503 (%d of %d did not)", kindAssembleStrict, bad[kindAssembleStrict], counts[kindAssembleStrict])
	sec.check(bad[kindAssemble] == 0, "during the outage every %s got a 200 flagged degraded or a 503 (%d of %d did not)",
		kindAssemble, bad[kindAssemble], counts[kindAssemble])
	var seen []string
	for _, v := range slices.Sorted(maps.Keys(retryAfter)) {
		seen = append(seen, fmt.Sprintf("%q x %d", v, retryAfter[v]))
	}
	sec.check(noRetryAfter == 0, "every 503 during the outage had a Retry-After header (%d did not; values: %s)", noRetryAfter, strings.Join(seen, ", "))
}

// checkRecovery checks that appends and strict assemblies succeed again after the restart, and keep
// succeeding.
func checkRecovery(sec *section, run *outageRun, tl timeline) {
	first, ok := run.firstSince(kindAppend, tl.readyAt)
	if !sec.check(ok, "appends recovered after the restart without intervention") {
		return
	}
	sec.note("first 201 after the restart: %.2f s after Valkey answered PING (%.2f s after it was started)",
		first.end.Sub(tl.readyAt).Seconds(), first.end.Sub(tl.restartAt).Seconds())
	if fa, ok := run.firstSince(kindAssembleStrict, tl.readyAt); ok {
		sec.note("first strict assembly 200 after the restart: %.2f s after Valkey answered PING", fa.end.Sub(tl.readyAt).Seconds())
	}
	stableFrom := first.end.Add(stableGrace)
	failures, n := 0, 0
	for _, e := range run.events {
		if e.start.Before(stableFrom) {
			continue
		}
		n++
		if e.status/100 != 2 || e.degraded {
			failures++
		}
	}
	sec.check(n > 0 && failures == 0, "every request that started %v after the first 201 succeeded, undegraded (%d of %d did not)", stableGrace, failures, n)
}

// checkDurability reads back every session the appenders wrote and checks that every acknowledged message
// is there with the seq its 201 gave, in each writer's order.
func checkDurability(ctx context.Context, sec *section, run *outageRun, clients []*client) {
	stored, err := readSessions(ctx, run.acks, clients)
	if err != nil {
		sec.fail("read the sessions back: %v", err)
		return
	}
	missing, wrongSeq := 0, 0
	for _, a := range run.acks {
		seq, ok := stored[a.tenant+"/"+a.session][a.content]
		switch {
		case !ok:
			missing++
			if missing <= 3 {
				sec.note("missing: %s/%s %q (seq %d)", a.tenant, a.session, a.content, a.seq)
			}
		case seq != a.seq:
			wrongSeq++
		}
	}
	found := len(run.acks) - missing
	unackedStored := 0
	for _, k := range run.attempted {
		if _, ok := stored[k.tenant+"/"+k.session][k.content]; ok {
			unackedStored++
		}
	}
	sec.printf("Acknowledged appends: **%d**, found afterwards: **%d**, missing: **%d**. Appends not acknowledged "+
		"(503 or transport error): %d, of which %d were stored anyway (the write reached Valkey but the reply did "+
		"not reach the client; allowed).\n\n", len(run.acks), found, missing, len(run.attempted), unackedStored)
	sec.check(len(run.acks) > 0 && missing == 0, "every acknowledged message is present after the restart (%d of %d missing)", missing, len(run.acks))
	sec.check(wrongSeq == 0, "every acknowledged message has the seq its 201 reported (%d differ)", wrongSeq)
	sec.check(writersInOrder(run.acks), "each writer's acknowledged messages have increasing seqs")
}

// readSessions reads every session named in acks, and returns per "tenant/session" the seq of each content.
func readSessions(ctx context.Context, acks []ack, clients []*client) (map[string]map[string]int64, error) {
	byTenant := map[string]*client{tenantA: clients[0], tenantB: clients[1]}
	out := map[string]map[string]int64{}
	for _, a := range acks {
		key := a.tenant + "/" + a.session
		if out[key] != nil {
			continue
		}
		msgs, err := listMessages(ctx, byTenant[a.tenant], a.session)
		if err != nil {
			return nil, err
		}
		out[key] = map[string]int64{}
		for _, m := range msgs {
			out[key][m.Content] = m.Seq
		}
	}
	return out, nil
}

// storedMessage is a message as GET /v1/sessions/{session}/messages returns it.
type storedMessage struct {
	Seq     int64  `json:"seq"`
	Role    string `json:"role"`
	Content string `json:"content"`
}

// listMessages returns all of a session's messages, oldest first, reading the listing's pages (newest
// first) until one has no next_before.
func listMessages(ctx context.Context, c *client, session string) ([]storedMessage, error) {
	var all []storedMessage
	for path := "/v1/sessions/" + session + "/messages?limit=1000"; ; {
		var body struct {
			Messages   []storedMessage `json:"messages"`
			NextBefore int64           `json:"next_before"`
		}
		if err := c.call(ctx, http.MethodGet, path, nil, &body); err != nil {
			return nil, err
		}
		all = append(body.Messages, all...)
		if body.NextBefore == 0 {
			return all, nil
		}
		path = fmt.Sprintf("/v1/sessions/%s/messages?limit=1000&before=%d", session, body.NextBefore)
	}
}

// writersInOrder reports whether each writer's acks, in the order they were acknowledged, have increasing
// seqs per session.
func writersInOrder(acks []ack) bool {
	last := map[string]int64{}
	for _, a := range acks { // appended to acks in each writer's order
		key := fmt.Sprintf("%d/%s/%s", a.writer, a.tenant, a.session)
		if a.seq <= last[key] {
			return false
		}
		last[key] = a.seq
	}
	return true
}
