package conn

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// URL is what a store URL says: the settings of a Conn, and the key layout's prefix and name.
type URL struct {
	Settings
	Prefix string // "" if not given
	Layout string // "" if not given, else "native" or "cookbook"
}

// Layouts a URL may name.
const (
	LayoutNative   = "native"
	LayoutCookbook = "cookbook"
)

// ParseURL parses a store URL, whose syntax package valkey's ParseURL documents. Errors wrap ErrBadOptions
// and never include the password.
func ParseURL(raw string) (URL, error) {
	var opts URL
	bad := func(format string, args ...any) (URL, error) {
		return URL{}, fmt.Errorf("%w: store URL: "+format, append([]any{ErrBadOptions}, args...)...)
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if !strings.Contains(raw, "@") && errors.As(err, &ue) {
			return bad("%v", ue.Err)
		}
		return bad("cannot be parsed") // its text would show the password
	}
	switch u.Scheme {
	case "valkey", "redis":
	case "valkeys", "rediss":
		opts.Client.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: u.Hostname()}
	case "":
		return bad("no scheme (want valkey://, valkeys://, redis:// or rediss://)")
	default:
		return bad("scheme %q (want valkey://, valkeys://, redis:// or rediss://)", u.Scheme)
	}
	if u.Opaque != "" {
		return bad("want %s://host", u.Scheme)
	}
	addr, err := hostPort(u.Host)
	if err != nil {
		return bad("%v", err)
	}
	opts.Client.InitAddress = []string{addr}
	if u.User != nil {
		opts.Client.Username = u.User.Username()
		opts.Client.Password, _ = u.User.Password()
	}
	switch p := strings.TrimPrefix(u.Path, "/"); {
	case p == "":
	case strings.Contains(p, "/"):
		return bad("path %q (want /<db number>)", u.Path)
	default:
		db, err := strconv.Atoi(p)
		if err != nil || db < 0 {
			return bad("database %q is not a number", p)
		}
		opts.Client.SelectDB = db
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return bad("bad query: %v", err)
	}
	duration := func(name string) (time.Duration, error) {
		d, err := time.ParseDuration(q.Get(name))
		if err != nil || d < 0 {
			return 0, fmt.Errorf("%s=%q is not a duration", name, q.Get(name))
		}
		return d, nil
	}
	flag := func(name string) (bool, error) {
		switch q.Get(name) {
		case "1", "true", "yes", "":
			return true, nil
		case "0", "false", "no":
			return false, nil
		}
		return false, fmt.Errorf("%s=%q is not 1 or 0", name, q.Get(name))
	}
	for name := range q {
		var err error
		switch name {
		case "addr":
			for _, a := range q[name] {
				a, err2 := hostPort(a)
				if err2 != nil {
					return bad("addr: %v", err2)
				}
				opts.Client.InitAddress = append(opts.Client.InitAddress, a)
			}
		case "cluster":
			var on bool
			if on, err = flag(name); err == nil {
				opts.Client.ForceSingleClient = !on
			}
		case "sentinel":
			opts.Client.Sentinel.MasterSet = q.Get(name)
			if opts.Client.Sentinel.MasterSet == "" {
				err = errors.New("sentinel= needs the master set's name")
			}
		case "timeout":
			opts.Timeout, err = duration(name)
		case "prefix":
			opts.Prefix = q.Get(name)
		case "layout":
			opts.Layout = q.Get(name)
			if opts.Layout != LayoutNative && opts.Layout != LayoutCookbook {
				err = fmt.Errorf("layout=%q (known: native, cookbook)", q.Get(name))
			}
		case "ttl":
			opts.SessionTTL, err = duration(name)
		case "cache_agents":
			opts.CacheAgents, err = duration(name)
		case "protocol":
			if p := q.Get(name); p != "2" && p != "3" {
				err = fmt.Errorf("protocol=%q (known: 2, 3)", p)
			}
			opts.Client.AlwaysRESP2 = q.Get(name) == "2"
		case "skip_verify":
			var skip bool
			if skip, err = flag(name); err == nil && skip {
				if opts.Client.TLSConfig == nil {
					err = errors.New("skip_verify needs valkeys:// or rediss://")
				} else {
					opts.Client.TLSConfig.InsecureSkipVerify = true
				}
			}
		case "client_name":
			opts.Client.ClientName = q.Get(name)
		default:
			err = fmt.Errorf("unknown option %q (known: addr, cluster, sentinel, timeout, prefix, layout, ttl, cache_agents, protocol, skip_verify, client_name)", name)
		}
		if err != nil {
			return bad("%v", err)
		}
	}
	if q.Has("cluster") && !opts.Client.ForceSingleClient && opts.Client.Sentinel.MasterSet != "" {
		return bad("cluster=1 and sentinel= exclude each other")
	}
	return opts, nil
}

// hostPort checks host[:port] and adds the default port.
func hostPort(hp string) (string, error) {
	if hp == "" {
		return "", errors.New("no host")
	}
	host, port := hp, "6379"
	if h, p, err := net.SplitHostPort(hp); err == nil {
		host, port = h, p
	} else if strings.HasPrefix(hp, "[") && strings.HasSuffix(hp, "]") {
		host = hp[1 : len(hp)-1]
	} else if strings.Count(hp, ":") == 1 || strings.HasPrefix(hp, "[") {
		return "", fmt.Errorf("bad address %q", hp)
	}
	if host == "" {
		return "", errors.New("no host")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("port %q is not a port number", port)
	}
	return net.JoinHostPort(host, port), nil
}
