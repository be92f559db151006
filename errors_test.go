package loom_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/chunker"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/embed"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/eval"
	"github.com/context-loom/loom/ingest"
	"github.com/context-loom/loom/promptcount"
	"github.com/context-loom/loom/retriever"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/sqlite"
	"github.com/context-loom/loom/store/storeurl"
	"github.com/context-loom/loom/store/valkey"
	"github.com/context-loom/loom/store/valkey/cookbook"
	"github.com/context-loom/loom/summarize"
	"github.com/context-loom/loom/tokenizer"
)

// kinds are the error kinds of package loom.
var kinds = []error{loom.ErrInvalid, loom.ErrNotFound, loom.ErrExists, loom.ErrTooLarge, loom.ErrUnsupported,
	loom.ErrUnavailable, loom.ErrClosed, loom.ErrBudget}

// sentinels are the exported sentinel errors of the module's packages, by package and name.
var sentinels = map[string]error{
	"assembler.ErrInvalidMaxTokens": assembler.ErrInvalidMaxTokens,
	"assembler.ErrNilCounter":       assembler.ErrNilCounter,
	"assembler.ErrTemplate":         assembler.ErrTemplate,
	"assembler.ErrInvalidRequest":   assembler.ErrInvalidRequest,
	"assembler.ErrUnknownFormat":    assembler.ErrUnknownFormat,
	"assembler.ErrNoUserTurn":       assembler.ErrNoUserTurn,
	"assembler.ErrProviderRule":     assembler.ErrProviderRule,
	"assembler.ErrNoMessages":       assembler.ErrNoMessages,
	"chunker.ErrNegativeSize":       chunker.ErrNegativeSize,
	"chunker.ErrNegativeOverlap":    chunker.ErrNegativeOverlap,
	"chunker.ErrOverlapTooLarge":    chunker.ErrOverlapTooLarge,
	"chunker.ErrUnknownStrategy":    chunker.ErrUnknownStrategy,
	"chunker.ErrNoChunker":          chunker.ErrNoChunker,
	"chunker.ErrUnknownLanguage":    chunker.ErrUnknownLanguage,
	"chunker.ErrNotApplicable":      chunker.ErrNotApplicable,
	"chunker.ErrStrategyMismatch":   chunker.ErrStrategyMismatch,
	"chunker.ErrSizeTooSmall":       chunker.ErrSizeTooSmall,
	"chunker.ErrNoTokenOffsets":     chunker.ErrNoTokenOffsets,
	"chunker.ErrBadPercentile":      chunker.ErrBadPercentile,
	"chunker.ErrNegativeLimit":      chunker.ErrNegativeLimit,
	"chunker.ErrTooManyChunks":      chunker.ErrTooManyChunks,
	"collection.ErrNotFound":        collection.ErrNotFound,
	"collection.ErrExists":          collection.ErrExists,
	"embed.ErrInvalidConfig":        embed.ErrInvalidConfig,
	"embed.ErrResponse":             embed.ErrResponse,
	"embed.ErrDimensions":           embed.ErrDimensions,
	"embed.ErrUnavailable":          embed.ErrUnavailable,
	"engine.ErrInvalidRequest":      engine.ErrInvalidRequest,
	"engine.ErrClosed":              engine.ErrClosed,
	"engine.ErrEmbedderMismatch":    engine.ErrEmbedderMismatch,
	"engine.ErrAgentNotFound":       engine.ErrAgentNotFound,
	"engine.ErrNoCollections":       engine.ErrNoCollections,
	"engine.ErrNoSummarizer":        engine.ErrNoSummarizer,
	"engine.ErrCompactionBusy":      engine.ErrCompactionBusy,
	"engine.ErrCompactionFailed":    engine.ErrCompactionFailed,
	"summarize.ErrInvalidConfig":    summarize.ErrInvalidConfig,
	"summarize.ErrResponse":         summarize.ErrResponse,
	"summarize.ErrUnavailable":      summarize.ErrUnavailable,
	"eval.ErrQuestions":             eval.ErrQuestions,
	"ingest.ErrBinary":              ingest.ErrBinary,
	"ingest.ErrTooLarge":            ingest.ErrTooLarge,
	"ingest.ErrNotRegular":          ingest.ErrNotRegular,
	"ingest.ErrContentType":         ingest.ErrContentType,
	"promptcount.ErrBody":           promptcount.ErrBody,
	"promptcount.ErrTooLarge":       promptcount.ErrTooLarge,
	"promptcount.ErrNotCounted":     promptcount.ErrNotCounted,
	"promptcount.ErrProviderConfig": promptcount.ErrProviderConfig,
	"retriever.ErrInvalidChunk":     retriever.ErrInvalidChunk,
	"retriever.ErrDimensions":       retriever.ErrDimensions,
	"retriever.ErrInvalidQuery":     retriever.ErrInvalidQuery,
	"store.ErrNotFound":             store.ErrNotFound,
	"store.ErrInvalid":              store.ErrInvalid,
	"store.ErrTooLarge":             store.ErrTooLarge,
	"store.ErrClosed":               store.ErrClosed,
	"store.ErrUnavailable":          store.ErrUnavailable,
	"store.ErrUnsupported":          store.ErrUnsupported,
	"sqlite.ErrNewerSchema":         sqlite.ErrNewerSchema,
	"storeurl.ErrBadURL":            storeurl.ErrBadURL,
	"valkey.ErrNoClientCache":       valkey.ErrNoClientCache,
	"valkey.ErrBadOptions":          valkey.ErrBadOptions,
	"cookbook.ErrNoClientCache":     cookbook.ErrNoClientCache,
	"cookbook.ErrBadOptions":        cookbook.ErrBadOptions,
	"tokenizer.ErrUnknownEncoding":  tokenizer.ErrUnknownEncoding,
	"tokenizer.ErrUnknownModel":     tokenizer.ErrUnknownModel,
	"tokenizer.ErrInvalidModel":     tokenizer.ErrInvalidModel,
	"tokenizer.ErrNoImageRule":      tokenizer.ErrNoImageRule,
	"tokenizer.ErrSchemaDepth":      tokenizer.ErrSchemaDepth,
}

// unkinded are the sentinels that are no kind of the caller's business on purpose: a protocol state
// (the change feed was trimmed: rebuild), or a failure of stored data that retrying cannot mend.
var unkinded = map[string]bool{
	"collection.ErrFeedTrimmed": true,
	"engine.ErrSourceFailed":    true,
}

// TestSentinels_EachWrapsOneKind: every exported sentinel error of every package wraps exactly one of
// package loom's kinds (or is named in unkinded, with its reason), so that a caller, and the server's
// table of statuses, test kinds and never a list of packages' errors. The sentinels are found by parsing
// the module's source, so a new one that wraps no kind fails here until it does.
func TestSentinels_EachWrapsOneKind(t *testing.T) {
	t.Parallel()
	found := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (d.Name() == "testdata" || d.Name() == "bench" || d.Name() == "scripts" || d.Name() == "internal" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				for _, name := range spec.(*ast.ValueSpec).Names {
					if strings.HasPrefix(name.Name, "Err") && name.IsExported() {
						found[f.Name.Name+"."+name.Name] = true
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range found {
		if strings.HasPrefix(name, "loom.") || unkinded[name] {
			continue
		}
		err, ok := sentinels[name]
		if !ok {
			t.Errorf("%s: a sentinel this test does not know; add it to sentinels (and make it wrap a kind)", name)
			continue
		}
		n := 0
		for _, k := range kinds {
			if errors.Is(err, k) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s (%q) wraps %d of loom's kinds, want 1", name, err, n)
		}
	}
	for name := range sentinels {
		if !found[name] {
			t.Errorf("%s: in sentinels but not declared in the source any more", name)
		}
	}
}

// TestBudgetError_IsTheBudgetKind: a *BudgetError, however wrapped, matches loom.ErrBudget and no other kind.
func TestBudgetError_IsTheBudgetKind(t *testing.T) {
	t.Parallel()
	err := error(&loom.BudgetError{Required: 10, Available: 5})
	for _, e := range []error{err, errors.Join(errors.New("x"), err)} {
		for _, k := range kinds {
			if errors.Is(e, k) != (k == loom.ErrBudget) {
				t.Errorf("errors.Is(%v, %v) = %v", e, k, errors.Is(e, k))
			}
		}
	}
}
