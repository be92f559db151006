package server_test

import (
	"encoding/json"
	"io"
	"net/http"
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

// TestAPI_CacheReport: a stored session's assemblies over HTTP say how much of the prompt the previous
// one shares and what changed first; another tenant's session of the same name starts afresh; /metrics
// counts the breaks and the shared tokens; and the OpenAPI document describes the field.
func TestAPI_CacheReport(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, newMemory(), server.Limits{})
	ts.must("POST", "/v1/sessions/s/messages", keyAcme, map[string]any{"role": "user", "content": "Hello."}, 201)
	body := func(instructions string) map[string]any {
		return map[string]any{"model": "gpt-4o", "session": "s", "instructions": instructions, "message": "Where is my train?"}
	}
	cache := func(res map[string]any) map[string]any {
		c, _ := res["cache"].(map[string]any)
		return c
	}
	if c := cache(ts.must("POST", "/v1/assemble", keyAcme, body("Be brief."), 200)); c["reason"] != "first_assembly" {
		t.Fatalf("first: %v", c)
	}
	if c := cache(ts.must("POST", "/v1/assemble", keyAcme, body("Be brief."), 200)); c["region"] != nil || c["shared_tokens"].(float64) <= 0 {
		t.Fatalf("same prompt: %v", c)
	}
	if c := cache(ts.must("POST", "/v1/assemble", keyAcme, body("Be kind."), 200)); c["region"] != "instructions" ||
		c["reason"] != "instructions_edited" || c["shared_tokens"] != 0.0 {
		t.Fatalf("instructions edited: %v", c)
	}
	ts.must("POST", "/v1/sessions/s/messages", keyGlobex, map[string]any{"role": "user", "content": "Hello."}, 201)
	if c := cache(ts.must("POST", "/v1/assemble", keyGlobex, body("Be kind."), 200)); c["reason"] != "first_assembly" {
		t.Fatalf("another tenant's session: %v", c)
	}
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`loom_cache_breaks_total{region="instructions"} 1`, `loom_cache_breaks_total{region="first_assembly"} 2`,
		"loom_prefix_tokens_shared_count 4", `loom_cache_state_writes_total{result="failed"} 0`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Properties map[string]any `json:"properties"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(server.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	props := doc.Components.Schemas["AssembleResult"].Properties["cache"].Properties
	for _, f := range []string{"shared_tokens", "region", "reason"} {
		if _, ok := props[f]; !ok {
			t.Errorf("AssembleResult.cache has no %s", f)
		}
	}
}
