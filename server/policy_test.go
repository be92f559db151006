package server_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/server"
)

// TestOpenAPI_PolicyMatchesTheStruct: the OpenAPI document's Policy schema names every field of a policy,
// and no other, and both the agent's and the assembly's policy refer to it.
func TestOpenAPI_PolicyMatchesTheStruct(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(server.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	var fields []string
	typ := reflect.TypeFor[loom.Policy]()
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		fields = append(fields, name)
	}
	var documented []string
	for name := range doc.Components.Schemas["Policy"].Properties {
		documented = append(documented, name)
	}
	slices.Sort(fields)
	slices.Sort(documented)
	if !slices.Equal(fields, documented) {
		t.Errorf("Policy's fields %q, documented %q", fields, documented)
	}
	for _, schema := range []string{"Agent", "AssembleRequest"} {
		if ref := string(doc.Components.Schemas[schema].Properties["policy"]); !strings.Contains(ref, `"#/components/schemas/Policy"`) {
			t.Errorf("%s.policy is %s", schema, ref)
		}
	}
}

// TestAPI_PolicyTrimsInStepsAndClearsToolResults: the history's trim and the clearing of tool results are
// set by a request's policy or the agent's, over HTTP, and reported per message; a bad value is a 400
// that names the field.
func TestAPI_PolicyTrimsInStepsAndClearsToolResults(t *testing.T) {
	t.Parallel()
	ts := newTestServer(t, newMemory(), server.Limits{})
	var history []map[string]any
	for i := range 12 {
		id := fmt.Sprintf("call_%d", i)
		history = append(history,
			map[string]any{"role": "user", "content": strings.Repeat(fmt.Sprintf("question %d about the trip. ", i), 6)},
			map[string]any{"role": "assistant", "tool_calls": []map[string]any{{"id": id, "type": "function", "function": map[string]any{"name": "search", "arguments": "{}"}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": strings.Repeat("a long result of the search. ", 12)},
			map[string]any{"role": "assistant", "content": strings.Repeat(fmt.Sprintf("answer %d. ", i), 10)})
	}
	reasons := func(res map[string]any) map[string]int {
		out := map[string]int{}
		regions, _ := res["report"].(map[string]any)["regions"].([]any)
		for _, r := range regions {
			r := r.(map[string]any)
			if r["name"] != "history" {
				continue
			}
			dropped, _ := r["dropped"].([]any)
			for _, d := range dropped {
				out[d.(map[string]any)["reason"].(string)]++
			}
		}
		return out
	}
	req := func(policy map[string]any) map[string]any {
		return map[string]any{"model": "gpt-4o", "max_tokens": 1500, "message": "And now?", "history": history, "policy": policy}
	}
	turns := reasons(ts.must("POST", "/v1/assemble", keyAcme, req(map[string]any{"history_trim": "turns"}), 200))
	steps := reasons(ts.must("POST", "/v1/assemble", keyAcme, req(map[string]any{"history_trim": "steps", "history_floor": 0.3}), 200))
	if turns["step"] != 0 || turns["budget"] == 0 || steps["step"] == 0 {
		t.Errorf("reasons cut by turns %v, in steps %v", turns, steps)
	}
	// An agent's policy clears the results of all but the newest exchange that the budget keeps.
	ts.must("PUT", "/v1/agents/clerk", keyAcme, map[string]any{"instructions": "Be brief.", "policy": map[string]any{"keep_tool_results": 1}}, 200)
	body := req(nil)
	delete(body, "policy")
	body["agent"] = "clerk"
	res := ts.must("POST", "/v1/assemble", keyAcme, body, 200)
	if reasons(res)["cleared"] == 0 || !strings.Contains(jsonString(res["messages"]), "[tool result cleared: search, call ") {
		t.Errorf("the agent's keep_tool_results cleared nothing: %v", reasons(res))
	}
	for _, bad := range []map[string]any{{"history_trim": "pages"}, {"history_floor": 2}, {"keep_tool_results": -1}, {"clear_tool_results_over": -5}} {
		code, out, _ := ts.call("POST", "/v1/assemble", keyAcme, req(bad))
		var field string
		for k := range bad {
			field = k
		}
		if code != 400 || !strings.Contains(jsonString(out), field) {
			t.Errorf("policy %v: %d %v, want 400 naming %s", bad, code, out, field)
		}
	}
}
