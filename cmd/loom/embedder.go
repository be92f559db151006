package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/context-loom/loom/embed"
	"github.com/context-loom/loom/engine"
)

const embedderUsage = `
Embedder: --embedder-url URL and --embedder-model NAME (or LOOM_EMBEDDER_URL and LOOM_EMBEDDER_MODEL) name an
OpenAI-compatible embeddings API (OpenAI https://api.openai.com/v1, Ollama http://localhost:11434/v1, vLLM,
LM Studio) and its model, which embed documents and queries in place of the offline lexical embedder; the
key, if it needs one, is read from LOOM_EMBEDDER_API_KEY only (never a flag, never logged).
--embedder-dimensions asks a model that can shorten its vectors for that many (OpenAI's text-embedding-3).
A collection records the embedder it was created with ("openai:MODEL", or "openai:MODEL:DIMENSIONS") and its
vectors' dimensions: a vector query or an ingest with another embedder is refused with an error naming both
(keyword retrieval compares no vectors and still works).
`

// embedderFlags choose an embedder.
type embedderFlags struct {
	url, model *string
	dimensions *int
	timeout    *time.Duration
}

func addEmbedderFlags(fs *flag.FlagSet) embedderFlags {
	return embedderFlags{
		url:        fs.String("embedder-url", os.Getenv("LOOM_EMBEDDER_URL"), "the embeddings API's base `URL` (default $LOOM_EMBEDDER_URL; none: the offline lexical embedder)"),
		model:      fs.String("embedder-model", os.Getenv("LOOM_EMBEDDER_MODEL"), "the embedding `model` (default $LOOM_EMBEDDER_MODEL)"),
		dimensions: fs.Int("embedder-dimensions", 0, "ask the embedding model for vectors of `N` dimensions (0: the model's own)"),
		timeout:    fs.Duration("embedder-timeout", embed.DefaultOpenAITimeout, "the longest one embeddings request may take"),
	}
}

// options returns the engine option of the embedder the flags name, none when they name none (the engine's
// offline default), and a usage error when they name half of one.
func (f embedderFlags) options(log *slog.Logger) ([]engine.Option, error) {
	if ok, err := modelFlags("embedder", *f.url, *f.model); !ok {
		if err == nil && *f.dimensions != 0 {
			err = usageError(errors.New("--embedder-dimensions needs --embedder-url and --embedder-model"))
		}
		return nil, err
	}
	key := os.Getenv("LOOM_EMBEDDER_API_KEY")
	emb, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: *f.url, Model: *f.model, APIKey: key, Dimensions: *f.dimensions,
		Timeout: *f.timeout})
	if err != nil {
		return nil, usageError(err)
	}
	if log != nil {
		log.Info("embedder configured", "url", redactedURL(*f.url), "model", *f.model, "name", emb.Name(), "api_key", key != "")
	}
	return []engine.Option{engine.WithEmbedder(emb)}, nil
}

// mismatchHint adds to an *engine.EmbedderMismatchError how to name the collection's embedder.
func mismatchHint(err error) error {
	if errors.Is(err, engine.ErrEmbedderMismatch) {
		return fmt.Errorf("%w (choose the embedder with --embedder-url and --embedder-model, or LOOM_EMBEDDER_URL and LOOM_EMBEDDER_MODEL; none is the offline lexical embedder)", err)
	}
	return err
}
