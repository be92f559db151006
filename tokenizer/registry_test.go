package tokenizer_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

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
			Tools: tokenizer.ToolRule{Namespace: true, Overhead: 9, SystemOverhead: 5, PadSystem: true, CallOverhead: 3, ResultOverhead: 3}}},
		{"gpt-3.5-turbo-0125", tokenizer.Model{Name: "gpt-3.5-turbo", Provider: "openai", Encoding: tokenizer.CL100KBase,
			ContextWindow: 16385, MaxOutputTokens: 4096, TokensPerMessage: 3, TokensPerName: 1, ReplyPriming: 3,
			Tools: tokenizer.ToolRule{Namespace: true, Overhead: 9, SystemOverhead: 5, PadSystem: true, CallOverhead: 3, ResultOverhead: 4, Exact: true}}},
		{"text-embedding-ada-002", tokenizer.Model{Name: "text-embedding-ada-002", Provider: "openai",
			Encoding: tokenizer.CL100KBase, ContextWindow: 8191}},
		{"claude-sonnet-4-5", tokenizer.Model{Name: "claude-sonnet-4-5", Provider: "anthropic",
			ContextWindow: 200000, MaxOutputTokens: 64000, TokensPerMessage: 5, TokensPerName: 1, ReplyPriming: 5}},
		{"gemini-2.5-pro", tokenizer.Model{Name: "gemini-2.5-pro", Provider: "google",
			ContextWindow: 1048576, MaxOutputTokens: 65536, TokensPerMessage: 5, TokensPerName: 1, ReplyPriming: 5}},
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
