package sqlite_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/sqlite"
)

// openFirst opens the store opts name, appends one message to session and closes the store: what one
// `loom session append` does. All the calls of one test start at once, when start is closed.
func openFirst(ctx context.Context, opts sqlite.Options, session string, start <-chan struct{}) error {
	<-start
	s, err := sqlite.Open(ctx, opts)
	if err != nil {
		return err
	}
	// The test shortens the busy timeout to make the openers race; 64 writers then queue for the write lock
	// longer than it on a loaded machine, and a write that waited past it is unavailable: retried, as a
	// client retries a 503. What is tested is that every store opened and every write landed once.
	for {
		_, err = s.AppendMessages(ctx, tenant, session, store.Message{Role: "user", Content: "hello from " + session})
		if !errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil {
			break
		}
	}
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkSessions checks that each of the sessions holds its one message.
func checkSessions(t *testing.T, path string, sessions []string) {
	t.Helper()
	s, err := sqlite.Open(t.Context(), sqlite.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, session := range sessions {
		msgs, err := s.Messages(t.Context(), tenant, session, store.MessageQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 1 || msgs[0].Content != "hello from "+session {
			t.Fatalf("session %s holds %+v", session, msgs)
		}
	}
}

// TestOpen_ManyFirstOpensAtOnce: many stores open the same new file at the same moment (each creating,
// switching to WAL and migrating it, or waiting for another that does), and every one of them opens and
// writes.
func TestOpen_ManyFirstOpensAtOnce(t *testing.T) {
	t.Parallel()
	const rounds, opens = 3, 30
	for r := range rounds {
		path := filepath.Join(t.TempDir(), "loom.db")
		start := make(chan struct{})
		errs := make([]error, opens)
		var sessions []string
		var wg sync.WaitGroup
		for i := range opens {
			session := fmt.Sprintf("r%d-s%d", r, i)
			sessions = append(sessions, session)
			wg.Go(func() { errs[i] = openFirst(t.Context(), sqlite.Options{Path: path}, session, start) })
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: open %d of %d: %v", r, i, opens, err)
			}
		}
		checkSessions(t, path, sessions)
	}
}

// openChildEnv names the file the children of TestOpen_ManyProcessesAtOnce open; a child runs only if it
// is set.
const openChildEnv = "LOOM_SQLITE_OPEN_CHILD"

// Stress of TestOpen_ManyProcessesAtOnce: openChildren processes, each opening openChildStores stores at
// once, every one with a busy timeout of openChildBusy.
const (
	openChildren    = 16
	openChildStores = 4
	// openChildBusy is a fifth of DefaultBusyTimeout, so that the test is as hard as 64 openers at the
	// default on a machine five times as loaded: `make test` on a cold 2-core machine, where the default
	// was not enough when every opener queued for the write lock to migrate. Under the race detector,
	// which slows the children by about as much again, it is the default: a fifth of it failed there at a
	// load average of 20 on 2 cores, each child getting a few percent of a core, with the openers making
	// progress all along.
	openChildBusy = sqlite.DefaultBusyTimeout / time.Duration(openChildBusyDivisor)
)

// TestOpen_ManyProcessesAtOnce: processes open the same new file at the same moment, as concurrent
// `loom session append` commands do, each with a few stores of its own, and every store opens and writes.
// When every opener took the write lock to migrate (all but the first only to find the schema made), the
// openers' queue for it outlasted the busy timeout under load, and some failed with SQLITE_BUSY.
func TestOpen_ManyProcessesAtOnce(t *testing.T) {
	if runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("needs child processes")
	}
	t.Parallel()
	path := filepath.Join(t.TempDir(), "loom.db")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute) // a hang: it kills the children
	defer cancel()
	type child struct {
		cmd     *exec.Cmd
		release io.WriteCloser
		ready   *bufio.Reader // the child's stderr: "ready" once it waits to be released
		stdout  strings.Builder
		stderr  strings.Builder
		drained chan struct{} // closed when stderr is read to its end
	}
	children := make([]*child, openChildren)
	for p := range children {
		c := &child{cmd: exec.CommandContext(ctx, os.Args[0], "-test.run=^TestOpen_ManyProcessesAtOnceChild$", "-test.count=1"),
			drained: make(chan struct{})}
		c.cmd.Env = append(os.Environ(), openChildEnv+"="+path, fmt.Sprintf("LOOM_SQLITE_OPEN_CHILD_ID=p%d", p))
		c.cmd.Stdout = &c.stdout
		var err error
		if c.release, err = c.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		stderr, err := c.cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		c.ready = bufio.NewReader(stderr)
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children[p] = c
	}
	// Every child says when it waits for its stdin to close: then let them all go at once.
	for p, c := range children {
		line, err := c.ready.ReadString('\n')
		if line != "ready\n" {
			_ = c.cmd.Process.Kill()
			rest, _ := io.ReadAll(c.ready)
			t.Fatalf("child %d did not get ready: %q %v\n%s", p, line, err, rest)
		}
		go func() {
			defer close(c.drained)
			_, _ = io.Copy(&c.stderr, c.ready)
		}()
	}
	for _, c := range children {
		_ = c.release.Close()
	}
	var sessions []string
	for p, c := range children {
		<-c.drained
		if err := c.cmd.Wait(); err != nil {
			t.Errorf("child %d: %v\n%s%s", p, err, c.stdout.String(), c.stderr.String())
		}
		for i := range openChildStores {
			sessions = append(sessions, fmt.Sprintf("p%d-s%d", p, i))
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	checkSessions(t, path, sessions)
}

// TestOpen_ManyProcessesAtOnceChild is a child of TestOpen_ManyProcessesAtOnce: it says "ready" on stderr,
// and once its stdin closes, it opens the file with openChildStores stores at once, and each appends a
// message.
func TestOpen_ManyProcessesAtOnceChild(t *testing.T) {
	path := os.Getenv(openChildEnv)
	if path == "" {
		t.Skip("a child of TestOpen_ManyProcessesAtOnce")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute) // a hang; the parent's is longer
	defer cancel()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range openChildStores {
		session := fmt.Sprintf("%s-s%d", os.Getenv("LOOM_SQLITE_OPEN_CHILD_ID"), i)
		wg.Go(func() {
			if err := openFirst(ctx, sqlite.Options{Path: path, BusyTimeout: openChildBusy}, session, start); err != nil {
				t.Errorf("store %d: %v", i, err)
			}
		})
	}
	fmt.Fprintln(os.Stderr, "ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	close(start)
	wg.Wait()
}
