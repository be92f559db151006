package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/tokenizer"
)

// cookbookHistory is how many of the newest messages the Valkey cookbook's assemble_context reads (LRANGE
// -10 -1).
const cookbookHistory = 10

// cookbookPrompt is the Valkey cookbook's system prompt, which names the three fields even when they are
// empty.
func cookbookPrompt(a *store.Agent) string {
	return a.Instructions + "\n\nConstraints: " + a.Constraints + "\nFormat: " + a.OutputFormat
}

// cookbookTitle is the title the Valkey cookbook shows for a knowledge item, d.get('title', 'Doc'): Metadata["title"]
// when the key is there, even empty (an entry with "title": ""), else Source when it is not empty, else
// "Doc" (an entry without a title). The cookbook layout of the Valkey store writes an item's title by this
// rule and reads an entry back so that it holds: an entry's title is Metadata["title"], and an entry
// without one has neither Metadata["title"] nor Source.
func cookbookTitle(k store.Knowledge) string {
	if t, ok := k.Metadata["title"]; ok {
		return t
	}
	if k.Source != "" {
		return k.Source
	}
	return "Doc"
}

// assembleCookbook renders the sources as the Valkey cookbook's assemble_context does, message for message,
// with its untrusted values marked and escaped as PresetCookbook documents, and trims as its budget_context
// means to (system messages and the current message kept, history dropped oldest first) but by the exact
// count, with the chat format's overhead, instead of by characters.
func assembleCookbook(req *Request, snap *store.Snapshot) (*assembler.Result, error) {
	if req.Format != "" && req.Format != assembler.FormatOpenAI {
		return nil, fmt.Errorf("%w: the cookbook preset renders OpenAI chat messages only, not %q", ErrInvalidRequest, req.Format)
	}
	if len(req.Tools) > 0 || req.Policy != nil {
		return nil, fmt.Errorf("%w: the cookbook preset takes no tools or policy", ErrInvalidRequest)
	}
	// The request's own tool names are checked as Loom's rendering checks them; stored ones, which other
	// programs may have written, are shown as they are (escaped).
	for i, o := range req.ToolOutputs {
		if err := assembler.CheckToolName(o.Tool); err != nil {
			return nil, fmt.Errorf("tool_outputs[%d]: %w", i, err)
		}
	}
	for i, m := range req.History {
		for j, c := range m.ToolCalls {
			if err := assembler.CheckToolName(c.Function.Name); err != nil {
				return nil, fmt.Errorf("history[%d].tool_calls[%d]: %w", i, j, err)
			}
		}
	}
	name := req.Model
	if name == "" && snap.Agent != nil {
		name = snap.Agent.Model
	}
	if name == "" {
		name = assembler.DefaultModel
	}
	model, err := tokenizer.ForModel(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", assembler.ErrInvalidRequest, err)
	}
	budget := req.MaxTokens
	if budget == 0 && snap.Agent != nil {
		budget = snap.Agent.MaxTokens
	}
	if budget, err = assembler.PromptBudget(model, budget, req.ReserveOutput, 0); err != nil {
		return nil, err
	}
	counter := model.Counter()
	cost := func(m assembler.ChatMessage) int {
		return model.TokensPerMessage + counter.Count(m.Role) + counter.Count(m.Content)
	}

	type region struct {
		name  assembler.Region
		msgs  []assembler.ChatMessage
		ids   []string
		costs []int
	}
	var head, tail []*region // before and after the history
	add := func(list *[]*region, name assembler.Region, id, role, content string) {
		var r *region
		if n := len(*list); n > 0 && (*list)[n-1].name == name {
			r = (*list)[n-1]
		} else {
			r = &region{name: name}
			*list = append(*list, r)
		}
		m := assembler.ChatMessage{Role: role, Content: content}
		r.msgs, r.ids, r.costs = append(r.msgs, m), append(r.ids, id), append(r.costs, cost(m))
	}

	// 1. System instructions.
	var instructions []string
	if snap.Agent != nil {
		instructions = append(instructions, cookbookPrompt(snap.Agent))
	}
	if req.Instructions != "" {
		instructions = append(instructions, req.Instructions)
	}
	for i, s := range instructions {
		add(&head, assembler.RegionInstructions, "instructions["+strconv.Itoa(i)+"]", "system", s)
	}
	// 2. User memory: the stored facts in the store's order, then the inline ones, one line each.
	facts := append(append([]store.Fact(nil), snap.Facts...), req.Memory...)
	if len(facts) > 0 {
		lines := make([]string, len(facts))
		for i, f := range facts {
			lines[i] = "- " + oneLineEscape(f.Key) + ": " + oneLineEscape(f.Value)
		}
		add(&head, assembler.RegionMemory, "memory", "system",
			"User context:\n"+assembler.Tag("user_memory", strings.Join(lines, "\n"), "trusted", "false"))
	}
	// 3. Retrieved knowledge, each item's content in a context tag.
	kb := append(append([]store.Knowledge(nil), snap.Knowledge...), req.Knowledge...)
	if len(kb) > 0 {
		docs := make([]string, len(kb))
		for i, k := range kb {
			typ := k.Type
			if typ == "" {
				typ = "rag"
			}
			docs[i] = "[" + assembler.EscapeText(oneLineEscape(cookbookTitle(k))) + "]: " +
				assembler.Tag("context", k.Content, "type", typ, "trusted", strconv.FormatBool(k.Trusted))
		}
		add(&head, assembler.RegionKnowledge, "knowledge", "system", "Relevant knowledge:\n"+strings.Join(docs, "\n\n"))
	}
	// 4. Conversation history: role and content, as the cookbook reads them.
	history := &region{name: assembler.RegionHistory}
	var all []assembler.ChatMessage
	for _, m := range snap.Messages {
		all = append(all, assembler.ChatMessage{Role: m.Role, Content: m.Content})
	}
	for _, m := range req.History {
		all = append(all, assembler.ChatMessage{Role: m.Role, Content: m.Content})
	}
	limit := req.HistoryLimit
	if limit == 0 {
		limit = cookbookHistory
	}
	if len(all) > limit {
		all = all[len(all)-limit:]
	}
	for i, m := range all {
		history.msgs, history.ids, history.costs = append(history.msgs, m), append(history.ids, "history["+strconv.Itoa(i)+"]"), append(history.costs, cost(m))
	}
	// 5. Tool outputs of the session.
	outs := make([]assembler.ToolOutput, 0, len(snap.ToolOutputs)+len(req.ToolOutputs))
	for _, o := range snap.ToolOutputs {
		outs = append(outs, assembler.ToolOutput{Tool: o.Tool, Result: o.Result})
	}
	outs = append(outs, req.ToolOutputs...)
	// The cookbook reads data.get('tool', 'unknown') and data.get('result', '{}'): its defaults stand for
	// fields that are missing, which the cookbook layout of the Valkey store supplies when it reads such a
	// step, and a field that is there is shown as it is, even empty. So the tool and result are shown as they
	// are, escaped: the tool's name on its line, the result in a tool_output tag.
	for i, o := range outs {
		add(&tail, assembler.RegionToolOutputs, "tool_outputs["+strconv.Itoa(i)+"]", "system",
			"Tool '"+assembler.EscapeText(oneLineEscape(o.Tool))+"' returned: "+assembler.Tag("tool_output", o.Result, "trusted", "false"))
	}
	// 6. The current message.
	add(&tail, assembler.RegionMessage, "message", "user", req.Message)

	required := model.ReplyPriming
	for _, r := range append(append([]*region(nil), head...), tail...) {
		for _, c := range r.costs {
			required += c
		}
	}
	if required > budget {
		return nil, &assembler.BudgetError{Required: required, Available: budget}
	}
	// Trim history oldest first: keep the longest suffix that fits.
	used, keep := 0, len(history.msgs)
	for keep > 0 && required+used+history.costs[keep-1] <= budget {
		used += history.costs[keep-1]
		keep--
	}
	res := &assembler.Result{
		Format: assembler.FormatOpenAI, Model: model.Name, Encoding: model.Encoding, Budget: budget,
		TotalTokens: required + used, Exact: model.Exact(), Citations: []assembler.Reference{},
	}
	if !model.Exact() {
		res.Encoding = "estimate"
	}
	report := func(r *region, from int) {
		rr := assembler.RegionReport{Name: r.name, Included: []string{}, Dropped: []assembler.Dropped{}}
		for i := range r.msgs {
			if i < from {
				rr.Dropped = append(rr.Dropped, assembler.Dropped{ID: r.ids[i], Reason: assembler.ReasonBudget})
				continue
			}
			rr.Used += r.costs[i]
			rr.Included = append(rr.Included, r.ids[i])
		}
		rr.Budget = rr.Used
		if r == history {
			rr.Budget = budget - required
		}
		res.Report.Regions = append(res.Report.Regions, rr)
		res.Messages = append(res.Messages, r.msgs[from:]...)
	}
	for _, r := range head {
		report(r, 0)
	}
	report(history, keep)
	for _, r := range tail {
		report(r, 0)
	}
	// The stable prefix is the agent's system prompt, the first message when there is one.
	var prefix string
	if len(head) > 0 && head[0].name == assembler.RegionInstructions {
		prefix = head[0].msgs[0].Content
	}
	sum := sha256.Sum256([]byte(prefix))
	res.PrefixHash = hex.EncodeToString(sum[:16])
	return res, nil
}

// oneLineEscape escapes a value that the cookbook shows on a line of its own making (a memory key or value,
// a knowledge title, a tool's name) so that it stays on that line: each line break as a Go string literal
// writes it (\n, \r, \v, \f, \u0085, \u2028, \u2029), and the backslash as \\, so that the escape is
// unambiguous.
func oneLineEscape(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD") // as assembler.EscapeText will, so that no escape meets a broken character
	if !strings.ContainsAny(s, "\\\n\r\v\f\u0085\u2028\u2029") {
		return s
	}
	return lineEscaper.Replace(s)
}

var lineEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, "\r", `\r`, "\v", `\v`, "\f", `\f`,
	"\u0085", `\u0085`, "\u2028", `\u2028`, "\u2029", `\u2029`)
