// Command loadtest proves `loom serve` under load, faults and hostile input, and prints a Markdown report.
//
// It builds the loom binary once, starts its own Valkey-protocol servers (valkey-server or redis-server) on
// free loopback ports and runs `loom serve` as a separate process with API keys for two tenants; this
// program is the second process that generates the load. The phases are:
//
//   - load: sustained POST /v1/assemble from stored state (agent, memory, a long session, tool outputs and
//     knowledge) by concurrent clients, on the Valkey store and then on the SQLite store, side by side.
//   - outage: appends and assemblies while the Valkey server is stopped (SIGTERM, with an fsynced append-only
//     file) and restarted on the same port: 503 with Retry-After during the outage, recovery after it, and
//     every acknowledged message present afterwards.
//   - kill: kill -9 of `loom serve` on SQLite during concurrent appends, then a restart on the same file:
//     every acknowledged message present, in order, without gaps.
//   - hostile: malformed and oversized bodies, invalid UTF-8, unknown fields, tag injection, other tenants'
//     ids and bad API keys: the right statuses, nothing leaked, no 500, a healthy server at the end.
//
// Usage:
//
//	go run ./scripts/loadtest [-duration 15s] [-concurrency 16] [-phases load,outage,kill,hostile]
//
// It exits with status 1 when a check fails and 2 for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run parses args, runs the phases they select and writes the report to stdout; progress goes to stderr.
// It returns errChecksFailed when a check failed, an error wrapping errUsage for bad flags, and other
// errors when the test itself could not run (no server binary, a build that fails, ...).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig(args, stderr)
	if err != nil {
		return err
	}
	env, err := newEnvironment(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	defer env.close()
	rep := newReport(cfg, env)
	for _, p := range phases {
		if !cfg.phases[p.name] {
			continue
		}
		env.logf("phase %s", p.name)
		sec := rep.section(p.title)
		if err := p.run(ctx, env, sec); err != nil {
			sec.fail("the phase could not run: %v", err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	rep.write(stdout)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	if rep.failed() {
		return errChecksFailed
	}
	return nil
}

// phase is one part of the test: its name for -phases, its report title and what runs it.
type phase struct {
	name, title string
	run         func(ctx context.Context, env *environment, sec *section) error
}

// phases are every phase, in the order they run.
var phases = []phase{
	{"load", "Sustained load on POST /v1/assemble", runLoadPhase},
	{"outage", "Valkey outage during appends and assemblies", runOutagePhase},
	{"kill", "kill -9 of loom serve on SQLite during appends", runKillPhase},
	{"hostile", "Hostile input", runHostilePhase},
}
