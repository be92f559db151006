// SPDX-License-Identifier: Apache-2.0

package loom_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/context-loom/loom"
)

// TestRegion_TextIsItsName: each region reads and writes as its name, in JSON too, and an unknown name is
// an invalid input, not a region.
func TestRegion_TextIsItsName(t *testing.T) {
	t.Parallel()
	names := map[loom.Region]string{loom.RegionInstructions: "instructions", loom.RegionTools: "tools", loom.RegionMemory: "memory",
		loom.RegionKnowledge: "knowledge", loom.RegionHistory: "history", loom.RegionToolOutputs: "tool_outputs", loom.RegionMessage: "message", 0: ""}
	for r, name := range names {
		if r.String() != name {
			t.Errorf("Region(%d).String() = %q, want %q", r, r.String(), name)
		}
		b, err := json.Marshal(loom.RegionPolicy{Name: r})
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"name":"` + name + `","priority":0}`; string(b) != want {
			t.Errorf("%s: JSON %s, want %s", name, b, want)
		}
		var back loom.RegionPolicy
		if err := json.Unmarshal(b, &back); err != nil || back.Name != r {
			t.Errorf("%s: read back as %v, %v", name, back.Name, err)
		}
		if got, err := loom.ParseRegion(name); err != nil || got != r {
			t.Errorf("ParseRegion(%q) = %v, %v", name, got, err)
		}
	}
	var p loom.RegionPolicy
	if err := json.Unmarshal([]byte(`{"name":"History"}`), &p); !errors.Is(err, loom.ErrInvalid) {
		t.Errorf("an unknown region's name: %v, want an invalid input", err)
	}
	if _, err := loom.Region(200).MarshalText(); !errors.Is(err, loom.ErrInvalid) || loom.Region(200).String() != "Region(200)" {
		t.Errorf("a value that is no region: %v, %s", err, loom.Region(200))
	}
}

func ExampleParseRegion() {
	r, err := loom.ParseRegion("tool_outputs")
	fmt.Println(r, r == loom.RegionToolOutputs, err)
	b, _ := json.Marshal(loom.RegionPolicy{Name: loom.RegionHistory, Priority: 1})
	fmt.Println(string(b))
	_, err = loom.ParseRegion("notes")
	fmt.Println(err)
	// Output:
	// tool_outputs true <nil>
	// {"name":"history","priority":1}
	// loom: invalid input: unknown region "notes" (known: instructions, tools, memory, knowledge, history, tool_outputs, message, summary)
}
