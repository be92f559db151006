package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/server"
	"github.com/context-loom/loom/store"
)

// newPlainServer is a server over an empty memory store with cfg (its Engine set here).
func newPlainServer(t *testing.T, cfg server.Config) *httptest.Server {
	t.Helper()
	eng, err := testEngine(newMemory())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Engine = eng
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// TestOpenAPI_VersionIsLoomVersion: the document served, and OpenAPI(), say loom.Version, the version the
// CLI prints.
func TestOpenAPI_VersionIsLoomVersion(t *testing.T) {
	t.Parallel()
	ts := newPlainServer(t, server.Config{})
	resp, err := http.Get(ts.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	served, _ := io.ReadAll(resp.Body)
	for name, doc := range map[string][]byte{"served": served, "OpenAPI()": server.OpenAPI()} {
		var d struct {
			Info struct {
				Version string `json:"version"`
			} `json:"info"`
		}
		if err := json.Unmarshal(doc, &d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d.Info.Version != loom.Version {
			t.Errorf("%s: info.version %q, want loom.Version %q", name, d.Info.Version, loom.Version)
		}
	}
}

// readyzLogLevel asks /readyz once and returns its status and the level of the request's log line.
func readyzLogLevel(t *testing.T, st *store.Store, ready func() error) (int, string) {
	t.Helper()
	eng, err := testEngine(st)
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	srv, err := server.New(server.Config{Engine: eng, Ready: ready, Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ts.Close() // the handler has returned, and logged
	for line := range strings.Lines(logs.String()) {
		var rec struct {
			Level, Msg, Route string
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "request" && rec.Route == "GET /readyz" {
			return resp.StatusCode, rec.Level
		}
	}
	t.Fatalf("no request line for /readyz in the logs:\n%s", logs)
	return 0, ""
}

// TestAPI_ReadyzLogLevels: a 503 from /readyz because the indexes are still loading is routine at start-up
// and logged at INFO; a 503 because the store cannot be reached is an ERROR.
func TestAPI_ReadyzLogLevels(t *testing.T) {
	t.Parallel()
	loading := func() error { return errors.New("the search indexes are loading") }
	if code, level := readyzLogLevel(t, newMemory(), loading); code != 503 || level != "INFO" {
		t.Errorf("not ready: status %d logged at %s, want 503 at INFO", code, level)
	}
	if code, level := readyzLogLevel(t, over(downStore{newMemory().Backend()}), nil); code != 503 || level != "ERROR" {
		t.Errorf("store down: status %d logged at %s, want 503 at ERROR", code, level)
	}
	if code, level := readyzLogLevel(t, newMemory(), nil); code != 200 || level != "INFO" {
		t.Errorf("ready: status %d logged at %s, want 200 at INFO", code, level)
	}
}

// newHandler is the handler of a server over st with keys (none: keyless).
func newHandler(t *testing.T, st *store.Store, keys map[string]string) http.Handler {
	t.Helper()
	eng, err := testEngine(st)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Engine: eng, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return srv.Handler()
}

// serve sends one request to h, from a loopback client to a loopback Host unless req says otherwise.
func serve(h http.Handler, req *http.Request) *httptest.ResponseRecorder {
	if req.Host == "example.com" { // httptest.NewRequest's default
		req.Host = "127.0.0.1:7070"
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestAPI_ContentTypeMustBeJSON: a POST or PUT, or any request with a body, must be application/json (UTF-8
// if a charset is named), with keys or without; otherwise 415 and nothing is written. A form or text/plain
// post is what a web page can send to any address without a preflight.
func TestAPI_ContentTypeMustBeJSON(t *testing.T) {
	t.Parallel()
	for _, keyed := range []bool{false, true} {
		st := newMemory()
		var keys map[string]string
		auth := ""
		if keyed {
			keys, auth = map[string]string{keyAcme: "default"}, "Bearer "+keyAcme
		}
		h := newHandler(t, st, keys)
		for i, tt := range []struct {
			contentType string
			want        int
		}{
			{"application/json", 201},
			{"application/json; charset=utf-8", 201},
			{"Application/JSON;Charset=\"UTF-8\"", 201},
			{"", 415},
			{"text/plain", 415},
			{"text/plain;charset=UTF-8", 415},
			{"text/plain; x=application/json", 415},
			{"application/x-www-form-urlencoded", 415},
			{"multipart/form-data; boundary=b", 415},
			{"application/json, text/plain", 415},
			{"application/jsonx", 415},
			{"application/json; charset=iso-8859-1", 415},
			{"application/json; charset=utf-16", 415},
		} {
			session := fmt.Sprintf("s-%d", i)
			for _, method := range []string{"POST", "PUT"} {
				path, body := "/v1/sessions/"+session+"/messages", `{"role":"user","content":"hi"}`
				if method == "PUT" {
					path, body, tt.want = "/v1/users/u"+session+"/memory/k", `{"value":"v"}`, map[int]int{201: 200, 415: 415}[tt.want]
				}
				req := httptest.NewRequest(method, path, strings.NewReader(body))
				if tt.contentType != "" {
					req.Header.Set("Content-Type", tt.contentType)
				}
				if auth != "" {
					req.Header.Set("Authorization", auth)
				}
				rec := serve(h, req)
				if rec.Code != tt.want {
					t.Errorf("keys %v: %s %s with Content-Type %q: %d %s, want %d", keyed, method, path, tt.contentType, rec.Code, rec.Body, tt.want)
				}
				if tt.want == 415 && !strings.Contains(rec.Body.String(), `"unsupported_media_type"`) {
					t.Errorf("415 body %s", rec.Body)
				}
			}
			msgs, _ := st.Messages(context.Background(), loom.DefaultTenant, session, store.MessageQuery{})
			facts, _ := st.Facts(context.Background(), loom.DefaultTenant, "u"+session)
			if stored := len(msgs) + len(facts); (tt.want == 415 && stored != 0) || (tt.want != 415 && stored != 2) {
				t.Errorf("keys %v: Content-Type %q: %d items stored", keyed, tt.contentType, stored)
			}
		}
		// Requests without a body need no Content-Type; a POST does, even an empty one; a DELETE with a body does.
		for _, tt := range []struct {
			method, path, body string
			want               int
		}{
			{"GET", "/v1/sessions/s-0/messages", "", 200},
			{"DELETE", "/v1/sessions/s-0", "", 204},
			{"GET", "/healthz", "", 200},
			{"POST", "/v1/tokens/count", "", 415},
			{"DELETE", "/v1/sessions/s-1", `{"x":1}`, 415},
		} {
			req := httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body))
			if tt.body == "" {
				req = httptest.NewRequest(tt.method, tt.path, nil)
			}
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			if rec := serve(h, req); rec.Code != tt.want {
				t.Errorf("keys %v: %s %s without Content-Type: %d %s, want %d", keyed, tt.method, tt.path, rec.Code, rec.Body, tt.want)
			}
		}
	}
}

// TestAPI_KeylessAnswersOnlyLoopbackHosts: without keys, a request whose Host is not a loopback name or
// address gets 421 (a page that rebinds its own name to 127.0.0.1 cannot read the API), on every route; with
// keys any Host is answered.
func TestAPI_KeylessAnswersOnlyLoopbackHosts(t *testing.T) {
	t.Parallel()
	keyless := newHandler(t, newMemory(), nil)
	keyed := newHandler(t, newMemory(), map[string]string{keyAcme: "acme"})
	good := []string{"localhost", "localhost:7070", "LocalHost:1", "localhost.", "127.0.0.1", "127.0.0.1:7070", "127.9.8.7:80",
		"[::1]", "[::1]:7070", "[::ffff:127.0.0.1]:7070"}
	bad := []string{"", "evil.example", "evil.example:7070", "127.0.0.1.evil.example", "localhost.evil.example:7070", "0.0.0.0:7070",
		"10.0.0.1", "192.168.1.2:7070", "[::]:7070", "[fe80::1%25lo]:7070", "::1", "127.1", "localhost:7070:7070", "[::1"}
	for _, path := range []string{"/healthz", "/openapi.json", "/metrics", "/v1/sessions/s/messages", "/no/such/route"} {
		for _, host := range append(append([]string(nil), good...), bad...) {
			want := http.StatusMisdirectedRequest
			if slices.Contains(good, host) {
				want = map[string]int{"/no/such/route": 404}[path]
				if want == 0 {
					want = 200
				}
			}
			req := httptest.NewRequest("GET", path, nil)
			req.Host = host
			rec := httptest.NewRecorder()
			keyless.ServeHTTP(rec, req)
			if rec.Code != want {
				t.Errorf("keyless: GET %s with Host %q: %d, want %d", path, host, rec.Code, want)
			}
			if rec.Code == 421 && !strings.Contains(rec.Body.String(), `"misdirected_request"`) {
				t.Errorf("421 body %s", rec.Body)
			}
		}
	}
	for _, host := range bad {
		req := httptest.NewRequest("GET", "/v1/sessions/s/messages", nil)
		req.Host = host
		req.Header.Set("Authorization", "Bearer "+keyAcme)
		rec := httptest.NewRecorder()
		keyed.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Errorf("with keys: Host %q: %d, want 200", host, rec.Code)
		}
	}
}

// TestAPI_NoCORSHeaders: no answer carries a CORS header, a preflight included, with keys or without: a web
// page of another origin is never allowed to read the API or send it JSON.
func TestAPI_NoCORSHeaders(t *testing.T) {
	t.Parallel()
	for _, keys := range []map[string]string{nil, {keyAcme: "acme"}} {
		h := newHandler(t, newMemory(), keys)
		eng, _ := testEngine(newMemory())
		srv, _ := server.New(server.Config{Engine: eng})
		for _, rt := range srv.Routes() {
			method, path, _ := strings.Cut(rt, " ")
			path = strings.NewReplacer("{session}", "s", "{user}", "u", "{key}", "k", "{agent}", "a", "{id}", "c", "{doc}", "d").Replace(path)
			for _, m := range []string{"OPTIONS", method} {
				var body io.Reader
				if m != "OPTIONS" && m != "GET" && m != "DELETE" {
					body = strings.NewReader(`{}`)
				}
				req := httptest.NewRequest(m, path, body)
				req.Header.Set("Origin", "https://evil.example")
				if m == "OPTIONS" {
					req.Header.Set("Access-Control-Request-Method", method)
					req.Header.Set("Access-Control-Request-Headers", "content-type, authorization")
				} else {
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Authorization", "Bearer "+keyAcme)
				}
				rec := serve(h, req)
				for name := range rec.Header() {
					if strings.HasPrefix(strings.ToLower(name), "access-control-") {
						t.Errorf("keys %v: %s %s: the answer has %s: %s", keys != nil, m, path, name, rec.Header().Get(name))
					}
				}
				if m == "OPTIONS" && rec.Code < 400 {
					t.Errorf("keys %v: a preflight of %s %s got %d", keys != nil, method, path, rec.Code)
				}
			}
		}
	}
}

// fullBodies are a body for each route that takes one, with every field that holds text filled in.
var fullBodies = []struct{ method, path, body string }{
	{"POST", "/v1/assemble", `{"agent":"a","user":"u","session":"s","history_limit":5,"retrieve":{"collection":"c","query":"q","mode":"hybrid","filter":{"k":"v"}},
		"model":"gpt-4o","format":"openai","instructions":"i","tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","description":"p"}}}],
		"memory":[{"key":"k","value":"v","source":"s"}],"knowledge":[{"id":"k1","document_id":"d","content":"c","source":"s","type":"rag","metadata":{"m":"v"}}],
		"history":[{"role":"user","content":"h","name":"n"},{"role":"assistant","content":"a","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"}],
		"tool_outputs":[{"tool":"t","call_id":"c1","args":"{}","result":"r"}],"message":"m","policy":{"knowledge_order":"score","regions":[{"name":"history","priority":1}]}}`},
	{"POST", "/v1/assemble", `{"message":"m","preset":"cookbook"}`},
	{"POST", "/v1/sessions/s/messages", `{"role":"user","content":"c","name":"n"}`},
	{"POST", "/v1/sessions/s/messages", `{"messages":[{"role":"assistant","content":"c","name":"n","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"}]}`},
	{"POST", "/v1/sessions/s/tool-outputs", `{"tool":"t","call_id":"c1","args":"{}","result":"r"}`},
	{"PUT", "/v1/sessions/s/knowledge", `{"knowledge":[{"id":"k1","document_id":"d","content":"c","source":"s","type":"rag","metadata":{"m":"v"}}]}`},
	{"PUT", "/v1/users/u/memory/k", `{"value":"v","source":"s"}`},
	{"PUT", "/v1/agents/a", `{"id":"a","instructions":"i","constraints":"c","output_format":"o","model":"gpt-4o",
		"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","description":"p"}}}],"policy":{"knowledge_order":"score","regions":[{"name":"history","priority":1}]}}`},
	{"POST", "/v1/collections", `{"id":"c","name":"n","chunk_strategy":"recursive"}`},
	{"POST", "/v1/collections/c/documents", `{"id":"d","source":"s.md","content_type":"markdown","text":"t","metadata":{"m":"v"}}`},
	{"POST", "/v1/retrieve", `{"collection":"c","query":"q","mode":"hybrid","filter":{"k":"v"}}`},
	{"POST", "/v1/tokens/count", `{"text":"t","model":"gpt-4o"}`},
	{"POST", "/v1/tokens/count", `{"text":"t","encoding":"cl100k_base"}`},
	{"POST", "/v1/tokens/count", `{"provider":"openai","request":{"model":"gpt-4o","messages":[{"role":"system","content":"s"},{"role":"user","content":"h","name":"n"},
		{"role":"assistant","content":"a","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"r"}],
		"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","description":"p"}}}],"tool_choice":"auto"}}`},
	{"POST", "/v1/tokens/count", `{"request":{"model":"claude-opus-4-1","system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"text","text":"h"}]},
		{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"r"}]}],
		"tools":[{"name":"f","description":"d","input_schema":{"type":"object"}}]}}`},
	{"POST", "/v1/chunk", `{"text":"t","strategy":"code","language":"go","encoding":"cl100k_base"}`},
	{"POST", "/v1/chunk", `{"text":"t","model":"gpt-4o"}`},
}

// stringLeaves calls fn with the path of each string in v (decoded JSON), in a fixed order, and a setter
// that replaces it.
func stringLeaves(v any, fn func(path string, set func(any))) {
	var walk func(v any, path string, set func(any))
	walk = func(v any, path string, set func(any)) {
		switch x := v.(type) {
		case string:
			fn(path, set)
		case []any:
			for i := range x {
				walk(x[i], fmt.Sprintf("%s[%d]", path, i), func(n any) { x[i] = n })
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				walk(x[k], strings.TrimPrefix(path+"."+k, "."), func(n any) { x[k] = n })
			}
		}
	}
	walk(v, "", nil)
}

// TestAPI_EveryTextIsLimited: every string of every route's body, one at a time made one byte longer than
// the per-text limit, gets 413 (checked before anything is counted, chunked or stored), but a document's
// text, which only the body limit bounds. Before, /v1/tokens/count counted a text of any size the body
// limit let in, and most fields other than a message's content were not checked at all.
func TestAPI_EveryTextIsLimited(t *testing.T) {
	t.Parallel()
	const limit = 64
	big := strings.Repeat("x", limit+1)
	ts := newTestServer(t, newMemory(), server.Limits{MaxMessageBytes: limit})
	decode := func(body string) any {
		var v any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		return v
	}
	for _, b := range fullBodies {
		if code, out, _ := ts.call(b.method, b.path, keyAcme, []byte(b.body)); code == 413 || errorCode(out) == "invalid_json" {
			t.Fatalf("%s %s: the full body itself is refused: %d %v", b.method, b.path, code, out)
		}
		n := 0
		stringLeaves(decode(b.body), func(string, func(any)) { n++ })
		if n == 0 {
			t.Errorf("%s %s: no texts", b.method, b.path)
		}
		for k := range n {
			body, i, path := decode(b.body), 0, ""
			stringLeaves(body, func(p string, set func(any)) {
				if i == k {
					set(big)
					path = p
				}
				i++
			})
			variant, _ := json.Marshal(body)
			want := 413
			if b.path == "/v1/collections/c/documents" && path == "text" {
				want = 201 // a document's text is bounded by the body limit
			}
			if strings.HasPrefix(path, "policy.regions[") && strings.HasSuffix(path, "].name") {
				want = 400 // a region's name is one of seven, decoded as a loom.Region: any other is invalid
			}
			code, out, _ := ts.call(b.method, b.path, keyAcme, variant)
			switch {
			case code != want:
				t.Errorf("%s %s with %s of %d bytes: %d %v, want %d", b.method, b.path, path, len(big), code, out, want)
			case want == 413 && errorCode(out) != "too_large":
				t.Errorf("%s %s with %s over the limit: code %q", b.method, b.path, path, errorCode(out))
			case want == 400 && errorCode(out) != "invalid_request":
				t.Errorf("%s %s with an unknown region %s: code %q", b.method, b.path, path, errorCode(out))
			}
		}
	}
	// Map keys count too.
	code, out, _ := ts.call("PUT", "/v1/sessions/s/knowledge", keyAcme, `{"knowledge":[{"content":"c","metadata":{"`+big+`":"v"}}]}`)
	if code != 413 {
		t.Errorf("a metadata key over the limit: %d %v", code, out)
	}
}

// assembleField is a field of an assembly request, and two requests that differ only in it.
type assembleField struct {
	Field         string
	Without, With json.RawMessage
	// Error: With must be refused (the field cannot apply), never silently left out.
	Error bool
}

// readAssembleFields reads the table of request fields that TestAPI_AssembleUsesEveryField and the CLI's
// TestAssemble_UsesEveryField share (loom assemble --request takes the API's body).
func readAssembleFields(t *testing.T, path string) []assembleField {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var fields []assembleField
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	return fields
}

// TestAPI_AssembleUsesEveryField: each field class of POST /v1/assemble changes the result, or is refused
// when it cannot apply: none is silently ignored. The state it names (agent a, user u, session s,
// collection kb) is stored first.
func TestAPI_AssembleUsesEveryField(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, newMemory(), server.Limits{})
	ts.must("PUT", "/v1/agents/a", keyAcme, map[string]any{"instructions": "You are Agent A."}, 200)
	ts.must("PUT", "/v1/users/u/memory/plan", keyAcme, map[string]any{"value": "basic"}, 200)
	ts.must("POST", "/v1/sessions/s/messages", keyAcme, map[string]any{"messages": []map[string]any{
		{"role": "user", "content": "first question"}, {"role": "assistant", "content": "first answer"}, {"role": "user", "content": "second question"}}}, 201)
	ts.must("POST", "/v1/collections", keyAcme, map[string]any{"name": "kb"}, 201)
	ts.must("POST", "/v1/collections/kb/documents", keyAcme, map[string]any{"id": "d", "source": "d.md", "text": "# Travel\n\nThe zeppelin leaves at noon from the tower.\n"}, 201)
	for _, f := range readAssembleFields(t, filepath.Join("testdata", "assemble-fields.json")) {
		codeA, without, _ := ts.call("POST", "/v1/assemble", keyAcme, []byte(f.Without))
		codeB, with, _ := ts.call("POST", "/v1/assemble", keyAcme, []byte(f.With))
		switch {
		case codeA != 200:
			t.Errorf("%s: the request without it: %d %v", f.Field, codeA, without)
		case f.Error && codeB != 400 && codeB != 404:
			t.Errorf("%s: %d %v, want it refused", f.Field, codeB, with)
		case !f.Error && codeB != 200:
			t.Errorf("%s: %d %v", f.Field, codeB, with)
		case !f.Error && jsonString(without) == jsonString(with):
			t.Errorf("%s is ignored: the result is the same with it and without it:\n%s", f.Field, jsonString(with))
		}
	}
}
