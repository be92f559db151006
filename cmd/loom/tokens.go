package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/context-loom/loom/promptcount"
	"github.com/context-loom/loom/tokenizer"
)

// defaultEncoding is what loom tokens counts in without --encoding or --model.
const defaultEncoding = tokenizer.CL100KBase

const tokensUsage = `Usage: loom tokens [--encoding NAME | --model NAME] [--json] [FILE...]
       loom tokens --request FILE [--provider openai|anthropic] [--model NAME] [--json]

Tokens counts the tokens of each FILE, or of standard input when there is no FILE or a FILE is "-".
Flags may come before or after the files; after "--", everything is a FILE.

It counts in the ` + defaultEncoding + ` encoding unless --encoding names another (%s) or --model
names a model (such as gpt-4o, claude-sonnet-4-5 or openai/gpt-4o-2024-08-06), which counts as that model
does. Only OpenAI's models are counted exactly; the others (Anthropic, Google, Meta, Mistral) are estimated:
their counts are approximate, and loom says so. Counts are of the text alone, without a chat format's
per-message overhead.

Output: one line per file, "COUNT<TAB>PATH" ("COUNT" alone for standard input without FILE), and a final
"COUNT<TAB>total" line when there is more than one FILE. With --json, one JSON object per file and line:

	{"file":"README.md","encoding":"o200k_base","model":"gpt-4o","tokens":1234,"bytes":5678}

with the path exactly as given ("-" for standard input), "model" only with --model, and for an estimated
model "encoding":"estimate" and "approximate":true.

With --request, FILE ("-": standard input) is a whole provider request body, and loom prints the prompt
tokens the provider bills for it: an OpenAI Chat Completions body (model, messages whose content is a
text or content parts with images, names, tool calls and tool results, tools, tool_choice) is counted
by the model's own rules, its tool definitions as the namespace OpenAI's models read and its images by
the model's image rule; an Anthropic Messages body (system, messages, tools) is estimated, marked
approximate. The shape is detected from the body, or named by --provider; --model names the model of a
body that names none. An image at a URL needs "width" and "height" beside its URL to be counted (an
image's data says its own size). With --json, one JSON object: the count ("tokens", "exact",
"approximate", "source") and its breakdown per message, image, tool set, tool choice and overhead.

For models without a public tokenizer, loom asks the provider's own counting endpoint when a key is in
the environment: LOOM_ANTHROPIC_API_KEY (Anthropic's /v1/messages/count_tokens, for Claude models in a
Messages body) and LOOM_GEMINI_API_KEY (Gemini's countTokens, for Gemini models in a Chat Completions
body); LOOM_ANTHROPIC_BASE_URL and LOOM_GEMINI_BASE_URL change where it asks. If the endpoint fails, the
count is Loom's estimate and loom says why ("degraded" under --json).

Exit status: 0 on success; 1 if a file cannot be read (the files before it are reported); 2 for bad
usage, an unknown encoding or model, or a request body that cannot be counted.
`

// tokensRecord is one line of loom tokens --json.
type tokensRecord struct {
	File        string `json:"file"`
	Encoding    string `json:"encoding"`
	Model       string `json:"model,omitempty"`
	Tokens      int    `json:"tokens"`
	Bytes       int    `json:"bytes"`
	Approximate bool   `json:"approximate,omitempty"`
}

func runTokens(ctx context.Context, args []string, s streams) error {
	fs, help := newFlagSet("tokens", fmt.Sprintf(tokensUsage, strings.Join(tokenizer.Encodings(), ", ")), s)
	encodingName := fs.String("encoding", defaultEncoding, "count in the encoding `NAME`")
	modelName := fs.String("model", "", "count as the model `NAME` does")
	asJSON := fs.Bool("json", false, "print one JSON object per file")
	request := fs.String("request", "", "count the provider request body in `FILE` (\"-\": standard input)")
	shape := fs.String("provider", "", "the request body's shape, `openai` or anthropic (default: detected)")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["request"] {
		switch {
		case set["encoding"]:
			return usageError(errors.New("tokens: --request counts as the request's model; --encoding does not apply"))
		case len(fs.Args()) > 0:
			return usageError(errors.New("tokens: --request takes one FILE, as its value; give no other files"))
		}
		return countRequest(ctx, s, *request, promptcount.Options{Shape: *shape, Model: *modelName}, *asJSON)
	}
	if set["provider"] {
		return usageError(errors.New("tokens: --provider names the shape of a --request body"))
	}
	if set["encoding"] && set["model"] {
		return usageError(errors.New("tokens: --encoding and --model are mutually exclusive"))
	}

	// What to count with, and how to name it in the output.
	var (
		counter   tokenizer.Counter
		rec       tokensRecord // the fields common to every file's record
		estimated bool
	)
	if set["model"] {
		m, err := tokenizer.ForModel(*modelName)
		if err != nil {
			return usageError(err)
		}
		counter, rec.Model, rec.Encoding = m.Counter(), m.Name, m.Encoding
		if !m.Exact() {
			estimated, rec.Encoding, rec.Approximate = true, "estimate", true
		}
	} else {
		enc, err := tokenizer.Get(*encodingName)
		if err != nil {
			return usageError(err)
		}
		counter, rec.Encoding = enc, enc.Name()
	}
	if estimated && !*asJSON {
		fmt.Fprintf(s.stderr, "loom: note: %s is not counted exactly; its counts are estimates\n", rec.Model)
	}

	files := fs.Args()
	paths := files
	if len(files) == 0 {
		paths = []string{"-"}
	}
	out := json.NewEncoder(s.stdout)
	out.SetEscapeHTML(false) // paths exactly as given
	total := 0
	for _, path := range paths {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := readInput(path, s.stdin)
		if err != nil {
			return err
		}
		n := counter.Count(string(data))
		total += n
		switch {
		case *asJSON:
			r := rec
			r.File, r.Tokens, r.Bytes = path, n, len(data)
			err = out.Encode(r)
		case len(files) == 0:
			_, err = fmt.Fprintf(s.stdout, "%d\n", n)
		default:
			_, err = fmt.Fprintf(s.stdout, "%d\t%s\n", n, path)
		}
		if err != nil {
			return err
		}
	}
	if len(files) > 1 && !*asJSON {
		if _, err := fmt.Fprintf(s.stdout, "%d\ttotal\n", total); err != nil {
			return err
		}
	}
	return nil
}

// countRequest counts the request body at path and prints the count: the number, or with asJSON the
// count and its breakdown; a note on stderr for an estimate, and why a provider did not count.
func countRequest(ctx context.Context, s streams, path string, opts promptcount.Options, asJSON bool) error {
	provider, err := providerFromEnv(os.Getenv)
	if err != nil {
		return usageError(err)
	}
	opts.Provider = provider
	opts.Limits.MaxBytes = maxRequestBytes // what loom assemble reads too
	data, err := readLimited(path, s)
	if err != nil {
		return err
	}
	c, err := promptcount.CountRequest(ctx, data, opts)
	if err != nil {
		return usageError(fmt.Errorf("tokens: %s: %w", requestName(path), err))
	}
	if c.Degraded != "" {
		fmt.Fprintf(s.stderr, "loom: note: %s\n", c.Degraded)
	}
	if asJSON {
		out := json.NewEncoder(s.stdout)
		out.SetEscapeHTML(false)
		return out.Encode(c)
	}
	switch {
	case c.Approximate && c.Encoding == "estimate":
		fmt.Fprintf(s.stderr, "loom: note: %s is not counted exactly; the count is an estimate\n", c.Model)
	case c.Approximate:
		fmt.Fprintf(s.stderr, "loom: note: some parts follow rules known only as estimates, which err high (see --json)\n")
	}
	_, err = fmt.Fprintf(s.stdout, "%d\n", c.Tokens)
	return err
}

func requestName(path string) string {
	if path == "-" {
		return "standard input"
	}
	return path
}

// providerFromEnv returns the provider counter that the environment configures (LOOM_ANTHROPIC_API_KEY,
// LOOM_GEMINI_API_KEY and their LOOM_*_BASE_URL), or nil when it gives no key.
func providerFromEnv(getenv func(string) string) (*promptcount.Provider, error) {
	cfg := promptcount.ProviderConfig{
		AnthropicKey: getenv("LOOM_ANTHROPIC_API_KEY"), AnthropicURL: getenv("LOOM_ANTHROPIC_BASE_URL"),
		GeminiKey: getenv("LOOM_GEMINI_API_KEY"), GeminiURL: getenv("LOOM_GEMINI_BASE_URL"),
	}
	if cfg.AnthropicKey == "" && cfg.GeminiKey == "" {
		return nil, nil
	}
	return promptcount.NewProvider(cfg)
}

// readInput returns the contents of the file at path, or of stdin for "-".
func readInput(path string, stdin io.Reader) ([]byte, error) {
	if path != "-" {
		return os.ReadFile(path) // its error names the file
	}
	data, err := io.ReadAll(stdin)
	if err != nil {
		return nil, fmt.Errorf("read standard input: %w", err)
	}
	return data, nil
}
