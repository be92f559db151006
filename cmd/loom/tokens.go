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

	"github.com/context-loom/loom/tokenizer"
)

// defaultEncoding is what loom tokens counts in without --encoding or --model.
const defaultEncoding = tokenizer.CL100KBase

const tokensUsage = `Usage: loom tokens [--encoding NAME | --model NAME] [--json] [FILE...]

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

Exit status: 0 on success; 1 if a file cannot be read (the files before it are reported); 2 for bad
usage or an unknown encoding or model.
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
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
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
