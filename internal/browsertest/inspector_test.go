package browsertest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/server"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/sqlite"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the screenshot to docs/inspector.png (the README's)")

// chromium finds the browser as scripts/ensure-chromium.sh does.
func chromium() (string, error) {
	if p := os.Getenv("LOOM_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium, chromium-browser or google-chrome on PATH and LOOM_CHROMIUM is not set")
}

const (
	tenant  = "acme"
	apiKey  = "inspector-test-key"
	session = "support-42"
	// other is a second session, recorded before session: the picker lists it second.
	other = "billing-7"
)

// seed stores a session whose assemblies drop items: a long conversation, a summary of its first turns,
// and more knowledge than the budget holds, some of it with markup that must show as text.
func seed(t *testing.T, ctx context.Context, st *store.Store) {
	t.Helper()
	turns := []string{
		"My order #1138 never arrived. Can you check?",
		"I found order #1138: it shipped on May 2 with the tracking number ZX-81-442.",
		"The tracking page says delivered, but there is nothing at my door.",
		"I am sorry. I have opened a carrier claim; they answer within two days.",
		"It is day three. Nobody called. <img src=x onerror=alert(1)>",
		"The claim is still open. I can send a replacement today, or refund you.",
		"A replacement, please, to the same address.",
		"Done: replacement order #1171 ships tomorrow by express.",
	}
	for i, text := range turns {
		role := []string{"user", "assistant"}[i%2]
		if _, err := st.AppendMessages(ctx, tenant, session, store.Message{Role: role, Content: text}); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok, err := st.SwapSummary(ctx, tenant, session, store.Summary{}, store.Summary{
		Text: "The user's order #1138 was marked delivered but never arrived; a carrier claim was opened.", From: 1, To: 4, Model: "summarizer"}); err != nil || !ok {
		t.Fatalf("SwapSummary: %v %v", ok, err)
	}
	kb := []store.Knowledge{
		{ID: "policy/replacements", Content: "Replacements ship by express at no cost when a carrier loses a parcel. " + strings.Repeat("Details of the policy. ", 30), Score: 0.91},
		{ID: "policy/refunds", Content: "Refunds go back to the original payment method within five business days. " + strings.Repeat("More refund rules. ", 40), Score: 0.74},
		{ID: "<b>faq/claims</b>", Content: "Carrier claims take two to five days. " + strings.Repeat("Claims fine print. ", 60), Score: 0.52},
		{ID: "faq/addresses", Content: "An address can be changed until the parcel ships. " + strings.Repeat("Address rules. ", 50), Score: 0.33},
	}
	if err := st.SetKnowledge(ctx, tenant, session, kb); err != nil {
		t.Fatal(err)
	}
	if err := st.PutAgent(ctx, tenant, store.Agent{ID: "support", Instructions: "You are the shop's support agent. Be brief and kind.", Model: "gpt-4o"}); err != nil {
		t.Fatal(err)
	}
}

func post(t *testing.T, url, body string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s", url, resp.Status)
	}
}

func TestInspector_ShowsTheRegionsAndDroppedItemsOfASeededSession(t *testing.T) {
	browser, err := chromium()
	if err != nil {
		t.Skipf("skipping the inspector's browser test: %v (make test-deps installs Debian's chromium: scripts/ensure-chromium.sh)", err)
	}
	ctx := t.Context()
	st, err := sqlite.Open(ctx, sqlite.Options{Path: filepath.Join(t.TempDir(), "loom.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := engine.New(st, engine.WithAssemblyRecords(engine.RecordOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	srv, err := server.New(server.Config{Engine: eng, Keys: map[string]string{apiKey: tenant}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	seed(t, ctx, st)
	if _, err := st.AppendMessages(ctx, tenant, other, store.Message{Role: "user", Content: "Why was I charged twice?"}); err != nil {
		t.Fatal(err)
	}
	post(t, ts.URL+"/v1/assemble", `{"session":"`+other+`","model":"gpt-4o","max_tokens":300,"message":"Any news?"}`)
	if err := eng.FlushRecords(ctx); err != nil { // so that it is recorded first
		t.Fatal(err)
	}
	// Two assemblies of the session, the second with a smaller budget: it drops more.
	post(t, ts.URL+"/v1/assemble", `{"agent":"support","session":"`+session+`","max_tokens":900,"message":"When does it arrive?"}`)
	post(t, ts.URL+"/v1/assemble", `{"agent":"support","session":"`+session+`","max_tokens":400,"message":"When does it arrive?"}`)
	if err := eng.FlushRecords(ctx); err != nil { // records are written in the background
		t.Fatal(err)
	}

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 1700))...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	defer cancelBrowser()
	bctx, cancelTimeout := context.WithTimeout(bctx, 60*time.Second)
	defer cancelTimeout()

	// The console (calls of the console API, uncaught exceptions, the browser's log, where a CSP violation
	// shows) from the start: the browser is started first, then subscribed to, then the page loaded.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("starting %s: %v", browser, err)
	}
	consoleCtx, stopConsole := context.WithCancel(bctx)
	messages := chromedp.Console(consoleCtx)
	var problems []string // console errors, exceptions, CSP violations and other error logs
	var wg sync.WaitGroup
	wg.Go(func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException || m.Type == chromedp.ConsoleWarning && strings.Contains(m.Text, "Content Security Policy") {
				problems = append(problems, fmt.Sprintf("%s: %s (%s:%d)", m.Type, m.Text, m.URL, m.Line))
			}
		}
	})
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			// Say what the page showed: its status line and what it logged.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(bctx), 5*time.Second)
			defer cancel()
			status, _ := chromedp.Run(sctx, chromedp.Evaluate[string](`document.getElementById("status").textContent`))
			stopConsole()
			wg.Wait()
			t.Fatalf("%s: %v (the page's status: %q; its errors: %q)", what, err, status, problems)
		}
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("the text of %s: %v", sel, err)
		}
		return v
	}
	eval := func(js string) bool {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[bool](js))
		if err != nil {
			t.Fatalf("evaluating %s: %v", js, err)
		}
		return v
	}
	str := func(js string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("evaluating %s: %v", js, err)
		}
		return v
	}
	// The key given, the picker lists the tenant's sessions that have records, the most recent first.
	run("loading the page and listing the sessions",
		chromedp.Navigate(ts.URL+"/inspect"),
		chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), apiKey),
		chromedp.Click(chromedp.CSS(`#key-form button[type="submit"]`)), // a click, which fires the form's submit event
		chromedp.WaitVisible(chromedp.CSS("#key-state")),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll("#session-pick option").length === 3`),
	)
	listed := str(`[...document.querySelectorAll("#session-pick option")].map((o) => o.value).join(",")`)
	firstOption := str(`document.querySelectorAll("#session-pick option")[1].textContent`)
	// Choosing one in the picker shows its timeline.
	run("choosing a session in the picker",
		chromedp.Evaluate[chromedp.Void](`(() => { const p = document.getElementById("session-pick"); p.value = "`+other+`"; p.dispatchEvent(new Event("change")); })()`),
		chromedp.Poll[chromedp.Void](`document.getElementById("detail-title").textContent.includes("`+other+`")`),
	)
	otherTimeline, err := chromedp.Run(bctx, chromedp.Nodes(chromedp.CSSAll("#timeline li")))
	if err != nil {
		t.Fatal(err)
	}
	otherTitle, otherInput := text("#detail-title"), str(`document.getElementById("session").value`)
	// An id typed in still works.
	run("typing the session's id",
		chromedp.SetValue(chromedp.CSS("#session"), session),
		chromedp.Click(chromedp.CSS(`#session-form button[type="submit"]`)),
		chromedp.Poll[chromedp.Void](`document.getElementById("detail-title").textContent.includes("`+session+`")`),
		chromedp.WaitVisible(chromedp.CSS("#regions .dropped-item")),
	)
	picked := str(`document.getElementById("session-pick").value`)
	timeline, err := chromedp.Run(bctx, chromedp.Nodes(chromedp.CSSAll("#timeline li")))
	if err != nil {
		t.Fatal(err)
	}
	regions, messagesText, cache, summary := text("#regions"), text("#messages"), text("#cache"), text("#summary")
	// Each item's tokens, next to it: a kept item's, and a dropped one's (a recorded assembly counts what
	// it drops).
	tokensOf := func(rowClass, id string) string {
		return str(`(() => { const tr = [...document.querySelectorAll("#regions tr.` + rowClass + `")].find((r) => r.cells[0].textContent === "` + id + `");
			return tr ? tr.querySelector("td.tokens").textContent : "no such row"; })()`)
	}
	keptTokens, droppedTokens := tokensOf("kept-item", "policy/replacements"), tokensOf("dropped-item", "policy/refunds")
	injected := eval(`document.querySelector("#messages img, #regions b, #timeline b") !== null`)
	keyInTab := eval(`sessionStorage.getItem("loom.inspector.key") === "` + apiKey + `" && localStorage.length === 0 && document.cookie === ""`)
	// Try it: the recorded request again with a larger budget.
	run("trying a larger budget",
		chromedp.SetValue(chromedp.CSS("#try-budget"), "2000"),
		chromedp.Click(chromedp.CSS(`#try-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#try-result table")),
	)
	tryResult := text("#try-result")
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	stopConsole()
	wg.Wait()

	if len(problems) > 0 {
		t.Errorf("the page logged errors:\n%s", strings.Join(problems, "\n"))
	}
	if listed != ","+session+","+other {
		t.Errorf("the picker lists %q, want the most recently recorded first: %q", listed, ","+session+","+other)
	}
	if !strings.Contains(firstOption, "2 assemblies") {
		t.Errorf("the picker's first session reads %q, want its 2 assemblies", firstOption)
	}
	if len(otherTimeline) != 1 || !strings.Contains(otherTitle, other) || otherInput != other {
		t.Errorf("choosing %s in the picker shows %d assemblies titled %q (the id box says %q), want 1 of it", other, len(otherTimeline), otherTitle, otherInput)
	}
	for _, c := range []struct{ what, got string }{{"the kept policy/replacements", keptTokens}, {"the dropped policy/refunds", droppedTokens}} {
		if n, err := strconv.Atoi(c.got); err != nil || n <= 0 {
			t.Errorf("%s shows %q tokens, want a count", c.what, c.got)
		}
	}
	if picked != session {
		t.Errorf("after typing %s the picker shows %q", session, picked)
	}
	if len(timeline) != 2 {
		t.Errorf("the timeline shows %d assemblies, want 2", len(timeline))
	}
	for _, want := range []string{"instructions", "summary", "knowledge", "history", "message",
		"policy/replacements", "<b>faq/claims</b>", "dropped", "budget", "summarized"} {
		if !strings.Contains(regions, want) {
			t.Errorf("the regions do not show %q:\n%s", want, regions)
		}
	}
	if !strings.Contains(messagesText, "You are the shop's support agent") {
		t.Errorf("the rendered messages are missing:\n%s", messagesText)
	}
	if injected {
		t.Error("untrusted text became markup (an img or b element)")
	}
	if !keyInTab {
		t.Error("the key is not in sessionStorage alone")
	}
	if !strings.Contains(cache, "prefix hash") || !strings.Contains(cache, "shared with the previous assembly") ||
		!strings.Contains(cache, "cache break") || !strings.Contains(summary, "seq 1 to 4") {
		t.Errorf("cache %q, summary %q", cache, summary)
	}
	if !strings.Contains(tryResult, "2000") || !strings.Contains(tryResult, "total tokens") || !strings.Contains(tryResult, "policy/refunds") || !strings.Contains(tryResult, "dropped → kept") {
		t.Errorf("try it shows %q", tryResult)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("the screenshot is not a PNG (%d bytes)", len(png))
	}
	out := os.Getenv("LOOM_INSPECTOR_SCREENSHOT")
	if out == "" {
		out = filepath.Join(os.TempDir(), "loom-inspector.png")
	}
	if *updateScreenshot {
		out = filepath.Join("..", "..", "docs", "inspector.png")
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", out, len(png))
}
