package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/store"
)

// cookbookHistory is how many of the newest messages the Valkey cookbook's assemble_context reads (LRANGE
// -10 -1).
const cookbookHistory = 10

// assembleCookbook assembles the sources with the cookbook format of the assembler (see
// assembler.Cookbook), as the Valkey cookbook's assemble_context reads them: the agent's configuration, the
// stored facts then the inline ones, the stored knowledge then the inline (and retrieved) items, the
// newest req.HistoryLimit (10 by default) of the stored then the inline messages, each as its role and
// content, the stored tool outputs then the inline ones, and the message. The model and the budget are the
// request's, else the agent's.
func assembleCookbook(ctx context.Context, req *Request, snap *store.Snapshot) (*assembler.Result, error) {
	if req.Format != "" && req.Format != assembler.FormatOpenAI {
		return nil, fmt.Errorf("%w: the cookbook preset renders OpenAI chat messages only, not %q", ErrInvalidRequest, req.Format)
	}
	if len(req.Tools) > 0 || req.Policy != nil || req.Formatter != nil {
		return nil, fmt.Errorf("%w: the cookbook preset takes no tools, policy or formatter", ErrInvalidRequest)
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
	out := assembler.Request{
		Model: req.Model, MaxTokens: req.MaxTokens, ReserveOutput: req.ReserveOutput,
		Formatter:    &assembler.Cookbook{Agent: snap.Agent},
		Instructions: req.Instructions,
		Memory:       append(slices.Clip(snap.Facts), req.Memory...),
		Knowledge:    append(slices.Clip(snap.Knowledge), req.Knowledge...),
		ToolOutputs:  append(slices.Clip(snap.ToolOutputs), req.ToolOutputs...),
		Message:      req.Message,
		MessageParts: req.MessageParts,
		CacheScope:   req.CacheScope,
		CacheReport:  req.CacheReport, CachePrevious: req.CachePrevious,
		CountDropped: req.CountDropped,
	}
	if a := snap.Agent; a != nil {
		out.Model, out.MaxTokens = cmp.Or(out.Model, a.Model), cmp.Or(out.MaxTokens, a.MaxTokens)
	}
	// The history: role and content, as the cookbook reads them, and a user message's content parts, which
	// the cookbook format writes as lines after its content (an image as assembler.ImagePlaceholder).
	history := make([]assembler.Message, 0, len(snap.Messages)+len(req.History))
	for _, m := range snap.Messages {
		history = append(history, assembler.Message{Role: m.Role, Content: m.Content, Parts: m.Parts})
	}
	for _, m := range req.History {
		history = append(history, assembler.Message{Role: m.Role, Content: m.Content, Parts: m.Parts})
	}
	limit := cmp.Or(req.HistoryLimit, cookbookHistory)
	if len(history) > limit {
		history = history[len(history)-limit:]
	}
	out.History = history
	return assembler.AssembleRequest(ctx, &out)
}
