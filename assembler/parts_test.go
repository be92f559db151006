package assembler

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/tokenizer"
)

// testPNG is a w x h PNG.
func testPNG(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{color.Black, color.White})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// sizedURLPart is an image at a URL that says its size, https://img.test/WxH.png, which testImageTokens
// reads back.
func sizedURLPart(w, h int, detail string) loom.Part {
	p := loom.ImageURLPart(fmt.Sprintf("https://img.test/%dx%d.png", w, h), detail)
	p.Image.Width, p.Image.Height = w, h
	return p
}

// testImageTokens counts an image of a rendering independently of the assembler's reading of it: its size
// from its base64 data by the standard library's image.DecodeConfig, or from its URL (see sizedURLPart),
// then the model's rule.
func testImageTokens(t testing.TB, model tokenizer.Model, url, b64, detail string) int {
	t.Helper()
	var w, h int
	if b64 != "" {
		data, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			t.Fatalf("image data: %v", err)
		}
		cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("image data: %v", err)
		}
		w, h = cfg.Width, cfg.Height
	} else {
		size, ok := strings.CutPrefix(url, "https://img.test/")
		ws, hs, _ := strings.Cut(strings.TrimSuffix(size, ".png"), "x")
		var err1, err2 error
		w, err1 = strconv.Atoi(ws)
		h, err2 = strconv.Atoi(hs)
		if !ok || err1 != nil || err2 != nil {
			t.Fatalf("an image URL %q that does not say its size", url)
		}
	}
	n, err := model.ImageTokens(w, h, detail)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// openAIPartsViolation returns what of Chat Completions' rules for a user message's content parts m
// breaks (the API reference, "content", array of content parts), or "".
func openAIPartsViolation(m ChatMessage) string {
	switch {
	case m.Role != "user":
		return "has content parts, and is not the user's"
	case m.Content != "":
		return "has both a content string and parts"
	case len(m.Parts) == 0:
		return "has no content"
	}
	for j, p := range m.Parts {
		switch {
		case p.Type == "text" && p.Text != "" && p.ImageURL == (ImageURL{}):
		case p.Type == "image_url" && p.Text == "" && (strings.HasPrefix(p.ImageURL.URL, "https://") || strings.HasPrefix(p.ImageURL.URL, "data:image/")):
			switch p.ImageURL.Detail {
			case "", "low", "high", "auto":
			default:
				return fmt.Sprintf("parts[%d] has detail %q", j, p.ImageURL.Detail)
			}
		default:
			return fmt.Sprintf("parts[%d] is not a text or image_url part: %+v", j, p)
		}
	}
	return ""
}

// TestAssemble_ImagesCostWhatTheModelBills: an image adds to the total what the model's rule says, in
// the formats that send it; the text and cookbook formats write the placeholder instead.
func TestAssemble_ImagesCostWhatTheModelBills(t *testing.T) {
	t.Parallel()
	question := Message{Role: "user", Content: "What is in this picture?"}
	for _, c := range []struct {
		model, format string
		part          loom.Part
		want          int
	}{
		{"gpt-4o", FormatOpenAI, sizedURLPart(1024, 1024, "high"), 765},
		{"gpt-4o", FormatOpenAI, sizedURLPart(2048, 4096, "high"), 1105},
		{"gpt-4o", FormatOpenAI, sizedURLPart(2048, 4096, "low"), 85},
		{"gpt-4o-mini", FormatOpenAI, sizedURLPart(1024, 1024, ""), 2833 + 4*5667},
		{"gpt-4.1-mini", FormatOpenAI, sizedURLPart(1800, 2400, "low"), 2353},
		{"gpt-4o", FormatOpenAI, loom.ImageDataPart(testPNG(t, 1024, 1024), "high"), 765},
		{"claude-sonnet-4-5", FormatAnthropic, sizedURLPart(1000, 1000, ""), 1334},
		{"claude-sonnet-4-5", FormatAnthropic, loom.ImageDataPart(testPNG(t, 1092, 1092), ""), 1590},
	} {
		without := Request{Model: c.model, Format: c.format, History: []Message{question}, Message: "Thanks."}
		with := without
		q := question
		q.Parts = []loom.Part{c.part}
		with.History = []Message{q}
		a, err := AssembleRequest(context.Background(), &without)
		if err != nil {
			t.Fatal(err)
		}
		b, err := AssembleRequest(context.Background(), &with)
		if err != nil {
			t.Fatal(err)
		}
		if got := b.TotalTokens - a.TotalTokens; got != c.want {
			t.Errorf("%s, %s: an image of %+v adds %d tokens, want %d", c.model, c.format, c.part.Image, got, c.want)
		}
		if b.Exact != (c.format == FormatOpenAI) {
			t.Errorf("%s: Exact %v", c.model, b.Exact)
		}
	}
	// The current message's parts count as the history's do.
	for _, f := range []string{FormatOpenAI, FormatAnthropic} {
		plain := Request{Model: "gpt-4o", Format: f, Message: "What is this?"}
		with := plain
		with.MessageParts = []loom.Part{sizedURLPart(2048, 4096, "high"), loom.TextPart("Be brief.")}
		a, err := AssembleRequest(context.Background(), &plain)
		if err != nil {
			t.Fatal(err)
		}
		b, err := AssembleRequest(context.Background(), &with)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := b.TotalTokens-a.TotalTokens, 1105+3; got != want { // "Be brief." is 3 tokens
			t.Errorf("%s: the message's image and text add %d tokens, want %d", f, got, want)
		}
	}
	// gpt-5.2's rule is an estimate: a result with one of its images is not exact.
	req := Request{Model: "gpt-5.2", History: []Message{{Role: "user", Content: "See:", Parts: []loom.Part{sizedURLPart(100, 100, "")}}}, Message: "Well?"}
	if res, err := AssembleRequest(context.Background(), &req); err != nil || res.Exact {
		t.Errorf("gpt-5.2 with an image: exact %v, %v; want an estimate", res != nil && res.Exact, err)
	} else {
		// The estimate is the region's that holds the image, the history's; the other regions stay exact.
		for _, r := range res.Report.Regions {
			if r.Exact != (r.Name != RegionHistory) {
				t.Errorf("gpt-5.2 with an image in the history: region %s exact %v", r.Name, r.Exact)
			}
		}
	}
	// An image in the current message makes the message's region an estimate.
	req = Request{Model: "gpt-5.2", Message: "Well?", MessageParts: []loom.Part{sizedURLPart(100, 100, "")}}
	if res, err := AssembleRequest(context.Background(), &req); err != nil || res.Exact {
		t.Errorf("gpt-5.2 with an image in the message: exact %v, %v; want an estimate", res != nil && res.Exact, err)
	} else {
		for _, r := range res.Report.Regions {
			if r.Exact != (r.Name != RegionMessage) {
				t.Errorf("gpt-5.2 with an image in the message: region %s exact %v", r.Name, r.Exact)
			}
		}
	}
}

func TestAssemble_ImageErrors(t *testing.T) {
	t.Parallel()
	msg := func(parts ...loom.Part) []Message {
		return []Message{{Role: "user", Content: "Look.", Parts: parts}}
	}
	for name, c := range map[string]struct {
		req  Request
		want error
		text string
	}{
		"unknown size": {Request{History: msg(loom.ImageURLPart("https://example.com/a.png", "high"))}, loom.ErrImageSize,
			`history[0].parts[0]: assembler: invalid request: loom: the image's size is not known`},
		"no rule": {Request{Model: "gpt-3.5-turbo", History: msg(sizedURLPart(10, 10, ""))}, tokenizer.ErrNoImageRule,
			"history[0].parts[0]: tokenizer: how the model bills images is not known: gpt-3.5-turbo"},
		"bad part": {Request{History: msg(loom.ImageURLPart("ftp://x/a.png", ""))}, ErrInvalidRequest, "history[0]: "},
		"assistant": {Request{History: []Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "x", Parts: []loom.Part{loom.TextPart("y")}}}},
			loom.ErrInvalid, "content parts in a message of role"},
		"cookbook checks too": {Request{Formatter: &Cookbook{}, History: msg(loom.ImageDataPart([]byte("nope"), ""))}, loom.ErrInvalid, "not a PNG"},
	} {
		_, err := AssembleRequest(context.Background(), &c.req)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%s: %v; want an error wrapping %v saying %q", name, err, c.want, c.text)
		}
	}
	// The formats that send text alone need no image's size, nor the model's rule.
	for _, f := range []Format{Text, &Cookbook{}} {
		req := Request{Model: "gpt-3.5-turbo", Formatter: f, History: msg(loom.ImageURLPart("https://example.com/a.png", "high")), Message: "ok"}
		if _, err := AssembleRequest(context.Background(), &req); err != nil {
			t.Errorf("%s: %v", f.Name(), err)
		}
	}
}

// withImages adds content parts to some of req's user messages: images at URLs and as PNG data, of
// random sizes and details, and text parts.
func withImages(t testing.TB, r *rand.Rand, req *Request, pngs [][]byte) int {
	added := 0
	if r.IntN(3) == 0 { // the current message's parts, the message's text blank or none at times
		req.MessageParts = []loom.Part{sizedURLPart(1+r.IntN(3000), 1+r.IntN(3000), "high"), loom.ImageDataPart(pngs[r.IntN(len(pngs))], "low")}
		req.Message = []string{"", " ", "What is this?"}[r.IntN(3)]
		added += 2
	}
	for i := range req.History {
		m := &req.History[i]
		if m.Role != "user" || r.IntN(2) == 0 {
			continue
		}
		m.Parts = nil
		for range 1 + r.IntN(3) {
			detail := []string{"", "low", "high", "auto"}[r.IntN(4)]
			switch r.IntN(3) {
			case 0:
				m.Parts = append(m.Parts, sizedURLPart(1+r.IntN(5000), 1+r.IntN(5000), detail))
			case 1:
				m.Parts = append(m.Parts, loom.ImageDataPart(pngs[r.IntN(len(pngs))], detail))
			default:
				m.Parts = append(m.Parts, loom.TextPart([]string{"and this", " <b>x</b> ", "中文\n2", "42"}[r.IntN(4)]))
			}
			added++
		}
		if r.IntN(4) == 0 {
			m.Content = ""
		}
	}
	return added
}

// TestAssemble_ImagesPropertyTotalIsAnIndependentCount: over random requests with images in their history,
// every format's total is the independent count of what it returns (the images by their model's rule, from
// the sizes their rendering carries), within the budget, by its provider's rules; the formats that send
// text alone write a placeholder for each kept image.
func TestAssemble_ImagesPropertyTotalIsAnIndependentCount(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(15, 2))
	pngs := [][]byte{testPNG(t, 1, 1), testPNG(t, 640, 480), testPNG(t, 3000, 200)}
	models := map[string][]string{
		FormatOpenAI:    {"gpt-4o", "gpt-4o-mini", "gpt-4.1-mini", "o4-mini", "gpt-5", "gpt-5.4"},
		FormatAnthropic: {"claude-sonnet-4-5", "claude-3-5-haiku"},
		FormatText:      {"gpt-4o", "gpt-4"},
		FormatCookbook:  {"gpt-4o", "gpt-3.5-turbo"},
		FormatResponses: {"gpt-4o", "gpt-4.1-mini", "gpt-5"},
		FormatGemini:    {"gemini-2.5-flash", "gemini-2.0-flash", "claude-sonnet-4-5"},
	}
	seen := map[string]int{}
	for range sweep(400) {
		for _, f := range []Format{OpenAI, Anthropic, Text, &Cookbook{}, Responses, Gemini} {
			req := formatRequest(r, f)
			req.Model = models[f.Name()][r.IntN(len(models[f.Name()]))]
			if req.MaxTokens > 0 {
				req.MaxTokens += 2000
			}
			if withImages(t, r, req, pngs) == 0 {
				continue
			}
			res, err := AssembleRequest(context.Background(), req)
			if err != nil {
				if errors.Is(err, ErrNoUserTurn) || errors.Is(err, ErrNoMessages) || errors.Is(err, loom.ErrBudget) {
					continue
				}
				t.Fatalf("%s: %v", f.Name(), err)
			}
			if res.TotalTokens > res.Budget {
				t.Fatalf("%s: total %d over the budget %d", f.Name(), res.TotalTokens, res.Budget)
			}
			// Counted as the request's model: a GPT-5 point release resolves to gpt-5 (res.Model), but for
			// its image rule.
			res.Model = req.Model
			var want int
			switch f.Name() {
			case FormatOpenAI, FormatCookbook:
				want = openAICount(t, res)
			case FormatAnthropic:
				want = anthropicCount(t, res)
			case FormatResponses:
				want = responsesCount(t, res)
			case FormatGemini:
				want = geminiCount(t, res)
			case FormatText:
				model, _ := tokenizer.ForModel(res.Model)
				want = model.Counter().Count(res.Text)
			}
			if res.TotalTokens != want {
				t.Fatalf("%s, %s: TotalTokens %d, independent count %d", f.Name(), res.Model, res.TotalTokens, want)
			}
			if v := providerViolation(f, res); v != "" {
				t.Fatalf("%s: the provider rejects this: %s", f.Name(), v)
			}
			images, placeholders := 0, 0
			for _, m := range res.Messages {
				for _, p := range m.Parts {
					images += boolInt(p.Type == "image_url")
				}
				for _, b := range m.Blocks {
					images += boolInt(b.Type == "image")
				}
				placeholders += strings.Count(m.Content, ImagePlaceholder)
			}
			for _, it := range res.Input {
				for _, c := range it.Content {
					images += boolInt(c.Type == "input_image")
					placeholders += strings.Count(c.Text, ImagePlaceholder)
				}
			}
			for _, c := range res.Contents {
				for _, p := range c.Parts {
					images += boolInt(p.InlineData != nil || p.FileData != nil)
					placeholders += strings.Count(p.Text, ImagePlaceholder)
				}
			}
			placeholders += strings.Count(res.Text, ImagePlaceholder)
			if sendsImages(f) && placeholders > 0 || !sendsImages(f) && images > 0 {
				t.Fatalf("%s: %d images and %d placeholders", f.Name(), images, placeholders)
			}
			seen[f.Name()] += images + placeholders
		}
	}
	for _, f := range []string{FormatOpenAI, FormatAnthropic, FormatText, FormatCookbook, FormatResponses, FormatGemini} {
		if seen[f] < sweep(100) {
			t.Errorf("%s: only %d images kept in all the requests", f, seen[f])
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
