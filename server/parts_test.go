package server_test

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/png"
	"net/http"
	"testing"

	"github.com/context-loom/loom/server"
)

// TestMessages_PartsRoundTrip: a user message's content parts go through the HTTP API as the store keeps
// them (an image's data as base64, bounded by the body's limit, not by the per-text one), and an assembly
// of the session sends them as Chat Completions content parts, counted; invalid parts are a 400.
func TestMessages_PartsRoundTrip(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, newMemory(), server.Limits{MaxMessageBytes: 1 << 10})
	var b bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 1024, 1024))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 7919 >> 3) // noise, so that the file is larger than a text may be
	}
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	if b.Len() <= 1<<10 {
		t.Fatalf("a PNG of %d bytes", b.Len())
	}
	data := base64.StdEncoding.EncodeToString(b.Bytes())
	msg := map[string]any{"role": "user", "content": "What is this?", "parts": []any{
		map[string]any{"type": "image", "image": map[string]any{"data": data, "detail": "high"}},
		map[string]any{"type": "image", "image": map[string]any{"url": "https://example.com/a.png", "width": 512, "height": 512, "detail": "low"}},
	}}
	ts.must("POST", "/v1/sessions/s/messages", keyAcme, msg, http.StatusCreated)
	page := ts.must("GET", "/v1/sessions/s/messages", keyAcme, nil, http.StatusOK)
	got := page["messages"].([]any)[0].(map[string]any)["parts"].([]any)
	if len(got) != 2 || got[0].(map[string]any)["image"].(map[string]any)["data"] != data ||
		got[1].(map[string]any)["image"].(map[string]any)["width"] != float64(512) {
		t.Fatalf("parts read back: %v", got)
	}

	without := ts.must("POST", "/v1/assemble", keyAcme, map[string]any{"session": "s", "model": "gpt-4o"}, http.StatusOK)
	content := without["messages"].([]any)[0].(map[string]any)["content"].([]any)
	if len(content) != 3 || content[1].(map[string]any)["image_url"].(map[string]any)["url"] != "data:image/png;base64,"+data {
		t.Fatalf("the assembled message's content: %v", content)
	}
	// 3 + "user" + "What is this?" + 765 (1024x1024, high) + 85 (low) + 3 to prime the reply.
	if total := without["total_tokens"]; total != float64(3+1+4+765+85+3) {
		t.Errorf("total_tokens %v", total)
	}

	for name, bad := range map[string]map[string]any{
		"an image at a ftp URL": {"role": "user", "parts": []any{map[string]any{"type": "image", "image": map[string]any{"url": "ftp://x/a.png"}}}},
		"an assistant's parts":  {"role": "assistant", "content": "x", "parts": []any{map[string]any{"type": "text", "text": "y"}}},
		"a video":               {"role": "user", "parts": []any{map[string]any{"type": "video"}}},
	} {
		if code, body, _ := ts.call("POST", "/v1/sessions/s2/messages", keyAcme, bad); code != http.StatusBadRequest {
			t.Errorf("%s: %d %v", name, code, body)
		}
	}
}
