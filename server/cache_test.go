package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/context-loom/loom/server"
)

// TestAPI_CacheBreakpoints: an anthropic assembly over HTTP carries Loom's cache breakpoints, with the
// TTL asked, the system prompt then also as system_blocks; cache_breakpoints "off" carries none; a bad
// value is a 400 that names the field; and the OpenAPI document describes both fields.
func TestAPI_CacheBreakpoints(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, newMemory(), server.Limits{})
	req := func(extra map[string]any) map[string]any {
		body := map[string]any{"model": "claude-sonnet-4-5", "format": "anthropic",
			"instructions": strings.Repeat("Give temperatures in Celsius. ", 300), "message": "Hi."}
		for k, v := range extra {
			body[k] = v
		}
		return body
	}
	res := ts.must("POST", "/v1/assemble", keyAcme, req(map[string]any{"cache_ttl": "1h"}), 200)
	if got := jsonString(res); strings.Count(got, `"cache_control":{"ttl":"1h","type":"ephemeral"}`)+strings.Count(got, `"cache_control":{"type":"ephemeral","ttl":"1h"}`) != 2 || res["system_blocks"] == nil {
		t.Errorf("want two breakpoints of 1h and system blocks: %s", got)
	}
	// An hour on the system prompt, five minutes on the message's breakpoint.
	mixed := ts.must("POST", "/v1/assemble", keyAcme, req(map[string]any{"cache_ttl": "1h+5m"}), 200)
	if got := jsonString(mixed); strings.Count(got, `"ttl":"1h"`) != 1 || strings.Count(got, `"cache_control":{"type":"ephemeral"}`) != 1 {
		t.Errorf("1h+5m: want one breakpoint of 1h and one of 5m: %s", got)
	}
	off := ts.must("POST", "/v1/assemble", keyAcme, req(map[string]any{"cache_breakpoints": "off"}), 200)
	if got := jsonString(off); strings.Contains(got, "cache_control") || off["system_blocks"] != nil {
		t.Errorf("off: %s", got)
	}
	for field, bad := range map[string]any{"cache_breakpoints": "always", "cache_ttl": "10m"} {
		code, out, _ := ts.call("POST", "/v1/assemble", keyAcme, req(map[string]any{field: bad}))
		if code != 400 || !strings.Contains(jsonString(out), field) {
			t.Errorf("%s %v: %d %v, want 400 naming it", field, bad, code, out)
		}
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum []string `json:"enum"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(server.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	props := doc.Components.Schemas["AssembleRequest"].Properties
	if got := strings.Join(props["cache_breakpoints"].Enum, " ") + "|" + strings.Join(props["cache_ttl"].Enum, " "); got != "auto off|5m 1h 1h+5m" {
		t.Errorf("the OpenAPI document's cache fields: %s", got)
	}
	if _, ok := doc.Components.Schemas["AssembleResult"].Properties["system_blocks"]; !ok {
		t.Error("AssembleResult has no system_blocks")
	}
}
