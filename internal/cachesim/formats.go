package cachesim

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/tokenizer"
)

// Formats are the renderings FormatFigures measures: Loom's five formats and the cookbook preset's (the
// cookbook format over the newest 10 messages, as the engine's preset reads them).
var Formats = []string{assembler.FormatOpenAI, assembler.FormatResponses, assembler.FormatAnthropic, assembler.FormatGemini,
	assembler.FormatText, "cookbook"}

// FormatTurn is one turn of a conversation rendered in one format.
type FormatTurn struct {
	Turn        int `json:"turn"`
	Breakpoints int `json:"breakpoints"` // the request's cache_control breakpoints (anthropic; 0 for the others)
	// CachedTokens is the previous turn's prompt up to its cache point, in tokens: up to its last
	// breakpoint (anthropic), or else up to the end of its history (the prefix the provider's automatic
	// cache finds again on the next turn). SharedTokens is how many of them start this turn's prompt, byte
	// for byte (cache_control markers aside, which are not the prompt's content): Share is their ratio.
	CachedTokens int     `json:"cached_tokens"`
	SharedTokens int     `json:"shared_tokens"`
	Share        float64 `json:"share"`
	// CutMoved is whether the kept history starts at another message than the turn before's (or the
	// summary changed): a turn whose prefix is expected to change.
	CutMoved bool `json:"cut_moved"`
	// Report is Loom's own cache report of the turn (Result.Cache), against the turn before's state.
	Report assembler.CacheReport `json:"report"`
}

// FormatFigures sums up a conversation's turns in one format.
type FormatFigures struct {
	Format         string       `json:"format"`
	Turns          []FormatTurn `json:"turns"`
	MaxBreakpoints int          `json:"max_breakpoints"`
	CutMoves       int          `json:"cut_moves"`
	// Stable is the share of the turns after the first whose cut did not move that are fully stable
	// (Share 1); MeanShare the mean Share of those turns.
	Stable    float64 `json:"stable"`
	MeanShare float64 `json:"mean_share"`
	// ReportAgrees is the share of the turns after the first where Loom's report says what the bytes
	// show: no break exactly when the previous turn's history is all shared.
	ReportAgrees float64 `json:"report_agrees"`
}

// RunFormats plays the conversation of c (Policy and Budget apply; the model is each format's) in every
// format of Formats, with a tool the history calls, and measures each turn's cache stability.
func RunFormats(ctx context.Context, c Config) ([]FormatFigures, error) {
	var out []FormatFigures
	for _, f := range Formats {
		fig, err := runFormat(ctx, c, f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, fig)
	}
	return out, nil
}

func runFormat(ctx context.Context, c Config, format string) (FormatFigures, error) {
	c.Turns = orDefault(c.Turns, 200)
	c.MessageTokens = orDefault(c.MessageTokens, 150)
	c.ToolEvery = orDefault(c.ToolEvery, 5)
	c.Budget = orDefault(c.Budget, 4000)
	model := "gpt-4o"
	switch format {
	case assembler.FormatAnthropic:
		model = "claude-sonnet-4-5"
	case assembler.FormatGemini:
		model = "gemini-2.5-flash"
	}
	enc := tokenizer.O200K() // the shares are counted in one encoding for every format: a proxy for each provider's
	conv := newConversation(c, enc)
	tools := []assembler.Tool{{Type: "function", Function: assembler.ToolFunction{Name: "search_bookings",
		Description: "Search the customer's bookings.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)}}}

	fig := FormatFigures{Format: format}
	var prevBytes []byte
	prevPoint, prevHist := 0, 0
	var prevState *assembler.CacheState
	stable, counted, agree := 0, 0, 0
	share := 0.0
	for turn := range c.Turns {
		message := conv.text()
		req := &assembler.Request{Model: model, MaxTokens: c.Budget, Instructions: instructions, Tools: tools, History: conv.history,
			Message: message, Policy: c.Policy, CacheReport: true, CachePrevious: prevState}
		if format == "cookbook" {
			// The preset: the newest 10 messages' roles and contents, no tools, no policy.
			h := conv.history[max(len(conv.history)-10, 0):]
			req.History = make([]assembler.Message, len(h))
			for i, m := range h {
				req.History[i] = assembler.Message{Role: m.Role, Content: m.Content}
			}
			req.Tools, req.Policy, req.Formatter = nil, nil, &assembler.Cookbook{}
		} else {
			req.Format = format
		}
		res, err := assembler.AssembleRequest(ctx, req)
		if err != nil {
			return FormatFigures{}, fmt.Errorf("turn %d: %w", turn, err)
		}
		cur, point, histEnd, bps, err := requestBytes(res)
		if err != nil {
			return FormatFigures{}, fmt.Errorf("turn %d: %w", turn, err)
		}
		t := FormatTurn{Turn: turn, Breakpoints: bps}
		if res.Cache != nil {
			t.Report = *res.Cache
		}
		if prevBytes != nil {
			t.CutMoved = prevState.History.Messages > 0 && prevState.History.First != res.CacheState.History.First ||
				t.Report.Region == "summary"
			n := min(commonPrefixBytes(prevBytes, cur), prevPoint)
			t.CachedTokens = enc.Count(string(prevBytes[:prevPoint]))
			t.SharedTokens = t.CachedTokens
			if n < prevPoint {
				t.SharedTokens = enc.Count(string(prevBytes[:n]))
			}
			t.Share = 1
			if t.CachedTokens > 0 {
				t.Share = float64(t.SharedTokens) / float64(t.CachedTokens)
			}
			if t.CutMoved {
				fig.CutMoves++
			} else {
				counted++
				share += t.Share
				if t.SharedTokens == t.CachedTokens {
					stable++
				}
			}
			// The report agrees with the bytes when it reports no break exactly when the previous
			// prompt's stable parts and history start this one's.
			histShared := commonPrefixBytes(prevBytes, cur) >= prevHist
			if (t.Report.Region == "") == histShared {
				agree++
			}
		}
		fig.MaxBreakpoints = max(fig.MaxBreakpoints, bps)
		fig.Turns = append(fig.Turns, t)
		prevBytes, prevPoint, prevHist, prevState = cur, point, histEnd, res.CacheState

		conv.happen(turn, message)
	}
	if counted > 0 {
		fig.Stable, fig.MeanShare = float64(stable)/float64(counted), share/float64(counted)
	}
	if n := len(fig.Turns) - 1; n > 0 {
		fig.ReportAgrees = float64(agree) / float64(n)
	}
	return fig, nil
}

// cacheControl matches a cache_control marker, the last field of the block it is on.
var cacheControl = regexp.MustCompile(`,"cache_control":\{[^}]*\}`)

// requestBytes is the result's request as a provider reads it, in its order, without the cache_control
// markers (they place the cache, they are not the prompt): the bytes, where the cache point ends in them
// (the last breakpoint's block, or the end of the history), where the history ends, and how many
// breakpoints there are.
func requestBytes(res *assembler.Result) (_ []byte, point, histEnd, breakpoints int, _ error) {
	var v any
	var lastHistory func() (any, error) // the request as far as the end of the history, to find it in the bytes
	switch res.Format {
	case assembler.FormatAnthropic:
		system := any(res.System)
		if res.SystemBlocks != nil {
			system = res.SystemBlocks
		}
		v = struct {
			Tools    []json.RawMessage       `json:"tools"`
			System   any                     `json:"system"`
			Messages []assembler.ChatMessage `json:"messages"`
		}{res.Tools, system, res.Messages}
		lastHistory = func() (any, error) {
			return struct {
				Tools    []json.RawMessage       `json:"tools"`
				System   any                     `json:"system"`
				Messages []assembler.ChatMessage `json:"messages"`
			}{res.Tools, system, res.Messages[:max(len(res.Messages)-1, 0)]}, nil
		}
	case assembler.FormatResponses:
		v = struct {
			Tools        []json.RawMessage     `json:"tools"`
			Instructions string                `json:"instructions"`
			Input        []assembler.InputItem `json:"input"`
		}{res.Tools, res.Instructions, res.Input}
		lastHistory = func() (any, error) {
			return struct {
				Tools        []json.RawMessage     `json:"tools"`
				Instructions string                `json:"instructions"`
				Input        []assembler.InputItem `json:"input"`
			}{res.Tools, res.Instructions, res.Input[:max(len(res.Input)-1, 0)]}, nil
		}
	case assembler.FormatGemini:
		v = struct {
			Tools             []json.RawMessage         `json:"tools"`
			SystemInstruction *assembler.GeminiContent  `json:"systemInstruction"`
			Contents          []assembler.GeminiContent `json:"contents"`
		}{res.Tools, res.SystemInstruction, res.Contents}
		lastHistory = func() (any, error) {
			return struct {
				Tools             []json.RawMessage         `json:"tools"`
				SystemInstruction *assembler.GeminiContent  `json:"systemInstruction"`
				Contents          []assembler.GeminiContent `json:"contents"`
			}{res.Tools, res.SystemInstruction, res.Contents[:max(len(res.Contents)-1, 0)]}, nil
		}
	case assembler.FormatText:
		b := []byte(res.Text)
		// The newest turn is the text's last "User:" block.
		i := max(bytes.LastIndex(b, []byte("\nUser:")), 0)
		return b, i, i, 0, nil
	default: // openai, and the cookbook's OpenAI messages
		v = struct {
			Tools    []json.RawMessage       `json:"tools"`
			Messages []assembler.ChatMessage `json:"messages"`
		}{res.Tools, res.Messages}
		lastHistory = func() (any, error) {
			return struct {
				Tools    []json.RawMessage       `json:"tools"`
				Messages []assembler.ChatMessage `json:"messages"`
			}{res.Tools, res.Messages[:max(len(res.Messages)-1, 0)]}, nil
		}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	stripped, point, marks := strip(raw)
	h, err := lastHistory()
	if err != nil {
		return nil, 0, 0, 0, err
	}
	hraw, err := json.Marshal(h)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	hb, _, _ := strip(hraw)
	histEnd = len(hb) - 2 // without the closing "]}" of the shorter request
	if !bytes.HasPrefix(stripped, hb[:histEnd]) {
		return nil, 0, 0, 0, fmt.Errorf("the history's bytes do not start the request's")
	}
	if point < 0 {
		point = histEnd
		if res.Format == assembler.FormatAnthropic { // without a breakpoint, nothing is cached
			point = 0
		}
	}
	return stripped, point, histEnd, marks, nil
}

// strip removes the cache_control markers of raw and returns what is left, where the last marker's
// block ends in it (-1: none), and how many there were.
func strip(raw []byte) ([]byte, int, int) {
	marks := cacheControl.FindAllIndex(raw, -1)
	stripped := make([]byte, 0, len(raw))
	from, point := 0, -1
	for _, m := range marks {
		stripped = append(stripped, raw[from:m[0]]...)
		from = m[1]
		point = len(stripped) + 1 // the block's closing brace follows its last field, the marker
	}
	return append(stripped, raw[from:]...), point, len(marks)
}

// commonPrefixBytes is the length of the longest prefix that a and b share.
func commonPrefixBytes(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
