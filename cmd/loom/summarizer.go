package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/summarize"
)

const summarizerUsage = `
Summarizer: --summarizer-url URL and --summarizer-model NAME (or LOOM_SUMMARIZER_URL and
LOOM_SUMMARIZER_MODEL) name a Chat Completions API (OpenAI https://api.openai.com/v1, Ollama
http://localhost:11434/v1, vLLM, LM Studio) and its model, which summarize the turns that sessions cut;
the key, if it needs one, is read from LOOM_SUMMARIZER_API_KEY only (never a flag, never logged).
--summarizer-window is the model's window in tokens (default: the tokenizer's registry's, else 8192), and
--summarizer-timeout bounds one request. An agent's policy.compaction sets when and how its sessions are
compacted (trigger_tokens or trigger_share of the budget, keep_tokens verbatim, instructions,
max_summary_tokens). Without a summarizer nothing is summarized; assemblies still use a summary stored.
`

// summarizerFlags choose a summarizer.
type summarizerFlags struct {
	url, model *string
	window     *int
	timeout    *time.Duration
}

func addSummarizerFlags(fs *flag.FlagSet) summarizerFlags {
	return summarizerFlags{
		url:     fs.String("summarizer-url", os.Getenv("LOOM_SUMMARIZER_URL"), "the summarizer's Chat Completions base `URL` (default $LOOM_SUMMARIZER_URL)"),
		model:   fs.String("summarizer-model", os.Getenv("LOOM_SUMMARIZER_MODEL"), "the summarizer's `model` (default $LOOM_SUMMARIZER_MODEL)"),
		window:  fs.Int("summarizer-window", 0, "the summarizer model's window in `tokens` (0: the registry's, else 8192)"),
		timeout: fs.Duration("summarizer-timeout", summarize.DefaultTimeout, "the longest one summarizer request may take"),
	}
}

// option returns the engine option of the summarizer the flags name, nil when they name none, and a
// usage error when they name half of one.
func (f summarizerFlags) option(log *slog.Logger) (engine.Option, error) {
	if ok, err := modelFlags("summarizer", *f.url, *f.model); !ok {
		return nil, err
	}
	key := os.Getenv("LOOM_SUMMARIZER_API_KEY")
	c, err := summarize.NewOpenAI(summarize.OpenAIConfig{BaseURL: *f.url, Model: *f.model, APIKey: key, Timeout: *f.timeout})
	if err != nil {
		return nil, usageError(err)
	}
	if log != nil {
		log.Info("summarizer configured", "url", redactedURL(*f.url), "model", *f.model, "api_key", key != "")
	}
	return engine.WithSummarizer(c, engine.SummarizerConfig{Model: *f.model, Window: *f.window}), nil
}

// sessionCompact compacts a session now and prints the result and the summary record.
func sessionCompact(ctx context.Context, name string, args []string, s streams) error {
	fs, help := newFlagSet(name, sessionUsage, s)
	sf := addStoreFlags(fs)
	sum := addSummarizerFlags(fs)
	session := fs.String("session", "", "the session `id`")
	agent := fs.String("agent", "", "the `agent` whose compaction policy applies (none: the defaults)")
	force := fs.Bool("force", false, "compact below the policy's trigger too, and retry at once after a failure")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if err := required(fs, "session"); err != nil {
		return err
	}
	opt, err := sum.option(nil)
	if err != nil {
		return err
	}
	if opt == nil {
		return usageError(fmt.Errorf("%s: no summarizer: give --summarizer-url and --summarizer-model (or LOOM_SUMMARIZER_URL and LOOM_SUMMARIZER_MODEL)", name))
	}
	return sf.with(ctx, name, func(st *store.Store) error {
		eng, err := engine.New(st, opt)
		if err != nil {
			return err
		}
		defer eng.Close()
		res, err := eng.Compact(loom.WithTenant(ctx, *sf.tenant), engine.CompactRequest{Session: *session, Agent: *agent, Force: *force})
		if res.Result != "" {
			if werr := writeJSON(s.stdout, res); werr != nil {
				return werr
			}
		}
		return err
	})
}

// sessionSummary prints the session's summary record.
func sessionSummary(ctx context.Context, name string, args []string, s streams) error {
	fs, help := newFlagSet(name, sessionUsage, s)
	sf := addStoreFlags(fs)
	session := fs.String("session", "", "the session `id`")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if err := required(fs, "session"); err != nil {
		return err
	}
	return sf.with(ctx, name, func(st *store.Store) error {
		sum, err := st.Summary(ctx, *sf.tenant, *session)
		if err != nil {
			return err
		}
		return writeJSON(s.stdout, sum)
	})
}

// modelFlags says whether --KIND-url and --KIND-model name a model API: both set (true), neither (false,
// no error), or half of one (a usage error naming the other flag).
func modelFlags(kind, url, model string) (bool, error) {
	switch {
	case url == "" && model == "":
		return false, nil
	case url == "":
		return false, usageError(fmt.Errorf("--%s-model needs --%s-url", kind, kind))
	case model == "":
		return false, usageError(fmt.Errorf("--%s-url needs --%s-model", kind, kind))
	}
	return true, nil
}

// redactedURL is raw with any password in it replaced, for a log.
func redactedURL(raw string) string {
	u, _ := url.Parse(raw) // nil for a URL that does not parse, whose Redacted is ""
	return u.Redacted()
}
