package assembler_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/context-loom/loom/assembler"
)

// A long session in a small budget: the history is cut in steps (the default), so the turns that follow
// keep its first message, and the results of all but the newest tool exchange are cleared to placeholders
// that keep their calls valid.
func ExampleAssembleRequest_compaction() {
	var history []assembler.Message
	for i := range 12 {
		id := fmt.Sprintf("call_%d", i)
		history = append(history,
			assembler.Message{Seq: int64(4*i + 1), Role: "user", Content: fmt.Sprintf("Where is order %d?", i)},
			assembler.Message{Seq: int64(4*i + 2), Role: "assistant", ToolCalls: []assembler.ToolCall{{ID: id, Type: "function",
				Function: assembler.ToolCallFunction{Name: "lookup", Arguments: fmt.Sprintf(`{"order":%d}`, i)}}}},
			assembler.Message{Seq: int64(4*i + 3), Role: "tool", ToolCallID: id, Content: strings.Repeat("shipped by DHL, tracking number 00340434, ", 4)},
			assembler.Message{Seq: int64(4*i + 4), Role: "assistant", Content: fmt.Sprintf("Order %d has shipped.", i)})
	}
	for turn := 8; turn <= 12; turn++ { // five turns of the session, each with one more exchange
		res, err := assembler.AssembleRequest(context.Background(), &assembler.Request{
			Model: "gpt-4o", MaxTokens: 450, Message: "Thanks!", History: history[:4*turn],
			Policy: &assembler.Policy{KeepToolResults: 1},
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		reasons := map[string]int{}
		for _, r := range res.Report.Regions {
			if r.Name == assembler.RegionHistory {
				for _, d := range r.Dropped {
					reasons[d.Reason]++
				}
			}
		}
		fmt.Printf("turn %d starts with %q; dropped %d (budget), %d (step); %d cleared\n",
			turn, res.Messages[0].Content, reasons[assembler.ReasonBudget], reasons[assembler.ReasonStep], reasons[assembler.ReasonCleared])
		if turn == 12 {
			fmt.Println(res.Messages[2].Content)
		}
	}
	// Output:
	// turn 8 starts with "Where is order 4?"; dropped 3 (budget), 13 (step); 3 cleared
	// turn 9 starts with "Where is order 4?"; dropped 7 (budget), 9 (step); 4 cleared
	// turn 10 starts with "Where is order 8?"; dropped 11 (budget), 21 (step); 1 cleared
	// turn 11 starts with "Where is order 8?"; dropped 15 (budget), 17 (step); 2 cleared
	// turn 12 starts with "Where is order 8?"; dropped 19 (budget), 13 (step); 3 cleared
	// [tool result cleared: lookup, call "call_8", 46 tokens]
}
