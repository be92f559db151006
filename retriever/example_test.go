package retriever_test

import (
	"context"
	"fmt"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/embed"
	"github.com/context-loom/loom/retriever"
)

func ExampleIndex_Search() {
	ctx := context.Background()
	texts := []string{
		"Raft elects a leader and replicates a log to its followers.",
		"Paxos reaches consensus among acceptors in two phases.",
		"Sourdough bread needs a starter, flour, water and salt.",
	}
	vecs, _ := embed.Default().Embed(ctx, texts)
	ix := retriever.NewIndex(retriever.IndexOptions{})
	for i, text := range texts {
		err := ix.Add(collection.Chunk{
			Chunk:  loom.Chunk{ID: fmt.Sprint("c", i), DocumentID: fmt.Sprint("doc", i), Content: text, EndOffset: len(text), Metadata: map[string]string{"source": fmt.Sprint("doc", i, ".txt")}},
			Vector: vecs[i],
		})
		if err != nil {
			fmt.Println(err)
		}
	}
	q := "how does raft elect a leader"
	qv, _ := embed.Default().Embed(ctx, []string{q})
	results, err := ix.Search(ctx, retriever.Query{Text: q, Vector: qv[0], TopK: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range results {
		fmt.Printf("%d %s %s %s keyword#%d vector#%d\n", r.Rank, r.Kind, r.Chunk.ID, r.Chunk.Metadata["source"], r.KeywordRank, r.VectorRank)
	}
	// Output:
	// 1 fused c0 doc0.txt keyword#1 vector#1
	// 2 fused c2 doc2.txt keyword#0 vector#2
}

func ExampleIndex_WaitGraph() {
	ctx := context.Background()
	texts := []string{
		"Raft elects a leader and replicates a log to its followers.",
		"Paxos reaches consensus among acceptors in two phases.",
		"Sourdough bread needs a starter, flour, water and salt.",
		"A leader lease lets a Raft leader serve reads locally.",
	}
	vecs, _ := embed.Default().Embed(ctx, texts)
	// Past two vectors, vector search goes through an HNSW graph, built in the background.
	ix := retriever.NewIndex(retriever.IndexOptions{HNSWThreshold: 2})
	defer ix.Close(ctx)
	for i, text := range texts {
		_ = ix.Add(collection.Chunk{Chunk: loom.Chunk{ID: fmt.Sprint("c", i), DocumentID: fmt.Sprint("doc", i), Content: text}, Vector: vecs[i]})
	}
	// Searches do not wait for the graph (they are exact meanwhile); WaitGraph does.
	if err := ix.WaitGraph(ctx); err != nil {
		fmt.Println(err)
		return
	}
	qv, _ := embed.Default().Embed(ctx, []string{"raft leader"})
	results, _ := ix.Search(ctx, retriever.Query{Vector: qv[0], Mode: retriever.ModeVector, TopK: 2})
	for _, r := range results {
		fmt.Println(r.Rank, r.Chunk.ID)
	}
	// Output:
	// 1 c3
	// 2 c0
}

// Analyze is the keyword analyzer every index uses: a chunk's terms and a query's come from it alike.
func ExampleAnalyze() {
	fmt.Printf("%q\n", retriever.Analyze("The Café in Zürich serves ＴＥＡ."))
	fmt.Printf("%q\n", retriever.Analyze("東京の首都"))
	// Output:
	// ["cafe" "zurich" "serves" "tea"]
	// ["東" "京" "東京" "の" "京の" "首" "の首" "都" "首都"]
}

func ExampleQuery_Validate() {
	err := retriever.Query{Text: "raft", MinScore: 1.5}.Validate()
	fmt.Println(err)
	// Output:
	// retriever: invalid query: MinScore 1.5 outside [0, 1]
}
