// Package storeurl opens a store from a URL, as the command line and the server name stores:
// "sqlite:PATH", "memory:", "valkey://[user:pass@]host:port[/db]" (or valkeys://, redis://, rediss://).
package storeurl

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/memory"
	"github.com/context-loom/loom/store/sqlite"
	"github.com/context-loom/loom/store/valkey"
	"github.com/context-loom/loom/store/valkey/cookbook"
)

// Layouts of a Valkey store.
const (
	LayoutNative   = "native"   // Loom's own keys (package valkey)
	LayoutCookbook = "cookbook" // the Valkey cookbook's keys (package valkey/cookbook)
)

// ErrBadURL is returned for a URL that names no store Open knows, or a layout the store cannot have.
var ErrBadURL = loom.NewError(loom.ErrInvalid, "storeurl: bad store URL")

// Options are what Open passes to the store besides what the URL says.
type Options struct {
	// Layout is the Valkey key layout: "" or LayoutNative, or LayoutCookbook. Other stores only have
	// the native layout. "" leaves it to the URL's layout= (native when it has none); set both, they must
	// agree.
	Layout string
	// Store are the options every backend takes (TTL, limits). A Valkey URL's ttl= holds when
	// Store.SessionTTL is 0.
	Store store.Options
	// Logger receives what the store has to say as it runs: the Valkey store says how the server persists
	// and warns when it persists nothing or restarted (see valkey.Options.Logger); the SQLite and memory
	// stores say nothing. nil means slog.Default().
	Logger *slog.Logger
}

// Open opens the store rawURL names. It returns an error wrapping ErrBadURL for a URL it cannot use, and the
// backend's error (wrapping store.ErrUnavailable when a server cannot be reached) otherwise.
func Open(ctx context.Context, rawURL string, opts Options) (*store.Store, error) {
	layout := cmp.Or(opts.Layout, LayoutNative)
	if layout != LayoutNative && layout != LayoutCookbook {
		return nil, fmt.Errorf("%w: layout %q (known: native, cookbook)", ErrBadURL, layout)
	}
	scheme, rest, _ := strings.Cut(rawURL, ":")
	switch strings.ToLower(scheme) {
	case "memory":
		if rest != "" {
			return nil, fmt.Errorf("%w: %q: memory: takes nothing after the colon", ErrBadURL, rawURL)
		}
		if layout != LayoutNative {
			return nil, fmt.Errorf("%w: the %s layout is for Valkey stores", ErrBadURL, layout)
		}
		return memory.Open(ctx, memory.Options{Options: opts.Store})
	case "sqlite":
		if layout != LayoutNative {
			return nil, fmt.Errorf("%w: the %s layout is for Valkey stores", ErrBadURL, layout)
		}
		path := strings.TrimPrefix(rest, "//")
		if path == "" {
			return nil, fmt.Errorf("%w: %q names no file (want sqlite:PATH)", ErrBadURL, rawURL)
		}
		return sqlite.Open(ctx, sqlite.Options{Options: opts.Store, Path: path})
	case "valkey", "valkeys", "redis", "rediss":
		// The URL's settings (ttl=, layout=) hold unless opts sets them too: opts' non-zero fields win,
		// and a layout given both ways must agree.
		inURL := urlLayout(rawURL)
		if opts.Layout != "" && inURL != "" && inURL != opts.Layout {
			return nil, fmt.Errorf("%w: the URL says layout=%s and the options say %s", ErrBadURL, inURL, opts.Layout)
		}
		if cmp.Or(opts.Layout, inURL) == LayoutCookbook {
			co, err := cookbook.ParseURL(rawURL)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
			}
			ttl := co.SessionTTL
			co.Options = opts.Store
			if co.SessionTTL == 0 {
				co.SessionTTL = ttl
			}
			co.Logger = opts.Logger
			return cookbook.Open(ctx, co)
		}
		vo, err := valkey.ParseURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrBadURL, err)
		}
		ttl := vo.SessionTTL
		vo.Options = opts.Store
		if vo.SessionTTL == 0 {
			vo.SessionTTL = ttl
		}
		vo.Logger = opts.Logger
		return valkey.Open(ctx, vo)
	}
	return nil, fmt.Errorf("%w: %q (want sqlite:PATH, memory: or valkey://host:port)", ErrBadURL, redact(rawURL))
}

// urlLayout is the layout= of a Valkey URL, "" if it has none (or does not parse: ParseURL then says
// why).
func urlLayout(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.Query().Get("layout")
}

// redact hides a password in a URL, for error messages.
func redact(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	host, path, _ := strings.Cut(rest, "/")
	if at := strings.LastIndex(host, "@"); at >= 0 {
		host = "***@" + host[at+1:]
	}
	if path != "" {
		return scheme + "://" + host + "/" + path
	}
	return scheme + "://" + host
}
