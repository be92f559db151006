package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// resourceCases are inputs that once exhausted a core or the memory of the server: the limits are checked
// before the work, and the work the limits admit is bounded.
func resourceCases() []hostileCase {
	// A 19-byte TypeScript text on which tree-sitter runs forever without a bound on the parse.
	spinTS := "''</</-[\" \n/e}x?@b "
	return []hostileCase{
		expect("7 MiB of text to count (over the 1 MiB text limit, checked before counting)", asA, "POST", "/v1/tokens/count",
			mustJSON(map[string]any{"text": strings.Repeat("count me ", 7<<20/9)}), nil, 413, "too_large"),
		expect("a text/plain POST (a cross-site form could send one)", asA, "POST", appendPath,
			[]byte(`{"role":"user","content":"csrf"}`), http.Header{"Content-Type": {"text/plain"}}, 415, "unsupported_media_type"),
		{name: "19 bytes of TypeScript that spin tree-sitter, chunked as code", want: "200, chunks marked parse=fallback, in < 10 s",
			run: func(ctx context.Context, t *target) outcome {
				start := time.Now()
				r := t.a.do(ctx, "POST", "/v1/chunk", mustJSON(map[string]any{"text": spinTS, "strategy": "code", "language": "typescript"}), nil)
				took := time.Since(start)
				var out struct {
					Chunks []struct {
						Metadata map[string]string `json:"metadata"`
					} `json:"chunks"`
				}
				_ = json.Unmarshal(r.body, &out)
				ok := r.status == http.StatusOK && len(out.Chunks) > 0 && out.Chunks[0].Metadata["parse"] == "fallback" && took < 10*time.Second
				return outcome{got: fmt.Sprintf("%s, %d chunks, parse=%q, %.1f s", r.describe(), len(out.Chunks), firstMeta(out.Chunks, "parse"), took.Seconds()), ok: ok}
			}},
		{name: "a Markdown document whose first heading is 20 KB", want: "201; each retrieved chunk's metadata under 2 KB",
			run: func(ctx context.Context, t *target) outcome {
				text := "# " + strings.Repeat("heading ", 20<<10/8) + "\n\n" + strings.Repeat("Body text about kumquats. ", 400)
				r := t.a.do(ctx, "POST", "/v1/collections/hostile_docs/documents", mustJSON(map[string]any{"id": "heading.md", "text": text, "content_type": "markdown"}), nil)
				if r.status != http.StatusCreated && r.status != http.StatusOK {
					return outcome{got: r.describe()}
				}
				q := t.a.do(ctx, "POST", "/v1/retrieve", mustJSON(map[string]any{"collection": "hostile_docs", "query": "kumquats", "top_k": 50}), nil)
				var out struct {
					Results []struct {
						DocumentID string            `json:"document_id"`
						Metadata   map[string]string `json:"metadata"`
					} `json:"results"`
				}
				if err := json.Unmarshal(q.body, &out); err != nil || q.status != http.StatusOK {
					return outcome{got: "retrieve: " + q.describe()}
				}
				worst, n := 0, 0
				for _, res := range out.Results {
					if res.DocumentID != "heading.md" {
						continue
					}
					n++
					b, _ := json.Marshal(res.Metadata)
					worst = max(worst, len(b))
				}
				return outcome{got: fmt.Sprintf("%s; %d chunks, metadata at most %d bytes", r.describe(), n, worst), ok: n > 0 && worst < 2<<10}
			}},
		{name: "three 7.5 MB one-line JavaScript documents ingested at once", want: "201 each; server peak RSS rise < 10x their bytes + 256 MB",
			run: denseJavaScript},
	}
}

// denseJavaScript ingests three 7.5 MB one-line JavaScript documents (var a=1+1+...) at once, the input that
// took a server to 3.9 GB, and reads how far the server's resident set rose (Linux: VmHWM after resetting
// it).
func denseJavaScript(ctx context.Context, t *target) outcome {
	const size = 7_500_000
	text := "var a=" + strings.Repeat("1+", (size-8)/2) + "1;\n"
	pid := t.srv.proc.cmd.Process.Pid
	base, err := procMemory(pid, "VmRSS")
	if err != nil {
		return outcome{got: err.Error()}
	}
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return outcome{got: "reset the peak: " + err.Error()}
	}
	var wg sync.WaitGroup
	statuses := make([]string, 3)
	good := true
	var mu sync.Mutex
	for i := range 3 {
		wg.Go(func() {
			body := mustJSON(map[string]any{"id": fmt.Sprintf("dense%d.js", i), "text": text, "content_type": "code"})
			r := t.a.do(ctx, "POST", "/v1/collections/hostile_docs/documents", body, nil)
			mu.Lock()
			defer mu.Unlock()
			statuses[i] = r.describe()
			good = good && (r.status == http.StatusCreated || r.status == http.StatusOK)
		})
	}
	wg.Wait()
	peak, err := procMemory(pid, "VmHWM")
	if err != nil {
		return outcome{got: err.Error()}
	}
	rise := peak - base
	limit := 10*3*size + 256<<20
	return outcome{got: fmt.Sprintf("%s; peak RSS rose %d MB (limit %d MB)", strings.Join(statuses, ", "), rise>>20, limit>>20), ok: good && rise < limit}
}

// procMemory returns a memory figure of /proc/PID/status in bytes.
func procMemory(pid int, key string) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, key+":"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", key, pid)
}

// firstMeta is the key's value in the first chunk's metadata, or "".
func firstMeta(chunks []struct {
	Metadata map[string]string `json:"metadata"`
}, key string) string {
	if len(chunks) == 0 {
		return ""
	}
	return chunks[0].Metadata[key]
}
