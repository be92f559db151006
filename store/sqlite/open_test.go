package sqlite_test

import (
	"context"
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

// openFirst opens the store at path, appends one message to session and closes the store: what one
// `loom session append` does. All the calls of one test start at once, when start is closed.
func openFirst(ctx context.Context, path, session string, start <-chan struct{}) error {
	<-start
	s, err := sqlite.Open(ctx, path, store.Options{})
	if err != nil {
		return err
	}
	_, err = s.AppendMessages(ctx, tenant, session, store.Message{Role: "user", Content: "hello from " + session})
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkSessions checks that each of the sessions holds its one message.
func checkSessions(t *testing.T, path string, sessions []string) {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path, store.Options{})
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
			wg.Go(func() { errs[i] = openFirst(t.Context(), path, session, start) })
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

// TestOpen_ManyProcessesAtOnce: processes open the same new file at the same moment, as concurrent
// `loom session append` commands do, each with a few stores of its own, and every store opens and writes.
func TestOpen_ManyProcessesAtOnce(t *testing.T) {
	if runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("needs child processes")
	}
	t.Parallel()
	const procs = 12
	path := filepath.Join(t.TempDir(), "loom.db")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	type child struct {
		cmd     *exec.Cmd
		release io.WriteCloser
		output  strings.Builder
	}
	children := make([]*child, procs)
	for p := range children {
		c := &child{cmd: exec.CommandContext(ctx, os.Args[0], "-test.run=^TestOpen_ManyProcessesAtOnceChild$", "-test.count=1")}
		c.cmd.Env = append(os.Environ(), openChildEnv+"="+path, fmt.Sprintf("LOOM_SQLITE_OPEN_CHILD_ID=p%d", p))
		c.cmd.Stdout, c.cmd.Stderr = &c.output, &c.output
		var err error
		if c.release, err = c.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children[p] = c
	}
	// Every child has started and waits for its stdin to close: let them all go at once.
	time.Sleep(500 * time.Millisecond)
	for _, c := range children {
		_ = c.release.Close()
	}
	var sessions []string
	for p, c := range children {
		if err := c.cmd.Wait(); err != nil {
			t.Errorf("child %d: %v\n%s", p, err, c.output.String())
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

// openChildStores is how many stores each child opens at once.
const openChildStores = 4

// TestOpen_ManyProcessesAtOnceChild is a child of TestOpen_ManyProcessesAtOnce: once its stdin closes,
// it opens the file with openChildStores stores at once, and each appends a message.
func TestOpen_ManyProcessesAtOnceChild(t *testing.T) {
	path := os.Getenv(openChildEnv)
	if path == "" {
		t.Skip("a child of TestOpen_ManyProcessesAtOnce")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range openChildStores {
		session := fmt.Sprintf("%s-s%d", os.Getenv("LOOM_SQLITE_OPEN_CHILD_ID"), i)
		wg.Go(func() {
			if err := openFirst(ctx, path, session, start); err != nil {
				t.Errorf("store %d: %v", i, err)
			}
		})
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	close(start)
	wg.Wait()
}
