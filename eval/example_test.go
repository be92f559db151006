package eval_test

import (
	"context"
	"log"
	"os"

	"github.com/context-loom/loom/eval"
	"github.com/context-loom/loom/ingest"
	"github.com/context-loom/loom/store/memory"
)

// Score a question set on one store: ingest the corpus, ask every question in every mode, print the table.
func ExampleIngest() {
	ctx := context.Background()
	doc, err := ingest.Read("notes.md", []byte("# Tea\n\nGreen tea steeps for two minutes.\n\n# Coffee\n\nEspresso takes twenty-five seconds.\n"))
	if err != nil {
		log.Fatal(err)
	}
	qs := []eval.Question{{ID: "q1", Doc: "notes.md", Question: "How long should green tea steep?", Gold: "two minutes"}}
	if err := eval.CheckGold([]ingest.Document{doc}, qs); err != nil {
		log.Fatal(err)
	}
	st, err := memory.Open(ctx, memory.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	target, err := eval.Ingest(ctx, "memory", st, []ingest.Document{doc})
	if err != nil {
		log.Fatal(err)
	}
	defer target.Close()
	scores, err := target.Evaluate(ctx, "notes", qs)
	if err != nil {
		log.Fatal(err)
	}
	eval.WriteTable(os.Stdout, scores)
	// Output:
	// notes: 1 questions, top 5
	//
	// | store | mode | hit@1 | hit@5 | MRR@5 |
	// | --- | --- | ---: | ---: | ---: |
	// | memory | keyword | 1.000 (1) | 1.000 (1) | 1.000 |
	// | memory | vector | 1.000 (1) | 1.000 (1) | 1.000 |
	// | memory | hybrid | 1.000 (1) | 1.000 (1) | 1.000 |
	// | memory | mmr | 1.000 (1) | 1.000 (1) | 1.000 |
}
