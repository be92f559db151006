package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Errors of the command.
var (
	// errUsage is returned for flags that cannot work; the flag package has already said why.
	errUsage = errors.New("loadtest: bad flags")
	// errChecksFailed is returned when the test ran and a check failed; the report says which.
	errChecksFailed = errors.New("loadtest: checks failed (see the report)")
)

// config is what the flags say.
type config struct {
	duration      time.Duration   // each sustained load run
	warmup        time.Duration   // load before each measured run, not counted
	concurrency   int             // clients of a load run
	sessions      int             // sessions per tenant seeded for the load
	messages      int             // stored messages per seeded session
	outage        time.Duration   // how long Valkey is down
	outageWriters int             // appenders during the outage
	killRounds    int             // kill -9 rounds
	killAfter     time.Duration   // appends before each kill -9
	killSessions  int             // sessions appended to during the kill rounds
	killWriters   int             // appenders per session during the kill rounds
	phases        map[string]bool // the phases to run
	valkeyBin     string          // the Valkey-protocol server binary; "" finds one
	loomBin       string          // a prebuilt loom binary; "" builds one
	keep          bool            // keep the temporary directory (logs, databases)
}

// parseConfig parses args. Bad flags give an error wrapping errUsage.
func parseConfig(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: go run ./scripts/loadtest [flags]\n\nProves loom serve under load, faults and hostile input; prints a Markdown report.\n\nFlags:")
		fs.PrintDefaults()
	}
	var phaseList string
	fs.DurationVar(&c.duration, "duration", 15*time.Second, "length of each sustained load run (one per store)")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "load before each measured run, not counted")
	fs.IntVar(&c.concurrency, "concurrency", 16, "concurrent clients of a load run")
	fs.IntVar(&c.sessions, "sessions", 4, "sessions per tenant seeded for the load run")
	fs.IntVar(&c.messages, "messages", 200, "stored messages per seeded session")
	fs.DurationVar(&c.outage, "outage", 10*time.Second, "how long the Valkey server stays down")
	fs.IntVar(&c.outageWriters, "outage-writers", 8, "appending clients during the outage phase")
	fs.IntVar(&c.killRounds, "kill-rounds", 2, "kill -9 rounds of the kill phase")
	fs.DurationVar(&c.killAfter, "kill-after", 3*time.Second, "appends before each kill -9")
	fs.IntVar(&c.killSessions, "kill-sessions", 4, "sessions appended to in the kill phase")
	fs.IntVar(&c.killWriters, "kill-writers", 3, "appending clients per session in the kill phase")
	fs.StringVar(&phaseList, "phases", "load,outage,kill,hostile", "comma-separated `phases` to run: load, outage, kill, hostile")
	fs.StringVar(&c.valkeyBin, "valkey-server", "", "the Valkey or Redis server `binary` (default: $LOOM_VALKEY_SERVER, valkey-server or redis-server on PATH)")
	fs.StringVar(&c.loomBin, "loom", "", "use this loom `binary` instead of building ./cmd/loom")
	fs.BoolVar(&c.keep, "keep", false, "keep the temporary directory (server logs, SQLite files) and print its path")
	if err := fs.Parse(args); err != nil {
		return c, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return c, usagef(fs, "unexpected arguments %q", fs.Args())
	}
	var err error
	if c.phases, err = parsePhases(phaseList); err != nil {
		return c, usagef(fs, "%v", err)
	}
	for _, v := range []struct {
		name string
		ok   bool
	}{
		{"-duration", c.duration > 0}, {"-warmup", c.warmup >= 0}, {"-concurrency", c.concurrency > 0},
		{"-sessions", c.sessions > 0}, {"-messages", c.messages > 0}, {"-outage", c.outage > 0},
		{"-outage-writers", c.outageWriters > 0}, {"-kill-rounds", c.killRounds > 0}, {"-kill-after", c.killAfter > 0},
		{"-kill-sessions", c.killSessions > 0}, {"-kill-writers", c.killWriters > 0},
	} {
		if !v.ok {
			return c, usagef(fs, "%s must be positive", v.name)
		}
	}
	return c, nil
}

// parsePhases parses a comma-separated list of phase names.
func parsePhases(list string) (map[string]bool, error) {
	known := make([]string, len(phases))
	for i, p := range phases {
		known[i] = p.name
	}
	out := map[string]bool{}
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !slices.Contains(known, name) {
			return nil, fmt.Errorf("unknown phase %q (known: %s)", name, strings.Join(known, ", "))
		}
		out[name] = true
	}
	if len(out) == 0 {
		return nil, errors.New("no phase selected")
	}
	return out, nil
}

// usagef reports a bad flag value with the usage and returns an error wrapping errUsage.
func usagef(fs *flag.FlagSet, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	fmt.Fprintln(fs.Output(), "loadtest:", msg)
	fs.Usage()
	return fmt.Errorf("%w: %s", errUsage, msg)
}
