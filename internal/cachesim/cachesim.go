// Package cachesim measures how well an assembly's prompt keeps its prefix from one turn to the next, which
// is what a provider's prompt cache serves: it plays a growing conversation, assembles it on every turn
// with the assembler, and compares each turn's prompt with the one before it.
//
// The conversation is the one the compaction issue names: each message about MessageTokens tokens, a
// tool exchange (the assistant's call and the tool's result) every ToolEvery turns, assembled each turn into
// a budget of Budget tokens in the openai format, its messages numbered by Seq as a store numbers them.
package cachesim

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/tokenizer"
)

// Config is a conversation to play. Zero fields take the defaults named beside them.
type Config struct {
	Turns         int    // 200
	MessageTokens int    // about 150 tokens a message (its words vary by a fifth either way)
	ToolEvery     int    // a tool exchange every 5th turn
	Budget        int    // 4,000 tokens
	Model         string // gpt-4o
	Seed          uint64
	// Policy is the assembly's policy (nil: the default, which cuts the history in steps).
	Policy *loom.Policy
}

// Figures are what a conversation measured.
type Figures struct {
	Turns int `json:"turns"`
	// Trimmed is how many turns' assemblies left some of the history out (a cleared result is kept).
	Trimmed int `json:"trimmed"`
	// PrefixChanges is how many turns' first kept history message differs from the turn's before.
	PrefixChanges int `json:"prefix_changes"`
	// Cacheable is the mean, over the turns after the first, of the share of the turn's prompt (in
	// tokens) that the prompt of the turn before starts with: what a prompt cache could serve.
	Cacheable float64 `json:"cacheable"`
	// HistoryUsed is the mean, over the trimmed turns, of the share of the history's budget (its
	// report's Budget) that the kept history uses.
	HistoryUsed float64 `json:"history_used"`
	// HistoryBudget is the mean of the history's budget over the trimmed turns, and TurnTokens the mean of
	// what a turn adds to the history (the user's message, a tool exchange every ToolEvery turns, the
	// answer), in tokens as the history's report counts them: with Figures of the turns trim, they bound
	// what any trim can do (see the script's note).
	HistoryBudget float64 `json:"history_budget"`
	TurnTokens    float64 `json:"turn_tokens"`
}

// Run plays the conversation of c and measures it.
func Run(ctx context.Context, c Config) (Figures, error) {
	c.Turns = orDefault(c.Turns, 200)
	c.MessageTokens = orDefault(c.MessageTokens, 150)
	c.ToolEvery = orDefault(c.ToolEvery, 5)
	c.Budget = orDefault(c.Budget, 4000)
	if c.Model == "" {
		c.Model = "gpt-4o"
	}
	model, err := tokenizer.ForModel(c.Model)
	if err != nil {
		return Figures{}, err
	}
	enc, ok := model.Counter().(*tokenizer.Encoding)
	if !ok {
		return Figures{}, fmt.Errorf("cachesim: %s has no exact encoding", c.Model)
	}
	conv := newConversation(c, enc)
	var f Figures
	var prev []int
	encoded := map[string][]int{}
	lastFirst := int64(-1)
	cacheable, used, budget := 0.0, 0.0, 0.0
	grew, lastUsed := 0, -1 // what the history used while nothing was trimmed, for TurnTokens
	for turn := range c.Turns {
		message := conv.text()
		res, err := assembler.AssembleRequest(ctx, &assembler.Request{
			Model: c.Model, MaxTokens: c.Budget, Instructions: instructions, History: conv.history, Message: message, Policy: c.Policy,
		})
		if err != nil {
			return Figures{}, fmt.Errorf("turn %d: %w", turn, err)
		}
		f.Turns++
		prompt := promptTokens(enc, res, encoded)
		if prev != nil {
			cacheable += float64(commonPrefix(prev, prompt)) / float64(len(prompt))
		}
		prev = prompt
		for _, reg := range res.Report.Regions {
			if reg.Name != loom.RegionHistory {
				continue
			}
			first := int64(0) // none kept
			if len(reg.Included) > 0 {
				i, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(reg.Included[0], "history["), "]"))
				if err != nil {
					return Figures{}, fmt.Errorf("turn %d: report id %q", turn, reg.Included[0])
				}
				first = conv.history[i].Seq
			}
			if lastFirst >= 0 && first != lastFirst {
				f.PrefixChanges++
			}
			lastFirst = first
			trimmed := false // a message left out; a result cleared is kept
			for _, d := range reg.Dropped {
				trimmed = trimmed || d.Reason != assembler.ReasonCleared
			}
			if trimmed {
				f.Trimmed++
				used += float64(reg.Used) / float64(max(reg.Budget, 1))
				budget += float64(reg.Budget)
			} else {
				lastUsed, grew = reg.Used, turn
			}
		}
		conv.happen(turn, message)
	}
	if f.Turns > 1 {
		f.Cacheable = cacheable / float64(f.Turns-1)
	}
	if f.Trimmed > 0 {
		f.HistoryUsed = used / float64(f.Trimmed)
		f.HistoryBudget = budget / float64(f.Trimmed)
	}
	if grew > 0 {
		f.TurnTokens = float64(lastUsed) / float64(grew) // turns 0..grew-1 are in the history of turn grew
	}
	return f, nil
}

func orDefault(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

// words are the sentences' vocabulary: common words, about a token each.
var words = strings.Fields(`the booking flight hotel date price ticket seat change cancel refund city trip train
	night room guest card email name time day week month airport gate bag meal plan offer fee total order status
	confirm check pay travel route stop early late open close a an and or to from for with on at in of by`)

// sentence returns words of r's choosing that count about n tokens in enc: each word is counted with the
// space before it, and the counts added.
func sentence(r *rand.Rand, enc *tokenizer.Encoding, n int) string {
	var b strings.Builder
	for tokens := 0; tokens < n; {
		w := words[r.IntN(len(words))]
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		tokens += enc.Count(" " + w)
	}
	b.WriteByte('.')
	return b.String()
}

// promptTokens is the result's prompt as a sequence of tokens: each message's role, tool call id, content
// and tool calls, encoded (once: encoded is the cache), in order. It stands for the rendering a provider
// caches, by prefix.
func promptTokens(enc *tokenizer.Encoding, res *assembler.Result, encoded map[string][]int) []int {
	var ids []int
	for _, m := range res.Messages {
		var b strings.Builder
		b.WriteString("<|" + m.Role + "|>" + m.ToolCallID + "\n" + m.Content)
		if len(m.ToolCalls) > 0 {
			calls, _ := json.Marshal(m.ToolCalls)
			b.Write(calls)
		}
		b.WriteString("<|end|>")
		text := b.String()
		e, ok := encoded[text]
		if !ok {
			e = enc.Encode(text)
			encoded[text] = e
		}
		ids = append(ids, e...)
	}
	return ids
}

// commonPrefix is the length of the longest prefix that a and b share.
func commonPrefix(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// instructions are the support agent's, the same in every simulation.
const instructions = "You are a support agent for a travel company. Answer from the bookings and the tools' results; " +
	"say so when you do not know. Keep answers short, and never invent a booking, a price or a date."

// conversation is the simulated session: its history and the random texts of its messages, the same
// for a seed whatever is measured of it.
type conversation struct {
	c       Config
	r       *rand.Rand
	enc     *tokenizer.Encoding
	history []assembler.Message
}

func newConversation(c Config, enc *tokenizer.Encoding) *conversation {
	return &conversation{c: c, r: rand.New(rand.NewPCG(c.Seed, 16)), enc: enc}
}

// text is a message's text: about MessageTokens tokens (80% to 120%).
func (v *conversation) text() string {
	return sentence(v.r, v.enc, v.c.MessageTokens*(80+v.r.IntN(41))/100)
}

func (v *conversation) add(m assembler.Message) {
	m.Seq = int64(len(v.history) + 1)
	v.history = append(v.history, m)
}

// happen records the turn: the user's message, a tool exchange every ToolEvery turns, the answer.
func (v *conversation) happen(turn int, message string) {
	v.add(assembler.Message{Role: "user", Content: message})
	if turn%v.c.ToolEvery == v.c.ToolEvery-1 {
		id := "call_" + strconv.Itoa(turn)
		v.add(assembler.Message{Role: "assistant", ToolCalls: []assembler.ToolCall{{ID: id, Type: "function",
			Function: assembler.ToolCallFunction{Name: "search_bookings", Arguments: `{"query":"booking ` + strconv.Itoa(turn) + `"}`}}}})
		v.add(assembler.Message{Role: "tool", ToolCallID: id, Content: v.text()})
	}
	v.add(assembler.Message{Role: "assistant", Content: v.text()})
}
