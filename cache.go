package loom

import "fmt"

// The values of a request's or an agent's cache_breakpoints and cache_ttl, for the Messages API's
// cache_control breakpoints that the anthropic format places. CacheTTL1h5m is an hour on the breakpoints
// of the stable prefix (the tools' and the system prompt's), which change only when the agent does, and
// five minutes on the messages', which a conversation rewrites every turn: an hour's writes cost more
// (twice the input price, against 1.25 times for five minutes), and are worth it only where they are
// read an hour long.
const (
	CacheBreakpointsAuto = "auto"
	CacheBreakpointsOff  = "off"
	CacheTTL5m           = "5m"
	CacheTTL1h           = "1h"
	CacheTTL1h5m         = "1h+5m"
)

// CheckCacheOptions returns an error wrapping ErrInvalid unless breakpoints is "", "auto" or "off" and
// ttl is "", "5m", "1h" or "1h+5m", and not a TTL with breakpoints "off".
func CheckCacheOptions(breakpoints, ttl string) error {
	switch breakpoints {
	case "", CacheBreakpointsAuto, CacheBreakpointsOff:
	default:
		return NewError(ErrInvalid, fmt.Sprintf("loom: cache_breakpoints %q (known: auto, off)", breakpoints))
	}
	switch ttl {
	case "":
	case CacheTTL5m, CacheTTL1h, CacheTTL1h5m:
		if breakpoints == CacheBreakpointsOff {
			return NewError(ErrInvalid, fmt.Sprintf("loom: cache_ttl %q with cache_breakpoints \"off\"", ttl))
		}
	default:
		return NewError(ErrInvalid, fmt.Sprintf("loom: cache_ttl %q (known: 5m, 1h, 1h+5m)", ttl))
	}
	return nil
}
