package engine_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/memory"
	"github.com/context-loom/loom/summarize"
)

// A session compacted by a summarizer (a stand-in here; summarize.NewOpenAI in use): the turns older than
// the policy keeps verbatim become a summary, which the next assembly sends in their place.
func ExampleEngine_Compact() {
	ctx := context.Background()
	st, _ := memory.Open(ctx, memory.Options{})
	model := summarize.Func(func(ctx context.Context, req summarize.Request) (string, error) {
		return "The user asked about their order.", nil
	})
	e, _ := engine.New(st, engine.WithSummarizer(model, engine.SummarizerConfig{Model: "gpt-4o-mini"}))
	defer e.Close()
	_ = st.PutAgent(ctx, loom.DefaultTenant, store.Agent{ID: "support", Instructions: "You help.", MaxTokens: 2000,
		Policy: &loom.Policy{Compaction: &loom.Compaction{KeepTokens: 200}}})
	for i := range 6 {
		_, _ = st.AppendMessages(ctx, loom.DefaultTenant, "s",
			store.Message{Role: "user", Content: fmt.Sprintf("Question %d about order 42: %s", i, strings.Repeat("details ", 40))},
			store.Message{Role: "assistant", Content: fmt.Sprintf("Answer %d.", i)})
	}
	res, err := e.Compact(ctx, engine.CompactRequest{Session: "s", Agent: "support", Force: true})
	fmt.Println(res.Result, res.Summary.From, res.Summary.To, err)

	out, _ := e.Assemble(ctx, engine.Request{Agent: "support", Session: "s", Request: assembler.Request{Message: "And now?"}})
	fmt.Println(out.Messages[0].Content)
	fmt.Println(out.Report.Summary.Covers, "messages summarized")
	// Output:
	// compacted 1 4 <nil>
	// You help.
	//
	// <conversation_summary from="1" to="4" trusted="false">
	// The user asked about their order.
	// </conversation_summary>
	// 4 messages summarized
}
