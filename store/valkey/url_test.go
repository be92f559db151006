package valkey_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/context-loom/loom/store/valkey"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url   string
		check func(o valkey.Options) bool
	}{
		{"valkey://localhost", func(o valkey.Options) bool {
			return slices.Equal(o.Client.InitAddress, []string{"localhost:6379"}) && o.Client.TLSConfig == nil && o.Client.SelectDB == 0
		}},
		{"redis://user:s3cret@cache.internal:6380/2", func(o valkey.Options) bool {
			return o.Client.InitAddress[0] == "cache.internal:6380" && o.Client.Username == "user" && o.Client.Password == "s3cret" && o.Client.SelectDB == 2
		}},
		{"valkey://:pw@h/", func(o valkey.Options) bool { return o.Client.Username == "" && o.Client.Password == "pw" }},
		{"valkeys://h:7000", func(o valkey.Options) bool {
			return o.Client.TLSConfig != nil && o.Client.TLSConfig.ServerName == "h" && !o.Client.TLSConfig.InsecureSkipVerify
		}},
		{"rediss://h?skip_verify=1", func(o valkey.Options) bool { return o.Client.TLSConfig.InsecureSkipVerify }},
		{"valkey://[::1]:7000", func(o valkey.Options) bool { return o.Client.InitAddress[0] == "[::1]:7000" }},
		{"valkey://n1:7000?addr=n2:7001&addr=n3&cluster=1", func(o valkey.Options) bool {
			return slices.Equal(o.Client.InitAddress, []string{"n1:7000", "n2:7001", "n3:6379"}) && !o.Client.ForceSingleClient
		}},
		{"valkey://h?cluster=0", func(o valkey.Options) bool { return o.Client.ForceSingleClient }},
		{"valkey://s1:26379?addr=s2:26379&sentinel=mymaster", func(o valkey.Options) bool {
			return o.Client.Sentinel.MasterSet == "mymaster" && len(o.Client.InitAddress) == 2
		}},
		{"valkey://h?timeout=500ms&prefix=app&ttl=30m&cache_agents=1m&protocol=2&client_name=loom", func(o valkey.Options) bool {
			return o.Timeout == 500*time.Millisecond && o.Prefix == "app" && o.SessionTTL == 30*time.Minute &&
				o.CacheAgents == time.Minute && o.Client.AlwaysRESP2 && o.Client.ClientName == "loom"
		}},
		{"valkey://h?layout=native", func(o valkey.Options) bool { return o.Prefix == "" }},
	} {
		o, err := valkey.ParseURL(tc.url)
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tc.url, err)
			continue
		}
		if !tc.check(o) {
			t.Errorf("ParseURL(%q) = %+v", tc.url, o)
		}
	}
}

func TestParseURL_BadURLs(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		"",
		"localhost:6379",
		"http://h",
		"sqlite:loom.db",
		"valkey://",
		"valkey://:6379",
		"valkey://h:notaport",
		"valkey://u:s3cret@h:notaport",
		"valkey://u:s3cret@h:99999",
		"valkey://u:s3cret@h:0",
		"valkey://h/db1",
		"valkey://u:s3cret@h/-1",
		"valkey://h/1/2",
		"valkey://u:s3cret@h?bogus=1",
		"valkey://h?timeout=soon",
		"valkey://h?timeout=-1s",
		"valkey://h?layout=flat",
		"valkey://h?layout=cookbook", // package cookbook's
		"valkey://h?cluster=maybe",
		"valkey://h?sentinel=",
		"valkey://h?cluster=1&sentinel=m",
		"valkey://h?skip_verify=1",
		"valkey://h?protocol=4",
		"valkey://h?addr=",
		"valkey://u:s3cret@h?addr=x:y",
		"valkey://u:s3cret@h%zz",
		"valkey://u:s3cret@[::1",
	} {
		_, err := valkey.ParseURL(raw)
		if !errors.Is(err, valkey.ErrBadOptions) {
			t.Errorf("ParseURL(%q): %v, want ErrBadOptions", raw, err)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseURL(%q): the error shows the password: %v", raw, err)
		}
	}
}

// FuzzParseURL_NeverShowsPassword: whatever follows the userinfo, an error never shows the password.
func FuzzParseURL_NeverShowsPassword(f *testing.F) {
	for _, rest := range []string{"h:1/0", "h:x", "h?x=1", "[::1", "h%zz", "h/a/b", "h?timeout=x"} {
		f.Add("secret", rest)
	}
	f.Fuzz(func(t *testing.T, password, rest string) {
		// Letters g-z only: quoting may turn other bytes into escapes of hex digits that spell the password.
		if len(password) < 4 || strings.Contains(rest, password) || strings.ContainsFunc(password, func(r rune) bool {
			return r < 'g' || r > 'z'
		}) {
			return
		}
		raw := "valkey://user:" + password + "@" + rest
		if _, err := valkey.ParseURL(raw); err != nil && strings.Contains(err.Error(), password) {
			t.Fatalf("ParseURL(%q): %v", raw, err)
		}
	})
}
