package server_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/context-loom/loom/server"
	"github.com/context-loom/loom/store"
)

// TestListMessages_Pages: a listing returns DefaultMessagePage messages by default, the newest, oldest
// first, with the next_before of the older page; following next_before returns every message once, in
// order, and the last page has none. A limit over MaxMessagePage is refused, not cut.
func TestListMessages_Pages(t *testing.T) {
	t.Parallel()
	st := newMemory()
	ts := newTestServer(t, st, server.Limits{})
	const n = 2*server.DefaultMessagePage + 37
	var msgs []store.Message
	for i := range n {
		msgs = append(msgs, store.Message{Role: "user", Content: fmt.Sprint("message ", i+1)})
	}
	if _, err := st.AppendMessages(t.Context(), "acme", "s", msgs...); err != nil {
		t.Fatal(err)
	}
	seqs := func(page map[string]any) []int64 {
		var out []int64
		for _, m := range page["messages"].([]any) {
			out = append(out, int64(m.(map[string]any)["seq"].(float64)))
		}
		return out
	}

	first := ts.must("GET", "/v1/sessions/s/messages", keyAcme, nil, http.StatusOK)
	if got := seqs(first); len(got) != server.DefaultMessagePage || got[0] != n-server.DefaultMessagePage+1 || got[len(got)-1] != n {
		t.Fatalf("the default page: seqs %d to %d (%d), want the newest %d", got[0], got[len(got)-1], len(got), server.DefaultMessagePage)
	}
	if next := first["next_before"]; next != float64(n-server.DefaultMessagePage+1) {
		t.Fatalf("next_before %v, want %d", next, n-server.DefaultMessagePage+1)
	}

	for _, limit := range []int{1, 7, server.DefaultMessagePage, server.MaxMessagePage} {
		var walked []int64
		path := fmt.Sprintf("/v1/sessions/s/messages?limit=%d", limit)
		for pages := 0; ; pages++ {
			if pages > n {
				t.Fatalf("limit %d: the walk does not end", limit)
			}
			page := ts.must("GET", path, keyAcme, nil, http.StatusOK)
			got := seqs(page)
			if len(got) == 0 || len(got) > limit {
				t.Fatalf("limit %d: a page of %d messages", limit, len(got))
			}
			walked = append(got, walked...)
			next, ok := page["next_before"]
			if !ok {
				break
			}
			if next != float64(got[0]) {
				t.Fatalf("limit %d: next_before %v, the page begins at %d", limit, next, got[0])
			}
			path = fmt.Sprintf("/v1/sessions/s/messages?limit=%d&before=%d", limit, int64(next.(float64)))
		}
		if len(walked) != n {
			t.Fatalf("limit %d: the walk read %d messages of %d", limit, len(walked), n)
		}
		for i, seq := range walked {
			if seq != int64(i+1) {
				t.Fatalf("limit %d: message %d of the walk has seq %d", limit, i, seq)
			}
		}
	}

	// An empty session, or a before at the first message, is an empty page with no next_before.
	for _, path := range []string{"/v1/sessions/none/messages", "/v1/sessions/s/messages?before=1"} {
		page := ts.must("GET", path, keyAcme, nil, http.StatusOK)
		if _, ok := page["next_before"]; ok || len(page["messages"].([]any)) != 0 {
			t.Errorf("%s: %v", path, page)
		}
	}
	for _, q := range []string{"limit=0", "limit=-1", fmt.Sprint("limit=", server.MaxMessagePage+1), "limit=x", "before=0", "before=-3", "before=x"} {
		if code, body, _ := ts.call("GET", "/v1/sessions/s/messages?"+q, keyAcme, nil); code != http.StatusBadRequest {
			t.Errorf("%s: %d %v, want 400", q, code, body)
		}
	}
}
