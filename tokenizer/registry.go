package tokenizer

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Model is what Loom needs to know of a language model to fit a request into it: how to count its tokens,
// how many it accepts, and what its chat format adds to each message.
type Model struct {
	// Name is the registered name, such as "gpt-4o" or "claude-sonnet-4-5": the name of a model family,
	// which also stands for its dated snapshots (see [ForModel]).
	Name string
	// Provider names who serves the model: "openai", "anthropic", "google", "meta" or "mistral" for the
	// built-in models.
	Provider string
	// Encoding is the name of the exact encoding of the model's tokenizer ([CL100KBase], [O200KBase]), or ""
	// when the tokenizer is not public and counts are estimated (see [Estimate]).
	Encoding string
	// ContextWindow is the most tokens one request may hold, prompt and reply together. For providers that
	// limit the prompt alone (Google), it is that limit.
	ContextWindow int
	// MaxOutputTokens is the most tokens the model generates in one reply; it is less than ContextWindow,
	// and 0 for models that do not generate text (embedding models). For models that document no limit of
	// their own (Llama, Mistral), the built-in value is a reservation for the reply.
	MaxOutputTokens int
	// TokensPerMessage is what the chat format adds to each message besides its content: 3 for OpenAI's
	// chat models, which frame every message with special tokens and its role.
	TokensPerMessage int
	// TokensPerName is what a message's name field adds besides the name's own tokens: 1 for OpenAI.
	TokensPerName int
	// ReplyPriming is what the chat format adds once per request: OpenAI's chat models count 3, for every
	// reply is primed with <|start|>assistant<|message|>.
	ReplyPriming int
	// Tools is how the model's provider counts tool definitions, calls and results (see [ToolRule]): OpenAI's
	// rules for the built-in OpenAI chat models, the zero ToolRule (their JSON, an estimate) for the others.
	Tools ToolRule
}

// Exact reports whether the model's tokens are counted exactly, with an encoding of this package; if not,
// they are estimated.
func (m Model) Exact() bool { return m.Encoding != "" }

// Counter returns the model's exact [*Encoding] when [Model.Exact], and [Estimator] otherwise. It panics
// if m.Encoding is not an encoding of this package, which cannot happen for a Model returned by [ForModel]
// or [Models] ([Register] rejects such models): check a Model built by hand with [Get] first.
func (m Model) Counter() Counter {
	if !m.Exact() {
		return Estimator{}
	}
	e, err := Get(m.Encoding)
	if err != nil {
		panic(err)
	}
	return e
}

// ForModel returns the registered model called name. The name is matched without regard to case, and may
// carry a provider prefix ("openai/gpt-4o", "anthropic/claude-opus-4-1"). A dated or suffixed snapshot
// resolves to its family, the longest registered name it extends at a '-': "gpt-4o-2024-08-06" is gpt-4o,
// "gpt-4o-mini-2024-07-18" is gpt-4o-mini and "claude-sonnet-4-5-20250929" is claude-sonnet-4-5. The
// returned Model's Name is the registered name.
//
// For a name it cannot resolve, ForModel returns an error wrapping [ErrUnknownModel] that lists the known
// names; add others with [Register].
func ForModel(name string) (Model, error) {
	key := strings.ToLower(strings.TrimSpace(name))
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	// Try the whole name, then what follows each '/', so that "openai/gpt-4o" finds gpt-4o.
	for rest := key; rest != ""; {
		if m, ok := registry.resolve(rest); ok {
			return m, nil
		}
		_, after, found := strings.Cut(rest, "/")
		if !found {
			break
		}
		rest = after
	}
	return Model{}, fmt.Errorf("%w %q (known: %s; add others with tokenizer.Register)",
		ErrUnknownModel, name, strings.Join(registry.names(), ", "))
}

// Register adds m to the models that [ForModel] knows, replacing a model of the same name (regardless of
// case), built-in or not. It returns an error wrapping [ErrInvalidModel] if the name is empty or has
// surrounding spaces, the context window is not positive, MaxOutputTokens is negative or not less than
// the window, or an overhead (of the chat format or of Tools) is negative; and one wrapping
// [ErrUnknownEncoding] if m.Encoding is neither "" nor an encoding of this package ([Encodings]). Register is safe to call concurrently with ForModel.
func Register(m Model) error {
	if err := validate(m); err != nil {
		return err
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	registry.models[strings.ToLower(m.Name)] = m
	return nil
}

// Models returns every registered model, sorted by name.
func Models() []Model {
	registry.mu.RLock()
	defer registry.mu.RUnlock()
	models := make([]Model, 0, len(registry.models))
	for _, m := range registry.models {
		models = append(models, m)
	}
	slices.SortFunc(models, func(a, b Model) int { return strings.Compare(a.Name, b.Name) })
	return models
}

func validate(m Model) error {
	switch {
	case m.Name == "" || strings.TrimSpace(m.Name) != m.Name:
		return fmt.Errorf("%w %q: the name must be non-empty, without surrounding spaces", ErrInvalidModel, m.Name)
	case m.ContextWindow <= 0:
		return fmt.Errorf("%w %q: context window %d is not positive", ErrInvalidModel, m.Name, m.ContextWindow)
	case m.MaxOutputTokens < 0 || m.MaxOutputTokens >= m.ContextWindow:
		return fmt.Errorf("%w %q: max output tokens %d is not in [0, context window %d)",
			ErrInvalidModel, m.Name, m.MaxOutputTokens, m.ContextWindow)
	case m.TokensPerMessage < 0 || m.TokensPerName < 0 || m.ReplyPriming < 0:
		return fmt.Errorf("%w %q: negative chat overhead (per message %d, per name %d, reply priming %d)",
			ErrInvalidModel, m.Name, m.TokensPerMessage, m.TokensPerName, m.ReplyPriming)
	case m.Tools.Overhead < 0 || m.Tools.SystemOverhead < 0 || m.Tools.CallOverhead < 0 || m.Tools.ResultOverhead < 0:
		return fmt.Errorf("%w %q: negative tool overhead %+v", ErrInvalidModel, m.Name, m.Tools)
	}
	if _, ok := encodings[m.Encoding]; m.Encoding != "" && !ok {
		return fmt.Errorf("register model %q: %w %q (known: %s)",
			m.Name, ErrUnknownEncoding, m.Encoding, strings.Join(Encodings(), ", "))
	}
	return nil
}

// registry holds the registered models by lower-case name.
var registry = func() *modelRegistry {
	r := &modelRegistry{models: make(map[string]Model, len(builtinModels))}
	for _, m := range builtinModels {
		r.models[strings.ToLower(m.Name)] = m
	}
	return r
}()

type modelRegistry struct {
	mu     sync.RWMutex
	models map[string]Model
}

// resolve returns the model registered as key, or else as its longest prefix that ends before a '-'.
// The caller holds r.mu.
func (r *modelRegistry) resolve(key string) (Model, bool) {
	if m, ok := r.models[key]; ok {
		return m, true
	}
	for i := strings.LastIndexByte(key, '-'); i > 0; i = strings.LastIndexByte(key[:i], '-') {
		if m, ok := r.models[key[:i]]; ok {
			return m, true
		}
	}
	return Model{}, false
}

// names returns the registered names, sorted. The caller holds r.mu.
func (r *modelRegistry) names() []string {
	names := make([]string, 0, len(r.models))
	for _, m := range r.models {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names
}

// Chat overheads. OpenAI's are documented (the OpenAI Cookbook, "How to count tokens with tiktoken").
// The other providers do not publish theirs; we assume 5 tokens per message and 5 to prime the reply, what
// Llama 3's published chat template costs (<|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>,
// and <|begin_of_text|> plus an assistant header once) and no less than the turn markers of Gemma's and
// Mistral's templates: erring high, like the estimate itself.
const (
	openAIPerMessage, openAIPerName, openAIPriming          = 3, 1, 3
	estimatedPerMessage, estimatedPerName, estimatedPriming = 5, 1, 5
)

// chatModel returns a chat model's entry; an OpenAI model is counted exactly with enc, the others are
// estimated.
func chatModel(provider, name, enc string, window, output int) Model {
	m := Model{Name: name, Provider: provider, Encoding: enc, ContextWindow: window, MaxOutputTokens: output,
		TokensPerMessage: estimatedPerMessage, TokensPerName: estimatedPerName, ReplyPriming: estimatedPriming}
	if provider == "openai" {
		m.TokensPerMessage, m.TokensPerName, m.ReplyPriming = openAIPerMessage, openAIPerName, openAIPriming
		m.Tools = openAITools(enc)
	}
	return m
}

func openAI(name, enc string, window, output int) Model {
	return chatModel("openai", name, enc, window, output)
}

func estimated(provider, name string, window, output int) Model {
	return chatModel(provider, name, "", window, output)
}

// builtinModels are the models known without [Register]. Windows and output limits are from each
// provider's documentation (model pages and API references, as of late 2026), except where a comment says.
var builtinModels = []Model{
	// OpenAI, counted exactly.
	openAI("gpt-3.5-turbo", CL100KBase, 16385, 4096),
	openAI("gpt-3.5-turbo-instruct", CL100KBase, 4096, 2048), // or it would resolve to gpt-3.5-turbo
	// GPT-4's documented output limit is its whole window; we reserve half of it, as an output limit must
	// leave room for the prompt.
	openAI("gpt-4", CL100KBase, 8192, 4096),
	openAI("gpt-4-32k", CL100KBase, 32768, 16384),
	openAI("gpt-4-turbo", CL100KBase, 128000, 4096),
	openAI("gpt-4-1106-preview", CL100KBase, 128000, 4096), // GPT-4 Turbo previews, not gpt-4
	openAI("gpt-4-0125-preview", CL100KBase, 128000, 4096),
	openAI("gpt-4o", O200KBase, 128000, 16384),
	openAI("gpt-4o-2024-05-13", O200KBase, 128000, 4096), // the first snapshot had a smaller output limit
	openAI("gpt-4o-mini", O200KBase, 128000, 16384),
	openAI("gpt-4.1", O200KBase, 1047576, 32768),
	openAI("gpt-4.1-mini", O200KBase, 1047576, 32768),
	openAI("gpt-4.1-nano", O200KBase, 1047576, 32768),
	openAI("gpt-4.5-preview", O200KBase, 128000, 16384),
	openAI("o1", O200KBase, 200000, 100000),
	openAI("o1-mini", O200KBase, 128000, 65536),
	openAI("o1-preview", O200KBase, 128000, 32768), // or "o1-preview" would resolve to o1's larger limits
	openAI("o3", O200KBase, 200000, 100000),
	openAI("o3-mini", O200KBase, 200000, 100000),
	openAI("o4-mini", O200KBase, 200000, 100000),
	openAI("gpt-5", O200KBase, 400000, 128000),
	openAI("gpt-5-mini", O200KBase, 400000, 128000),
	openAI("gpt-5-nano", O200KBase, 400000, 128000),
	openAI("gpt-5-chat", O200KBase, 128000, 16384), // gpt-5-chat-latest, or it would resolve to gpt-5
	{Name: "text-embedding-3-small", Provider: "openai", Encoding: CL100KBase, ContextWindow: 8191},
	{Name: "text-embedding-3-large", Provider: "openai", Encoding: CL100KBase, ContextWindow: 8191},
	{Name: "text-embedding-ada-002", Provider: "openai", Encoding: CL100KBase, ContextWindow: 8191},

	// Anthropic, estimated. Windows are the standard 200,000 (some models offer 1M in beta).
	estimated("anthropic", "claude-3-haiku", 200000, 4096),
	estimated("anthropic", "claude-3-opus", 200000, 4096),
	estimated("anthropic", "claude-3-5-haiku", 200000, 8192),
	estimated("anthropic", "claude-3-5-sonnet", 200000, 8192),
	estimated("anthropic", "claude-3-7-sonnet", 200000, 64000),
	estimated("anthropic", "claude-sonnet-4", 200000, 64000),
	estimated("anthropic", "claude-opus-4", 200000, 32000),
	estimated("anthropic", "claude-opus-4-1", 200000, 32000),
	estimated("anthropic", "claude-sonnet-4-5", 200000, 64000),
	estimated("anthropic", "claude-haiku-4-5", 200000, 64000),
	estimated("anthropic", "claude-opus-4-5", 200000, 64000),

	// Google, estimated. The windows are input limits.
	estimated("google", "gemini-1.5-pro", 2097152, 8192),
	estimated("google", "gemini-1.5-flash", 1048576, 8192),
	estimated("google", "gemini-2.0-flash", 1048576, 8192),
	estimated("google", "gemini-2.5-pro", 1048576, 65536),
	estimated("google", "gemini-2.5-flash", 1048576, 65536),

	// Meta, estimated. The windows are the model cards' (hosts often serve less). Llama has no output limit
	// of its own; 8192 is a reservation for the reply, not a documented limit.
	estimated("meta", "llama-3.1-8b", 131072, 8192),
	estimated("meta", "llama-3.1-70b", 131072, 8192),
	estimated("meta", "llama-3.1-405b", 131072, 8192),
	estimated("meta", "llama-3.3-70b", 131072, 8192),
	estimated("meta", "llama-4-scout", 10485760, 8192),
	estimated("meta", "llama-4-maverick", 1048576, 8192),

	// Mistral, estimated. Mistral documents windows only; 8192 is a reservation for the reply, as for Llama.
	estimated("mistral", "mistral-large", 131072, 8192),
	estimated("mistral", "mistral-medium", 131072, 8192),
	estimated("mistral", "mistral-small", 131072, 8192),
	estimated("mistral", "codestral", 256000, 8192),
	estimated("mistral", "ministral-8b", 131072, 8192),
	estimated("mistral", "open-mistral-nemo", 131072, 8192),
}
