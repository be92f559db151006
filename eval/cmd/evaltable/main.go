// Command evaltable measures Loom's retrieval on the committed evaluation corpus and prints the table of
// hit@1, hit@5 and MRR@5 per question set, store and mode, in Markdown.
//
// It ingests the corpus (eval/testdata/corpus) once per store with the engine's defaults and asks every
// question of the dev set (eval/testdata/dev.jsonl), and of the held-out sets (eval/testdata/heldout.jsonl
// and heldout2.jsonl) whose files are there, in the keyword, vector, hybrid and mmr modes, top 5 each. The stores are an
// in-process memory store, an SQLite file in a temporary directory and a Valkey-protocol server of its
// own on a free loopback port (valkey-server or redis-server on PATH, or $LOOM_VALKEY_SERVER), stopped at
// the end. Run it from the repository's root:
//
//	go run ./eval/cmd/evaltable [-stores memory,sqlite,valkey] [-questions FILE,...] [-ranks]
//
// -ranks adds, per question set, each question's rank in every mode (on the first store). It exits with
// status 2 for bad flags and 1 when the evaluation cannot run.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/context-loom/loom/eval"
	"github.com/context-loom/loom/ingest"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/memory"
	"github.com/context-loom/loom/store/sqlite"
	"github.com/context-loom/loom/store/storeurl"
)

// errUsage is wrapped by the errors of bad flags.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "evaltable:", err)
		os.Exit(1)
	}
}

// run parses args, runs the evaluation and writes the tables to stdout; notes go to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("evaltable", flag.ContinueOnError)
	fs.SetOutput(stderr)
	testdata := fs.String("testdata", filepath.Join("eval", "testdata"), "the `directory` of the corpus (corpus/) and the question sets (dev.jsonl, heldout.jsonl, heldout2.jsonl)")
	questions := fs.String("questions", "", "question set `files`, comma-separated, each named by its base name without .jsonl (default: dev.jsonl, and heldout.jsonl and heldout2.jsonl where they are there)")
	storeList := fs.String("stores", "memory,sqlite,valkey", "the `stores` to measure, comma-separated: memory, sqlite, valkey")
	valkeyBin := fs.String("valkey-server", "", "the Valkey or Redis server `binary` (default: $LOOM_VALKEY_SERVER, valkey-server or redis-server on PATH)")
	ranks := fs.Bool("ranks", false, "print each question's rank in every mode, per set, on the first store")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	stores := strings.Split(*storeList, ",")
	for _, s := range stores {
		if !slices.Contains([]string{"memory", "sqlite", "valkey"}, s) {
			return fmt.Errorf("%w: unknown store %q (known: memory, sqlite, valkey)", errUsage, s)
		}
	}

	docs, err := eval.LoadCorpus(filepath.Join(*testdata, "corpus"))
	if err != nil {
		return err
	}
	setNames, sets, err := loadSets(*testdata, *questions, stderr)
	if err != nil {
		return err
	}
	for _, name := range setNames {
		if err := eval.CheckGold(docs, sets[name]); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}

	tmp, err := os.MkdirTemp("", "loom-evaltable-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	byStore := map[string][]eval.Score{}
	for _, name := range stores {
		st, stopStore, err := openStore(ctx, name, tmp, *valkeyBin)
		if err != nil {
			return err
		}
		scores, err := measure(ctx, name, st, docs, setNames, sets)
		st.Close()
		stopStore()
		if err != nil {
			return err
		}
		byStore[name] = scores
	}

	var table []eval.Score
	for _, set := range setNames {
		for _, name := range stores {
			for _, s := range byStore[name] {
				if s.Set == set {
					table = append(table, s)
				}
			}
		}
	}
	if err := eval.WriteTable(stdout, table); err != nil {
		return err
	}
	if *ranks {
		for _, set := range setNames {
			var scores []eval.Score
			for _, s := range byStore[stores[0]] {
				if s.Set == set {
					scores = append(scores, s)
				}
			}
			fmt.Fprintf(stdout, "\n%s, ranks on %s:\n\n", set, stores[0])
			if err := eval.WriteRanks(stdout, sets[set], scores); err != nil {
				return err
			}
		}
	}
	return nil
}

// loadSets reads the question sets: the files of list, or else dev.jsonl and (where they are there)
// heldout.jsonl and heldout2.jsonl in dir.
func loadSets(dir, list string, stderr io.Writer) ([]string, map[string][]eval.Question, error) {
	var paths []string
	if list != "" {
		paths = strings.Split(list, ",")
	} else {
		paths = []string{filepath.Join(dir, "dev.jsonl")}
		for _, name := range []string{"heldout.jsonl", "heldout2.jsonl"} {
			held := filepath.Join(dir, name)
			if _, err := os.Stat(held); err == nil {
				paths = append(paths, held)
			} else {
				fmt.Fprintf(stderr, "evaltable: no %s: that held-out set is not measured\n", held)
			}
		}
	}
	var names []string
	sets := map[string][]eval.Question{}
	for _, p := range paths {
		name := strings.TrimSuffix(filepath.Base(p), ".jsonl")
		if sets[name] != nil {
			return nil, nil, fmt.Errorf("%w: two question sets named %q", errUsage, name)
		}
		qs, err := eval.LoadQuestions(p)
		if err != nil {
			return nil, nil, err
		}
		names, sets[name] = append(names, name), qs
	}
	return names, sets, nil
}

// measure ingests docs into st and scores every set on it.
func measure(ctx context.Context, name string, st *store.Store, docs []ingest.Document, setNames []string, sets map[string][]eval.Question) ([]eval.Score, error) {
	target, err := eval.Ingest(ctx, name, st, docs)
	if err != nil {
		return nil, err
	}
	defer target.Close()
	var out []eval.Score
	for _, set := range setNames {
		if err := target.CheckChunks(ctx, sets[set]); err != nil {
			return nil, fmt.Errorf("%s: %w", set, err)
		}
		scores, err := target.Evaluate(ctx, set, sets[set])
		if err != nil {
			return nil, err
		}
		out = append(out, scores...)
	}
	return out, nil
}

// openStore opens an empty store of the kind name, with a function that stops what it started.
func openStore(ctx context.Context, name, tmp, valkeyBin string) (*store.Store, func(), error) {
	nothing := func() {}
	switch name {
	case "memory":
		st, err := memory.Open(ctx, memory.Options{})
		return st, nothing, err
	case "sqlite":
		st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(tmp, "eval.db")})
		return st, nothing, err
	}
	addr, stop, err := startValkey(ctx, valkeyBin, filepath.Join(tmp, "valkey"))
	if err != nil {
		return nil, nil, err
	}
	// The server is a throwaway that persists nothing, on purpose: the store's warning about it is noise.
	st, err := storeurl.Open(ctx, "valkey://"+addr, storeurl.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		stop()
		return nil, nil, err
	}
	return st, stop, nil
}

// startValkey starts a Valkey-protocol server that persists nothing on a free loopback port, in dir, and
// returns its address once it answers PING, with a function that kills it and waits for it.
func startValkey(ctx context.Context, bin, dir string) (string, func(), error) {
	if bin == "" {
		bin = os.Getenv("LOOM_VALKEY_SERVER")
	}
	for _, name := range []string{"valkey-server", "redis-server"} {
		if bin != "" {
			break
		}
		bin, _ = exec.LookPath(name)
	}
	if bin == "" {
		return "", nil, errors.New("no valkey-server or redis-server on PATH (bash scripts/ensure-valkey.sh installs one; or leave valkey out of -stores)")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	var lastErr error
	for range 3 { // the free port may be taken before the server binds it
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", nil, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "",
			"--appendonly", "no", "--daemonize", "no", "--protected-mode", "no")
		if err := cmd.Start(); err != nil {
			return "", nil, fmt.Errorf("start %s: %w", bin, err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		stop := func() {
			cmd.Process.Kill()
			<-exited
		}
		if lastErr = waitForPing(ctx, addr, exited); lastErr == nil {
			return addr, stop, nil
		}
		stop()
	}
	return "", nil, fmt.Errorf("start %s: %w", bin, lastErr)
}

// waitForPing waits up to 10 s for the server at addr to answer PING, giving up when it exits.
func waitForPing(ctx context.Context, addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := ping(addr)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer to PING at %s: %w", addr, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return fmt.Errorf("the server exited before it answered at %s", addr)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// ping sends PING on a fresh connection and expects +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}
