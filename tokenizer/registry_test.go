package tokenizer_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/context-loom/loom/tokenizer"
)

func TestForModel_ResolvesNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		input string
		want  string
	}{
		{"exact OpenAI name", "gpt-4o", "gpt-4o"},
		{"exact Anthropic name", "claude-opus-4-1", "claude-opus-4-1"},
		{"exact embedding name", "text-embedding-3-small", "text-embedding-3-small"},
		{"dated snapshot", "gpt-4o-2024-08-06", "gpt-4o"},
		{"snapshot of the longer family", "gpt-4o-mini-2024-07-18", "gpt-4o-mini"},
		{"gpt-4 snapshot is not gpt-4o", "gpt-4-0613", "gpt-4"},
		{"gpt-4-turbo snapshot is not gpt-4", "gpt-4-turbo-2024-04-09", "gpt-4-turbo"},
		{"gpt-4-32k snapshot", "gpt-4-32k-0613", "gpt-4-32k"},
		{"gpt-4.1-mini snapshot", "gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"},
		{"o1-mini snapshot is not o1", "o1-mini-2024-09-12", "o1-mini"},
		{"o1 snapshot", "o1-2024-12-17", "o1"},
		{"gpt-5 chat alias", "gpt-5-chat-latest", "gpt-5-chat"},
		{"Claude dated snapshot", "claude-sonnet-4-5-20250929", "claude-sonnet-4-5"},
		{"Claude 4 alias", "claude-sonnet-4-0", "claude-sonnet-4"},
		{"Claude latest alias", "claude-3-5-sonnet-latest", "claude-3-5-sonnet"},
		{"Gemini version suffix", "gemini-2.0-flash-001", "gemini-2.0-flash"},
		{"Llama instruct suffix", "llama-3.1-8b-instruct", "llama-3.1-8b"},
		{"Mistral latest alias", "mistral-large-latest", "mistral-large"},
		{"upper case", "GPT-4O", "gpt-4o"},
		{"mixed case snapshot", "Claude-Haiku-4-5-20251001", "claude-haiku-4-5"},
		{"surrounding spaces", "  gpt-4o  ", "gpt-4o"},
		{"provider prefix", "openai/gpt-4o", "gpt-4o"},
		{"provider prefix and snapshot", "anthropic/claude-sonnet-4-5-20250929", "claude-sonnet-4-5"},
		{"host and provider prefixes", "openrouter/google/gemini-2.5-pro", "gemini-2.5-pro"},
		{"Hugging Face style name", "meta-llama/Llama-3.3-70B-Instruct", "llama-3.3-70b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m, err := tokenizer.ForModel(tt.input)
			if err != nil {
				t.Fatalf("ForModel(%q): %v", tt.input, err)
			}
			if m.Name != tt.want {
				t.Errorf("ForModel(%q).Name = %q, want %q", tt.input, m.Name, tt.want)
			}
		})
	}
}

func TestForModel_ReturnsTheRegisteredLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		input string
		want  tokenizer.Model
	}{
		{"gpt-4o-2024-08-06", tokenizer.Model{Name: "gpt-4o", Provider: "openai", Encoding: tokenizer.O200KBase,
			ContextWindow: 128000, MaxOutputTokens: 16384, TokensPerMessage: 3, TokensPerName: 1, ReplyPriming: 3,
			Tools: tokenizer.ToolRule{Namespace: true, Overhead: 9, SystemOverhead: 5, PadSystem: true, CallOverhead: 3, ResultOverhead: 3},
			Image: tokenizer.ImageRule{Kind: tokenizer.ImageTiles, Base: 85, PerTile: 170}}},
		{"gpt-3.5-turbo-0125", tokenizer.Model{Name: "gpt-3.5-turbo", Provider: "openai", Encoding: tokenizer.CL100KBase,
			ContextWindow: 16385, MaxOutputTokens: 4096, TokensPerMessage: 3, TokensPerName: 1, ReplyPriming: 3,
			Tools: tokenizer.ToolRule{Namespace: true, Overhead: 9, SystemOverhead: 5, PadSystem: true, CallOverhead: 3, ResultOverhead: 4, Exact: true}}},
		{"text-embedding-ada-002", tokenizer.Model{Name: "text-embedding-ada-002", Provider: "openai",
			Encoding: tokenizer.CL100KBase, ContextWindow: 8191}},
		{"claude-sonnet-4-5", tokenizer.Model{Name: "claude-sonnet-4-5", Provider: "anthropic",
			ContextWindow: 200000, MaxOutputTokens: 64000, TokensPerMessage: 5, TokensPerName: 1, ReplyPriming: 5,
			Tools: tokenizer.ToolRule{Overhead: 346, SystemOverhead: 346},
			Image: tokenizer.ImageRule{Kind: tokenizer.ImageArea, Estimate: true}}},
		{"gemini-2.5-pro", tokenizer.Model{Name: "gemini-2.5-pro", Provider: "google",
			ContextWindow: 1048576, MaxOutputTokens: 65536, TokensPerMessage: 5, TokensPerName: 1, ReplyPriming: 5,
			Image: tokenizer.ImageRule{Kind: tokenizer.ImageGeminiTiles, Base: 258, PerTile: 258, Estimate: true}}},
	}
	for _, tt := range tests {
		t.Run(tt.input, func(t *testing.T) {
			t.Parallel()
			got, err := tokenizer.ForModel(tt.input)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("ForModel(%q) = %+v, want %+v", tt.input, got, tt.want)
			}
		})
	}
}

func TestForModel_RejectsUnknownNames(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "gpt", "gpt-4x", "gpt-4o_mini", "claude", "claude-9", "openai/", "o", "-", "x/y/z"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m, err := tokenizer.ForModel(name)
			if !errors.Is(err, tokenizer.ErrUnknownModel) {
				t.Fatalf("ForModel(%q) = %+v, %v; want an error wrapping ErrUnknownModel", name, m, err)
			}
			for _, want := range []string{fmt.Sprintf("%q", name), "gpt-4o, ", "claude-sonnet-4-5", "tokenizer.Register"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

func TestForModel_ErrorListsKnownNamesSorted(t *testing.T) {
	t.Parallel()
	_, err := tokenizer.ForModel("no-such-model")
	msg := err.Error()
	start, end := strings.Index(msg, "(known: "), strings.Index(msg, "; add others")
	if start < 0 || end < start {
		t.Fatalf("error %q has no list of known names", msg)
	}
	names := strings.Split(msg[start+len("(known: "):end], ", ")
	if !slices.IsSorted(names) {
		t.Errorf("known names are not sorted: %v", names)
	}
	if !slices.Contains(names, "gpt-4o") || !slices.Contains(names, "llama-3.1-8b") {
		t.Errorf("known names %v lack built-in models", names)
	}
}

func TestRegister_AddsAndReplacesModels(t *testing.T) {
	t.Parallel()
	first := tokenizer.Model{Name: "Test-Register-Replace", Provider: "example", ContextWindow: 1000, MaxOutputTokens: 100}
	if err := tokenizer.Register(first); err != nil {
		t.Fatal(err)
	}
	got, err := tokenizer.ForModel("example/test-register-replace-2026-01-01")
	if err != nil || got != first {
		t.Fatalf("ForModel after Register = %+v, %v; want %+v", got, err, first)
	}
	second := tokenizer.Model{Name: "test-register-replace", Provider: "example", Encoding: tokenizer.O200KBase,
		ContextWindow: 2000, MaxOutputTokens: 200, TokensPerMessage: 3, TokensPerName: 1, ReplyPriming: 3}
	if err := tokenizer.Register(second); err != nil {
		t.Fatal(err)
	}
	if got, err := tokenizer.ForModel("TEST-REGISTER-REPLACE"); err != nil || got != second {
		t.Fatalf("ForModel after replacing = %+v, %v; want %+v", got, err, second)
	}
	n := 0
	for _, m := range tokenizer.Models() {
		if strings.EqualFold(m.Name, "test-register-replace") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("Models() holds %d models called test-register-replace, want 1", n)
	}
}

func TestRegister_ExtendsFamilies(t *testing.T) {
	t.Parallel()
	// A registered model longer than a built-in one wins over it for its own snapshots.
	m := tokenizer.Model{Name: "gpt-4o-test-extension", Provider: "example", Encoding: tokenizer.O200KBase,
		ContextWindow: 64000, MaxOutputTokens: 4096}
	if err := tokenizer.Register(m); err != nil {
		t.Fatal(err)
	}
	for input, want := range map[string]string{
		"gpt-4o-test-extension-2026-01-01": "gpt-4o-test-extension",
		"gpt-4o-test":                      "gpt-4o",
	} {
		if got, err := tokenizer.ForModel(input); err != nil || got.Name != want {
			t.Errorf("ForModel(%q) = %q, %v; want %q", input, got.Name, err, want)
		}
	}
}

func TestRegister_RejectsInvalidModels(t *testing.T) {
	t.Parallel()
	valid := tokenizer.Model{Name: "test-register-invalid", ContextWindow: 1000, MaxOutputTokens: 100}
	tests := []struct {
		name   string
		change func(*tokenizer.Model)
		want   error
	}{
		{"empty name", func(m *tokenizer.Model) { m.Name = "" }, tokenizer.ErrInvalidModel},
		{"blank name", func(m *tokenizer.Model) { m.Name = "  " }, tokenizer.ErrInvalidModel},
		{"name with surrounding spaces", func(m *tokenizer.Model) { m.Name = " x " }, tokenizer.ErrInvalidModel},
		{"zero window", func(m *tokenizer.Model) { m.ContextWindow, m.MaxOutputTokens = 0, 0 }, tokenizer.ErrInvalidModel},
		{"negative window", func(m *tokenizer.Model) { m.ContextWindow = -1 }, tokenizer.ErrInvalidModel},
		{"negative tool overhead", func(m *tokenizer.Model) { m.Tools.SystemOverhead = -1 }, tokenizer.ErrInvalidModel},
		{"negative output", func(m *tokenizer.Model) { m.MaxOutputTokens = -1 }, tokenizer.ErrInvalidModel},
		{"output equal to window", func(m *tokenizer.Model) { m.MaxOutputTokens = 1000 }, tokenizer.ErrInvalidModel},
		{"output above window", func(m *tokenizer.Model) { m.MaxOutputTokens = 1001 }, tokenizer.ErrInvalidModel},
		{"negative per-message overhead", func(m *tokenizer.Model) { m.TokensPerMessage = -1 }, tokenizer.ErrInvalidModel},
		{"negative per-name overhead", func(m *tokenizer.Model) { m.TokensPerName = -1 }, tokenizer.ErrInvalidModel},
		{"name taking back more than the message costs",
			func(m *tokenizer.Model) { m.TokensPerMessage, m.TokensPerName = 4, -5 }, tokenizer.ErrInvalidModel},
		{"negative reply priming", func(m *tokenizer.Model) { m.ReplyPriming = -1 }, tokenizer.ErrInvalidModel},
		{"unknown encoding", func(m *tokenizer.Model) { m.Encoding = "p50k_base" }, tokenizer.ErrUnknownEncoding},
		{"encoding name in wrong case", func(m *tokenizer.Model) { m.Encoding = "O200K_BASE" }, tokenizer.ErrUnknownEncoding},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := valid
			m.Name += "-" + strings.ReplaceAll(tt.name, " ", "-")
			tt.change(&m)
			err := tokenizer.Register(m)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Register(%+v) = %v, want an error wrapping %v", m, err, tt.want)
			}
			if strings.TrimSpace(m.Name) == "" {
				return
			}
			if _, err := tokenizer.ForModel(m.Name); !errors.Is(err, tokenizer.ErrUnknownModel) {
				t.Errorf("ForModel(%q) after a rejected Register = %v, want ErrUnknownModel", m.Name, err)
			}
		})
	}
}

func TestRegister_TakesANameInPlaceOfTheRole(t *testing.T) {
	t.Parallel()
	// gpt-3.5-turbo-0301's framing: a name replaces the role, so it costs one token less than its own.
	m := tokenizer.Model{Name: "test-register-name-for-role", Provider: "example", Encoding: tokenizer.CL100KBase,
		ContextWindow: 4096, MaxOutputTokens: 2048, TokensPerMessage: 4, TokensPerName: -4, ReplyPriming: 3}
	if err := tokenizer.Register(m); err != nil {
		t.Fatal(err)
	}
	if got, err := tokenizer.ForModel(m.Name); err != nil || got != m {
		t.Errorf("ForModel(%q) = %+v, %v; want %+v", m.Name, got, err, m)
	}
}

func TestRegister_IsSafeWithConcurrentLookups(t *testing.T) {
	t.Parallel()
	const writers, readers, rounds = 4, 4, 200
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds+2*readers*rounds)
	for w := range writers {
		wg.Go(func() {
			for i := range rounds {
				m := tokenizer.Model{Name: fmt.Sprintf("test-concurrent-%d", w), Provider: "example",
					ContextWindow: 1000 + i, MaxOutputTokens: i}
				if err := tokenizer.Register(m); err != nil {
					errs <- err
				}
			}
		})
	}
	for r := range readers {
		wg.Go(func() {
			for range rounds {
				if _, err := tokenizer.ForModel("gpt-4o-2024-08-06"); err != nil {
					errs <- err
				}
				if m, err := tokenizer.ForModel(fmt.Sprintf("test-concurrent-%d-x", r)); err == nil &&
					m.MaxOutputTokens >= m.ContextWindow {
					errs <- fmt.Errorf("torn model %+v", m)
				}
				_ = tokenizer.Models()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestModels_BuiltinsAreValid(t *testing.T) {
	t.Parallel()
	models := tokenizer.Models()
	if !slices.IsSortedFunc(models, func(a, b tokenizer.Model) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("Models() is not sorted by name")
	}
	for _, m := range models {
		if m.Provider == "example" { // registered by other tests
			continue
		}
		t.Run(m.Name, func(t *testing.T) {
			if m.ContextWindow <= m.MaxOutputTokens || m.MaxOutputTokens < 0 {
				t.Errorf("window %d, output %d: want 0 <= output < window", m.ContextWindow, m.MaxOutputTokens)
			}
			if err := tokenizer.Register(m); err != nil { // re-registering validates it and changes nothing
				t.Errorf("Register rejects it: %v", err)
			}
			if got, err := tokenizer.ForModel(m.Name); err != nil || got != m {
				t.Errorf("ForModel(%q) = %+v, %v; want %+v", m.Name, got, err, m)
			}
			if m.Name != strings.ToLower(m.Name) {
				t.Errorf("built-in name %q is not lower-case", m.Name)
			}
			c := m.Counter()
			if m.Exact() {
				e, ok := c.(*tokenizer.Encoding)
				if !ok || e.Name() != m.Encoding {
					t.Fatalf("Counter() = %T, want the %s encoding", c, m.Encoding)
				}
				if m.Provider != "openai" {
					t.Errorf("exact model of provider %q", m.Provider)
				}
			} else if _, ok := c.(tokenizer.Estimator); !ok {
				t.Fatalf("Counter() = %T, want Estimator", c)
			}
			if n := c.Count("Hello, world!"); n != 4 {
				t.Errorf("Counter().Count(\"Hello, world!\") = %d, want 4", n)
			}
			if m.TokensPerName < 0 && m.TokensPerMessage+m.TokensPerName < 0 {
				t.Errorf("per message %d, per name %d: a named message costs less than nothing",
					m.TokensPerMessage, m.TokensPerName)
			}
			chat := m.MaxOutputTokens > 0
			if chat != (m.TokensPerMessage > 0 && m.ReplyPriming > 0) {
				t.Errorf("output %d but per-message overhead %d and reply priming %d",
					m.MaxOutputTokens, m.TokensPerMessage, m.ReplyPriming)
			}
		})
	}
	// Every family the issue names is covered.
	for provider, want := range map[string]int{"openai": 20, "anthropic": 10, "google": 5, "meta": 5, "mistral": 5} {
		n := 0
		for _, m := range models {
			if m.Provider == provider {
				n++
			}
		}
		if n < want {
			t.Errorf("%d built-in %s models, want at least %d", n, provider, want)
		}
	}

}

func TestModel_ExactFollowsEncoding(t *testing.T) {
	t.Parallel()
	if (tokenizer.Model{Encoding: tokenizer.CL100KBase}).Exact() != true {
		t.Error("a model with an encoding is not exact")
	}
	if (tokenizer.Model{}).Exact() != false {
		t.Error("a model without an encoding is exact")
	}
}

func ExampleForModel() {
	m, err := tokenizer.ForModel("openai/gpt-4o-2024-08-06")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Name, m.Encoding, m.ContextWindow, m.MaxOutputTokens, m.Exact())
	fmt.Println(m.Counter().Count("Hello, world!"))

	claude, err := tokenizer.ForModel("claude-sonnet-4-5-20250929")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(claude.Name, claude.ContextWindow, claude.Exact(), claude.Counter().Count("Hello, world!"))
	// Output:
	// gpt-4o o200k_base 128000 16384 true
	// 4
	// claude-sonnet-4-5 200000 false 4
}

func ExampleRegister() {
	err := tokenizer.Register(tokenizer.Model{
		Name:             "my-finetune",
		Provider:         "example",
		Encoding:         tokenizer.O200KBase,
		ContextWindow:    128000,
		MaxOutputTokens:  16384,
		TokensPerMessage: 3,
		TokensPerName:    1,
		ReplyPriming:     3,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := tokenizer.ForModel("my-finetune-v2")
	fmt.Println(m.Name, m.Exact(), err)
	// Output:
	// my-finetune true <nil>
}

// tiktokenModels is testdata/tiktoken_models.json, tiktoken's model map as scripts/gen-tokenizer/models.mjs
// wrote it from npm's tiktoken.
type tiktokenModels struct {
	Reference string `json:"reference"`
	Models    []struct {
		Name     string `json:"name"`
		Encoding string `json:"encoding"`
	} `json:"models"`
}

func TestForModel_AgreesWithTiktokensModelMap(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("testdata", "tiktoken_models.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref tiktokenModels
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ref.Reference, "npm tiktoken@") || len(ref.Models) < 100 {
		t.Fatalf("reference %q with %d models: not tiktoken's map", ref.Reference, len(ref.Models))
	}
	known, unknown := 0, 0
	for _, tm := range ref.Models {
		exact := slices.Contains(tokenizer.Encodings(), tm.Encoding)
		if exact {
			known++
		} else {
			unknown++
		}
		// The name as tiktoken knows it, with a provider prefix, and in upper case.
		for _, name := range []string{tm.Name, "openai/" + tm.Name, strings.ToUpper(tm.Name)} {
			m, err := tokenizer.ForModel(name)
			switch {
			case !exact && !errors.Is(err, tokenizer.ErrUnknownModel):
				// Counting with another encoding would be wrong, not approximate.
				t.Errorf("ForModel(%q) = %+v, %v; tiktoken counts it with %s, which this package lacks: want ErrUnknownModel",
					name, m, err, tm.Encoding)
			case exact && err != nil:
				t.Errorf("ForModel(%q): %v; tiktoken counts it with %s", name, err, tm.Encoding)
			case exact && (m.Encoding != tm.Encoding || m.Provider != "openai"):
				t.Errorf("ForModel(%q) = %s model %q counted with %q; tiktoken counts it with %s",
					name, m.Provider, m.Name, m.Encoding, tm.Encoding)
			}
		}
	}
	if known < 70 || unknown < 20 {
		t.Errorf("%d names of encodings this package has, %d of others: the map has changed, check the test", known, unknown)
	}
}

func TestForModel_ResolvesTiktokensOtherNames(t *testing.T) {
	t.Parallel()
	// Names that tiktoken's prefix rules or aliases map (MODEL_PREFIX_TO_ENCODING and MODEL_TO_ENCODING in
	// openai/tiktoken's tiktoken/model.py), with the model each stands for and its encoding.
	tests := []struct {
		input, want, encoding string
	}{
		// Fine-tunes ("ft:gpt-4o", "ft:gpt-4", "ft:gpt-3.5-turbo", "ft:davinci-002", "ft:babbage-002").
		{"ft:gpt-4o-mini:org::id", "gpt-4o-mini", tokenizer.O200KBase},
		{"ft:gpt-4o-mini-2024-07-18:my-org:custom-suffix:9t7Kx2ab", "gpt-4o-mini", tokenizer.O200KBase},
		{"ft:gpt-4o-2024-08-06:org:suffix:id:ckpt-step-88", "gpt-4o", tokenizer.O200KBase},
		{"ft:gpt-4o", "gpt-4o", tokenizer.O200KBase},
		{"ft:gpt-4-0613:org::id", "gpt-4", tokenizer.CL100KBase},
		{"ft:gpt-3.5-turbo-0125:org::id", "gpt-3.5-turbo", tokenizer.CL100KBase},
		{"ft:gpt-3.5-turbo-0613:org::id", "gpt-3.5-turbo-0613", tokenizer.CL100KBase},
		{"ft:davinci-002:org::id", "davinci-002", tokenizer.CL100KBase},
		{"ft:babbage-002:org::id", "babbage-002", tokenizer.CL100KBase},
		{"FT:GPT-4o-Mini:Org::ID", "gpt-4o-mini", tokenizer.O200KBase},
		{"openai/ft:gpt-4o-mini:org::id", "gpt-4o-mini", tokenizer.O200KBase},
		{"gpt-35-turbo-0613.ft-5fd1918ee65d4cd38a5dcf6835066ed7", "gpt-3.5-turbo-0613", tokenizer.CL100KBase}, // Azure's
		{"gpt-4o-mini-2024-07-18.ft-0e208cf33a6a466994aff31a08aba678", "gpt-4o-mini", tokenizer.O200KBase},
		// tiktoken's prefix "ft:gpt-4" would count a GPT-4.1 fine-tune with cl100k_base; GPT-4.1 itself,
		// in tiktoken's map too, is o200k_base, and so is its fine-tune here.
		{"ft:gpt-4.1-mini-2025-04-14:org::id", "gpt-4.1-mini", tokenizer.O200KBase},
		// Azure OpenAI's deployment names ("gpt-35-turbo", prefix "gpt-35-turbo-").
		{"gpt-35-turbo", "gpt-3.5-turbo", tokenizer.CL100KBase},
		{"gpt-35-turbo-16k", "gpt-3.5-turbo-16k", tokenizer.CL100KBase},
		{"gpt-35-turbo-0613", "gpt-3.5-turbo-0613", tokenizer.CL100KBase},
		{"gpt-35-turbo-instruct", "gpt-3.5-turbo-instruct", tokenizer.CL100KBase},
		{"azure/gpt-35-turbo-16k", "gpt-3.5-turbo-16k", tokenizer.CL100KBase},
		// The shorthand "gpt-3.5" and the base models.
		{"gpt-3.5", "gpt-3.5-turbo", tokenizer.CL100KBase},
		{"davinci-002", "davinci-002", tokenizer.CL100KBase},
		{"babbage-002", "babbage-002", tokenizer.CL100KBase},
		// ChatGPT's GPT-4o (prefix "chatgpt-4o-").
		{"chatgpt-4o-latest", "chatgpt-4o", tokenizer.O200KBase},
		// GPT-5 point releases (prefix "gpt-5"): the registered ones, then later ones as GPT-5.
		{"gpt-5.1", "gpt-5.1", tokenizer.O200KBase},
		{"gpt-5.1-2025-11-13", "gpt-5.1", tokenizer.O200KBase},
		{"gpt-5.1-codex-mini", "gpt-5.1", tokenizer.O200KBase},
		{"gpt-5.1-chat-latest", "gpt-5.1-chat", tokenizer.O200KBase},
		{"gpt-5.2", "gpt-5.2", tokenizer.O200KBase},
		{"gpt-5.2-chat-latest", "gpt-5.2-chat", tokenizer.O200KBase},
		{"gpt-5.4", "gpt-5", tokenizer.O200KBase},
		{"gpt-5.10-2027-01-01", "gpt-5", tokenizer.O200KBase},
		{"gpt-5.4-mini", "gpt-5-mini", tokenizer.O200KBase},
		{"gpt-5.4-nano-2027-01-01", "gpt-5-nano", tokenizer.O200KBase},
		{"gpt-5.4-chat-latest", "gpt-5-chat", tokenizer.O200KBase},
		{"openai/gpt-5.4-pro", "gpt-5", tokenizer.O200KBase},
		// The other prefixes: "o1-", "o3-", "o4-mini-", "gpt-5-", "gpt-4.5-", "gpt-4.1-", "gpt-4o-", "gpt-4-",
		// "gpt-3.5-turbo-".
		{"o1-pro-2025-03-19", "o1", tokenizer.O200KBase},
		{"o3-deep-research", "o3", tokenizer.O200KBase},
		{"o4-mini-deep-research-2025-06-26", "o4-mini", tokenizer.O200KBase},
		{"gpt-5-codex", "gpt-5", tokenizer.O200KBase},
		{"gpt-4.5-preview-2025-02-27", "gpt-4.5-preview", tokenizer.O200KBase},
		{"gpt-4.1-nano-2025-04-14", "gpt-4.1-nano", tokenizer.O200KBase},
		{"gpt-4o-audio-preview-2025-06-03", "gpt-4o", tokenizer.O200KBase},
		{"gpt-4o-realtime-preview-2025-06-03", "gpt-4o-realtime", tokenizer.O200KBase},
		{"gpt-4o-mini-realtime-preview", "gpt-4o-mini-realtime", tokenizer.O200KBase},
		{"gpt-4-vision-preview", "gpt-4-vision-preview", tokenizer.CL100KBase},
		{"gpt-4-turbo-preview", "gpt-4-turbo", tokenizer.CL100KBase},
		{"gpt-3.5-turbo-16k-0613", "gpt-3.5-turbo-16k", tokenizer.CL100KBase},
		{"gpt-3.5-turbo-instruct-0914", "gpt-3.5-turbo-instruct", tokenizer.CL100KBase},
	}
	for _, tt := range tests {
		t.Run(tt.input, func(t *testing.T) {
			t.Parallel()
			m, err := tokenizer.ForModel(tt.input)
			if err != nil {
				t.Fatalf("ForModel(%q): %v", tt.input, err)
			}
			if m.Name != tt.want || m.Encoding != tt.encoding {
				t.Errorf("ForModel(%q) = %q counted with %q, want %q with %q", tt.input, m.Name, m.Encoding, tt.want, tt.encoding)
			}
			if want, err := tokenizer.ForModel(tt.want); err != nil || !sameModel(m, want) {
				t.Errorf("ForModel(%q) = %+v, want the registered %+v (%v)", tt.input, m, want, err)
			}
		})
	}
}

func TestForModel_RejectsNamesNoRuleMaps(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"ft:", "ft:ft:gpt-4o", ".ft-x", "gpt-9.ft-x", "ft:unknown-model:org::id", "ft::org::id", "ft:gpt-4x:org::id",
		"gpt-35", "gpt-35-turbox", "gpt-3.5-foo", "gpt-3", "gpt-5.", "gpt-5.x", "gpt-5.1.2", "gpt-5.4x", "gpt-5x",
		"gpt-50", "gpt-6", "davinci", "text-davinci-003", "code-davinci-002", "gpt2", "chatgpt-4", "gpt-oss-120b",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if m, err := tokenizer.ForModel(name); !errors.Is(err, tokenizer.ErrUnknownModel) {
				t.Errorf("ForModel(%q) = %+v, %v; want an error wrapping ErrUnknownModel", name, m, err)
			}
		})
	}
}

// TestForModel_ChatOverheadsMatchTheAPI counts the OpenAI Cookbook's example conversation ("How to count
// tokens with tiktoken", openai/openai-cookbook examples/How_to_count_tokens_with_tiktoken.ipynb at commit
// 06d9feb5e21e6fdc85f3ddce7731e05892758cd7) by its num_tokens_from_messages rule with each model's
// registered overheads, and compares the prompt tokens the OpenAI API reported for it there.
func TestForModel_ChatOverheadsMatchTheAPI(t *testing.T) {
	t.Parallel()
	messages := []struct{ role, name, content string }{
		{"system", "", "You are a helpful, pattern-following assistant that translates corporate jargon into plain English."},
		{"system", "example_user", "New synergies will help drive top-line growth."},
		{"system", "example_assistant", "Things working well together will increase revenue."},
		{"system", "example_user",
			"Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage."},
		{"system", "example_assistant", "Let's talk later when we're less busy about how to do better."},
		{"user", "", "This late pivot means we don't have time to boil the ocean for the client deliverable."},
	}
	for model, apiTokens := range map[string]int{
		"gpt-3.5-turbo-0301": 127,
		"gpt-3.5-turbo-0613": 129,
		"gpt-4-0314":         129,
		"gpt-4-0613":         129,
	} {
		t.Run(model, func(t *testing.T) {
			t.Parallel()
			m, err := tokenizer.ForModel(model)
			if err != nil {
				t.Fatal(err)
			}
			c := m.Counter()
			n := m.ReplyPriming
			for _, msg := range messages {
				n += m.TokensPerMessage + c.Count(msg.role) + c.Count(msg.content)
				if msg.name != "" {
					n += c.Count(msg.name) + m.TokensPerName
				}
			}
			if n != apiTokens {
				t.Errorf("%s (%+v) counts %d prompt tokens, the API %d", model, m, n, apiTokens)
			}
		})
	}
}

func TestForModel_WindowsOfTheNewNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		input          string
		window, output int
	}{
		{"gpt-3.5-turbo-0301", 4096, 2048},
		{"gpt-3.5-turbo-0613", 4096, 2048},
		{"gpt-35-turbo-16k", 16385, 8192},
		{"gpt-35-turbo", 16385, 4096},
		{"davinci-002", 16384, 8192},
		{"ft:babbage-002:org::id", 16384, 8192},
		{"ft:gpt-4o-mini:org::id", 128000, 16384},
		{"chatgpt-4o-latest", 128000, 16384},
		{"gpt-4-vision-preview", 128000, 4096},
		{"gpt-5.1", 400000, 128000},
		{"gpt-5.1-chat-latest", 128000, 16384},
		{"gpt-5.4-chat-latest", 128000, 16384},
	}
	for _, tt := range tests {
		t.Run(tt.input, func(t *testing.T) {
			t.Parallel()
			m, err := tokenizer.ForModel(tt.input)
			if err != nil {
				t.Fatal(err)
			}
			if m.ContextWindow != tt.window || m.MaxOutputTokens != tt.output {
				t.Errorf("ForModel(%q) = %q with window %d and output %d, want %d and %d",
					tt.input, m.Name, m.ContextWindow, m.MaxOutputTokens, tt.window, tt.output)
			}
		})
	}
}

// sameModel reports whether a, resolved from a name, is the registered model b: equal, or, for a GPT-5
// point release that is not registered, equal but for the point releases' image rule in place of GPT-5's
// tiles (see ForModel).
func sameModel(a, b tokenizer.Model) bool {
	pointRelease := tokenizer.ImageRule{Kind: tokenizer.ImageTilesOrPatches, Base: 70, PerTile: 140, Multiplier: 1.2, Estimate: true}
	if a.Image == pointRelease && b.Image == (tokenizer.ImageRule{Kind: tokenizer.ImageTiles, Base: 70, PerTile: 140}) {
		a.Image = b.Image
	}
	return a == b
}

// FuzzForModel checks what holds for any name: ForModel resolves it to a registered model, the one its own
// name resolves to (see sameModel), whatever the name's ASCII case, surrounding spaces or provider prefix; or it fails with
// ErrUnknownModel, quoting the name.
func FuzzForModel(f *testing.F) {
	for _, s := range []string{"gpt-4o", "ft:gpt-4o-mini:org::id", "gpt-35-turbo-16k", "gpt-3.5", "gpt-5.4-chat-latest",
		"gpt-5.1", "chatgpt-4o-latest", "openai/ft:davinci-002:x", "ft:", "gpt-5.", "gpt-5.1.2", "x/y", "ft:ft:gpt-4",
		"claude-sonnet-4-5-20250929", "meta-llama/Llama-3.3-70B-Instruct", "\xff", "gpt-5.\u0661"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		m, err := tokenizer.ForModel(name)
		if err != nil {
			if !errors.Is(err, tokenizer.ErrUnknownModel) ||
				len(strings.TrimSpace(name)) <= 256 && !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
				t.Fatalf("ForModel(%q): %v; want an error wrapping ErrUnknownModel that quotes the name", name, err)
			}
			return
		}
		if own, err := tokenizer.ForModel(m.Name); err != nil || !sameModel(m, own) {
			t.Fatalf("ForModel(%q) = %+v, not the model its name resolves to (%+v, %v)", name, m, own, err)
		}
		if m.Encoding != "" && !slices.Contains(tokenizer.Encodings(), m.Encoding) {
			t.Fatalf("ForModel(%q) has encoding %q", name, m.Encoding)
		}
		upper := strings.Map(func(r rune) rune {
			if 'a' <= r && r <= 'z' {
				return r - 'a' + 'A'
			}
			return r
		}, name)
		for _, variant := range []string{upper, " \t" + name + "\n ", "openai/" + strings.TrimSpace(name)} {
			if got, err := tokenizer.ForModel(variant); err != nil || got != m {
				t.Fatalf("ForModel(%q) = %+v, %v; ForModel(%q) = %+v", variant, got, err, name, m)
			}
		}
	})
}

func TestForModel_RefusesOverlongNamesAtOnce(t *testing.T) {
	t.Parallel()
	// Every '/' and '-' of such a name starts another lookup: a name the size of a request body would take years.
	names := []string{strings.Repeat("a-/", 1<<20), "gpt-4o-" + strings.Repeat("x", 300), strings.Repeat("é", 200)}
	for _, name := range names {
		m, err := tokenizer.ForModel(name)
		if !errors.Is(err, tokenizer.ErrUnknownModel) {
			t.Fatalf("ForModel(%d bytes) = %+v, %v; want ErrUnknownModel", len(name), m, err)
		}
		if msg := err.Error(); len(msg) > 200 || !utf8.ValidString(msg) || !strings.Contains(msg, fmt.Sprint(len(name))) {
			t.Errorf("error for a name of %d bytes: %q; want a short one that gives its length", len(name), msg)
		}
	}
	long := tokenizer.Model{Name: "test-" + strings.Repeat("x", 252), ContextWindow: 1000}
	if err := tokenizer.Register(long); !errors.Is(err, tokenizer.ErrInvalidModel) {
		t.Errorf("Register(a name of %d bytes) = %v, want ErrInvalidModel", len(long.Name), err)
	}
	long.Name = long.Name[:256]
	if err := tokenizer.Register(long); err != nil {
		t.Fatalf("Register(a name of 256 bytes): %v", err)
	}
	if got, err := tokenizer.ForModel("  " + long.Name + "-2026 "); err == nil {
		t.Errorf("ForModel(a name of %d bytes) = %+v, want ErrUnknownModel", len(long.Name)+5, got)
	}
	if got, err := tokenizer.ForModel(" " + long.Name + " "); err != nil || got != long {
		t.Errorf("ForModel(a registered name of 256 bytes) = %+v, %v", got, err)
	}
}
