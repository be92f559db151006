// Command loom is Loom's command-line tool. It parses flags and calls Loom's packages; run `loom help` for
// its commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/context-loom/loom"
)

// command is one subcommand. Its run parses args with a flag.FlagSet of its own.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, s streams) error
}

// commands are the subcommands, in the order `loom help` lists them. Adding one is one line here.
var commands = []command{
	{"demo", "run the Valkey cookbook's scenario on a temporary SQLite file and show the assembled context", runDemo},
	{"serve", "run the HTTP API", runServe},
	{"mcp", "run the MCP server on standard input and output", runMCP},
	{"tokens", "count the tokens of files or standard input", runTokens},
	{"chunk", "split a file into chunks, printed as JSON Lines", runChunk},
	{"assemble", "fit a request, or stored state, into its token budget and print the result", runAssemble},
	{"ingest", "chunk, embed and store files and directories in a collection", runIngest},
	{"retrieve", "print a collection's chunks most relevant to a query, as JSON Lines", runRetrieve},
	{"collection", "list, show or delete collections", runCollection},
	{"document", "list or delete a collection's documents", runDocument},
	{"session", "append to, show or delete a stored session", runSession},
	{"memory", "set, get or delete facts about a user", runMemory},
	{"agent", "put or get an agent's configuration", runAgent},
	{"version", "print Loom's version", runVersion},
}

// streams are a command's standard input, output and error.
type streams struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// exitError is an error that sets the process's exit code. Its err is nil when there is nothing more to
// print (the usage has been printed).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// Exit codes other than 0 (success) and 1 (any other error).
const exitUsage = 2 // bad flags or arguments, a malformed request, unknown command, encoding or model

// usageError returns an error that exits with exitUsage.
func usageError(err error) error { return &exitError{code: exitUsage, err: err} }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(report(err, os.Stderr))
}

// report prints err to stderr, unless it is an exitError with nothing to print, and returns its exit code.
func report(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	code := 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
		if ee.err == nil {
			return code
		}
	}
	fmt.Fprintf(stderr, "loom: %v\n", err)
	return code
}

// run runs the loom command line args (without the program name).
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	s := streams{stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		printUsage(stderr)
		return &exitError{code: exitUsage}
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return runHelp(ctx, rest, s)
	}
	cmd, ok := lookup(name)
	if !ok {
		return usageError(fmt.Errorf("unknown command %q (run 'loom help' for the list)", name))
	}
	return runCommand(ctx, cmd, rest, s)
}

// runCommand runs cmd; asking it for help (-h) is a success.
func runCommand(ctx context.Context, cmd command, args []string, s streams) error {
	err := cmd.run(ctx, args, s)
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// runHelp prints the usage of loom, or of the command named in args, to stdout.
func runHelp(ctx context.Context, args []string, s streams) error {
	switch len(args) {
	case 0:
		printUsage(s.stdout)
		return nil
	case 1:
		cmd, ok := lookup(args[0])
		if !ok {
			return usageError(fmt.Errorf("unknown command %q (run 'loom help' for the list)", args[0]))
		}
		// A command prints its usage for -h to its standard error; help asked for it, so send it to stdout.
		return runCommand(ctx, cmd, []string{"-h"}, streams{stdin: s.stdin, stdout: s.stdout, stderr: s.stdout})
	default:
		return usageError(errors.New("usage: loom help [COMMAND]"))
	}
}

func printUsage(w io.Writer) {
	var b strings.Builder
	b.WriteString("Loom assembles the context of LLM calls, counted exactly in the model's tokens.\n\n")
	b.WriteString("Usage:\n\n\tloom COMMAND [ARGUMENTS]\n\nCommands:\n\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "\t%-11s %s\n", c.name, c.summary)
	}
	b.WriteString("\nRun 'loom help COMMAND' (or 'loom COMMAND -h') for a command's usage. Flags may come before or\n")
	b.WriteString("after a command's arguments; \"--\" ends the flags.\n")
	io.WriteString(w, b.String())
}

// newFlagSet returns a command's flag set, which prints nothing itself, and a func that prints the command's
// usage (its help text, then its flags) to s.stderr.
func newFlagSet(name, usage string, s streams) (*flag.FlagSet, func()) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	help := func() {
		io.WriteString(s.stderr, usage)
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			io.WriteString(s.stderr, "\nFlags:\n")
			fs.SetOutput(s.stderr)
			fs.PrintDefaults()
			fs.SetOutput(io.Discard)
		}
	}
	return fs, help
}

// parseFlags parses args with fs, every command's flags, so that flags and arguments may come in any
// order: a flag after an argument is a flag (loom tokens README.md --json), and "--" ends the flags, so
// that what follows it is an argument even if it starts with "-". Afterwards fs.Args() are the arguments,
// in order. For -h it prints the usage with help and returns errHelp; for bad flags it returns a usage
// error.
func parseFlags(fs *flag.FlagSet, help func(), args []string) error {
	var positional []string
	for {
		err := fs.Parse(args)
		switch {
		case errors.Is(err, flag.ErrHelp):
			help()
			return errHelp
		case err != nil:
			return usageError(fmt.Errorf("%s: %w (run 'loom help %s' for usage)", fs.Name(), err, strings.Fields(fs.Name())[0]))
		}
		rest := fs.Args()
		if endsWithTerminator(fs, args[:len(args)-len(rest)]) {
			positional = append(positional, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		// fs.Parse stopped at an argument: keep it, and parse what follows it.
		positional = append(positional, rest[0])
		args = rest[1:]
	}
	// Leave the arguments as fs.Args(): parsing "--" and them sets no flag.
	return fs.Parse(append([]string{"--"}, positional...))
}

// endsWithTerminator reports whether parsed, the arguments fs.Parse consumed, ended with the "--" that ends
// the flags, rather than with a flag's value that is "--" (--content --).
func endsWithTerminator(fs *flag.FlagSet, parsed []string) bool {
	for i := 0; i < len(parsed); i++ {
		a := parsed[i]
		if a == "--" {
			return true
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if strings.Contains(name, "=") {
			continue // -flag=value
		}
		f := fs.Lookup(name)
		if f == nil {
			continue
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			continue // -flag, with no value
		}
		i++ // -flag value: the next one is its value, whatever it is
	}
	return false
}

// errHelp is returned by parseFlags when usage was asked for and printed; commands return it, and
// runCommand makes it a success.
var errHelp = errors.New("help requested")

const versionUsage = `Usage: loom version

Version prints the version of Loom.
`

func runVersion(_ context.Context, args []string, s streams) error {
	fs, help := newFlagSet("version", versionUsage, s)
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(errors.New("version: takes no arguments"))
	}
	_, err := fmt.Fprintf(s.stdout, "loom %s\n", loom.Version)
	return err
}
