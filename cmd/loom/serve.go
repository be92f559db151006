package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/server"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/storeurl"
)

const serveUsage = `Usage: loom serve [--addr HOST:PORT] [--store URL] [--keys FILE] [--summarizer-url URL --summarizer-model NAME]
                  [--embedder-url URL --embedder-model NAME] [flags]

Serve runs Loom's HTTP API (GET /openapi.json describes it) until SIGINT or SIGTERM, then stops accepting
connections, finishes the requests in flight (up to --shutdown-timeout) and closes the store.

Search indexes: a collection's in-memory index is built on its first retrieval, and kept current after.
--warm-indexes builds the ones it names at start instead, in the background (GET /readyz answers 503 until
they are built): "acme/manual,acme/faq" (TENANT/COLLECTION, by id or name; a name alone is the tenant
"default"'s). --index-memory caps what the loaded indexes take, by their estimate ("512MiB", "2GB", or
bytes; 0, the default, is no cap): past it, the indexes no request is using are evicted, least recently
used first, and built again on their next use. /metrics shows loom_index_memory_bytes.

API keys: LOOM_API_KEYS="KEY1=TENANT1,KEY2=TENANT2" (each pair split at its last "=", so a key may end in
base64 "=" padding: "c2VjcmV0IQ===acme" is the key "c2VjcmV0IQ==" for acme), or --keys FILE with one
"KEY TENANT" pair a line (# starts a comment). A tenant may not contain "=" or white space. LOOM_API_KEYS set but
empty, or a keys file with no key, is an error, never a server without keys. Clients send
"Authorization: Bearer KEY" and see only their tenant's collections, agents, users and sessions.

With no keys, every request is the tenant "default", the server refuses to listen on anything but a
loopback address, and it answers only requests whose Host is a loopback name or address (localhost,
127.0.0.0/8, [::1], with any port): a web page that rebinds its own name to 127.0.0.1 gets 421. With or
without keys, a request with a body must be Content-Type: application/json (415 otherwise), so that a web
page cannot post a form to the API, and no CORS header is ever sent.

MCP: POST /mcp serves Loom's MCP server (the tools and resources of loom mcp) over streamable HTTP,
statelessly, behind the same keys and rules: an MCP client with a key sees only its tenant's state.

The inspector: GET / (or /inspect) in a browser shows a session's recent assemblies: the window by region
against the budget and the model's window, every item kept or dropped and why, the rendered messages, the
cacheable prefix, the compaction summary, and a form that runs an assembly again with another budget or
format. The page asks for an API key and keeps it for the tab only. Each assembly of a stored session is
recorded in the store (so any server of a cluster shows it): the newest --assemblies-kept of each session
(default 20), each at most --assembly-max-bytes (default 256KiB; a larger one is kept without its
rendered messages). --record-assemblies=false records none. GET /v1/sessions/SESSION/assemblies lists
them, .../assemblies/SEQ returns one.

Provider counts: with LOOM_ANTHROPIC_API_KEY or LOOM_GEMINI_API_KEY set, POST /v1/tokens/count asks
Anthropic's /v1/messages/count_tokens or Gemini's countTokens for the exact count of a request to a model
without a public tokenizer (LOOM_ANTHROPIC_BASE_URL and LOOM_GEMINI_BASE_URL change where), and answers
with Loom's estimate and the reason if that fails. Assemblies never ask.

Every flag can also be set by an environment variable: LOOM_ and the flag's name in capitals with _ for -
(--max-body-bytes is LOOM_MAX_BODY_BYTES). A flag on the command line wins.
` + summarizerUsage + embedderUsage + storeFlagsUsage

// serveConfig is what loom serve's flags and environment say.
type serveConfig struct {
	addr, storeURL, layout, keysFile, logFormat         string
	maxBody                                             int64
	maxMessage, maxItems                                int
	requestTimeout, sourceTimeout, shutdownTimeout, ttl time.Duration
	storeWait                                           time.Duration
	warm                                                string
	indexMemory                                         byteSize
	recordAssemblies                                    bool
	assembliesKept                                      int
	assemblyMaxBytes                                    byteSize
	summarizer                                          summarizerFlags
	embedder                                            embedderFlags
}

func runServe(ctx context.Context, args []string, s streams) error {
	fs, help := newFlagSet("serve", serveUsage, s)
	var c serveConfig
	fs.StringVar(&c.addr, "addr", "127.0.0.1:7070", "listen on `HOST:PORT`")
	fs.StringVar(&c.storeURL, "store", defaultStore, "the store `URL`")
	fs.StringVar(&c.layout, "layout", "", "the Valkey key `layout`: native (the default, or the URL's layout=) or cookbook")
	fs.StringVar(&c.keysFile, "keys", "", "read API keys from `FILE` (lines of KEY TENANT)")
	fs.StringVar(&c.logFormat, "log-format", "text", "log as `text` or json")
	fs.Int64Var(&c.maxBody, "max-body-bytes", server.DefaultMaxBodyBytes, "the largest request body, in `bytes`")
	fs.IntVar(&c.maxMessage, "max-message-bytes", server.DefaultMaxMessageBytes, "the largest text in a request (a message, fact, query, text to count...; not a document), in `bytes`")
	fs.IntVar(&c.maxItems, "max-items", server.DefaultMaxItems, "the most items (messages, knowledge, ...) in one request")
	fs.DurationVar(&c.requestTimeout, "request-timeout", server.DefaultRequestTimeout, "the longest a request may take")
	fs.DurationVar(&c.sourceTimeout, "source-timeout", engine.DefaultSourceTimeout, "how long an assembly waits for the store")
	fs.DurationVar(&c.shutdownTimeout, "shutdown-timeout", 15*time.Second, "how long to wait for requests in flight at shutdown")
	fs.DurationVar(&c.ttl, "session-ttl", 0, "expire sessions this long after their last write (0: never)")
	fs.DurationVar(&c.storeWait, "store-wait", 30*time.Second, "at start, how long to keep trying a store that cannot be reached")
	fs.StringVar(&c.warm, "warm-indexes", "", "build the search indexes of these collections at start (`TENANT/COLLECTION,...`)")
	fs.Var(&c.indexMemory, "index-memory", "cap the loaded search indexes' memory at `SIZE` (512MiB, 2GB, bytes; 0: no cap)")
	fs.BoolVar(&c.recordAssemblies, "record-assemblies", true, "record each assembly of a stored session for the inspector (GET /)")
	fs.IntVar(&c.assembliesKept, "assemblies-kept", store.DefaultAssembliesKept, "how many of a session's newest assemblies to keep recorded")
	c.assemblyMaxBytes = store.DefaultMaxAssemblyBytes
	fs.Var(&c.assemblyMaxBytes, "assembly-max-bytes", "the largest assembly record, `SIZE` (a larger one goes without its rendered messages)")
	c.summarizer = addSummarizerFlags(fs)
	c.embedder = addEmbedderFlags(fs)
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fmt.Errorf("serve: unexpected arguments %q", fs.Args()))
	}
	if err := flagsFromEnv(fs); err != nil {
		return usageError(fmt.Errorf("serve: %w", err))
	}
	if c.assembliesKept < 1 || c.assemblyMaxBytes < 1 {
		return usageError(errors.New("serve: --assemblies-kept and --assembly-max-bytes must be at least 1 (turn recording off with --record-assemblies=false)"))
	}
	env, envSet := os.LookupEnv("LOOM_API_KEYS")
	keys, err := loadKeys(env, envSet, c.keysFile)
	if err != nil {
		return usageError(fmt.Errorf("serve: %w", err))
	}
	provider, err := providerFromEnv(os.Getenv)
	if err != nil {
		return usageError(fmt.Errorf("serve: %w", err))
	}
	warm, err := parseWarm(c.warm)
	if err != nil {
		return usageError(fmt.Errorf("serve: --warm-indexes: %w", err))
	}
	var handler slog.Handler
	switch c.logFormat {
	case "text":
		handler = slog.NewTextHandler(s.stderr, nil)
	case "json":
		handler = slog.NewJSONHandler(s.stderr, nil)
	default:
		return usageError(fmt.Errorf("serve: --log-format %q (want text or json)", c.logFormat))
	}
	log := slog.New(handler)
	if len(keys) == 0 {
		if err := requireLoopback(c.addr); err != nil {
			return usageError(fmt.Errorf("serve: %w", err))
		}
		log.Warn("no API keys configured: every request is the tenant \"default\"; listening on loopback only", "addr", c.addr)
	}

	sopts := storeurl.Options{Layout: c.layout, Logger: log, Store: store.Options{SessionTTL: c.ttl,
		Limits: store.Limits{MaxValueBytes: c.maxMessage, MaxBatch: c.maxItems}}}
	st, err := storeurl.Open(ctx, c.storeURL, sopts)
	// A store server that is down at start (restarting with us, say) gets --store-wait to come up.
	for deadline := time.Now().Add(c.storeWait); errors.Is(err, store.ErrUnavailable) && time.Now().Before(deadline); {
		log.Warn("the store cannot be reached; trying again", "store", storeKind(c.storeURL), "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
		st, err = storeurl.Open(ctx, c.storeURL, sopts)
	}
	if errors.Is(err, storeurl.ErrBadURL) {
		return usageError(fmt.Errorf("serve: %w", err))
	}
	if err != nil {
		return fmt.Errorf("serve: open the store: %w", err)
	}
	defer st.Close()
	opts := []engine.Option{engine.WithSourceTimeout(c.sourceTimeout), engine.WithIndexMemory(int64(c.indexMemory)),
		engine.WithChunkers(newChunkers())}
	opts = append(opts, engine.WithAssemblyRecords(engine.RecordOptions{Off: !c.recordAssemblies,
		Keep: c.assembliesKept, MaxBytes: int(min(int64(c.assemblyMaxBytes), math.MaxInt32))}))
	embOpts, err := c.embedder.options(log)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	opts = append(opts, embOpts...)
	sumOpt, err := c.summarizer.option(log)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if sumOpt != nil {
		if !st.Summaries() {
			log.Warn("the store keeps no summaries (the Valkey cookbook's layout): sessions are not compacted")
		}
		opts = append(opts, sumOpt)
	}
	eng, err := engine.New(st, opts...)
	if err != nil {
		return err
	}
	// The indexes named to warm are built while the server starts listening; /readyz says 503 until they
	// are. On the way out the engine is closed (which ends a build under way) and the warming waited for,
	// before the store is closed.
	var warming atomic.Bool
	warming.Store(len(warm) > 0)
	warmed := make(chan struct{})
	defer func() {
		eng.Close()
		<-warmed
	}()
	go func() {
		defer close(warmed)
		if len(warm) == 0 {
			return
		}
		start := time.Now()
		err := eng.WarmIndexes(ctx, warm...)
		if errors.Is(err, engine.ErrClosed) || ctx.Err() != nil {
			return
		}
		if err != nil {
			log.Warn("some search indexes were not warmed; they are built on their first retrieval", "err", err)
		}
		log.Info("search indexes warmed", "collections", eng.IndexStats().Loaded, "took", time.Since(start).Round(time.Millisecond))
		warming.Store(false)
	}()
	ready := func() error {
		if warming.Load() {
			return errors.New("the search indexes are warming")
		}
		return nil
	}
	srv, err := server.New(server.Config{Engine: eng, Keys: keys, Logger: log, Ready: ready, ProviderCount: provider, Limits: server.Limits{
		MaxBodyBytes: c.maxBody, MaxMessageBytes: c.maxMessage, MaxItems: c.maxItems, RequestTimeout: c.requestTimeout}})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: c.requestTimeout + 10*time.Second,
		IdleTimeout: 2 * time.Minute, ErrorLog: slog.NewLogLogger(handler, slog.LevelWarn)}
	log.Info("listening", "addr", "http://"+ln.Addr().String(), "store", storeKind(c.storeURL), "tenants", len(distinct(keys)))
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing requests in flight")
	sctx, cancel := context.WithTimeout(context.Background(), c.shutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		return fmt.Errorf("serve: shutdown: %w", err)
	}
	if err := st.Close(); err != nil {
		return fmt.Errorf("serve: close the store: %w", err)
	}
	log.Info("stopped")
	return nil
}

// flagsFromEnv sets each flag not given on the command line from LOOM_<NAME>, if set.
func flagsFromEnv(fs *flag.FlagSet) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := "LOOM_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok && !set[f.Name] && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %w", name, v, e)
			}
		}
	})
	return err
}

// loadKeys reads API keys from LOOM_API_KEYS (env, when envSet) and a keys file. LOOM_API_KEYS is
// "KEY=TENANT,KEY=TENANT", each pair split at its last "=" (so a key may end in base64's "=" padding); the
// file has one "KEY TENANT" pair a line, # starting a comment. A tenant named here may not contain "=" or
// white space and must be a valid tenant id. A source that is given but names no key is an error: the
// server would otherwise start without authentication. Errors never print a key.
func loadKeys(env string, envSet bool, file string) (map[string]string, error) {
	keys := map[string]string{}
	add := func(where, key, tenant string) error {
		key, tenant = strings.TrimSpace(key), strings.TrimSpace(tenant)
		switch {
		case key == "":
			return fmt.Errorf("%s: the key is empty", where)
		case tenant == "":
			return fmt.Errorf("%s: the tenant is empty", where)
		case strings.ContainsFunc(tenant, func(r rune) bool { return r == '=' || unicode.IsSpace(r) }):
			return fmt.Errorf("%s: tenant %q: a tenant may not contain \"=\" or white space", where, tenant)
		}
		if err := store.ValidateID(store.Limits{}, "tenant", tenant); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if t, dup := keys[key]; dup && t != tenant {
			return fmt.Errorf("%s: a key is bound to two tenants", where) // never print the key
		}
		keys[key] = tenant
		return nil
	}
	if envSet {
		if strings.TrimSpace(env) == "" {
			return nil, errors.New("LOOM_API_KEYS is set but names no key (want KEY=TENANT,...); unset it to run without keys")
		}
		for i, pair := range strings.Split(env, ",") {
			where := fmt.Sprintf("LOOM_API_KEYS entry %d", i+1)
			// The tenant has no "=", so the last one ends the key, which may hold "=" itself.
			at := strings.LastIndex(pair, "=")
			if at < 0 {
				return nil, fmt.Errorf("%s: want KEY=TENANT", where)
			}
			if err := add(where, pair[:at], pair[at+1:]); err != nil {
				return nil, err
			}
		}
	}
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		found := false
		sc := bufio.NewScanner(io.LimitReader(f, 16<<20))
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			fields := strings.Fields(line)
			if len(fields) != 2 {
				return nil, fmt.Errorf("%s line %d: want KEY TENANT", file, n)
			}
			if err := add(fmt.Sprintf("%s line %d", file, n), fields[0], fields[1]); err != nil {
				return nil, err
			}
			found = true
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if !found {
			return nil, fmt.Errorf("%s names no key (want lines of KEY TENANT); refusing to start without authentication", file)
		}
	}
	return keys, nil
}

// requireLoopback returns an error unless addr's host is a loopback address or localhost.
func requireLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("refusing to listen on %q without API keys: set LOOM_API_KEYS or --keys, or listen on 127.0.0.1", addr)
}

// storeKind names a store URL's kind without its credentials, for the log.
func storeKind(u string) string {
	scheme, _, _ := strings.Cut(u, ":")
	return scheme
}

func distinct(keys map[string]string) map[string]bool {
	out := map[string]bool{}
	for _, t := range keys {
		out[t] = true
	}
	return out
}

// parseWarm parses --warm-indexes: TENANT/COLLECTION pairs separated by commas, a COLLECTION alone being
// the default tenant's.
func parseWarm(list string) ([]collection.Ref, error) {
	var refs []collection.Ref
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		tenant, coll, ok := strings.Cut(item, "/")
		if !ok {
			tenant, coll = loom.DefaultTenant, item
		}
		if tenant == "" || coll == "" {
			return nil, fmt.Errorf("%q: want TENANT/COLLECTION", item)
		}
		refs = append(refs, collection.Ref{Tenant: tenant, ID: coll})
	}
	return refs, nil
}

// byteSize is a flag's size in bytes, given as a number of bytes or with a unit: B, KB, MB, GB, TB (powers
// of 1000) or KiB, MiB, GiB, TiB (powers of 1024), in any case, with or without a space.
type byteSize int64

func (b *byteSize) String() string { return strconv.FormatInt(int64(*b), 10) }

func (b *byteSize) Set(s string) error {
	num := strings.TrimSpace(s)
	unit := strings.TrimLeftFunc(num, func(r rune) bool { return r >= '0' && r <= '9' || r == '.' })
	num = strings.TrimSpace(num[:len(num)-len(unit)])
	mult, ok := map[string]float64{"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}[strings.ToLower(strings.TrimSpace(unit))]
	if !ok || num == "" {
		return fmt.Errorf("size %q: want bytes, or a number with B, KB, MB, GB, KiB, MiB or GiB", s)
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n*mult >= math.MaxInt64 {
		return fmt.Errorf("size %q: want bytes, or a number with B, KB, MB, GB, KiB, MiB or GiB", s)
	}
	*b = byteSize(n * mult)
	return nil
}
