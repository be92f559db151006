// SPDX-License-Identifier: Apache-2.0

package tokenizer_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/tokenizer"
)

func mustModel(t testing.TB, name string) tokenizer.Model {
	t.Helper()
	m, err := tokenizer.ForModel(name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestImageTokens_PublishedFigures holds each rule to the figures its provider publishes, and to counts
// users measured off the API (the request's usage with the image less the same request's text alone).
func TestImageTokens_PublishedFigures(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		model         string
		width, height int
		detail        string
		want          int
		source        string
	}{
		// OpenAI, "Images and vision", Calculating costs: the GPT-4o family's examples.
		{"gpt-4o", 1024, 1024, "high", 765, "OpenAI: 4 tiles at 768x768"},
		{"gpt-4o", 2048, 4096, "high", 1105, "OpenAI: 6 tiles at 768x1536"},
		{"gpt-4o", 4096, 8192, "low", 85, "OpenAI: low detail is a fixed cost"},
		{"gpt-4o-2024-08-06", 1024, 1024, "", 765, "no detail is auto, counted as high"},
		{"gpt-4o", 1024, 1024, "auto", 765, "auto, counted as high"},
		// The same guide's table of base and tile tokens per model.
		{"gpt-4.1", 1024, 1024, "high", 765, "OpenAI: 4o, 4.1, 4.5: 85 and 170"},
		{"gpt-4.5-preview", 2048, 4096, "high", 1105, "OpenAI: 4o, 4.1, 4.5: 85 and 170"},
		{"gpt-4o-mini", 1024, 1024, "high", 2833 + 4*5667, "OpenAI: 4o-mini: 2833 and 5667"},
		{"gpt-4o-mini", 1024, 1024, "low", 2833, "OpenAI: 4o-mini: 2833 and 5667"},
		{"o1", 1024, 1024, "high", 75 + 4*150, "OpenAI: o1, o1-pro, o3: 75 and 150"},
		{"o3-2025-04-16", 512, 512, "low", 75, "OpenAI: o1, o1-pro, o3: 75 and 150"},
		{"gpt-5", 1024, 1024, "high", 70 + 4*140, "OpenAI: gpt-5, gpt-5-chat-latest: 70 and 140"},
		{"gpt-5-chat-latest", 1024, 1024, "low", 70, "OpenAI: gpt-5, gpt-5-chat-latest: 70 and 140"},
		// The patch rule's examples, 1024 and 1452 patches, times each model's multiplier, rounded up.
		{"gpt-4.1-mini", 1024, 1024, "high", 1659, "OpenAI: 1024 patches x 1.62"},
		{"gpt-4.1-mini", 1800, 2400, "high", 2353, "OpenAI: 1452 patches (33x44 once scaled) x 1.62"},
		{"gpt-4.1-nano", 1800, 2400, "low", 3572, "OpenAI: 1452 x 2.46; detail changes nothing"},
		{"o4-mini", 1024, 1024, "high", 1762, "OpenAI: 1024 x 1.72"},
		{"gpt-5-mini", 1024, 1024, "high", 1659, "OpenAI: 1024 x 1.62"},
		{"gpt-5-nano", 1024, 1024, "high", 2520, "OpenAI: 1024 x 2.46"},
		// Measured, with a 128x64 image and a five-word text (the OpenAI Developer Community, "Vision - more
		// than one way to send a request", 2025): gpt-4o 97 low and 267 high, gpt-4o-mini 2845 and 8512, o3
		// 86 and 236, o4-mini 26 whatever the detail, the text 12 tokens (11 for o3).
		{"gpt-4o-2024-11-20", 128, 64, "low", 97 - 12, "measured"},
		{"gpt-4o-2024-11-20", 128, 64, "high", 267 - 12, "measured"},
		{"gpt-4o-mini-2024-07-18", 128, 64, "low", 2845 - 12, "measured"},
		{"gpt-4o-mini-2024-07-18", 128, 64, "high", 8512 - 12, "measured"},
		{"o3-2025-04-16", 128, 64, "high", 236 - 11, "measured"},
		{"o4-mini-2025-04-16", 128, 64, "low", 26 - 12, "measured: 8 patches x 1.72, rounded up"},
		// Measured where the 2048 fit rounds a side (the OpenAI Developer Community, "Vision pricing
		// calculator: inaccurate resizing/rounding vs API costs", 2025): gpt-4.1 billed 1453 for 2049x513 and
		// 773 for 2050x513, 8 tokens of them the text; 513 scales to 512.75 (513 pixels, two rows of tiles)
		// and to 512.4995 (512 pixels, one row).
		{"gpt-4.1-2025-04-14", 2049, 513, "high", 1453 - 8, "measured"},
		{"gpt-4.1-2025-04-14", 2050, 513, "high", 773 - 8, "measured"},
		// Anthropic, "Vision", Evaluate image size: width x height / 750, about 54 for 200x200 (the later
		// docs' 28-pixel patches give 8x8 = 64, which the estimate takes), 1334 for 1000x1000, 1590 for
		// 1092x1092 (the largest 1:1 size it does not scale down).
		{"claude-sonnet-4-5", 200, 200, "", 64, "Anthropic: at least 8x8 patches"},
		{"claude-sonnet-4-5", 1000, 1000, "", 1334, "Anthropic: 1,000,000 / 750, rounded up"},
		{"claude-3-5-sonnet-20241022", 1092, 1092, "high", 1590, "Anthropic: 1,192,464 / 750"},
		{"claude-opus-4-1", 784, 1568, "", 1640, "Anthropic's largest 1:2 size not scaled down"},
		{"claude-opus-4-1", 8000, 8000, "", 1640, "scaled down to 1568x784's pixels"},
	} {
		got, err := mustModel(t, c.model).ImageTokens(c.width, c.height, c.detail)
		if err != nil || got != c.want {
			t.Errorf("%s: %dx%d %q = %d, %v; want %d (%s)", c.model, c.width, c.height, c.detail, got, err, c.want, c.source)
		}
	}
}

func TestImageTokens_Rules(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]tokenizer.ImageRule{
		"gpt-4o":       {Kind: tokenizer.ImageTiles, Base: 85, PerTile: 170},
		"gpt-4.1-nano": {Kind: tokenizer.ImagePatches, Multiplier: 2.46},
		// GPT-5's point releases, registered or resolved to the GPT-5 model of their suffix, count the
		// larger of GPT-5's tiles and 1.2 tokens a patch; a point release of a patch model keeps its rule.
		"gpt-5.2":                  {Kind: tokenizer.ImageTilesOrPatches, Base: 70, PerTile: 140, Multiplier: 1.2, Estimate: true},
		"gpt-5.4":                  {Kind: tokenizer.ImageTilesOrPatches, Base: 70, PerTile: 140, Multiplier: 1.2, Estimate: true},
		"gpt-5.4-mini":             {Kind: tokenizer.ImagePatches, Multiplier: 1.62},
		"claude-opus-4-5-20251101": {Kind: tokenizer.ImageArea, Estimate: true},
		"gpt-3.5-turbo":            {},
		"gemini-2.5-pro":           {Kind: tokenizer.ImageGeminiTiles, Base: 258, PerTile: 258, Estimate: true},
		"llama-3.1-8b":             {},
	} {
		if got := mustModel(t, name).Image; got != want {
			t.Errorf("%s: Image = %+v, want %+v", name, got, want)
		}
	}
	// Gemini: an image of sides at most 384 is one tile's 258; a larger one the 768-pixel tiles that
	// cover it, 258 each, whatever the detail.
	gemini := mustModel(t, "gemini-2.5-flash")
	for _, c := range []struct{ w, h, want int }{{1, 1, 258}, {384, 384, 258}, {385, 10, 258}, {768, 768, 258}, {769, 768, 516}, {1000, 1000, 1032}, {3000, 200, 1032}} {
		for _, detail := range []string{"", "low", "high"} {
			if n, err := gemini.ImageTokens(c.w, c.h, detail); err != nil || n != c.want {
				t.Errorf("gemini %dx%d %q: %d, %v; want %d", c.w, c.h, detail, n, err, c.want)
			}
		}
	}
	// The point releases' rule is never less than either rule it may be.
	m := mustModel(t, "gpt-5.4")
	tile := tokenizer.Model{Name: "t", Image: tokenizer.ImageRule{Kind: tokenizer.ImageTiles, Base: 70, PerTile: 140}}
	patch := tokenizer.Model{Name: "p", Image: tokenizer.ImageRule{Kind: tokenizer.ImagePatches, Multiplier: 1.2}}
	for _, size := range [][2]int{{100, 100}, {1920, 1080}, {512, 512}, {4000, 30}} {
		n, _ := m.ImageTokens(size[0], size[1], "high")
		a, _ := tile.ImageTokens(size[0], size[1], "high")
		b, _ := patch.ImageTokens(size[0], size[1], "high")
		if n != max(a, b) {
			t.Errorf("gpt-5.4 %v: %d, want max(%d, %d)", size, n, a, b)
		}
	}
}

func TestImageTokens_Errors(t *testing.T) {
	t.Parallel()
	gpt4o := mustModel(t, "gpt-4o")
	for _, c := range []struct {
		m      tokenizer.Model
		w, h   int
		detail string
		want   error
	}{
		{mustModel(t, "gpt-3.5-turbo"), 10, 10, "", tokenizer.ErrNoImageRule},
		{mustModel(t, "llama-3.1-8b"), 10, 10, "", loom.ErrUnsupported},
		{gpt4o, 0, 10, "", loom.ErrInvalid},
		{gpt4o, 10, -1, "", loom.ErrInvalid},
		{gpt4o, loom.MaxImageSide + 1, 10, "", loom.ErrInvalid},
		{gpt4o, 10, 10, "medium", loom.ErrInvalid},
	} {
		if n, err := c.m.ImageTokens(c.w, c.h, c.detail); !errors.Is(err, c.want) {
			t.Errorf("%s %dx%d %q: %d, %v; want an error wrapping %v", c.m.Name, c.w, c.h, c.detail, n, err, c.want)
		}
	}
}

func TestRegister_RejectsInvalidImageRules(t *testing.T) {
	t.Parallel()
	for _, r := range []tokenizer.ImageRule{
		{Kind: 99},
		{Kind: tokenizer.ImageTiles},
		{Kind: tokenizer.ImageTiles, Base: -1, PerTile: 170},
		{Kind: tokenizer.ImagePatches},
		{Kind: tokenizer.ImagePatches, Multiplier: math.NaN()},
		{Kind: tokenizer.ImagePatches, Multiplier: math.Inf(1)},
		{Kind: tokenizer.ImageTilesOrPatches, Base: 1, PerTile: 1},
		{Kind: tokenizer.ImageArea, MaxEdge: -5},
		{Kind: tokenizer.ImageGeminiTiles, Base: 258},
	} {
		m := tokenizer.Model{Name: "vision-test-invalid", ContextWindow: 1000, Image: r}
		if err := tokenizer.Register(m); !errors.Is(err, tokenizer.ErrInvalidModel) {
			t.Errorf("Register with %+v: %v, want ErrInvalidModel", r, err)
		}
	}
	m := tokenizer.Model{Name: "vision-test-valid", ContextWindow: 1000,
		Image: tokenizer.ImageRule{Kind: tokenizer.ImageArea, MaxEdge: 2576, Estimate: true}}
	if err := tokenizer.Register(m); err != nil {
		t.Fatal(err)
	}
	// A larger edge: 2576x1288 is not scaled down by the edge, but by the pixel bound.
	if n, err := mustModel(t, "vision-test-valid").ImageTokens(2000, 1000, ""); err != nil || n != 1640 {
		t.Errorf("an area rule of edge 2576: 2000x1000 = %d, %v; want 1640", n, err)
	}
}

// TestImageTokens_Bounds: over random sizes, each rule stays within what its steps allow: a tile rule
// costs Base at low detail and at most Base + 8 tiles at high (768x2048 once scaled), auto as high; a patch
// rule at most 1536 patches' worth, whatever the detail; the area rule at most 1,229,312 pixels' worth, or
// the 28-pixel patches of an image of that many, which are at most 1568 and those that pad its sides
// ((1568 + 1568) / 28 + 1).
func TestImageTokens_Bounds(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(3, 4))
	tiles := mustModel(t, "gpt-4o")
	patches := mustModel(t, "gpt-4.1-mini")
	area := mustModel(t, "claude-haiku-4-5")
	for range 20000 {
		w, h := 1+r.IntN(loom.MaxImageSide), 1+r.IntN(loom.MaxImageSide)
		if r.IntN(2) == 0 {
			w, h = 1+r.IntN(3000), 1+r.IntN(3000)
		}
		low, _ := tiles.ImageTokens(w, h, "low")
		high, _ := tiles.ImageTokens(w, h, "high")
		auto, _ := tiles.ImageTokens(w, h, "auto")
		if low != 85 || high < 85+170 || high > 85+8*170 || auto != high || (high-85)%170 != 0 {
			t.Fatalf("gpt-4o %dx%d: low %d, high %d, auto %d", w, h, low, high, auto)
		}
		p, _ := patches.ImageTokens(w, h, "low")
		ph, _ := patches.ImageTokens(w, h, "high")
		if p != ph || p < 2 || p > int(math.Ceil(1536*1.62)) {
			t.Fatalf("gpt-4.1-mini %dx%d: low %d, high %d", w, h, p, ph)
		}
		if raw := ((w + 31) / 32) * ((h + 31) / 32); raw <= 1536 && p != int(math.Ceil(float64(raw)*1.62-1e-9)) {
			t.Fatalf("gpt-4.1-mini %dx%d: %d, want %d patches x 1.62", w, h, p, raw)
		}
		a, _ := area.ImageTokens(w, h, "")
		if a < 1 || a > max(1640, 1568+113) {
			t.Fatalf("claude %dx%d: %d", w, h, a)
		}
		if w <= 1568 && h <= 1568 && w*h <= 1568*784 && a < int(math.Ceil(float64(w*h)/750-1e-9)) {
			t.Fatalf("claude %dx%d, not scaled: %d, less than its pixels / 750", w, h, a)
		}
	}
}

func ExampleModel_ImageTokens() {
	m, _ := tokenizer.ForModel("gpt-4o")
	for _, c := range []struct {
		w, h   int
		detail string
	}{{1024, 1024, "high"}, {2048, 4096, "high"}, {2048, 4096, "low"}} {
		n, _ := m.ImageTokens(c.w, c.h, c.detail)
		fmt.Printf("%dx%d %s: %d tokens\n", c.w, c.h, c.detail, n)
	}
	// Output:
	// 1024x1024 high: 765 tokens
	// 2048x4096 high: 1105 tokens
	// 2048x4096 low: 85 tokens
}
