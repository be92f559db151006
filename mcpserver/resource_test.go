package mcpserver

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzResourceID: an id put in a resource URI, escaped, comes back as itself; any other URI gives an id
// that makes the same URI again, or an error, never a panic.
func FuzzResourceID(f *testing.F) {
	for _, s := range []string{"sess_42", "a/b", "a b", "%2F", "..", "ünï", "loom://sessions/x/messages", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s != "" && utf8.ValidString(s) {
			uri := "loom://sessions/" + url.PathEscape(s) + "/messages"
			id, err := resourceID(uri, "sessions", "messages", 1<<20)
			if err != nil || id != s {
				t.Fatalf("%q: %q %v", uri, id, err)
			}
		}
		id, err := resourceID(s, "users", "memory", 1<<20)
		if err != nil {
			return
		}
		if id == "" || !strings.HasPrefix(s, "loom://users/") || !strings.HasSuffix(s, "/memory") {
			t.Fatalf("%q: the id %q", s, id)
		}
		again, err := resourceID("loom://users/"+url.PathEscape(id)+"/memory", "users", "memory", 1<<20)
		if err != nil || again != id {
			t.Fatalf("%q: the id %q does not round-trip: %q %v", s, id, again, err)
		}
	})
}

func TestResourceID_Refuses(t *testing.T) {
	t.Parallel()
	for _, uri := range []string{"loom://users/u/memory/", "loom://users/u/x/memory", "loom://sessions/u/memory",
		"http://users/u/memory", "loom://users/%zz/memory", "loom://users/u/memory#f", "loom:users/u/memory"} {
		if id, err := resourceID(uri, "users", "memory", 1<<20); err == nil {
			t.Errorf("%q: the id %q", uri, id)
		}
	}
	if _, err := resourceID("loom://users/"+strings.Repeat("u", 100)+"/memory", "users", "memory", 64); err == nil {
		t.Error("a URI over the limit")
	}
}
