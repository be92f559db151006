package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// batchSize is how many messages every fourth append of the kill phase carries, to check that a batch is
// stored whole or not at all.
const batchSize = 3

// killAppend is one append request of the kill phase: its messages' contents, and the seqs its 201 gave.
type killAppend struct {
	tenant, session string
	writer, round   int
	contents        []string
	seqs            []int64 // nil: not acknowledged
}

// killLedger is every append of the kill phase, across rounds. It is safe for concurrent use.
type killLedger struct {
	mu      sync.Mutex
	appends []killAppend // in each writer's order
}

func (l *killLedger) add(a killAppend) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.appends = append(l.appends, a)
}

// killRound is what one round saw.
type killRound struct {
	acked, unacked int // append requests
	ackedMsgs      int
	killedAfter    time.Duration
	restart        time.Duration
	statuses       *tally
}

// runKillPhase appends from concurrent writers to a SQLite-backed loom serve, kills it with SIGKILL mid-load,
// restarts it on the same file and checks every acknowledged message, for cfg.killRounds rounds.
func runKillPhase(ctx context.Context, env *environment, sec *section) error {
	srv, err := startLoom(ctx, env, "loom-kill", "sqlite:"+env.path("kill.db"))
	if err != nil {
		return err
	}
	defer func() { srv.proc.kill() }()
	a := &audit{}
	writers := env.cfg.killSessions * env.cfg.killWriters
	hc := newHTTPClient(writers)
	defer hc.CloseIdleConnections()
	clients := []*client{newClient(srv, keyA, hc, a), newClient(srv, keyB, hc, a)}
	sec.printf("`loom serve --store sqlite:FILE` (WAL, synchronous=FULL). %d sessions (alternating between the two "+
		"tenants) with %d writers each append as fast as they can: one message per request, every fourth request a "+
		"batch of %d (`{\"messages\": [...]}`). After %v the server gets **SIGKILL**; it is restarted on the same file "+
		"and port and every session is read back. %d rounds; the checks cover every round's messages. (A SIGKILL ends "+
		"the process, not the machine: what the kernel has accepted survives it, so this proves the server acknowledges "+
		"only committed writes, not what a power cut would leave.)\n\n",
		env.cfg.killSessions, env.cfg.killWriters, batchSize, env.cfg.killAfter, env.cfg.killRounds)

	ledger := &killLedger{}
	var rows [][]string
	for round := 1; round <= env.cfg.killRounds; round++ {
		env.logf("kill round %d", round)
		kr, err := runKillRound(ctx, env, srv, clients, ledger, round)
		if err != nil {
			return err
		}
		rows = append(rows, []string{strconv.Itoa(round), fmt.Sprintf("%.1f s", kr.killedAfter.Seconds()),
			strconv.Itoa(kr.acked), strconv.Itoa(kr.ackedMsgs), strconv.Itoa(kr.unacked), kr.statuses.statusList(),
			fmt.Sprintf("%.2f s", kr.restart.Seconds())})
	}
	sec.table([]string{"round", "killed after", "acknowledged appends", "acknowledged messages", "unacknowledged appends (in flight at the kill)",
		"responses by status", "restart to /healthz 200"}, rows)
	if err := verifyKillLedger(ctx, sec, ledger, clients); err != nil {
		return err
	}
	a.check(sec, "sqlite")
	sec.check(srv.panics() == 0, "no panic in loom serve's log")
	sec.check(srv.stop() == nil, "loom serve stopped cleanly on SIGTERM after the last round")
	return nil
}

// runKillRound runs the writers, kills the server after cfg.killAfter, waits for the writers and restarts
// the server.
func runKillRound(ctx context.Context, env *environment, srv *loomServer, clients []*client, ledger *killLedger, round int) (killRound, error) {
	kr := killRound{statuses: newTally()}
	var killed atomic.Bool
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for s := range env.cfg.killSessions {
		for w := range env.cfg.killWriters {
			writer := s*env.cfg.killWriters + w
			tenant, c := tenantA, clients[0]
			if s%2 == 1 {
				tenant, c = tenantB, clients[1]
			}
			session := fmt.Sprintf("kill_%d", s)
			wg.Go(func() {
				t := runKillWriter(ctx, c, ledger, &killed, killAppend{tenant: tenant, session: session, writer: writer, round: round})
				mu.Lock()
				kr.statuses.merge(t)
				mu.Unlock()
			})
		}
	}
	if err := sleep(ctx, env.cfg.killAfter); err != nil {
		return kr, err
	}
	kr.killedAfter = time.Since(start)
	killed.Store(true)
	_ = srv.proc.signal(syscall.SIGKILL, 5*time.Second) // exits with "signal: killed"
	wg.Wait()
	restartAt := time.Now()
	if err := srv.start(ctx); err != nil {
		return kr, fmt.Errorf("restart after kill -9: %w", err)
	}
	kr.restart = time.Since(restartAt)
	ledger.mu.Lock()
	for _, a := range ledger.appends {
		if a.round != round {
			continue
		}
		if a.seqs != nil {
			kr.acked++
			kr.ackedMsgs += len(a.seqs)
		} else {
			kr.unacked++
		}
	}
	ledger.mu.Unlock()
	return kr, nil
}

// runKillWriter appends to one session until the server is killed: after the kill, the first failed
// request ends it. Every request goes into the ledger.
func runKillWriter(ctx context.Context, c *client, ledger *killLedger, killed *atomic.Bool, base killAppend) *tally {
	t := newTally()
	for n := 0; ctx.Err() == nil; n++ {
		a := base
		size := 1
		if n%4 == 3 {
			size = batchSize
		}
		msgs := make([]map[string]string, size)
		for i := range msgs {
			content := fmt.Sprintf("r%d w%d n%d m%d: the customer asks whether invoice INV-%05d was paid", a.round, a.writer, n, i, n)
			a.contents = append(a.contents, content)
			msgs[i] = map[string]string{"role": "user", "content": content}
		}
		r := c.send(ctx, http.MethodPost, "/v1/sessions/"+a.session+"/messages", map[string]any{"messages": msgs})
		t.add(r)
		if r.status == http.StatusCreated {
			a.seqs = seqsOf(r.body)
		}
		ledger.add(a)
		if r.status != http.StatusCreated && killed.Load() {
			return t
		}
		if r.status != http.StatusCreated {
			time.Sleep(retryPause)
		}
	}
	return t
}

// seqsOf returns the seqs of a 201 append's messages, or an empty (non-nil) slice if it cannot tell.
func seqsOf(body []byte) []int64 {
	var out struct {
		Messages []struct {
			Seq int64 `json:"seq"`
		} `json:"messages"`
	}
	seqs := []int64{}
	if json.Unmarshal(body, &out) == nil {
		for _, m := range out.Messages {
			seqs = append(seqs, m.Seq)
		}
	}
	return seqs
}

// verifyKillLedger reads every session back and checks: seqs from 1 without gaps, no duplicates, every
// acknowledged message with the seq its 201 gave, each writer's order, and batches whole or absent.
func verifyKillLedger(ctx context.Context, sec *section, ledger *killLedger, clients []*client) error {
	sessions := map[msgKey][]storedMessage{} // by tenant and session (content unused)
	ledger.mu.Lock()
	defer ledger.mu.Unlock()
	for _, a := range ledger.appends {
		k := msgKey{tenant: a.tenant, session: a.session}
		if _, ok := sessions[k]; ok {
			continue
		}
		c := clients[0]
		if a.tenant == tenantB {
			c = clients[1]
		}
		msgs, err := listMessages(ctx, c, a.session)
		if err != nil {
			return fmt.Errorf("read the sessions back: %w", err)
		}
		sessions[k] = msgs
	}
	stored := map[msgKey]int64{}
	gaps, dups, stored0 := 0, 0, 0
	for k, msgs := range sessions {
		for i, m := range msgs {
			if m.Seq != int64(i+1) {
				gaps++
			}
			ck := msgKey{k.tenant, k.session, m.Content}
			if _, dup := stored[ck]; dup {
				dups++
			}
			stored[ck] = m.Seq
			stored0++
		}
	}
	v := checkAppends(ledger.appends, stored)
	sec.printf("Read back: %d messages in %d sessions. Acknowledged messages: **%d**, found: **%d**, missing: **%d**, "+
		"with another seq: %d. Unacknowledged appends: %d, of which %d were stored whole (committed before the kill, "+
		"reply lost; allowed) and %d partly.\n\n",
		stored0, len(sessions), v.acked, v.acked-v.missing, v.missing, v.wrongSeq, v.unacked, v.unackedStored, v.partial)
	sec.check(v.acked > 0 && v.missing == 0, "every acknowledged message is present after kill -9 and restart (%d of %d missing)", v.missing, v.acked)
	sec.check(v.wrongSeq == 0, "every acknowledged message has the seq its 201 reported (%d differ)", v.wrongSeq)
	sec.check(gaps == 0, "each session's seqs run 1, 2, 3, ... without gaps (%d out of place)", gaps)
	sec.check(dups == 0, "no message is stored twice (%d duplicates)", dups)
	sec.check(v.outOfOrder == 0, "each writer's acknowledged messages are stored in the order they were acknowledged (%d out of order)", v.outOfOrder)
	sec.check(v.partial == 0 && v.split == 0, "every batch is stored whole, with consecutive seqs, or not at all (%d partial, %d split)", v.partial, v.split)
	return nil
}

// appendVerdict is what checkAppends found.
type appendVerdict struct {
	acked, missing, wrongSeq, outOfOrder   int // acknowledged messages
	unacked, unackedStored, partial, split int // append requests
}

// checkAppends compares the ledger's appends with the stored seqs.
func checkAppends(appends []killAppend, stored map[msgKey]int64) appendVerdict {
	var v appendVerdict
	lastSeq := map[string]int64{} // by writer
	for _, a := range appends {
		var seqs []int64
		for _, c := range a.contents {
			if seq, ok := stored[msgKey{a.tenant, a.session, c}]; ok {
				seqs = append(seqs, seq)
			}
		}
		if len(seqs) > 0 && len(seqs) < len(a.contents) {
			v.partial++
		}
		for i := 1; i < len(seqs); i++ {
			if seqs[i] != seqs[i-1]+1 {
				v.split++
				break
			}
		}
		if a.seqs == nil {
			v.unacked++
			if len(seqs) == len(a.contents) {
				v.unackedStored++
			}
			continue
		}
		for i, c := range a.contents {
			v.acked++
			seq, ok := stored[msgKey{a.tenant, a.session, c}]
			switch {
			case !ok:
				v.missing++
				continue
			case i >= len(a.seqs) || seq != a.seqs[i]:
				v.wrongSeq++
			}
			w := strconv.Itoa(a.writer)
			if seq <= lastSeq[w] {
				v.outOfOrder++
			}
			lastSeq[w] = seq
		}
	}
	return v
}
