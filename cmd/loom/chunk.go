package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/context-loom/loom/chunker"
	"github.com/context-loom/loom/ingest"
	"github.com/context-loom/loom/tokenizer"
)

const chunkUsage = `Usage: loom chunk [--strategy S] [--size N] [--overlap M] [--encoding NAME] [--lang L] FILE

Chunk splits FILE ("-" for standard input) into chunks of at most N tokens and prints them as JSON Lines,
one chunk a line:

	{"index":0,"start":0,"end":1834,"tokens":412,"text":"...","metadata":{...}}

start and end are byte offsets into the file: text is exactly its bytes start to end. Strategies: %s.
Without --size, chunks are up to 512 tokens; without --overlap, neighbours share up to 50 tokens (or a
fifth of the size); --overlap 0 means none. The code strategy takes its language from --lang or from the
file's extension (%s), and splits other files as lines.

In this build, code is %s.

Exit status: 0 on success; 1 if the file cannot be read; 2 for bad usage or options.
`

// chunkRecord is one line of loom chunk.
type chunkRecord struct {
	Index    int               `json:"index"`
	Start    int               `json:"start"`
	End      int               `json:"end"`
	Tokens   int               `json:"tokens"`
	Text     string            `json:"text"`
	Metadata map[string]string `json:"metadata"`
}

func runChunk(ctx context.Context, args []string, s streams) error {
	chunkers := newChunkers()
	fs, help := newFlagSet("chunk", fmt.Sprintf(chunkUsage, strings.Join(chunkers.Strategies(), ", "),
		strings.Join(chunker.CodeLanguages(), ", "), codeParsed), s)
	strategy := fs.String("strategy", chunker.DefaultStrategy, "the chunking strategy `S`")
	size := fs.Int("size", chunker.DefaultChunkSize, "the most tokens a chunk may have")
	overlap := fs.Int("overlap", 0, "tokens neighbours share (default 50, or a fifth of the size)")
	encodingName := fs.String("encoding", tokenizer.CL100KBase, "count tokens in the encoding `NAME`")
	lang := fs.String("lang", "", "the code strategy's language `L` (default: from the file's extension)")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError(errors.New("chunk: want exactly one FILE (\"-\" for standard input)"))
	}
	path := fs.Arg(0)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	enc, err := tokenizer.Get(*encodingName)
	if err != nil {
		return usageError(fmt.Errorf("chunk: %w", err))
	}
	opts := &chunker.Options{
		Strategy:     *strategy,
		ChunkSize:    *size,
		ChunkOverlap: *overlap,
		NoOverlap:    set["overlap"] && *overlap == 0,
		Counter:      enc,
		Language:     *lang,
	}
	if *size <= 0 {
		return usageError(fmt.Errorf("chunk: --size must be positive (got %d)", *size))
	}
	if *strategy == chunker.Code && *lang == "" {
		opts.Language = ingest.LanguageForFile(path)
	}
	c, err := chunkers.Lookup(*strategy)
	if err != nil {
		return usageError(fmt.Errorf("chunk: %w", err))
	}

	var data []byte
	if path == "-" {
		data, err = io.ReadAll(s.stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return fmt.Errorf("chunk: %w", err)
	}
	chunks, err := c.Chunk(ctx, string(data), opts)
	if err != nil {
		if chunker.IsOptionError(err) {
			return usageError(fmt.Errorf("chunk: %w", err))
		}
		return fmt.Errorf("chunk: %w", err)
	}
	w := bufio.NewWriter(s.stdout)
	enc2 := json.NewEncoder(w)
	enc2.SetEscapeHTML(false)
	for _, ch := range chunks {
		meta := ch.Metadata
		if meta == nil {
			meta = map[string]string{}
		}
		if err := enc2.Encode(chunkRecord{Index: ch.Index, Start: ch.StartOffset, End: ch.EndOffset,
			Tokens: ch.TokenCount, Text: ch.Content, Metadata: meta}); err != nil {
			return err
		}
	}
	return w.Flush()
}
