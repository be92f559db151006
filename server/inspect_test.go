package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/server"
	"github.com/context-loom/loom/store"
)

// call sends one request with key (none if "") and returns its status and body.
func call(t *testing.T, method, url, key, body string) (int, []byte, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

// recordingServer is a server over a memory store whose engine records assemblies, with a key for each of
// the tenants acme (key-acme) and globex (key-globex).
func recordingServer(t *testing.T) (*store.Store, *engine.Engine, *httptest.Server) {
	t.Helper()
	st := newMemory()
	eng, err := testEngine(st, engine.WithAssemblyRecords(engine.RecordOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Engine: eng, Keys: map[string]string{"key-acme": "acme", "key-globex": "globex"}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return st, eng, ts
}

func TestAssemblies_ListedAndReadByTheirTenantOnly(t *testing.T) {
	t.Parallel()
	st, eng, ts := recordingServer(t)
	ctx := loom.WithTenant(t.Context(), "acme")
	for i := range 10 {
		role := []string{"user", "assistant"}[i%2]
		if _, err := st.AppendMessages(ctx, "acme", "s", store.Message{Role: role, Content: strings.Repeat("words of a turn ", 20)}); err != nil {
			t.Fatal(err)
		}
	}
	// Knowledge more than the budget holds: some of it is dropped.
	var kb []store.Knowledge
	for i := range 4 {
		kb = append(kb, store.Knowledge{ID: "doc-" + string(rune('a'+i)), Content: strings.Repeat("a fact worth knowing ", 15)})
	}
	if err := st.SetKnowledge(ctx, "acme", "s", kb); err != nil {
		t.Fatal(err)
	}
	assemble := `{"session":"s","model":"gpt-4o","max_tokens":400,"message":"and now?"}`
	if code, b, _ := call(t, "POST", ts.URL+"/v1/assemble", "key-acme", assemble); code != 200 {
		t.Fatalf("assemble: %d %s", code, b)
	}
	// A try-it run is not recorded.
	if code, b, _ := call(t, "POST", ts.URL+"/v1/assemble", "key-acme", `{"session":"s","model":"gpt-4o","max_tokens":900,"message":"and now?","no_record":true}`); code != 200 {
		t.Fatalf("assemble: %d %s", code, b)
	}
	if err := eng.FlushRecords(t.Context()); err != nil { // records are written in the background
		t.Fatal(err)
	}
	code, b, _ := call(t, "GET", ts.URL+"/v1/sessions/s/assemblies", "key-acme", "")
	if code != 200 {
		t.Fatalf("list: %d %s", code, b)
	}
	var list struct {
		Recording  bool `json:"recording"`
		Assemblies []struct {
			Seq         int64 `json:"seq"`
			Budget      int   `json:"budget"`
			TotalTokens int   `json:"total_tokens"`
			Window      int   `json:"window"`
			Regions     []struct {
				Name    string `json:"name"`
				Dropped int    `json:"dropped"`
			} `json:"regions"`
		} `json:"assemblies"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	if !list.Recording || len(list.Assemblies) != 1 || list.Assemblies[0].Seq != 1 || list.Assemblies[0].Budget != 400 || list.Assemblies[0].Window != 128000 {
		t.Fatalf("list: %s", b)
	}
	dropped := 0
	for _, r := range list.Assemblies[0].Regions {
		dropped += r.Dropped
	}
	if dropped == 0 {
		t.Fatalf("the listed assembly dropped nothing: %s", b)
	}
	code, b, _ = call(t, "GET", ts.URL+"/v1/sessions/s/assemblies/1", "key-acme", "")
	if code != 200 || !bytes.Contains(b, []byte(`"report"`)) || !bytes.Contains(b, []byte(`"and now?"`)) {
		t.Fatalf("get: %d %s", code, b)
	}
	for _, c := range []struct {
		url, key string
		want     int
	}{
		{"/v1/sessions/s/assemblies/2", "key-acme", 404},
		{"/v1/sessions/s/assemblies/zero", "key-acme", 400},
		{"/v1/sessions/s/assemblies/1", "key-globex", 404},
		{"/v1/sessions/s/assemblies", "", 401},
		{"/v1/sessions/s/assemblies/1", "", 401},
	} {
		if code, b, _ := call(t, "GET", ts.URL+c.url, c.key, ""); code != c.want {
			t.Errorf("GET %s with %q: %d %s, want %d", c.url, c.key, code, b, c.want)
		}
	}
	if _, b, _ := call(t, "GET", ts.URL+"/v1/sessions/s/assemblies", "key-globex", ""); bytes.Contains(b, []byte(`"seq"`)) {
		t.Fatalf("another tenant lists %s", b)
	}
	// What went unrecorded is counted on /metrics.
	if _, b, _ := call(t, "GET", ts.URL+"/metrics", "", ""); !bytes.Contains(b, []byte("loom_assembly_records_dropped_total 0")) {
		t.Errorf("/metrics lacks loom_assembly_records_dropped_total 0")
	}
	// Deleted with the session.
	if code, b, _ := call(t, "DELETE", ts.URL+"/v1/sessions/s", "key-acme", ""); code != 204 {
		t.Fatalf("delete: %d %s", code, b)
	}
	if code, _, _ := call(t, "GET", ts.URL+"/v1/sessions/s/assemblies/1", "key-acme", ""); code != 404 {
		t.Fatalf("a record outlived its session: %d", code)
	}
}

func TestInspectorPage_StrictHeadersAndLoopbackOnlyWithoutKeys(t *testing.T) {
	t.Parallel()
	eng, err := testEngine(newMemory())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Engine: eng})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	for path, ctype := range map[string]string{"/": "text/html", "/inspect": "text/html", "/inspect/app.js": "text/javascript", "/inspect/app.css": "text/css"} {
		code, b, h := call(t, "GET", ts.URL+path, "", "")
		if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), ctype) || len(b) == 0 {
			t.Fatalf("GET %s: %d %q", path, code, h.Get("Content-Type"))
		}
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("GET %s: CSP %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe") || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: CSP %q, nosniff %q", path, csp, h.Get("X-Content-Type-Options"))
		}
	}
	// The page has no inline script or style, and writes no untrusted text as HTML.
	_, page, _ := call(t, "GET", ts.URL+"/", "", "")
	_, js, _ := call(t, "GET", ts.URL+"/inspect/app.js", "", "")
	if bytes.Contains(page, []byte("<script>")) || bytes.Contains(page, []byte("<style")) || bytes.Contains(page, []byte(" style=")) {
		t.Error("the page has inline script or style")
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "localStorage"} {
		if bytes.Contains(js, []byte(bad)) {
			t.Errorf("app.js uses %s", bad)
		}
	}
	// Without keys, a name that is not loopback gets 421, the page too.
	req, _ := http.NewRequestWithContext(t.Context(), "GET", ts.URL+"/inspect", nil)
	req.Host = "attacker.example"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("the page by a rebound name: %d", resp.StatusCode)
	}
	// POST to the page is not allowed; other paths stay the API's JSON 404.
	if code, _, _ := call(t, "POST", ts.URL+"/inspect", "", `{}`); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /inspect: %d", code)
	}
	if code, b, _ := call(t, "GET", ts.URL+"/nothing-here", "", ""); code != 404 || !bytes.Contains(b, []byte(`"not_found"`)) {
		t.Errorf("GET /nothing-here: %d %s", code, b)
	}
}

func TestAssemblySessions_ListedByTenantMostRecentFirst(t *testing.T) {
	t.Parallel()
	st, eng, ts := recordingServer(t)
	assemble := func(key, tenant, session string) {
		t.Helper()
		if _, err := st.AppendMessages(loom.WithTenant(t.Context(), tenant), tenant, session, store.Message{Role: "user", Content: "hello"}); err != nil {
			t.Fatal(err)
		}
		if code, b, _ := call(t, "POST", ts.URL+"/v1/assemble", key, `{"session":"`+session+`","model":"gpt-4o","message":"and now?"}`); code != 200 {
			t.Fatalf("assemble: %d %s", code, b)
		}
		if err := eng.FlushRecords(t.Context()); err != nil { // records are written in the background, in order
			t.Fatal(err)
		}
	}
	assemble("key-acme", "acme", "s1")
	assemble("key-acme", "acme", "s2")
	assemble("key-acme", "acme", "s1")
	assemble("key-globex", "globex", "g")

	type listing struct {
		Recording bool `json:"recording"`
		Sessions  []struct {
			Session    string    `json:"session"`
			Assemblies int       `json:"assemblies"`
			LastSeq    int64     `json:"last_seq"`
			LastTime   time.Time `json:"last_time"`
		} `json:"sessions"`
	}
	list := func(key, query string) listing {
		t.Helper()
		code, b, _ := call(t, "GET", ts.URL+"/v1/assemblies"+query, key, "")
		if code != 200 {
			t.Fatalf("GET /v1/assemblies%s: %d %s", query, code, b)
		}
		var l listing
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	l := list("key-acme", "")
	if !l.Recording || len(l.Sessions) != 2 || l.Sessions[0].Session != "s1" || l.Sessions[0].Assemblies != 2 || l.Sessions[0].LastSeq != 2 ||
		l.Sessions[1].Session != "s2" || l.Sessions[1].Assemblies != 1 || l.Sessions[0].LastTime.Before(l.Sessions[1].LastTime) {
		t.Fatalf("acme's sessions: %+v, want s1 (2 records) then s2 (1)", l)
	}
	if l := list("key-acme", "?limit=1"); len(l.Sessions) != 1 || l.Sessions[0].Session != "s1" {
		t.Fatalf("limit=1: %+v", l)
	}
	if l := list("key-globex", ""); len(l.Sessions) != 1 || l.Sessions[0].Session != "g" {
		t.Fatalf("globex's sessions: %+v", l)
	}
	for _, q := range []string{"?limit=0", "?limit=201", "?limit=-1", "?limit=ten"} {
		code, b, _ := call(t, "GET", ts.URL+"/v1/assemblies"+q, "key-acme", "")
		if code != 400 || !bytes.Contains(b, []byte(`"invalid_request"`)) {
			t.Errorf("GET /v1/assemblies%s: %d %s, want 400 invalid_request", q, code, b)
		}
	}
	if code, _, _ := call(t, "GET", ts.URL+"/v1/assemblies", "", ""); code != 401 {
		t.Errorf("GET /v1/assemblies without a key: %d, want 401", code)
	}
	if code, b, _ := call(t, "DELETE", ts.URL+"/v1/sessions/s1", "key-acme", ""); code != 204 {
		t.Fatalf("delete: %d %s", code, b)
	}
	if l := list("key-acme", ""); len(l.Sessions) != 1 || l.Sessions[0].Session != "s2" {
		t.Fatalf("after deleting s1: %+v", l)
	}
}
