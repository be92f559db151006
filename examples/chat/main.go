// Command chat is a complete agent loop on Loom: for each line it reads, it assembles the context (the
// session's history, the chunks of a collection that match the line, the instructions and a tool) within a
// budget, calls an OpenAI-compatible Chat Completions model, runs the tool the model calls (a search of the
// collection) until the model answers, prints the answer and records the turn, tool calls included, so the
// next line's assembly sees it.
//
//	CHAT_BASE_URL=http://localhost:11434/v1 CHAT_MODEL=llama3.2 CHAT_DOCS=./docs go run ./examples/chat
//
// Environment: CHAT_BASE_URL (default https://api.openai.com/v1), CHAT_MODEL (default gpt-4o-mini),
// CHAT_API_KEY (if the server needs one), CHAT_DOCS (a file or directory to ingest first), CHAT_SESSION
// (default "chat"), CHAT_COUNT_AS (the model whose tokenizer counts the budget when Loom does not know
// CHAT_MODEL; default gpt-4o), LOOM_STORE (default sqlite:chat.db), and LOOM_EMBEDDER_URL, LOOM_EMBEDDER_MODEL and
// LOOM_EMBEDDER_API_KEY for an embeddings API in place of the offline embedder.
package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/embed"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/storeurl"
	"github.com/context-loom/loom/tokenizer"
)

const collectionName = "chat-docs"

var searchTool = loom.Tool{Type: "function", Function: loom.ToolFunction{Name: "search_docs",
	Description: "Search the documents for passages about a question.",
	Parameters:  json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)}}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Getenv, os.Stdin, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chat:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string, in io.Reader, out io.Writer) error {
	st, err := storeurl.Open(ctx, cmp.Or(getenv("LOOM_STORE"), "sqlite:chat.db"), storeurl.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	var opts []engine.Option
	if u := getenv("LOOM_EMBEDDER_URL"); u != "" {
		emb, err := embed.NewOpenAI(embed.OpenAIConfig{BaseURL: u, Model: getenv("LOOM_EMBEDDER_MODEL"), APIKey: getenv("LOOM_EMBEDDER_API_KEY")})
		if err != nil {
			return err
		}
		opts = append(opts, engine.WithEmbedder(emb))
	}
	eng, err := engine.New(st, opts...)
	if err != nil {
		return err
	}
	defer eng.Close()
	if _, err := eng.CreateCollection(ctx, loom.Collection{Name: collectionName}); err != nil && !errors.Is(err, collection.ErrExists) {
		return err
	}
	if docs := getenv("CHAT_DOCS"); docs != "" {
		if _, err := eng.IngestPaths(ctx, collectionName, []string{docs}, engine.IngestOptions{}); err != nil {
			return err
		}
	}
	model := cmp.Or(getenv("CHAT_MODEL"), "gpt-4o-mini")
	// The budget is counted in the model's encoding; a model Loom's registry does not know (a local one)
	// is counted as CHAT_COUNT_AS (default gpt-4o).
	countAs := model
	if _, err := tokenizer.ForModel(model); err != nil {
		countAs = cmp.Or(getenv("CHAT_COUNT_AS"), "gpt-4o")
	}
	llm := chatClient{url: strings.TrimRight(cmp.Or(getenv("CHAT_BASE_URL"), "https://api.openai.com/v1"), "/") + "/chat/completions",
		key: getenv("CHAT_API_KEY"), model: model}
	session := cmp.Or(getenv("CHAT_SESSION"), "chat")
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		line := strings.TrimSpace(lines.Text())
		if line == "" {
			continue
		}
		// Assemble: instructions, the tool, the session's history and the chunks that match, in the budget.
		res, err := eng.Assemble(ctx, engine.Request{Session: session,
			Retrieve: &engine.RetrieveRequest{Collection: collectionName, TopK: 3},
			Request: assembler.Request{Model: countAs, MaxTokens: 8000, ReserveOutput: 1000, Format: assembler.FormatOpenAI, Message: line,
				Instructions: "Answer from the context; call search_docs when it is not enough.", Tools: []loom.Tool{searchTool}}})
		if err != nil {
			return err
		}
		messages := make([]any, len(res.Messages))
		for i, m := range res.Messages {
			messages[i] = m
		}
		var reply []store.Message // the turn's assistant and tool messages, to record
		for round := 0; ; round++ {
			msg, err := llm.complete(ctx, messages, res.Tools)
			if err != nil {
				return err
			}
			reply = append(reply, msg)
			messages = append(messages, msg)
			if len(msg.ToolCalls) == 0 {
				fmt.Fprintln(out, msg.Content)
				break
			}
			if round == 4 {
				return errors.New("the model is still calling tools after 5 rounds")
			}
			for _, call := range msg.ToolCalls {
				result := runTool(ctx, eng, call)
				tool := store.Message{Role: "tool", ToolCallID: call.ID, Content: result}
				reply = append(reply, tool)
				messages = append(messages, tool)
			}
		}
		// Record the turn, tool calls and results included: the next assembly has it as history.
		if _, err := eng.Record(ctx, engine.Turn{Session: session, Message: line, Reply: reply}); err != nil {
			return err
		}
	}
	return lines.Err()
}

// runTool runs one call of search_docs; what it returns is the tool message's content.
func runTool(ctx context.Context, eng *engine.Engine, call loom.ToolCall) string {
	var args struct {
		Query string `json:"query"`
	}
	if call.Function.Name != searchTool.Function.Name || json.Unmarshal([]byte(call.Function.Arguments), &args) != nil || args.Query == "" {
		return `{"error":"unknown tool or bad arguments"}`
	}
	results, err := eng.Retrieve(ctx, args.Query, engine.WithCollection(collectionName), engine.WithTopK(3))
	if err != nil {
		return fmt.Sprintf(`{"error":%q}`, err.Error())
	}
	hits := make([]engine.Hit, len(results))
	for i, r := range results {
		hits[i] = engine.NewHit(r)
	}
	b, _ := json.Marshal(hits)
	return string(b)
}

// chatClient calls a Chat Completions API.
type chatClient struct{ url, key, model string }

// complete sends the messages and tools and returns the model's message: its text or its tool calls.
func (c chatClient) complete(ctx context.Context, messages []any, tools []json.RawMessage) (store.Message, error) {
	body, err := json.Marshal(map[string]any{"model": c.model, "messages": messages, "tools": tools})
	if err != nil {
		return store.Message{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return store.Message{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return store.Message{}, err
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct {
				Content   string          `json:"content"`
				ToolCalls []loom.ToolCall `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	if resp.StatusCode != http.StatusOK {
		return store.Message{}, fmt.Errorf("chat completions: %s", resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&out); err != nil || len(out.Choices) == 0 {
		return store.Message{}, fmt.Errorf("chat completions: a response without a choice (%v)", err)
	}
	m := out.Choices[0].Message
	return store.Message{Role: "assistant", Content: m.Content, ToolCalls: m.ToolCalls}, nil
}
