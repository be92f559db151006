package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
)

// TestNotFound_NamesTheTenant: the tenant comes from the context alone (loom.WithTenant), and an id that
// exists under another tenant is not found with an error that says which tenant looked, so that a caller
// who set the wrong tenant sees why.
func TestNotFound_NamesTheTenant(t *testing.T) {
	t.Parallel()
	st := newMemory()
	acme := loom.WithTenant(t.Context(), "acme")
	globex := loom.WithTenant(t.Context(), "globex")
	if err := st.PutAgent(acme, "acme", store.Agent{ID: "helper", Instructions: "Help."}); err != nil {
		t.Fatal(err)
	}
	eng, c := newCollectionsEngine(t, st)
	if _, err := eng.Assemble(acme, engine.Request{Agent: "helper", Request: assembler.Request{Message: "hi"}}); err != nil {
		t.Fatalf("acme's own agent: %v", err)
	}
	checks := map[string]error{}
	_, checks["agent"] = eng.Assemble(globex, engine.Request{Agent: "helper", Request: assembler.Request{Message: "hi"}})
	_, checks["collection"] = eng.Collection(globex, c.ID)
	_, checks["retrieve"] = eng.Retrieve(globex, "password", engine.WithCollection(c.ID))
	_, checks["store agent"] = st.GetAgent(globex, "globex", "helper")
	checks["delete session"] = st.DeleteSession(globex, "globex", "none")
	for what, err := range checks {
		if !errors.Is(err, loom.ErrNotFound) || !strings.Contains(err.Error(), `tenant "globex"`) {
			t.Errorf("%s under globex: %v, want not found naming tenant \"globex\"", what, err)
		}
	}
}

// TestPromptCacheKey_IsTheTenantsAndTheAgents: the engine derives the prompt cache key from the tenant
// (the context's, which a request cannot name) and the agent: two tenants with the same agent, or two
// agents with the same configuration, never share a key; one agent's turns for one tenant do, and the
// cookbook preset's too.
func TestPromptCacheKey_IsTheTenantsAndTheAgents(t *testing.T) {
	t.Parallel()
	st := newMemory()
	acme := loom.WithTenant(t.Context(), "acme")
	globex := loom.WithTenant(t.Context(), "globex")
	for _, ctx := range []context.Context{acme, globex} {
		for _, id := range []string{"helper", "twin"} {
			if err := st.PutAgent(ctx, loom.Tenant(ctx), store.Agent{ID: id, Instructions: "Help."}); err != nil {
				t.Fatal(err)
			}
		}
	}
	eng, err := testEngine(st)
	if err != nil {
		t.Fatal(err)
	}
	key := func(ctx context.Context, agent, message, preset string) string {
		t.Helper()
		res, err := eng.Assemble(ctx, engine.Request{Agent: agent, Preset: preset, Request: assembler.Request{Message: message, CacheScope: "forged"}})
		if err != nil {
			t.Fatal(err)
		}
		if res.PromptCacheKey == "" {
			t.Fatalf("%s, %s: no prompt cache key", loom.Tenant(ctx), agent)
		}
		return res.PromptCacheKey
	}
	k := key(acme, "helper", "hi", "")
	if got := key(acme, "helper", "another turn", ""); got != k {
		t.Errorf("one agent's two turns: keys %q and %q", k, got)
	}
	if got := key(globex, "helper", "hi", ""); got == k {
		t.Errorf("acme's and globex's helper share the key %q", k)
	}
	if got := key(acme, "twin", "hi", ""); got == k {
		t.Errorf("two agents of one configuration share the key %q", k)
	}
	c := key(acme, "helper", "hi", engine.PresetCookbook)
	if got := key(globex, "helper", "hi", engine.PresetCookbook); got == c {
		t.Errorf("the cookbook preset: acme's and globex's helper share the key %q", c)
	}
}

// TestAssemble_AgentCacheDefaults: an agent's cache_breakpoints and cache_ttl are the defaults of its
// requests, which a request's own override: the agent's "1h+5m" puts an hour on the system prompt and
// five minutes on the message; a request's "5m" or "off" wins; and a request in another format, which
// takes no TTL, is not refused for the agent's.
func TestAssemble_AgentCacheDefaults(t *testing.T) {
	t.Parallel()
	st := newMemory()
	ctx := loom.WithTenant(t.Context(), "acme")
	long := strings.Repeat("Give temperatures in Celsius. ", 300) // past the model's minimum cacheable length
	if err := st.PutAgent(ctx, "acme", store.Agent{ID: "cached", Instructions: long, Model: "claude-sonnet-4-5", CacheTTL: assembler.CacheTTL1h5m}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutAgent(ctx, "acme", store.Agent{ID: "uncached", Instructions: long, Model: "claude-sonnet-4-5", CacheBreakpoints: assembler.CacheBreakpointsOff}); err != nil {
		t.Fatal(err)
	}
	eng, err := testEngine(st)
	if err != nil {
		t.Fatal(err)
	}
	ttls := func(agent string, req assembler.Request) []string {
		t.Helper()
		req.Message = "Hi."
		res, err := eng.Assemble(ctx, engine.Request{Agent: agent, Request: req})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, b := range res.SystemBlocks {
			got = append(got, "system:"+b.CacheControl.TTL)
		}
		for _, m := range res.Messages {
			for _, b := range m.Blocks {
				if b.CacheControl.Type != "" {
					got = append(got, "message:"+b.CacheControl.TTL)
				}
			}
		}
		return got
	}
	anthropic := assembler.Request{Format: assembler.FormatAnthropic}
	for _, tc := range []struct {
		agent string
		req   assembler.Request
		want  string
	}{
		{"cached", anthropic, "system:1h message:"},
		{"cached", assembler.Request{Format: assembler.FormatAnthropic, CacheTTL: assembler.CacheTTL5m}, "system: message:"},
		{"cached", assembler.Request{Format: assembler.FormatAnthropic, CacheBreakpoints: assembler.CacheBreakpointsOff}, ""},
		{"cached", assembler.Request{Format: assembler.FormatOpenAI}, ""},
		{"uncached", anthropic, ""},
		{"uncached", assembler.Request{Format: assembler.FormatAnthropic, CacheTTL: assembler.CacheTTL1h}, "system:1h message:1h"},
	} {
		if got := strings.Join(ttls(tc.agent, tc.req), " "); got != tc.want {
			t.Errorf("%s, %+v: breakpoints %q, want %q", tc.agent, tc.req, got, tc.want)
		}
	}
}
