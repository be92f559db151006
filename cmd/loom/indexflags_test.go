package main

import (
	"slices"
	"testing"

	"github.com/context-loom/loom/collection"
)

// TestByteSize_Units: --index-memory takes bytes, or a number with a decimal or binary unit in any case;
// anything else is refused.
func TestByteSize_Units(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"1048576", 1 << 20, true},
		{"512MiB", 512 << 20, true},
		{"512 mib", 512 << 20, true},
		{"2GB", 2_000_000_000, true},
		{"1.5GiB", 3 << 29, true},
		{"64kb", 64_000, true},
		{"10B", 10, true},
		{"", 0, false},
		{"MiB", 0, false},
		{"-1", 0, false},
		{"12 parsecs", 0, false},
		{"1e3", 0, false},
		{"99999999999TiB", 0, false},
	} {
		var b byteSize
		err := b.Set(tt.in)
		if (err == nil) != tt.ok || tt.ok && int64(b) != tt.want {
			t.Errorf("Set(%q) = %d, %v; want %d, ok %v", tt.in, b, err, tt.want, tt.ok)
		}
	}
}

// TestParseWarm: --warm-indexes names TENANT/COLLECTION pairs, a collection alone being the default
// tenant's; an empty side is refused.
func TestParseWarm(t *testing.T) {
	t.Parallel()
	got, err := parseWarm(" acme/manual, acme/faq ,notes,,")
	want := []collection.Ref{{Tenant: "acme", ID: "manual"}, {Tenant: "acme", ID: "faq"}, {Tenant: "default", ID: "notes"}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("parseWarm = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"acme/", "/manual"} {
		if _, err := parseWarm(bad); err == nil {
			t.Errorf("parseWarm(%q) accepted", bad)
		}
	}
	if got, err := parseWarm(""); err != nil || len(got) != 0 {
		t.Errorf("parseWarm(\"\") = %v, %v", got, err)
	}
}
