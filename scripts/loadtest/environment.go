package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// The two tenants' API keys, as loom serve gets them in LOOM_API_KEYS.
const (
	tenantA = "tenant_a"
	tenantB = "tenant_b"
	keyA    = "lt-key-a-7f3e9c1d"
	keyB    = "lt-key-b-2b8d4a60"
)

// environment is what every phase shares: the temporary directory, the binaries and the progress log. It
// owns the processes the phases start and stops any still running at close.
type environment struct {
	cfg       config
	dir       string
	loomBin   string
	valkeyBin string
	valkeyVer string
	started   time.Time
	stderr    io.Writer

	mu    sync.Mutex
	procs []*process
}

// newEnvironment makes the temporary directory, finds the Valkey server binary and builds loom.
func newEnvironment(ctx context.Context, cfg config, stderr io.Writer) (*environment, error) {
	dir, err := os.MkdirTemp("", "loom-loadtest-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	env := &environment{cfg: cfg, dir: dir, stderr: stderr, started: time.Now()}
	if err := env.findValkey(ctx); err != nil {
		env.close()
		return nil, err
	}
	if err := env.buildLoom(ctx); err != nil {
		env.close()
		return nil, err
	}
	return env, nil
}

// logf writes one line of progress to stderr, with the time since the start.
func (e *environment) logf(format string, args ...any) {
	fmt.Fprintf(e.stderr, "[%6.1fs] %s\n", time.Since(e.started).Seconds(), fmt.Sprintf(format, args...))
}

// path returns a path in the temporary directory.
func (e *environment) path(name string) string { return filepath.Join(e.dir, name) }

// findValkey finds the server binary: the flag, $LOOM_VALKEY_SERVER, valkey-server, redis-server.
func (e *environment) findValkey(ctx context.Context) error {
	bin := e.cfg.valkeyBin
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
		return errors.New("no valkey-server or redis-server on PATH (bash scripts/ensure-valkey.sh installs one)")
	}
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		return fmt.Errorf("%s --version: %w", bin, err)
	}
	e.valkeyBin, e.valkeyVer = bin, strings.TrimSpace(string(out))
	return nil
}

// buildLoom builds ./cmd/loom into the temporary directory, unless -loom names a binary.
func (e *environment) buildLoom(ctx context.Context) error {
	if e.cfg.loomBin != "" {
		e.loomBin = e.cfg.loomBin
		return nil
	}
	e.loomBin = e.path("loom")
	e.logf("building loom")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", e.loomBin, "github.com/context-loom/loom/cmd/loom")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/loom: %w\n%s", err, out)
	}
	return nil
}

// track adds a process for close to stop.
func (e *environment) track(p *process) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.procs = append(e.procs, p)
}

// close kills the processes still running and removes the temporary directory unless -keep.
func (e *environment) close() {
	e.mu.Lock()
	procs := e.procs
	e.procs = nil
	e.mu.Unlock()
	for _, p := range procs {
		p.kill()
	}
	if e.cfg.keep {
		fmt.Fprintf(e.stderr, "loadtest: kept %s\n", e.dir)
		return
	}
	os.RemoveAll(e.dir)
}
