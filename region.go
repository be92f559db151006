// SPDX-License-Identifier: Apache-2.0

package loom

import (
	"fmt"
	"strconv"
)

// Region is a part of an assembly: the instructions, the tool definitions, user memory, knowledge, the
// conversation history, the session's tool outputs or the current message. Its text form is its name
// ("tool_outputs"), which is how JSON writes it (a RegionPolicy's name, a report's region); the zero Region
// is none of them, and its text is "".
type Region uint8

// The regions, in the order a rendering lays them out, but for RegionSummary, which came later and goes
// after the stable prefix (instructions, pinned memory). RegionSummary is the last.
const (
	RegionInstructions Region = iota + 1
	RegionTools
	RegionMemory
	RegionKnowledge
	RegionHistory
	RegionToolOutputs
	RegionMessage
	// RegionSummary is the session's running summary of the history's older turns (see Summary), laid out
	// after the stable prefix.
	RegionSummary
)

var regionNames = [...]string{"", "instructions", "tools", "memory", "knowledge", "history", "tool_outputs", "message", "summary"}

// String returns the region's name ("tool_outputs"), "" for the zero Region, and "Region(n)" for a value
// that is no region.
func (r Region) String() string {
	if int(r) < len(regionNames) {
		return regionNames[r]
	}
	return "Region(" + strconv.Itoa(int(r)) + ")"
}

// MarshalText returns the region's name. A value that is no region is an error wrapping ErrInvalid.
func (r Region) MarshalText() ([]byte, error) {
	if int(r) >= len(regionNames) {
		return nil, fmt.Errorf("%w: region %d", ErrInvalid, int(r))
	}
	return []byte(regionNames[r]), nil
}

// UnmarshalText sets r to the region named text ("" is the zero Region). An unknown name is an error
// wrapping ErrInvalid.
func (r *Region) UnmarshalText(text []byte) error {
	reg, err := ParseRegion(string(text))
	if err != nil {
		return err
	}
	*r = reg
	return nil
}

// ParseRegion returns the region named name ("" is the zero Region); an unknown name is an error wrapping
// ErrInvalid.
func ParseRegion(name string) (Region, error) {
	for i, n := range regionNames {
		if n == name {
			return Region(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown region %s (known: instructions, tools, memory, knowledge, history, tool_outputs, message, summary)", ErrInvalid, quoteName(name))
}
