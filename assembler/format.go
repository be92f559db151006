package assembler

import (
	"encoding/json"
	"fmt"

	"github.com/context-loom/loom/tokenizer"
)

// A Format writes a finished plan as a provider's request: it decides how each item of the request is
// written (what the planner costs), and lays the chosen items out as messages made of (region, text)
// segments with the format's framing (per-message overhead, roles, reply priming). The assembler's output
// counts each text a format lays out with the meter, and gives every token to a region or to the format's
// overhead (see [Report]): that accounting is written once, for every format. Last, a format holds its
// output to its provider's rules (roles, turn order, tool calls and their results, non-empty content,
// names), and an output that breaks one is an error wrapping [ErrProviderRule] rather than a request the
// provider would refuse: see each format's variable for the rules, and what it does to keep them.
//
// The formats are [OpenAI], [Responses], [Anthropic], [Gemini], [Text] and the Valkey cookbook's layout,
// [Cookbook]. A request names one of the first five by Request.Format ([FormatByName]); a Go caller may pass any as
// Request.Formatter (engine's cookbook preset passes a Cookbook). The interface is the assembler's own: a
// format costs its items with the assembler's memoized counts, which are not exported, so no other package
// implements it.
type Format interface {
	// Name is the format's name: "openai", "responses", "anthropic", "gemini", "text" or "cookbook".
	// Result.Format reports it, but
	// for the cookbook's, which are OpenAI's messages ("openai").
	Name() string

	formatter
}

// formatter is what the assembler asks of a format, in the order it asks.
type formatter interface {
	// policy resolves the request's policy (nil: none) as the format plans: it fills the defaults and
	// checks it.
	policy(p *Policy) (Policy, error)
	// prepare checks the request against the format's rules and makes the plan's candidates: the items of
	// every region written as the format writes them, the history's turns, the required items kept.
	prepare(a *assembly) error
	// body returns text as the format writes it in a turn's body or inside a tag (the text format indents
	// its lines after the first), so that the planner counts it as it is rendered.
	body(text string) string
	// turnCost is what the planner counts a history message as, before it renders: content holds the
	// message's content as written (see body), its count memoized there.
	turnCost(a *assembly, msg *Message, content []tokenizer.Part) int
	// settle applies the format's last rules of planning once the optional items are chosen, and again
	// after one is dropped: what a history may start with, how kept knowledge is ordered and numbered.
	settle(a *assembly)
	// render lays the settled plan out in out, counting every text it writes with out. It does not change
	// the plan: rendering it twice gives the same output.
	render(a *assembly, out *output)
	// check holds the verified rendering of a's plan to the rules of the format's provider, the last step
	// of an assembly: it returns an error wrapping ErrProviderRule (ErrNoMessages for a request with no
	// message to send) for an output the provider would refuse, rather than let it be sent. A format keeps
	// the rules it can by construction; check says so for the others, and proves the rest.
	check(a *assembly, out *output) error
}

// bodyCounter is implemented by a format whose body changes a text (the text format): bodyPart returns
// p.Text[:end] written as body writes it, then p.Text[end:] as it is, with a count derived exactly from p's
// where p's is known and the format can (-1 otherwise), so that a count cached of the text as given is not
// lost. A format without it leaves texts as they are.
type bodyCounter interface {
	bodyPart(a *assembly, p tokenizer.Part, end int) tokenizer.Part
	// rewrites reports whether body changes text.
	rewrites(text string) bool
}

// bodyPart is p's text written as the format writes a turn's body or a text in a tag (see
// formatter.body), with its count carried over where the format can (see bodyCounter).
func (a *assembly) bodyPart(p tokenizer.Part) tokenizer.Part { return a.bodyPartTo(p, len(p.Text)) }

// bodyPartTo is bodyPart of p.Text[:end], then p.Text[end:] as it is.
func (a *assembly) bodyPartTo(p tokenizer.Part, end int) tokenizer.Part {
	if bc, ok := a.f.(bodyCounter); ok {
		return bc.bodyPart(a, p, end)
	}
	if text := a.f.body(p.Text[:end]); len(text) != end {
		return tokenizer.NewPart(text + p.Text[end:])
	}
	return p
}

// finisher is implemented by a format that adds to its verified rendering what costs no tokens and so
// need not be in every rendering of the planning (the anthropic format's cache breakpoints): finish runs
// once, on the rendering the assembly returns, before check.
type finisher interface {
	finish(a *assembly, out *output)
}

// The formats.
var (
	// OpenAI renders Chat Completions messages: a system message with the instructions and pinned memory,
	// the history, a system message with the context (memory, tool outputs, knowledge), the user's message.
	// A request with nothing to send (no instructions, message, context or history within the budget) is
	// [ErrNoMessages], for Chat Completions takes at least one message; a history message whose name
	// Chat Completions refuses (^[a-zA-Z0-9_-]{1,64}$) is [ErrProviderRule].
	OpenAI Format = openAI{}
	// Anthropic renders a Messages API request: the top-level system prompt, and user and assistant turns
	// that alternate, the context and the user's message in the last user turn. So that the API takes every
	// request it renders: an assistant message's text that is only white space, beside its tool calls, is
	// not sent (no text block of white space); neither is a tool result that is only white space (its
	// tool_result has no content); an assistant message that ends the conversation (no context or message
	// after it: a prefill the reply continues) is sent without the white space it ends with; and a request
	// with no message to send (the instructions alone are the system prompt, and no message, context or
	// history within the budget is left) is [ErrNoMessages]. TotalTokens counts what is sent. Unless the
	// request says cache_breakpoints "off", it carries up to four cache_control breakpoints, at the ends of
	// the tools, the system prompt (then also Result.SystemBlocks), the history and the newest turn, where
	// the prompt before each reaches the model's minimum cacheable length ([CacheMinTokens]); they add no
	// tokens to the count (see Request.CacheBreakpoints).
	Anthropic Format = anthropic{}
	// Text renders one transcript of turns (see Request.Format). It sends text alone: a message's content
	// parts are lines of its turn after its content, an image written ImagePlaceholder ("[image]"), as
	// the Cookbook format writes them too.
	Text Format = textFormat{}
	// Responses renders an OpenAI Responses API request (Result.Instructions, Input and Tools): the
	// instructions and pinned memory are its instructions; the history, the context (a system message)
	// and the user's message its input items: messages of input_text and input_image parts (the user's and
	// the system's) and of output_text (the assistant's), a function_call item per tool call, and a
	// function_call_output per result, right after the calls, paired by call_id; the tools are function
	// tools in the Responses API's flat shape, strict said (false unless the tool is), for the API's
	// default is strict. A history message's name is not sent (no input item has one), nor a text of white
	// space beside tool calls or content parts. It is counted as the openai format counts Chat
	// Completions' messages, which the model reads alike. A request with nothing to send is
	// [ErrNoMessages].
	Responses Format = responses{}
	// Gemini renders a Gemini API generateContent request (Result.SystemInstruction, Contents and
	// Tools): the instructions and pinned memory are the systemInstruction; the history, the context and
	// the user's message are contents of the user and the model that alternate, laid out as the anthropic
	// format lays its turns out (the context and the message in the last user turn, white space not sent
	// where the Messages API would refuse it), with text parts, images as inlineData (their bytes) or
	// fileData (their URL, which then needs its media type), a functionCall per tool call and a
	// functionResponse ({"output": result}) per result, first in the user turn after the calls, paired by
	// the call's id and the function's name; the tools are one tool of functionDeclarations, each one's
	// schema as parametersJsonSchema. Gemini's tokenizer is not public: the format counts with the
	// estimator whatever the model (its window still sets the budget), an image by Gemini's rule
	// (tokenizer.ImageGeminiTiles), and the result is not Exact. A
	// request with no content to send is [ErrNoMessages].
	Gemini Format = gemini{}
)

// FormatByName returns the format that name names: "openai" ("" too), "responses", "anthropic", "gemini"
// or "text". Another name is an error wrapping ErrUnknownFormat.
func FormatByName(name string) (Format, error) {
	switch name {
	case "", FormatOpenAI:
		return OpenAI, nil
	case FormatResponses:
		return Responses, nil
	case FormatAnthropic:
		return Anthropic, nil
	case FormatGemini:
		return Gemini, nil
	case FormatText:
		return Text, nil
	}
	return nil, fmt.Errorf("%w %q (known: openai, responses, anthropic, gemini, text)", ErrUnknownFormat, name)
}

// wireName is the name Result.Format reports for f: the shape of its messages, which is the cookbook
// format's that of OpenAI's chat messages.
func wireName(f Format) string {
	if w, ok := f.(interface{ wire() string }); ok {
		return w.wire()
	}
	return f.Name()
}

// requestFormat is the format of req: its Formatter, or the one its Format names.
func requestFormat(req *Request) (Format, error) {
	if req.Formatter == nil {
		return FormatByName(req.Format)
	}
	if req.Format != "" && req.Format != req.Formatter.Name() {
		return nil, fmt.Errorf("%w: format %q and a formatter of format %q", ErrInvalidRequest, req.Format, req.Formatter.Name())
	}
	return req.Formatter, nil
}

// numRegions is the size of an array indexed by Region: the regions are 1 to RegionSummary, and index 0,
// the zero Region, is regionOverhead here.
const numRegions = int(RegionSummary) + 1

// regionOverhead is what an output holds that is no region's: the format's overhead (see Report).
const regionOverhead Region = 0

// output is a plan as a format lays it out: the result's fields, and the exact count of what they hold,
// by region. A format counts nothing itself: it writes each text it returns through add, addPart or
// addText, each message's framing through frame, and a count the plan holds or a fixed overhead through
// addTokens, so that every token is counted once, with the meter, and given to a region or to
// regionOverhead.
type output struct {
	a        *assembly // for its meter, model and counts of roles
	m        *tokenizer.Meter
	messages []ChatMessage
	system   string
	// systemBlocks is the system prompt as blocks, when a breakpoint ends it; marks are where the stable
	// parts of a Messages API rendering end (see placeBreakpoints).
	systemBlocks []Block
	marks        cacheMarks
	tools        []json.RawMessage
	text         string
	context      string
	// The Responses API's instructions and input (see Responses), and generateContent's systemInstruction
	// and contents (see Gemini).
	instructions      string
	input             []InputItem
	systemInstruction *GeminiContent
	contents          []GeminiContent
	stableFirst       bool   // the first of messages is the stable prefix's system message (openai)
	prefix            string // the stable prefix, hashed into Result.PrefixHash
	total             int
	// used is what each region uses of total, as far as the output knows it; the texts in shared hold
	// more than one region, and are split among them only when the output is reported (see regionsUsed).
	used   regionTokens
	shared []segments
	// estimated marks the regions whose count follows a rule known only as an estimate, which errs high
	// (the model's tool rule: tokenizer.ToolRule).
	estimated [numRegions]bool
}

// reset empties out for another rendering of a's plan, keeping what it allocated.
func (o *output) reset(a *assembly) {
	clear(o.shared)
	*o = output{a: a, m: a.m, shared: o.shared[:0]}
}

// segments is one text of an output, made of its regions' parts in order: parts[:ends[0].end] is
// ends[0].region's, and so on; the last end is at len(parts).
type segments struct {
	parts []tokenizer.Part
	ends  [10]bound
	n     int
	total int // the text's count, once added to an output
}

type bound struct {
	end    int
	region Region
}

// add appends parts to the text, as region's.
func (s *segments) add(region Region, parts ...tokenizer.Part) {
	s.parts = append(s.parts, parts...)
	s.mark(region)
}

// mark ends the region that runs from the last end to len(s.parts), if it has any parts.
func (s *segments) mark(region Region) { s.markAt(len(s.parts), region) }

// markAt ends the region that runs from the last end to end, if it has any parts.
func (s *segments) markAt(end int, region Region) {
	if (s.n == 0 && end > 0) || (s.n > 0 && end > s.ends[s.n-1].end) {
		s.ends[s.n] = bound{end, region}
		s.n++
	}
}

// add counts s, its parts joined, into the output and returns the count. A text of one region is that
// region's; one of several is split among them when the output is reported (see regionsUsed).
func (o *output) add(s segments) int {
	s.total = o.m.Join(s.parts)
	o.total += s.total
	switch s.n {
	case 0:
	case 1:
		o.used[s.ends[0].region] += s.total
	default:
		o.shared = append(o.shared, s)
	}
	return s.total
}

// addPart counts p, a text whose count the plan may hold (a history message's content), as region's.
func (o *output) addPart(region Region, p tokenizer.Part) {
	o.addTokens(region, o.m.Join([]tokenizer.Part{p}))
}

// addText counts text as region's. Its count is remembered for the output's other renderings (tool
// definitions, ids, the message).
func (o *output) addText(region Region, text string) {
	o.addTokens(region, o.m.CountShort(text))
}

// frame adds what framing a message of role costs, the model's per-message overhead and the role, as
// region's (regionOverhead: the format's).
func (o *output) frame(region Region, role string) {
	o.addTokens(region, o.a.model.TokensPerMessage+o.a.roleTokens(role))
}

// estimate marks region's count as an estimate (see output.estimated).
func (o *output) estimate(region Region) { o.estimated[region] = true }

// addTokens adds n tokens that region uses: a count the plan holds (a history turn that the planner
// counted as it is rendered), or a fixed overhead of the format (reply priming).
func (o *output) addTokens(region Region, n int) {
	o.total += n
	o.used[region] += n
}

// regionsUsed returns what each region uses of the output, the format's overhead at regionOverhead. Each
// region of a shared text is given what it adds to the count of the text before it, so that the regions
// add up to the text's count exactly, however its parts merge at their joins (a token that spans a join
// is the later region's).
func (o *output) regionsUsed() regionTokens {
	used := o.used
	for i := range o.shared {
		s := &o.shared[i]
		prev := 0
		for j, b := range s.ends[:s.n] {
			n := s.total
			if j < s.n-1 {
				n = o.m.Join(s.parts[:b.end])
			}
			used[b.region] += n - prev
			prev = n
		}
	}
	return used
}
