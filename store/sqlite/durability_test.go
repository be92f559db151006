package sqlite_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/sqlite"
)

// killChildEnv names the file the child of TestDurability_Kill9 writes to; the child runs only if it is set.
const killChildEnv = "LOOM_SQLITE_KILL9_CHILD"

const (
	killWriters  = 8
	killSessions = 4
	killAfter    = 300 // acknowledgements before the parent kills the child
)

// TestDurability_Kill9 runs TestDurability_Kill9Child in a child process, kills it with SIGKILL in the
// middle of its writes, and checks that every append the child saw acknowledged is in the file: in order
// per session, with no gaps in seq, nothing of a writer lost before its last acknowledged append.
func TestDurability_Kill9(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("needs SIGKILL and a child process")
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "loom.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestDurability_Kill9Child$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildEnv+"="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	watchdog := time.AfterFunc(5*time.Minute, func() { _ = cmd.Process.Kill() }) // a hang: the child never got to killAfter
	defer watchdog.Stop()

	type ack struct {
		session string
		seq     int64
		content string
	}
	var acks []ack
	killed := false
	sc := bufio.NewScanner(stdout)
	for sc.Scan() { // after the kill, the lines still in the pipe are acknowledgements too
		f := strings.Fields(sc.Text())
		if len(f) != 4 || f[0] != "ack" {
			continue
		}
		var a ack
		if _, err := fmt.Sscanf(sc.Text(), "ack %s %d %s", &a.session, &a.seq, &a.content); err != nil {
			t.Fatalf("child wrote %q: %v", sc.Text(), err)
		}
		acks = append(acks, a)
		if len(acks) >= killAfter && !killed {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !killed || !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child was not killed mid-write (%d acks, wait: %v); stderr:\n%s", len(acks), err, stderr.String())
	}

	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	stored := map[string]map[int64]string{}
	total := 0
	for i := range killSessions {
		session := fmt.Sprintf("s%d", i)
		msgs, err := s.Messages(t.Context(), tenant, session, store.MessageQuery{})
		if err != nil {
			t.Fatal(err)
		}
		stored[session] = map[int64]string{}
		next := map[int]int{} // writer -> its next message number
		for j, m := range msgs {
			if m.Seq != int64(j+1) {
				t.Fatalf("session %s: message %d has seq %d: a gap", session, j, m.Seq)
			}
			var w, n int
			if _, err := fmt.Sscanf(m.Content, "w%d-%d", &w, &n); err != nil {
				t.Fatal(err)
			}
			if n != next[w] {
				t.Fatalf("session %s: writer %d's message %d follows its message %d", session, w, n, next[w]-1)
			}
			next[w]++
			stored[session][m.Seq] = m.Content
		}
		total += len(msgs)
	}
	for _, a := range acks {
		if got, ok := stored[a.session][a.seq]; !ok || got != a.content {
			t.Fatalf("acknowledged message %s #%d %q: stored %q (%v)", a.session, a.seq, a.content, got, ok)
		}
	}
	t.Logf("%d acknowledged messages, %d stored (any more were committed but not yet printed at the kill)", len(acks), total)

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var integrity string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&integrity); err != nil || integrity != "ok" {
		t.Fatalf("integrity_check: %q, %v", integrity, err)
	}
}

// TestDurability_Kill9Child is the child of TestDurability_Kill9: writers append batches of messages to
// sessions until the process is killed, and print "ack <session> <seq> <content>" for every message of an
// append that returned without error.
func TestDurability_Kill9Child(t *testing.T) {
	path := os.Getenv(killChildEnv)
	if path == "" {
		t.Skip("the child of TestDurability_Kill9")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute) // the parent kills it long before
	defer cancel()
	s, err := sqlite.Open(ctx, sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range killWriters {
		wg.Go(func() {
			session := fmt.Sprintf("s%d", w%killSessions)
			n := 0
			for b := 0; ctx.Err() == nil; b++ {
				batch := make([]store.Message, 1+b%3)
				for i := range batch {
					batch[i] = store.Message{Role: "user", Content: fmt.Sprintf("w%d-%d", w, n+i)}
				}
				got, err := s.AppendMessages(ctx, tenant, session, batch...)
				if err != nil {
					t.Error(err)
					return
				}
				n += len(batch)
				var lines bytes.Buffer
				for _, m := range got {
					fmt.Fprintf(&lines, "ack %s %d %s\n", session, m.Seq, m.Content)
				}
				mu.Lock()
				_, err = os.Stdout.Write(lines.Bytes())
				mu.Unlock()
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
