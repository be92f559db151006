package tokenizer

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// tiktoken's model map, which the registry's tests hold ForModel to (testdata/tiktoken_models.json).
//go:generate sh -c "cd ../scripts/gen-tokenizer && npm ci --no-audit --no-fund && node models.mjs"

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
	// TokensPerName is what a message's name field adds besides the name's own tokens: 1 for OpenAI. It
	// may be negative, down to -TokensPerMessage, where a name takes the place of the role:
	// gpt-3.5-turbo-0301 frames a message as <|im_start|>{role or name}\n{content}<|im_end|>\n, 4 tokens
	// a message and -1 for a name.
	TokensPerName int
	// ReplyPriming is what the chat format adds once per request: OpenAI's chat models count 3, for every
	// reply is primed with <|start|>assistant<|message|>.
	ReplyPriming int
	// Tools is how the model's provider counts tool definitions, calls and results (see [ToolRule]): OpenAI's
	// rules for the built-in OpenAI chat models, the zero ToolRule (their JSON, an estimate) for the others.
	Tools ToolRule
	// Image is how the model bills an image (see [Model.ImageTokens]): OpenAI's tile or patch rule with its
	// model's constants, Anthropic's area rule (an estimate), or ImagesUnknown for a model that takes no
	// images or whose rule is not known.
	Image ImageRule
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
// ForModel also knows the other names of a model, those that OpenAI's tiktoken maps and Azure OpenAI's,
// and resolves them to the model they stand for, tried after the registered names:
//   - a fine-tuned model, "ft:<base>:<org>:<suffix>:<id>" (Azure OpenAI: "<base>.ft-<id>"), is its base
//     model: "ft:gpt-4o-mini:org::id" is gpt-4o-mini, with its encoding and limits;
//   - Azure OpenAI's spelling of GPT-3.5, "gpt-35-turbo" and its variants ("gpt-35-turbo-16k"), is
//     OpenAI's ("gpt-3.5-turbo", "gpt-3.5-turbo-16k"), and the shorthand "gpt-3.5" is gpt-3.5-turbo;
//   - a GPT-5 point release that is not registered, "gpt-5.<n>" with any suffix, is the GPT-5 model of the
//     same suffix: "gpt-5.9" is gpt-5 and "gpt-5.9-chat-latest" is gpt-5-chat, with their limits; but
//     for images, which OpenAI has not said how a point release bills, the Model returned counts the
//     larger of GPT-5's tiles and the 1.2 tokens a patch that users measured for gpt-5.2 (see ImageRule).
//
// Every model name in tiktoken's map whose encoding this package has resolves to a model of that encoding;
// the others (the retired GPT-3 models, counted with r50k_base or p50k_base) are unknown.
//
// For a name it cannot resolve, ForModel returns an error wrapping [ErrUnknownModel] that lists the known
// names; add others with [Register]. A name longer than 256 bytes (besides surrounding spaces) is unknown.
func ForModel(name string) (Model, error) {
	trimmed := strings.TrimSpace(name)
	if len(trimmed) > maxModelName {
		// No model has such a name, and trying its every prefix would take time that grows with its cube.
		return Model{}, fmt.Errorf("%w: a name of %d bytes, %q... (model names have at most %d)",
			ErrUnknownModel, len(trimmed), clip(trimmed, 64), maxModelName)
	}
	key := strings.ToLower(trimmed)
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

// maxModelName is the longest model name, in bytes, that [ForModel] resolves and [Register] takes: room
// for provider prefixes and fine-tune names ("ft:<base>:<org>:<suffix>:<id>"), a bound on the work a name
// costs.
const maxModelName = 256

// clip returns s cut to at most n bytes, at a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Register adds m to the models that [ForModel] knows, replacing a model of the same name (regardless of
// case), built-in or not. It returns an error wrapping [ErrInvalidModel] if the name is empty, has
// surrounding spaces or is longer than 256 bytes, the context window is not positive, MaxOutputTokens is
// negative or not less than the window, TokensPerMessage or ReplyPriming is negative, TokensPerName is
// less than -TokensPerMessage, an overhead of Tools is negative, or its Image rule has a negative count, a
// kind it does not know or tiles or patches that cost nothing; and one wrapping [ErrUnknownEncoding] if
// m.Encoding is neither "" nor an encoding of this package ([Encodings]). Register is safe to call
// concurrently with ForModel.
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
	case len(m.Name) > maxModelName:
		return fmt.Errorf("%w %q...: a name of %d bytes (at most %d)",
			ErrInvalidModel, clip(m.Name, 64), len(m.Name), maxModelName)
	case m.ContextWindow <= 0:
		return fmt.Errorf("%w %q: context window %d is not positive", ErrInvalidModel, m.Name, m.ContextWindow)
	case m.MaxOutputTokens < 0 || m.MaxOutputTokens >= m.ContextWindow:
		return fmt.Errorf("%w %q: max output tokens %d is not in [0, context window %d)",
			ErrInvalidModel, m.Name, m.MaxOutputTokens, m.ContextWindow)
	case m.TokensPerMessage < 0 || m.TokensPerMessage+m.TokensPerName < 0 || m.ReplyPriming < 0:
		return fmt.Errorf("%w %q: negative chat overhead (per message %d, per name %d, reply priming %d; "+
			"a name may take back at most the per-message overhead)",
			ErrInvalidModel, m.Name, m.TokensPerMessage, m.TokensPerName, m.ReplyPriming)
	case m.Tools.Overhead < 0 || m.Tools.SystemOverhead < 0 || m.Tools.CallOverhead < 0 || m.Tools.ResultOverhead < 0:
		return fmt.Errorf("%w %q: negative tool overhead %+v", ErrInvalidModel, m.Name, m.Tools)
	}
	if msg := validImageRule(m.Image); msg != "" {
		return fmt.Errorf("%w %q: %s", ErrInvalidModel, m.Name, msg)
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
		m.Image = builtinImageRules[m.Name]
		r.models[strings.ToLower(m.Name)] = m
	}
	return r
}()

type modelRegistry struct {
	mu     sync.RWMutex
	models map[string]Model
}

// resolve returns the model that key names: a fine-tune's base model, or the model key (or else its other
// spelling, see [respell]) names as a family. The caller holds r.mu.
func (r *modelRegistry) resolve(key string) (Model, bool) {
	if base, ok := strings.CutPrefix(key, "ft:"); ok {
		// OpenAI names a fine-tune "ft:<base>:<org>:<suffix>:<id>" (a checkpoint adds ":ckpt-step-<n>").
		key, _, _ = strings.Cut(base, ":")
	} else if base, _, ok := strings.Cut(key, ".ft-"); ok {
		key = base // and Azure OpenAI "<base>.ft-<job id>"
	}
	if m, ok := r.family(key); ok {
		return m, true
	}
	if other, ok := respell(key); ok {
		m, ok := r.family(other)
		if ok && strings.HasPrefix(key, "gpt-5.") { // a point release that is not registered
			m.Image = pointReleaseImages(m.Image)
		}
		return m, ok
	}
	return Model{}, false
}

// family returns the model registered as key, or else as its longest prefix that ends before a '-'.
// The caller holds r.mu.
func (r *modelRegistry) family(key string) (Model, bool) {
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

// respell returns the name that key stands for when it spells a model otherwise than the registry does,
// as tiktoken's model map and prefix rules (tiktoken/model.py) accept it: Azure's "gpt-35-turbo", the
// shorthand "gpt-3.5", and a GPT-5 point release ("gpt-5.2-mini", tiktoken's "gpt-5" prefix) that is not
// registered, which is the GPT-5 model of the same suffix.
func respell(key string) (string, bool) {
	switch {
	case key == "gpt-3.5":
		return "gpt-3.5-turbo", true
	case key == "gpt-35-turbo" || strings.HasPrefix(key, "gpt-35-turbo-"):
		return "gpt-3.5" + strings.TrimPrefix(key, "gpt-35"), true
	}
	if rest, ok := strings.CutPrefix(key, "gpt-5."); ok {
		n := 0
		for n < len(rest) && '0' <= rest[n] && rest[n] <= '9' {
			n++
		}
		if n > 0 && (n == len(rest) || rest[n] == '-') {
			return "gpt-5" + rest[n:], true
		}
	}
	return "", false
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
	m := chatModel(provider, name, "", window, output)
	if provider == "anthropic" {
		m.Tools = anthropicTools(name)
	}
	return m
}

// builtinModels are the models known without [Register]. Windows and output limits are from each
// provider's documentation (model pages and API references, as of late 2026), except where a comment says.
var builtinModels = []Model{
	// OpenAI, counted exactly. Where a model's documented output limit is its whole window (GPT-4, the
	// 2023 GPT-3.5 Turbo snapshots, the GPT-3 base models), we reserve half of it, as an output limit must
	// leave room for the prompt.
	openAI("gpt-3.5-turbo", CL100KBase, 16385, 4096),
	// The first snapshot frames a message as <|im_start|>{role or name}\n{content}<|im_end|>\n: 4 tokens a
	// message, and a name replaces the role (the OpenAI Cookbook, "How to count tokens with tiktoken").
	{Name: "gpt-3.5-turbo-0301", Provider: "openai", Encoding: CL100KBase, ContextWindow: 4096, MaxOutputTokens: 2048,
		TokensPerMessage: 4, TokensPerName: -1, ReplyPriming: openAIPriming},
	openAI("gpt-3.5-turbo-0613", CL100KBase, 4096, 2048), // or it would resolve to the larger window
	openAI("gpt-3.5-turbo-16k", CL100KBase, 16385, 8192),
	openAI("gpt-3.5-turbo-instruct", CL100KBase, 4096, 2048), // or it would resolve to gpt-3.5-turbo
	openAI("davinci-002", CL100KBase, 16384, 8192),           // base models of the completions API
	openAI("babbage-002", CL100KBase, 16384, 8192),
	openAI("gpt-4", CL100KBase, 8192, 4096),
	openAI("gpt-4-32k", CL100KBase, 32768, 16384),
	openAI("gpt-4-turbo", CL100KBase, 128000, 4096),
	openAI("gpt-4-1106-preview", CL100KBase, 128000, 4096), // GPT-4 Turbo previews, not gpt-4
	openAI("gpt-4-0125-preview", CL100KBase, 128000, 4096),
	openAI("gpt-4-vision-preview", CL100KBase, 128000, 4096),
	openAI("gpt-4o", O200KBase, 128000, 16384),
	openAI("gpt-4o-2024-05-13", O200KBase, 128000, 4096), // the first snapshot had a smaller output limit
	openAI("gpt-4o-mini", O200KBase, 128000, 16384),
	openAI("gpt-4o-realtime", O200KBase, 32000, 4096), // the Realtime API's smaller windows, not gpt-4o's
	openAI("gpt-4o-mini-realtime", O200KBase, 16000, 4096),
	openAI("chatgpt-4o", O200KBase, 128000, 16384), // chatgpt-4o-latest, ChatGPT's GPT-4o
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
	// GPT-5 point releases. A later one resolves to the GPT-5 model of its suffix (see ForModel), whose
	// limits are at most its own where they are published (gpt-5.4's window is 1,050,000; its mini's,
	// 400,000): registering gpt-5.4 alone would give its window to gpt-5.4-mini.
	openAI("gpt-5.1", O200KBase, 400000, 128000),
	openAI("gpt-5.1-chat", O200KBase, 128000, 16384),
	openAI("gpt-5.2", O200KBase, 400000, 128000),
	openAI("gpt-5.2-chat", O200KBase, 128000, 16384),
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
