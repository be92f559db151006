package assembler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// growingSession is a conversation of n turns, each a user's question and the assistant's answer of
// about words words, with a tool exchange every fifth turn; each message has its Seq, from 1.
func growingSession(r *rand.Rand, n, words int) []Message {
	vocab := strings.Fields("the city weather rain ticket order premium plan account price invoice report answer question data costs")
	text := func() string {
		w := make([]string, words/2+r.IntN(words))
		for i := range w {
			w[i] = vocab[r.IntN(len(vocab))]
		}
		return strings.Join(w, " ") + "."
	}
	var h []Message
	add := func(m Message) {
		m.Seq = int64(len(h) + 1)
		h = append(h, m)
	}
	for turn := range n {
		add(Message{Role: "user", Content: text()})
		if turn%5 == 4 {
			id := "call_" + strconv.Itoa(turn)
			add(Message{Role: "assistant", ToolCalls: []ToolCall{{ID: id, Type: "function", Function: ToolCallFunction{Name: "search", Arguments: `{"q":"x"}`}}}})
			add(Message{Role: "tool", ToolCallID: id, Content: text()})
		}
		add(Message{Role: "assistant", Content: text()})
	}
	return h
}

// historyReport returns the history region's report.
func historyReport(t *testing.T, res *Result) RegionReport {
	t.Helper()
	for _, r := range res.Report.Regions {
		if r.Name == RegionHistory {
			return r
		}
	}
	t.Fatal("no history region in the report")
	return RegionReport{}
}

// firstKept is the index in the history of the first message kept, -1 for none.
func firstKept(t *testing.T, res *Result) int {
	t.Helper()
	hist := historyReport(t, res)
	if len(hist.Included) == 0 {
		return -1
	}
	i, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(hist.Included[0], "history["), "]"))
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// TestStepTrim_KeepsTheStartUntilItOverflows: over a growing conversation, the history cut in steps
// changes its first message far less often than the history cut a turn at a time, keeps at least its
// floor of the history's share whenever it cuts more than the budget asks, starts with a user turn, is a
// suffix of the history, and reports what the step cut with the reason "step".
func TestStepTrim_KeepsTheStartUntilItOverflows(t *testing.T) {
	t.Parallel()
	session := growingSession(rand.New(rand.NewPCG(1, 2)), 80, 40)
	for _, format := range []string{FormatOpenAI, FormatAnthropic, FormatText} {
		changes := map[string]int{}
		fits := map[int]int{} // what the history that fits costs, by the history's length
		for _, trim := range []string{HistoryTrimTurns, HistoryTrimSteps} {
			last := -1
			for n := 2; n <= len(session); n++ {
				if session[n-1].Role != "assistant" || len(session[n-1].ToolCalls) > 0 {
					continue // a turn ends with the assistant's answer
				}
				req := &Request{Model: "gpt-4o", Format: format, MaxTokens: 1200, Instructions: "Be brief.", Message: "And then?",
					History: session[:n], Policy: &Policy{HistoryTrim: trim}}
				res, err := AssembleRequest(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				checkHistoryShape(t, res)
				hist := historyReport(t, res)
				first := firstKept(t, res)
				if first > 0 && first != last && last >= 0 {
					changes[trim]++
				}
				last = first
				if first < 0 {
					t.Fatalf("%s %s: nothing kept at %d", format, trim, n)
				}
				if session[first].Role != "user" {
					t.Fatalf("%s %s: the history starts with %s", format, trim, session[first].Role)
				}
				for i, id := range hist.Included {
					if id != historyID(first+i) {
						t.Fatalf("%s %s: the kept history is not a suffix: %v", format, trim, hist.Included)
					}
				}
				if len(hist.Included)+len(hist.Dropped) != n {
					t.Fatalf("%s %s: %d included and %d dropped of %d", format, trim, len(hist.Included), len(hist.Dropped), n)
				}
				steps := 0
				for _, d := range hist.Dropped {
					if d.Reason == ReasonStep {
						steps++
					}
				}
				if trim == HistoryTrimTurns {
					if steps > 0 {
						t.Fatalf("%s: turns cut %d in steps", format, steps)
					}
					fits[n] = hist.Used
				}
				// The other formats' planners estimate a turn, which their renderings then count whole.
				if trim == HistoryTrimSteps && format == FormatOpenAI && float64(hist.Used) < DefaultHistoryFloor*float64(fits[n]) {
					t.Fatalf("%s: a step cut keeps %d of the %d that fit, under the floor", format, hist.Used, fits[n])
				}
			}
		}
		t.Logf("%s: first kept message changed %d times cut by turns, %d cut in steps", format, changes[HistoryTrimTurns], changes[HistoryTrimSteps])
		if changes[HistoryTrimTurns] < 40 || changes[HistoryTrimSteps]*3 > changes[HistoryTrimTurns] {
			t.Errorf("%s: %d changes cut by turns, %d in steps: want at least 3 times fewer", format, changes[HistoryTrimTurns], changes[HistoryTrimSteps])
		}
	}
}

// TestStepTrim_SameCutFromAWindow: the cut depends on the messages' Seq, not on where the history given
// starts, so a store that reads only the newest messages (enough to fill the budget) gets the cut a whole
// session would; a history without Seq is numbered by its place, which is the same for a whole session.
func TestStepTrim_SameCutFromAWindow(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	session := growingSession(r, 60, 40)
	for n := 20; n <= len(session); n += 7 {
		req := &Request{Model: "gpt-4o", MaxTokens: 900, Message: "Go on.", History: session[:n]}
		whole, err := AssembleRequest(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		first := firstKept(t, whole)
		req.Policy = &Policy{HistoryTrim: HistoryTrimTurns}
		turns, err := AssembleRequest(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		// The oldest message that fits: the first kept, or one before it that fits but would start the
		// history mid-turn.
		fits := firstKept(t, turns)
		for fits > 0 && reportHas(turns, RegionHistory, historyID(fits-1), ReasonOrphan) {
			fits--
		}
		req.Policy = nil
		// Without Seq: numbered by place.
		bare := slices.Clone(session[:n])
		for i := range bare {
			bare[i].Seq = 0
		}
		req.History = bare
		res, err := AssembleRequest(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if got := firstKept(t, res); got != first {
			t.Fatalf("n %d: without Seq the cut is at %d, with it at %d", n, got, first)
		}
		// Windows that start anywhere up to the oldest message that fits (as a store reads them: until
		// they fill the budget).
		for from := 0; from <= fits; from += 2 {
			req.History = session[from:n]
			res, err := AssembleRequest(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if got := firstKept(t, res); got+from != first {
				t.Fatalf("n %d: the window from %d cuts at %d, the whole session at %d", n, from, got+from, first)
			}
		}
	}
}

// TestStepTrim_FloorOneCutsAsTurns: a floor of 1 keeps all that fits, as the turns do.
func TestStepTrim_FloorOneCutsAsTurns(t *testing.T) {
	t.Parallel()
	session := growingSession(rand.New(rand.NewPCG(5, 6)), 40, 40)
	for n := 10; n <= len(session); n += 5 {
		turns, err := AssembleRequest(context.Background(), &Request{Model: "gpt-4o", MaxTokens: 800, Message: "Go on.", History: session[:n],
			Policy: &Policy{HistoryTrim: HistoryTrimTurns}})
		if err != nil {
			t.Fatal(err)
		}
		steps, err := AssembleRequest(context.Background(), &Request{Model: "gpt-4o", MaxTokens: 800, Message: "Go on.", History: session[:n],
			Policy: &Policy{HistoryFloor: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if a, b := historyReport(t, turns), historyReport(t, steps); !slices.Equal(a.Included, b.Included) {
			t.Fatalf("n %d: turns keep %v, steps with floor 1 %v", n, a.Included, b.Included)
		}
	}
}

func TestPolicy_TrimAndClearFieldsAreChecked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p    Policy
		want string
	}{
		{Policy{HistoryTrim: "pages"}, "history_trim"},
		{Policy{HistoryFloor: -0.1}, "history_floor"},
		{Policy{HistoryFloor: 1.5}, "history_floor"},
		{Policy{KeepToolResults: -1}, "keep_tool_results"},
		{Policy{ClearToolResultsOver: -1}, "clear_tool_results_over"},
	} {
		_, err := AssembleRequest(context.Background(), &Request{Message: "hi", Policy: &tc.p})
		if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an invalid request naming %s", tc.p, err, tc.want)
		}
	}
	p, err := resolvePolicy(&Policy{})
	if err != nil || p.HistoryTrim != HistoryTrimSteps || p.HistoryFloor != DefaultHistoryFloor || p.KeepToolResults != 0 || p.ClearToolResultsOver != 0 {
		t.Errorf("defaults %+v, %v", p, err)
	}
}

var clearedPattern = regexp.MustCompile(`^\[tool result cleared: (\w+), call "([^"]*)", (\d+) tokens\]$`)

// TestClearToolResults_PlaceholdersKeepThePairs: results older than the newest KeepToolResults exchanges
// (and, with ClearToolResultsOver, longer than it) become placeholders naming the tool, the call and the
// tokens cleared, counted exactly; the pairs stay valid in every format, the latest exchange is never
// cleared, and each cleared message is reported as kept and "cleared".
func TestClearToolResults_PlaceholdersKeepThePairs(t *testing.T) {
	t.Parallel()
	var h []Message
	for i := range 6 {
		id := fmt.Sprintf("call_%d", i)
		result := strings.Repeat(fmt.Sprintf("row %d of the report says nothing new. ", i), 5+10*(i%2)) // short, long, ...
		h = append(h,
			Message{Role: "user", Content: fmt.Sprintf("Look up report %d.", i)},
			Message{Role: "assistant", ToolCalls: []ToolCall{{ID: id, Type: "function", Function: ToolCallFunction{Name: "report", Arguments: `{}`}}}},
			Message{Role: "tool", ToolCallID: id, Content: result})
	}
	// The history ends with a tool exchange (required); its result is history[17].
	resultAt := func(i int) int { return 3*i + 2 }
	for _, format := range []string{FormatOpenAI, FormatAnthropic, FormatText} {
		for _, tc := range []struct {
			keep, over int
			cleared    []int // exchanges
		}{
			{0, 0, nil},
			{2, 0, []int{0, 1, 2, 3}},
			{0, 100, []int{1, 3}},
			{3, 100, []int{1}},
			{1, 0, []int{0, 1, 2, 3, 4}},
			{10, 0, nil},
		} {
			name := fmt.Sprintf("%s keep %d over %d", format, tc.keep, tc.over)
			req := &Request{Model: "gpt-4o", Format: format, History: h, Policy: &Policy{KeepToolResults: tc.keep, ClearToolResultsOver: tc.over}}
			res, err := AssembleRequest(context.Background(), req)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			checkHistoryShape(t, res)
			checkReportSums(t, req, res)
			switch format {
			case FormatOpenAI:
				if got := openAICount(t, res); got != res.TotalTokens {
					t.Fatalf("%s: total %d, recount %d", name, res.TotalTokens, got)
				}
			case FormatText:
				if got := countWith(t, res.Model, res.Text); got != res.TotalTokens {
					t.Fatalf("%s: total %d, recount %d", name, res.TotalTokens, got)
				}
			}
			hist := historyReport(t, res)
			var reported []int
			for _, d := range hist.Dropped {
				if d.Reason != ReasonCleared {
					t.Fatalf("%s: %s dropped (%s)", name, d.ID, d.Reason)
				}
				if !slices.Contains(hist.Included, d.ID) {
					t.Fatalf("%s: %s cleared but not kept", name, d.ID)
				}
				reported = append(reported, slices.IndexFunc(tc.cleared, func(e int) bool { return historyID(resultAt(e)) == d.ID }))
			}
			if len(reported) != len(tc.cleared) || slices.Contains(reported, -1) {
				t.Fatalf("%s: cleared %v, want the results of exchanges %v", name, hist.Dropped, tc.cleared)
			}
			// What the provider gets: each result, as it is or as its placeholder.
			results := toolResults(t, res)
			if len(results) != 6 {
				t.Fatalf("%s: %d tool results", name, len(results))
			}
			for e, got := range results {
				orig := h[resultAt(e)].Content
				if !slices.Contains(tc.cleared, e) {
					if got != orig && got != indentLines(orig) {
						t.Fatalf("%s: result %d changed: %q", name, e, got)
					}
					continue
				}
				m := clearedPattern.FindStringSubmatch(got)
				if m == nil || m[1] != "report" || m[2] != fmt.Sprintf("call_%d", e) {
					t.Fatalf("%s: result %d is %q", name, e, got)
				}
				if n, _ := strconv.Atoi(m[3]); n != countWith(t, "gpt-4o", orig) {
					t.Fatalf("%s: result %d says %d tokens, it had %d", name, e, n, countWith(t, "gpt-4o", orig))
				}
			}
		}
	}
}

// toolResults returns the text of each tool result a result sends, in order.
func toolResults(t *testing.T, res *Result) []string {
	t.Helper()
	var out []string
	switch res.Format {
	case FormatOpenAI:
		for _, m := range res.Messages {
			if m.Role == "tool" {
				out = append(out, m.Content)
			}
		}
	case FormatAnthropic:
		for _, m := range res.Messages {
			for _, b := range m.Blocks {
				if b.Type == "tool_result" {
					out = append(out, b.Content)
				}
			}
		}
	case FormatText:
		for _, turn := range strings.Split(res.Text, "\n\n") {
			if strings.HasPrefix(turn, "Tool result (") {
				_, text, _ := strings.Cut(turn, "): ")
				out = append(out, text)
			}
		}
	}
	return out
}

// TestTrimAndClear_EveryMessageAccountedFor: for random sessions with tool exchanges, policies and
// budgets, in every format, each message of the history is kept (as it is, or cleared to its placeholder
// and reported "cleared") or reported dropped, once, for one reason; the kept ones are a suffix of the
// history that starts a turn; the provider's rules hold and the count is exact.
func TestTrimAndClear_EveryMessageAccountedFor(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 8))
	var withSteps, withCleared, fit int
	defer func() {
		t.Logf("%d fit, %d cut in steps, %d with results cleared", fit, withSteps, withCleared)
		if fit < sweep(100) || withSteps < sweep(20) || withCleared < sweep(20) {
			t.Errorf("%d fit, %d cut in steps, %d with results cleared: the test proves little", fit, withSteps, withCleared)
		}
	}()
	for round := range sweep(150) {
		session := growingSession(r, 5+r.IntN(40), 10+r.IntN(60))
		if r.IntN(3) == 0 { // a store's window: the newest messages, numbered as in the whole session
			session = session[r.IntN(len(session)/2):]
		}
		policy := &Policy{HistoryFloor: []float64{0, 0.1, 0.5, 1}[r.IntN(4)], KeepToolResults: r.IntN(4), ClearToolResultsOver: []int{0, 0, 20, 60}[r.IntN(4)]}
		if r.IntN(3) == 0 {
			policy.HistoryTrim = HistoryTrimTurns
		}
		format := []string{FormatOpenAI, FormatAnthropic, FormatText}[r.IntN(3)]
		req := &Request{Model: "gpt-4o", Format: format, MaxTokens: 200 + r.IntN(3000), Message: "Next?", History: session, Policy: policy}
		what := fmt.Sprintf("round %d (%s, %d messages, budget %d, policy %+v)", round, format, len(session), req.MaxTokens, *policy)
		res, err := AssembleRequest(context.Background(), req)
		var be *BudgetError
		if errors.As(err, &be) {
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		checkHistoryShape(t, res)
		checkReportSums(t, req, res)
		if format == FormatOpenAI && openAICount(t, res) != res.TotalTokens {
			t.Fatalf("%s: total %d, recount %d", what, res.TotalTokens, openAICount(t, res))
		}
		hist := historyReport(t, res)
		kept := map[string]bool{}
		for _, id := range hist.Included {
			kept[id] = true
		}
		dropped, cleared := map[string]string{}, map[string]bool{}
		for _, d := range hist.Dropped {
			switch {
			case d.Reason == ReasonCleared:
				if !kept[d.ID] || cleared[d.ID] {
					t.Fatalf("%s: %s cleared but not kept, or twice", what, d.ID)
				}
				cleared[d.ID] = true
			case kept[d.ID] || dropped[d.ID] != "":
				t.Fatalf("%s: %s dropped (%s) and kept, or dropped twice", what, d.ID, d.Reason)
			case d.Reason != ReasonBudget && d.Reason != ReasonStep && d.Reason != ReasonOrphan:
				t.Fatalf("%s: %s dropped for %q", what, d.ID, d.Reason)
			case d.Reason == ReasonStep && policy.HistoryTrim == HistoryTrimTurns:
				t.Fatalf("%s: %s dropped for a step cut by turns", what, d.ID)
			default:
				dropped[d.ID] = d.Reason
			}
		}
		if len(kept)+len(dropped) != len(session) {
			t.Fatalf("%s: %d kept and %d dropped of %d", what, len(kept), len(dropped), len(session))
		}
		first := firstKept(t, res)
		for i := range session {
			if kept[historyID(i)] != (first >= 0 && i >= first) {
				t.Fatalf("%s: the kept history is not a suffix from %d: %v", what, first, hist.Included)
			}
		}
		if first >= 0 && session[first].Role != "user" {
			t.Fatalf("%s: the history starts with %s", what, session[first].Role)
		}
		// What is sent: the kept results as they are, or their placeholders where reported cleared.
		results := toolResults(t, res)
		n := 0
		for i := max(first, 0); first >= 0 && i < len(session); i++ {
			m := session[i]
			if m.Role != "tool" {
				continue
			}
			got := results[n]
			n++
			if cleared[historyID(i)] {
				if match := clearedPattern.FindStringSubmatch(got); match == nil || match[2] != m.ToolCallID {
					t.Fatalf("%s: %s reported cleared, sent as %q", what, historyID(i), got)
				}
			} else if got != m.Content {
				t.Fatalf("%s: %s sent as %q", what, historyID(i), got)
			}
		}
		if n != len(results) {
			t.Fatalf("%s: %d tool results sent, %d kept", what, len(results), n)
		}
		fit++
		if len(cleared) > 0 {
			withCleared++
		}
		for _, reason := range dropped {
			if reason == ReasonStep {
				withSteps++
				break
			}
		}
	}
}
