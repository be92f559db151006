package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/store"
)

// unknownTool is the name of a stored tool output whose tool has no name at all, as the Valkey cookbook
// shows a step without one (data.get('tool', 'unknown')).
const unknownTool = "unknown"

// usableToolNames makes the tool names of a snapshot's stored sources ones the assembler takes (the
// providers' rule, assembler.CheckToolName), and says what it changed. Loom's stores refuse other names when
// they are written, but the Valkey cookbook layout's keys are written by other programs too, and a store
// may hold names written before Loom checked them: one of them must not fail every assembly of the
// session. So, as merge leaves out a stored message of a role the assembler cannot use:
//
//   - an agent's tool with such a name is left out (a provider refuses a request that defines it);
//   - a stored message's tool call with such a name is left out, so its results are left without their
//     call, and the assembly drops them as orphans and reports them so;
//   - a stored tool output's tool, which is only a label of its result, is shown under a usable name: its
//     characters outside the rule as "_", cut to 64 bytes, "unknown" when it has none.
//
// Each change is reported as a degradation of its source. The snapshot's slices and agent are replaced,
// never changed in place: they may be the store's own.
func usableToolNames(snap *store.Snapshot) []Degradation {
	var out []Degradation
	if a := snap.Agent; a != nil && slices.ContainsFunc(a.Tools, badTool) {
		var first error
		copied := *a
		copied.Tools = slices.DeleteFunc(slices.Clone(a.Tools), func(t assembler.Tool) bool {
			err := assembler.CheckToolName(t.Function.Name)
			first = firstError(first, err)
			return err != nil
		})
		out = append(out, Degradation{Source: string(store.SourceAgent),
			Cause: fmt.Sprintf("%d of the agent's tools left out: %v", len(a.Tools)-len(copied.Tools), first)})
		snap.Agent = &copied
	}
	if slices.ContainsFunc(snap.Messages, badCalls) {
		var first error
		n := 0
		msgs := slices.Clone(snap.Messages)
		for i := range msgs {
			if !badCalls(msgs[i]) {
				continue
			}
			msgs[i].ToolCalls = slices.DeleteFunc(slices.Clone(msgs[i].ToolCalls), func(c assembler.ToolCall) bool {
				err := assembler.CheckToolName(c.Function.Name)
				if err != nil {
					first = firstError(first, err)
					n++
				}
				return err != nil
			})
		}
		out = append(out, Degradation{Source: string(store.SourceHistory),
			Cause: fmt.Sprintf("%d stored tool calls left out, and their results with them: %v", n, first)})
		snap.Messages = msgs
	}
	if slices.ContainsFunc(snap.ToolOutputs, func(o store.ToolOutput) bool { return assembler.CheckToolName(o.Tool) != nil }) {
		var first error
		var example string
		n := 0
		outs := slices.Clone(snap.ToolOutputs)
		for i := range outs {
			if err := assembler.CheckToolName(outs[i].Tool); err != nil {
				usable := usableToolName(outs[i].Tool)
				if first == nil {
					first, example = err, fmt.Sprintf(" (the first as %q)", usable)
				}
				outs[i].Tool = usable
				n++
			}
		}
		out = append(out, Degradation{Source: string(store.SourceToolOutputs),
			Cause: fmt.Sprintf("%d stored tool outputs shown under a usable tool name%s: %v", n, example, first)})
		snap.ToolOutputs = outs
	}
	return out
}

func badTool(t assembler.Tool) bool { return assembler.CheckToolName(t.Function.Name) != nil }

func badCalls(m store.Message) bool {
	return slices.ContainsFunc(m.ToolCalls, func(c assembler.ToolCall) bool { return assembler.CheckToolName(c.Function.Name) != nil })
}

// firstError returns first, or err when there is no first yet.
func firstError(first, err error) error {
	if first == nil {
		return err
	}
	return first
}

// usableToolName is name with each character outside the providers' rule as "_", cut to
// assembler.MaxToolName bytes; "unknown" for an empty name.
func usableToolName(name string) string {
	if name == "" {
		return unknownTool
	}
	var b strings.Builder
	for _, r := range name {
		if b.Len() == assembler.MaxToolName {
			break
		}
		if r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
