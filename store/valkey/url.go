package valkey

import (
	"fmt"

	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/valkey/internal/conn"
)

// ParseURL parses a store URL into Options:
//
//	valkey://[user:password@]host[:port][/db][?option=value&...]
//
// valkeys:// connects with TLS; redis:// and rediss:// are the same as valkey:// and valkeys://. The port
// defaults to 6379 and the database to 0. Options:
//
//	addr=host:port       another server to start from (repeatable): more cluster nodes, or more sentinels
//	cluster=1|0          1: the servers are cluster nodes (the default is to ask the server); 0: never use a
//	                     cluster client, even if the server is a cluster node
//	sentinel=<master>    the servers are Sentinels of the master set <master>; the credentials are the
//	                     master's
//	timeout=<duration>   Options.Timeout, such as 500ms
//	prefix=<prefix>      Options.Prefix
//	layout=native        this package's key layout (the default); layout=cookbook is the Valkey
//	                     cookbook's, which package cookbook opens (and its ParseURL parses)
//	ttl=<duration>       Options.SessionTTL
//	cache_agents=<duration>  Options.CacheAgents
//	protocol=2           speak RESP2 only
//	skip_verify=1        valkeys:// only: do not verify the server's certificate
//	client_name=<name>   the connection's CLIENT SETNAME
//
// Errors wrap ErrBadOptions and never include the password.
func ParseURL(raw string) (Options, error) {
	u, err := conn.ParseURL(raw)
	if err != nil {
		return Options{}, err
	}
	if u.Layout == conn.LayoutCookbook {
		return Options{}, fmt.Errorf("%w: store URL: layout=cookbook is the Valkey cookbook's key layout, which package cookbook opens", ErrBadOptions)
	}
	return Options{Options: store.Options{SessionTTL: u.SessionTTL}, Client: u.Client, Timeout: u.Timeout, Prefix: u.Prefix,
		CacheAgents: u.CacheAgents}, nil
}
