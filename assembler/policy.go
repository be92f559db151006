package assembler

import (
	"fmt"
	"slices"

	"github.com/context-loom/loom"
)

// Regions (see [loom.Region]).
type Region = loom.Region

// The regions.
const (
	RegionInstructions = loom.RegionInstructions
	RegionTools        = loom.RegionTools
	RegionMemory       = loom.RegionMemory
	RegionKnowledge    = loom.RegionKnowledge
	RegionHistory      = loom.RegionHistory
	RegionToolOutputs  = loom.RegionToolOutputs
	RegionMessage      = loom.RegionMessage
	RegionSummary      = loom.RegionSummary
)

// Knowledge orders.
const (
	OrderScore           = loom.OrderScore
	OrderDocument        = loom.OrderDocument
	OrderLostInTheMiddle = loom.OrderLostInTheMiddle
)

// Policy sets how the optional regions share the budget (see [loom.Policy]).
type Policy = loom.Policy

// RegionPolicy is one optional region's share.
type RegionPolicy = loom.RegionPolicy

// DefaultPolicy gives memory and the session's tool outputs first call on the budget, then the
// conversation, then knowledge: an agent mid-task needs its tool results and the thread more than extra
// background. History and knowledge are promised a fifth each when they have that much. The history is
// cut in steps that keep its start, and so the prompt cache, over the turns that follow a cut, keeping at
// least 30% of its room; tool results are not cleared.
func DefaultPolicy() Policy {
	return Policy{
		Regions: []RegionPolicy{
			{Name: RegionMemory, Priority: 1, MaxShare: 0.15},
			{Name: RegionToolOutputs, Priority: 2, MaxShare: 0.3},
			{Name: RegionHistory, Priority: 3, MinShare: 0.2, MaxShare: 0.6},
			{Name: RegionKnowledge, Priority: 4, MinShare: 0.2, MaxShare: 0.6},
		},
		KnowledgeOrder:      OrderScore,
		NearDuplicate:       0.9,
		MaxToolOutputTokens: 1000,
		HistoryTrim:         HistoryTrimSteps,
		HistoryFloor:        DefaultHistoryFloor,
	}
}

// History trims (see [loom.HistoryTrimSteps]).
const (
	HistoryTrimSteps = loom.HistoryTrimSteps
	HistoryTrimTurns = loom.HistoryTrimTurns
)

// DefaultHistoryFloor is the share of its room that a history cut in steps keeps at least (Policy.HistoryFloor).
const DefaultHistoryFloor = 0.3

// resolvePolicy fills p's zero values from DefaultPolicy and validates it.
func resolvePolicy(p *Policy) (Policy, error) {
	def := DefaultPolicy()
	if p == nil {
		return def, nil
	}
	out := *p
	if len(out.Regions) == 0 {
		out.Regions = def.Regions
	} else {
		out.Regions = slices.Clone(out.Regions)
		var seen [numRegions]bool
		for _, r := range out.Regions {
			switch r.Name {
			case RegionMemory, RegionToolOutputs, RegionHistory, RegionKnowledge:
			default:
				return Policy{}, fmt.Errorf("%w: policy for %q: only memory, tool_outputs, history and knowledge are optional regions", ErrInvalidRequest, r.Name)
			}
			if seen[r.Name] {
				return Policy{}, fmt.Errorf("%w: policy names %q twice", ErrInvalidRequest, r.Name)
			}
			seen[r.Name] = true
			if r.MinShare < 0 || r.MaxShare < 0 || r.MinShare > 1 || r.MaxShare > 1 || (r.MaxShare > 0 && r.MinShare > r.MaxShare) {
				return Policy{}, fmt.Errorf("%w: policy for %q: shares must be in [0, 1] with min <= max", ErrInvalidRequest, r.Name)
			}
		}
		// Regions the policy leaves out keep their default share, after the ones it names.
		for _, d := range def.Regions {
			if !seen[d.Name] {
				d.Priority += 1000
				out.Regions = append(out.Regions, d)
			}
		}
	}
	for i := range out.Regions {
		if out.Regions[i].MaxShare == 0 {
			out.Regions[i].MaxShare = 1
		}
	}
	slices.SortStableFunc(out.Regions, func(a, b RegionPolicy) int { return a.Priority - b.Priority })
	switch out.KnowledgeOrder {
	case "":
		out.KnowledgeOrder = OrderScore
	case OrderScore, OrderDocument, OrderLostInTheMiddle:
	default:
		return Policy{}, fmt.Errorf("%w: knowledge order %q (known: score, document, lost_in_the_middle)", ErrInvalidRequest, out.KnowledgeOrder)
	}
	if out.NearDuplicate == 0 {
		out.NearDuplicate = def.NearDuplicate
	}
	if out.NearDuplicate < 0 || out.NearDuplicate > 1 {
		return Policy{}, fmt.Errorf("%w: near_duplicate must be in [0, 1]", ErrInvalidRequest)
	}
	if out.MaxToolOutputTokens == 0 {
		out.MaxToolOutputTokens = def.MaxToolOutputTokens
	}
	if out.MaxToolOutputTokens < 20 {
		return Policy{}, fmt.Errorf("%w: max_tool_output_tokens must be at least 20", ErrInvalidRequest)
	}
	if out.Margin < 0 {
		return Policy{}, fmt.Errorf("%w: margin must not be negative", ErrInvalidRequest)
	}
	switch out.HistoryTrim {
	case "":
		out.HistoryTrim = def.HistoryTrim
	case HistoryTrimSteps, HistoryTrimTurns:
	default:
		return Policy{}, fmt.Errorf("%w: history_trim %q (known: steps, turns)", ErrInvalidRequest, out.HistoryTrim)
	}
	if out.HistoryFloor == 0 {
		out.HistoryFloor = def.HistoryFloor
	}
	if !(out.HistoryFloor > 0 && out.HistoryFloor <= 1) { // NaN too
		return Policy{}, fmt.Errorf("%w: history_floor must be in (0, 1]", ErrInvalidRequest)
	}
	if out.KeepToolResults < 0 {
		return Policy{}, fmt.Errorf("%w: keep_tool_results must not be negative", ErrInvalidRequest)
	}
	if out.ClearToolResultsOver < 0 {
		return Policy{}, fmt.Errorf("%w: clear_tool_results_over must not be negative", ErrInvalidRequest)
	}
	return out, nil
}

// allocate shares available tokens among the optional regions, given what each could use: demand(name,
// upTo) is the smaller of what region name's candidates cost and upTo (at most available), so that a
// region's candidates are costed only as far as the shares need.
func allocate(p Policy, available int, demand func(r Region, upTo int) int) regionTokens {
	var got regionTokens
	left := available
	// give gives name what it could use up to a total of upTo, as far as what is left goes: its demand is
	// asked for only that far.
	give := func(name Region, upTo int) {
		if left <= 0 {
			return
		}
		n := demand(name, min(upTo, got[name]+left)) - got[name]
		if n > 0 {
			got[name] += n
			left -= n
		}
	}
	for _, r := range p.Regions { // minimum shares
		give(r.Name, int(r.MinShare*float64(available)))
	}
	for _, r := range p.Regions { // up to the maximum share, by priority
		give(r.Name, int(r.MaxShare*float64(available)))
	}
	for _, r := range p.Regions { // the rest, past the maximum, by priority
		give(r.Name, available)
	}
	return got
}
