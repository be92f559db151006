package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/ingest"
)

const ingestUsage = `Usage: loom ingest --collection NAME [--store URL] [--tenant T] [--strategy S] [--chunk-size N]
                   [--chunk-overlap M] [--include GLOB]... [--exclude GLOB]... [--prune] [--json]
                   [--embedder-url URL --embedder-model NAME] PATH...

Ingest reads files and directories (in lexical order; hidden files and symbolic links are left out) as
text, Markdown, HTML (its text extracted, its headings kept for chunking) or code, chunks and embeds them
(with the offline embedder, or the one --embedder-url and --embedder-model name), and stores them in the collection NAME, which is created if it does not exist
(with --strategy, --chunk-size and --chunk-overlap, or the defaults: auto, 512, 50). A document's id is its
path as walked; ingesting an unchanged file again changes nothing, a changed one replaces its old chunks.
With --prune, it then deletes the documents it made from files under the PATHs that no longer exist, and
lists them ("removed ID"; with --json, "removed": [...]): run it from the same directory as before, since a
document's id is its path as given. A file that is there keeps its document, even one left out by
--exclude. On a terminal it shows a progress bar on standard error; at the end it prints a summary (--json:
as JSON). Files that cannot be read as text are skipped and listed.
` + embedderUsage + storeFlagsUsage

// multiFlag collects a repeated flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func runIngest(ctx context.Context, args []string, s streams) error {
	fs, help := newFlagSet("ingest", ingestUsage, s)
	sf := addStoreFlags(fs)
	ef := addEmbedderFlags(fs)
	name := fs.String("collection", "", "the collection's `name` (or id)")
	strategy := fs.String("strategy", "", "a new collection's chunking `strategy`: auto, recursive, fixed, sliding, semantic, code, markdown")
	size := fs.Int("chunk-size", 0, "a new collection's chunk size in tokens, at least 16 (default 512)")
	overlap := fs.Int("chunk-overlap", 0, "a new collection's chunk overlap in tokens (default 50, or a fifth of a chunk size under 250; -1: none)")
	var include, exclude multiFlag
	fs.Var(&include, "include", "ingest only files matching `GLOB` (repeatable; *.md, docs/*.html)")
	fs.Var(&exclude, "exclude", "leave out files and directories matching `GLOB` (repeatable)")
	prune := fs.Bool("prune", false, "then delete the documents of files under the PATHs that no longer exist")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if *name == "" || fs.NArg() == 0 {
		return usageError(errors.New("ingest: want --collection NAME and at least one PATH (run 'loom help ingest')"))
	}
	// Every path must be there before anything is created or stored.
	for _, p := range fs.Args() {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("ingest: %w", err)
		}
	}
	engOpts, err := ef.options(nil)
	if err != nil {
		return err
	}
	eng, closeAll, err := openEngine(ctx, sf, engOpts...)
	if err != nil {
		return err
	}
	defer closeAll()
	ctx = loom.WithTenant(ctx, *sf.tenant)
	coll, err := eng.Collection(ctx, *name)
	switch {
	case errors.Is(err, collection.ErrNotFound):
		coll, err = eng.CreateCollection(ctx, loom.Collection{Name: *name, ChunkStrategy: *strategy, ChunkSize: *size, ChunkOverlap: *overlap})
		if err != nil {
			return usageError(fmt.Errorf("ingest: create collection %q: %w", *name, err))
		}
		fmt.Fprintf(s.stderr, "created collection %q (%s, %d tokens, overlap %d, embedder %s)\n", coll.Name, coll.ChunkStrategy, coll.ChunkSize, coll.ChunkOverlap, coll.Embedder)
	case err != nil:
		return fmt.Errorf("ingest: %w", err)
	case (*strategy != "" && *strategy != coll.ChunkStrategy) || (*size != 0 && *size != coll.ChunkSize) || (*overlap != 0 && max(*overlap, 0) != coll.ChunkOverlap):
		return usageError(fmt.Errorf("ingest: collection %q exists with strategy %s, size %d, overlap %d; its settings cannot change", coll.Name, coll.ChunkStrategy, coll.ChunkSize, coll.ChunkOverlap))
	}
	opts := engine.IngestOptions{Walk: ingest.WalkOptions{Include: include, Exclude: exclude}}
	var bar *progressBar
	if isTerminal(s.stderr) {
		total := countFiles(fs.Args())
		bar = &progressBar{w: s.stderr, total: total, start: time.Now()}
		opts.Progress = bar.update
	}
	start := time.Now()
	sum, err := eng.IngestPaths(ctx, coll.ID, fs.Args(), opts)
	if bar != nil {
		bar.finish()
	}
	if errors.Is(err, engine.ErrEmbedderMismatch) {
		return usageError(fmt.Errorf("ingest: %w", mismatchHint(err)))
	}
	if err != nil {
		return fmt.Errorf("ingest: %w", err)
	}
	var removed *[]string // with --prune, the ids removed
	if *prune {
		ids, err := eng.PruneDocuments(ctx, coll.ID, fs.Args())
		if err != nil {
			for _, id := range ids {
				fmt.Fprintf(s.stdout, "removed %s\n", id)
			}
			return fmt.Errorf("ingest: prune: %w", err)
		}
		ids = append([]string{}, ids...)
		removed = &ids
	}
	elapsed := time.Since(start)
	if *asJSON {
		return writeJSON(s.stdout, struct {
			Collection string `json:"collection"`
			engine.IngestSummary
			Removed *[]string `json:"removed,omitempty"` // with --prune; [] when nothing was removed
			Seconds float64   `json:"seconds"`
		}{coll.ID, sum, removed, elapsed.Seconds()})
	}
	mbps := float64(sum.Bytes) / 1e6 / max(elapsed.Seconds(), 1e-9)
	fmt.Fprintf(s.stdout, "ingested %d files into %q: %d new or changed (%d chunks), %d unchanged, %d skipped; %.1f MB in %.2fs (%.1f MB/s)\n",
		sum.Files, coll.Name, sum.Changed, sum.Chunks, sum.Unchanged, len(sum.Skipped), float64(sum.Bytes)/1e6, elapsed.Seconds(), mbps)
	for _, sk := range sum.Skipped {
		fmt.Fprintf(s.stdout, "skipped %s\n", sk)
	}
	if removed != nil {
		for _, id := range *removed {
			fmt.Fprintf(s.stdout, "removed %s\n", id)
		}
		fmt.Fprintf(s.stdout, "removed %d documents whose files are gone\n", len(*removed))
	}
	return nil
}

// openEngine opens the store the flags name and an engine over it, with opts; closeAll closes both.
func openEngine(ctx context.Context, sf storeFlags, opts ...engine.Option) (*engine.Engine, func(), error) {
	st, err := sf.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	eng, err := engine.New(st, append([]engine.Option{engine.WithChunkers(newChunkers())}, opts...)...)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return eng, func() { eng.Close(); st.Close() }, nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// countFiles counts the regular, not hidden files under paths, for the progress bar's total.
func countFiles(paths []string) int {
	n := 0
	for _, root := range paths {
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if path != root && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.Type().IsRegular() {
				n++
			}
			return nil
		})
	}
	return n
}

// progressBar draws "[=====>    ] 12/40 files  1.2 MB  3.4 MB/s" on one terminal line.
type progressBar struct {
	w     io.Writer
	total int
	bytes int64
	start time.Time
	last  time.Time
}

func (p *progressBar) update(pr engine.IngestProgress) {
	p.bytes += pr.Bytes
	if time.Since(p.last) < 100*time.Millisecond && pr.Files < p.total {
		return
	}
	p.last = time.Now()
	const width = 30
	done := width
	if p.total > 0 {
		done = min(width, pr.Files*width/p.total)
	}
	bar := strings.Repeat("=", done)
	if done < width {
		bar += ">" + strings.Repeat(" ", width-done-1)
	}
	rate := float64(p.bytes) / 1e6 / max(time.Since(p.start).Seconds(), 1e-9)
	fmt.Fprintf(p.w, "\r[%s] %d/%d files  %.1f MB  %.1f MB/s ", bar, pr.Files, p.total, float64(p.bytes)/1e6, rate)
}

func (p *progressBar) finish() { fmt.Fprintln(p.w) }

const retrieveUsage = `Usage: loom retrieve --collection NAME [--store URL] [--tenant T] [--top-k N]
                     [--mode hybrid|keyword|vector|mmr] [--min-score S] [--filter KEY=VALUE]...
                     [--keyword-weight W] [--vector-weight W] [--mmr-lambda L]
                     [--embedder-url URL --embedder-model NAME] QUERY...

Retrieve prints the chunks of the collection most relevant to QUERY as JSON Lines, best first:

	{"rank":1,"score":0.91,"kind":"fused","chunk_id":"docs/a.md#3","document_id":"docs/a.md",
	 "source":"docs/a.md","start":1200,"end":2480,"text":"..."}

start and end are byte offsets of text in the document's text; metadata, and the keyword and vector scores
and ranks behind a hybrid score, follow when there are any.

hybrid (the default) fuses the keyword (BM25) and vector rankings by the weighted mean of their relevances:
(kw*k + vw*v) / (kw + vw), k a chunk's BM25 score relative to the best match, v its cosine similarity to
the query. The weights are --keyword-weight and --vector-weight, else the collection's, else 1 for the
keywords and the embedder's own for the vectors (0.4 for the offline lexical embedder, 1 for a model
server's). mmr drops duplicates and near-duplicates of the hybrid candidates and re-ranks them for
diversity (--mmr-lambda from 0, most diverse, to 1, most relevant; default 0.7).

--min-score (0 to 1) drops results less relevant than it, relevance meaning the same in every mode: a
result's score in its mode's ranking (BM25 in keyword mode, the cosine similarity in vector mode, the
fused score in hybrid and mmr mode) relative to the best result's, printed as "relevance". So 0.5 keeps the
results at least half as good as the best one, in any mode; the best one is always kept. It cannot tell a
query that nothing matches well: "vector" keeps the absolute cosine similarity for that.
` + embedderUsage + storeFlagsUsage

func runRetrieve(ctx context.Context, args []string, s streams) error {
	fs, help := newFlagSet("retrieve", retrieveUsage, s)
	sf := addStoreFlags(fs)
	ef := addEmbedderFlags(fs)
	name := fs.String("collection", "", "the collection's `name` (or id)")
	topK := fs.Int("top-k", 10, "return at most `N` results")
	mode := fs.String("mode", engine.ModeHybrid, "the retrieval `mode`: hybrid, keyword, vector or mmr")
	minScore := fs.Float64("min-score", 0, "drop results less relevant than this share of the best result's score (0 to 1)")
	keywordWeight := fs.Float64("keyword-weight", 1, "the weight `W` of the keyword ranking in hybrid and mmr mode (default: the collection's, else 1)")
	vectorWeight := fs.Float64("vector-weight", 0, "the weight `W` of the vector ranking in hybrid and mmr mode (default: the collection's, else the embedder's)")
	lambda := fs.Float64("mmr-lambda", 0, "relevance against diversity in mmr mode, `L` from 0 to 1 (default 0.7)")
	var filters multiFlag
	fs.Var(&filters, "filter", "keep chunks whose metadata has `KEY=VALUE` (repeatable; document_id=ID)")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	query := strings.Join(fs.Args(), " ")
	if *name == "" || strings.TrimSpace(query) == "" {
		return usageError(errors.New("retrieve: want --collection NAME and a QUERY (run 'loom help retrieve')"))
	}
	filter := map[string]string{}
	for _, f := range filters {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return usageError(fmt.Errorf("retrieve: --filter %q: want KEY=VALUE", f))
		}
		filter[k] = v
	}
	engOpts, err := ef.options(nil)
	if err != nil {
		return err
	}
	eng, closeAll, err := openEngine(ctx, sf, engOpts...)
	if err != nil {
		return err
	}
	defer closeAll()
	ctx = loom.WithTenant(ctx, *sf.tenant)
	opts := []engine.RetrieveOption{engine.WithCollection(*name), engine.WithTopK(*topK), engine.WithMode(*mode), engine.WithMinScore(*minScore),
		engine.WithMMRLambda(*lambda)}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "keyword-weight":
			opts = append(opts, engine.WithKeywordWeight(*keywordWeight))
		case "vector-weight":
			opts = append(opts, engine.WithVectorWeight(*vectorWeight))
		}
	})
	if len(filter) > 0 {
		opts = append(opts, engine.WithFilter(filter))
	}
	results, err := eng.Retrieve(ctx, query, opts...)
	switch {
	case errors.Is(err, engine.ErrEmbedderMismatch):
		return usageError(fmt.Errorf("retrieve: %w", mismatchHint(err)))
	case errors.Is(err, engine.ErrInvalidRequest):
		return usageError(fmt.Errorf("retrieve: %w", err))
	case err != nil:
		return fmt.Errorf("retrieve: %w", err)
	}
	for _, r := range results {
		if err := writeJSON(s.stdout, engine.NewHit(r)); err != nil {
			return err
		}
	}
	return nil
}

var _ flag.Value = (*multiFlag)(nil)
