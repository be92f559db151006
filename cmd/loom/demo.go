package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/storeurl"
)

const demoUsage = `Usage: loom demo [--store URL] [--max-tokens N] [--model M] [--format F] [--preset cookbook]

Demo runs the Valkey cookbook's "Putting It Together" scenario on the embedded default with no set-up: it
stores the agent demo_agent, Bob's memory (user_42), a three-turn chat (sess_42) and a check_account tool
output in a temporary SQLite file (or the --store you name; the demo's session is replaced there), assembles the context
for "How much does premium cost?", and prints the messages and a table of each region's tokens out of the
budget. A small --max-tokens shows what is trimmed, and why.
`

// demoMessage is the question the demo assembles for.
const demoMessage = "How much does premium cost?"

func runDemo(ctx context.Context, args []string, s streams) error {
	fs, help := newFlagSet("demo", demoUsage, s)
	storeURL := fs.String("store", "", "a store `URL` to use instead of a temporary SQLite file")
	maxTokens := fs.Int("max-tokens", 4000, "the prompt budget in tokens (the cookbook uses 4000)")
	model := fs.String("model", "gpt-4o", "the `model` whose tokens to count")
	format := fs.String("format", assembler.FormatOpenAI, "the output `format`: openai, responses, anthropic, gemini or text")
	preset := fs.String("preset", "", "render with a `preset`: cookbook (the Valkey cookbook's own messages)")
	if err := parseFlags(fs, help, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fmt.Errorf("demo: unexpected arguments %q", fs.Args()))
	}
	if *maxTokens <= 0 {
		return usageError(errors.New("demo: --max-tokens must be positive"))
	}
	url := *storeURL
	if url == "" {
		dir, err := os.MkdirTemp("", "loom-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		url = "sqlite:" + filepath.Join(dir, "loom.db")
	}
	st, err := storeurl.Open(ctx, url, storeurl.Options{})
	if errors.Is(err, storeurl.ErrBadURL) {
		return usageError(fmt.Errorf("demo: %w", err))
	}
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer st.Close()
	if err := storeDemo(ctx, st); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	eng, err := engine.New(st, engine.WithChunkers(newChunkers()))
	if err != nil {
		return err
	}
	defer eng.Close()
	res, err := eng.Assemble(ctx, engine.Request{Agent: "demo_agent", User: "user_42", Session: "sess_42", Preset: *preset,
		Request: assembler.Request{Message: demoMessage, MaxTokens: *maxTokens, Model: *model, Format: *format}})
	var be *assembler.BudgetError
	switch {
	case errors.As(err, &be):
		return &exitError{code: exitBudget, err: fmt.Errorf("demo: the required items need %d tokens, the budget is %d", be.Required, be.Available)}
	case err != nil:
		return usageError(fmt.Errorf("demo: %w", err))
	}
	return printDemo(s, url, *storeURL == "", res)
}

// storeDemo writes the Valkey cookbook's scenario, replacing the demo session if it exists.
func storeDemo(ctx context.Context, st *store.Store) error {
	const tenant = loom.DefaultTenant
	if err := st.PutAgent(ctx, tenant, store.Agent{ID: "demo_agent", Instructions: "You are a helpful AI assistant.",
		Constraints: "Be concise and accurate.", OutputFormat: "Plain text."}); err != nil {
		return err
	}
	for _, kv := range [][2]string{{"name", "Bob"}, {"preferred_language", "English"}, {"tier", "free"}} {
		if err := st.SetFact(ctx, tenant, "user_42", store.Fact{Key: kv[0], Value: kv[1]}); err != nil {
			return err
		}
	}
	if err := st.DeleteSession(ctx, tenant, "sess_42"); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if _, err := st.AppendMessages(ctx, tenant, "sess_42",
		store.Message{Role: "user", Content: "Hi, I need help with my account"},
		store.Message{Role: "assistant", Content: "Sure! What do you need help with?"},
		store.Message{Role: "user", Content: "I want to upgrade to premium"}); err != nil {
		return err
	}
	_, err := st.AppendToolOutput(ctx, tenant, "sess_42", store.ToolOutput{Tool: "check_account", Result: `{"plan": "free", "eligible_upgrade": true}`})
	return err
}

func printDemo(s streams, url string, temporary bool, res *engine.Result) error {
	var b strings.Builder
	where := url
	if temporary {
		where = "a temporary SQLite file"
	}
	fmt.Fprintf(&b, "Stored the Valkey cookbook's scenario in %s: agent demo_agent, user_42's memory, session sess_42 (3 messages, 1 tool output).\n", where)
	fmt.Fprintf(&b, "Assembled for %q with %s (%s), format %s:\n\n", demoMessage, res.Model, res.Encoding, res.Format)
	if res.System != "" {
		fmt.Fprintf(&b, "[system]\n%s\n\n", indent(res.System))
	}
	if res.Text != "" {
		fmt.Fprintf(&b, "%s\n\n", indent(res.Text))
	}
	for _, m := range res.Messages {
		content := m.Content
		for _, bl := range m.Blocks {
			switch bl.Type {
			case "text":
				content += bl.Text
			case "tool_use":
				content += fmt.Sprintf("(tool_use %s %s)", bl.Name, bl.Input)
			case "tool_result":
				content += fmt.Sprintf("(tool_result %s)", bl.Content)
			}
		}
		for _, c := range m.ToolCalls {
			content += fmt.Sprintf("(calls %s %s)", c.Function.Name, c.Function.Arguments)
		}
		fmt.Fprintf(&b, "[%s]\n%s\n\n", m.Role, indent(content))
	}
	if res.Instructions != "" { // responses
		fmt.Fprintf(&b, "[instructions]\n%s\n\n", indent(res.Instructions))
	}
	for _, it := range res.Input {
		var content string
		switch it.Type {
		case assembler.ItemFunctionCall:
			content = fmt.Sprintf("(calls %s %s)", it.Name, it.Arguments)
		case assembler.ItemFunctionCallOutput:
			content = fmt.Sprintf("(output %s)", it.Output)
		default:
			var parts []string
			for _, c := range it.Content {
				parts = append(parts, c.Text)
			}
			content = strings.Join(parts, "\n")
		}
		fmt.Fprintf(&b, "[%s]\n%s\n\n", cmp.Or(it.Role, it.Type), indent(content))
	}
	if si := res.SystemInstruction; si != nil { // gemini
		fmt.Fprintf(&b, "[system_instruction]\n%s\n\n", indent(si.Parts[0].Text))
	}
	for _, c := range res.Contents {
		var parts []string
		for _, p := range c.Parts {
			switch {
			case p.FunctionCall != nil:
				parts = append(parts, fmt.Sprintf("(functionCall %s %s)", p.FunctionCall.Name, p.FunctionCall.Args))
			case p.FunctionResponse != nil:
				parts = append(parts, fmt.Sprintf("(functionResponse %s %s)", p.FunctionResponse.Name, p.FunctionResponse.Response))
			default:
				parts = append(parts, p.Text)
			}
		}
		fmt.Fprintf(&b, "[%s]\n%s\n\n", c.Role, indent(strings.Join(parts, "\n")))
	}
	if res.PromptCacheKey != "" {
		fmt.Fprintf(&b, "prompt_cache_key: %s\n\n", res.PromptCacheKey)
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "region\tincluded\tdropped\ttokens\tbudget\t")
	var dropped []string
	for _, r := range res.Report.Regions {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t\n", r.Name, len(r.Included), len(r.Dropped), r.Used, r.Budget)
		for _, d := range r.Dropped {
			dropped = append(dropped, fmt.Sprintf("  %s %s: %s", r.Name, d.ID, d.Reason))
		}
	}
	fmt.Fprintf(tw, "total (with the format's overhead)\t\t\t%d\t%d\t\n", res.TotalTokens, res.Budget)
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(dropped) > 0 {
		fmt.Fprintf(&b, "\nLeft out:\n%s\n", strings.Join(dropped, "\n"))
	} else {
		b.WriteString("\nNothing was left out; try --max-tokens 60 to see trimming.\n")
	}
	_, err := fmt.Fprint(s.stdout, b.String())
	return err
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }
