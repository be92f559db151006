// SPDX-License-Identifier: Apache-2.0

package tokenizer

import (
	"fmt"
	"math"

	"github.com/context-loom/loom"
)

// ImageKind names a way of billing an image.
type ImageKind int

// The kinds of image rule.
const (
	// ImagesUnknown: the model takes no images, or how it bills them is not known: counting one is an
	// error wrapping ErrNoImageRule.
	ImagesUnknown ImageKind = iota
	// ImageTiles is OpenAI's rule for the GPT-4o family and the o-series (but o4-mini): an image with
	// "detail": "low" costs Base. One with "high" is scaled to fit in a 2048x2048 square, then so that its
	// shortest side is at most 768 pixels (each side rounded to a pixel), and costs Base plus PerTile for
	// each 512x512 tile it takes. "auto" (or no detail) lets the model choose, and is counted as "high",
	// the most it can cost.
	ImageTiles
	// ImagePatches is OpenAI's rule for gpt-4.1-mini, gpt-4.1-nano, o4-mini, gpt-5-mini and gpt-5-nano:
	// the 32x32 patches that cover the image, at most 1536 (a larger image is scaled down, keeping its
	// aspect ratio, until it is covered by no more), times Multiplier, rounded up. Detail changes nothing.
	ImagePatches
	// ImageTilesOrPatches is the larger of the two counts above, with Base, PerTile and Multiplier: for a
	// model that OpenAI has not said which rule bills (the GPT-5 point releases), so that the count is
	// never less than either would be.
	ImageTilesOrPatches
	// ImageArea is Anthropic's rule: an image whose long edge is more than MaxEdge pixels (1568), or of
	// more than about 1.2 million pixels (1,600 tokens), is first scaled down to fit, keeping its aspect
	// ratio; it then costs width x height / 750 tokens, rounded up, and at least its 28x28 patches (the
	// rule of Anthropic's later documentation, which pads an image to whole patches). It is an estimate:
	// Anthropic counts exactly only with its token counting endpoint.
	ImageArea
	// ImageGeminiTiles is Google's rule for Gemini: an image whose sides are both at most 384 pixels costs
	// Base (258); a larger one is cropped and scaled into tiles of 768x768 pixels, each costing PerTile
	// (258), counted here as the tiles that cover it, which is the most the cropping can make. It is an
	// estimate: Google does not say how it crops, and Gemini's tokenizer is not public.
	ImageGeminiTiles
)

// ImageRule is how a model bills an image in its prompt (see [Model.ImageTokens]).
type ImageRule struct {
	Kind ImageKind
	// Base and PerTile are the tile rules' counts: what any image costs, and what each 512-pixel tile
	// adds at high detail.
	Base, PerTile int
	// Multiplier is the patch rules' tokens per 32-pixel patch.
	Multiplier float64
	// MaxEdge is the area rule's longest side, in pixels, before an image is scaled down; 0 is 1568.
	MaxEdge int
	// Estimate says the rule is not the provider's published one for the model, but the best known.
	Estimate bool
}

// ErrNoImageRule is returned, wrapped with the model's name, for an image to a model whose ImageRule is
// ImagesUnknown: one that takes no images, or whose rule for them is not known (register the model with
// one, see [Register]). It wraps loom.ErrUnsupported.
var ErrNoImageRule = loom.NewError(loom.ErrUnsupported, "tokenizer: how the model bills images is not known")

// Constants of the rules, as OpenAI's and Anthropic's documentation give them.
const (
	tileFit         = 2048 // a high-detail image is first scaled to fit in this square
	tileShortSide   = 768  // then so that its shortest side is at most this long
	tileSide        = 512  // and costs PerTile for each tile of this side
	patchSide       = 32
	maxPatches      = 1536
	areaPerToken    = 750  // Anthropic: width x height / 750
	areaMaxEdge     = 1568 // the long edge of an image Anthropic does not scale down
	areaMaxPixels   = 1568 * 784
	areaPatchSide   = 28
	floatTolerance  = 1e-9 // of a scaled side that lands on a whole number of tiles or patches
	geminiSmallSide = 384  // Gemini: an image of sides at most this long is one tile's cost
	geminiTileSide  = 768
)

// ImageTokens returns what an image of width x height pixels, looked at with detail ("low", "high",
// "auto" or ""), costs in the model's prompt, by the model's Image rule (see [ImageKind]). It returns an
// error wrapping loom.ErrInvalid for a size that is not positive or a detail it does not know, and one
// wrapping [ErrNoImageRule] for a model whose rule is not known. The count is the image's alone: the
// message that carries it is framed as any other.
func (m Model) ImageTokens(width, height int, detail string) (int, error) {
	switch detail {
	case "", loom.DetailAuto, loom.DetailLow, loom.DetailHigh:
	default:
		return 0, loom.NewError(loom.ErrInvalid, fmt.Sprintf("tokenizer: image detail %q (want low, high or auto)", detail))
	}
	if width <= 0 || height <= 0 || width > loom.MaxImageSide || height > loom.MaxImageSide {
		return 0, loom.NewError(loom.ErrInvalid, fmt.Sprintf("tokenizer: an image of %dx%d pixels (each side from 1 to %d)", width, height, loom.MaxImageSide))
	}
	r := m.Image
	switch r.Kind {
	case ImageTiles:
		return r.tiles(width, height, detail), nil
	case ImagePatches:
		return r.patches(width, height), nil
	case ImageTilesOrPatches:
		return max(r.tiles(width, height, detail), r.patches(width, height)), nil
	case ImageArea:
		return r.area(width, height), nil
	case ImageGeminiTiles:
		if width <= geminiSmallSide && height <= geminiSmallSide {
			return r.Base, nil
		}
		return r.PerTile * ((width + geminiTileSide - 1) / geminiTileSide) * ((height + geminiTileSide - 1) / geminiTileSide), nil
	}
	return 0, fmt.Errorf("%w: %s", ErrNoImageRule, m.Name)
}

func (r ImageRule) tiles(width, height int, detail string) int {
	if detail == loom.DetailLow {
		return r.Base
	}
	w, h := float64(width), float64(height)
	if long := max(w, h); long > tileFit {
		w, h = roundHalfUp(w*tileFit/long), roundHalfUp(h*tileFit/long)
	}
	if short := min(w, h); short > tileShortSide {
		w, h = roundHalfUp(w*tileShortSide/short), roundHalfUp(h*tileShortSide/short)
	}
	tiles := int(math.Ceil(w/tileSide)) * int(math.Ceil(h/tileSide))
	return r.Base + r.PerTile*tiles
}

// roundHalfUp rounds a side x to the nearest whole number of pixels, a half up (a side rounded up never
// takes fewer tiles), and at least 1.
func roundHalfUp(x float64) float64 { return max(1, math.Floor(x+0.5)) }

// patches follows OpenAI's steps: the patches that cover the image; if more than 1536, the factor that
// scales it to 1536 patches' area, lowered so that one side is a whole number of patches; the patches that
// cover it then, at most 1536; times the multiplier, rounded up.
func (r ImageRule) patches(width, height int) int {
	w, h := float64(width), float64(height)
	n := ceilPatches(w/patchSide) * ceilPatches(h/patchSide)
	if n > maxPatches {
		scale := math.Sqrt(patchSide * patchSide * maxPatches / (w * h))
		pw, ph := w*scale/patchSide, h*scale/patchSide
		// (A side less than a patch long stays one patch: the cap then bounds the count.)
		scale *= min(max(1, math.Floor(pw+floatTolerance))/pw, max(1, math.Floor(ph+floatTolerance))/ph)
		n = min(ceilPatches(w*scale/patchSide)*ceilPatches(h*scale/patchSide), maxPatches)
	}
	return int(math.Ceil(float64(n)*r.Multiplier - floatTolerance))
}

// ceilPatches is the patches that cover x patches' length, a length within floatTolerance of a whole
// number taken as that number.
func ceilPatches(x float64) int { return int(math.Ceil(x - floatTolerance)) }

func (r ImageRule) area(width, height int) int {
	edge := r.MaxEdge
	if edge <= 0 {
		edge = areaMaxEdge
	}
	w, h := float64(width), float64(height)
	scale := min(1, float64(edge)/max(w, h), math.Sqrt(areaMaxPixels/(w*h)))
	w, h = w*scale, h*scale
	byArea := int(math.Ceil(w*h/areaPerToken - floatTolerance))
	byPatch := int(math.Ceil(w/areaPatchSide-floatTolerance)) * int(math.Ceil(h/areaPatchSide-floatTolerance))
	return max(byArea, byPatch, 1)
}

// validImageRule returns what is wrong with r, or "".
func validImageRule(r ImageRule) string {
	switch {
	case r.Kind < ImagesUnknown || r.Kind > ImageGeminiTiles:
		return fmt.Sprintf("unknown image rule kind %d", r.Kind)
	case r.Base < 0 || r.PerTile < 0 || r.MaxEdge < 0 || !(r.Multiplier >= 0) || math.IsInf(r.Multiplier, 0):
		return "an image rule with a negative or infinite count"
	case (r.Kind == ImageTiles || r.Kind == ImageTilesOrPatches) && r.Base+r.PerTile == 0,
		r.Kind == ImageGeminiTiles && (r.Base == 0 || r.PerTile == 0):
		return "a tile rule whose tiles cost nothing"
	case (r.Kind == ImagePatches || r.Kind == ImageTilesOrPatches) && r.Multiplier == 0:
		return "a patch rule whose patches cost nothing"
	}
	return ""
}

// OpenAI's image rules, from its guide "Images and vision", section "Calculating costs"
// (platform.openai.com/docs/guides/images-vision): the tile rule's base and tile tokens per model
// family, and the patch rule's multipliers. The GPT-5 point releases are not in it; users measured
// gpt-5.2 and gpt-5.4 at 1.2 tokens a 32-pixel patch (the OpenAI Developer Community, "Introducing
// GPT-5.4 mini and nano", 2026), and their rule counts the larger of GPT-5's tiles and those patches.
func tiles(base, perTile int) ImageRule {
	return ImageRule{Kind: ImageTiles, Base: base, PerTile: perTile}
}

func patches(multiplier float64) ImageRule {
	return ImageRule{Kind: ImagePatches, Multiplier: multiplier}
}

var (
	gpt4oImages       = tiles(85, 170) // gpt-4o, gpt-4.1, gpt-4.5, and GPT-4 Turbo with vision before them
	gpt5Images        = tiles(70, 140) // gpt-5, gpt-5-chat-latest
	gpt5PointReleases = ImageRule{Kind: ImageTilesOrPatches, Base: 70, PerTile: 140, Multiplier: 1.2, Estimate: true}
	anthropicImages   = ImageRule{Kind: ImageArea, Estimate: true}
	// Google's "Understand and count tokens" (ai.google.dev/gemini-api/docs/tokens), for Gemini 2.0 and
	// later; Gemini 1.5 billed 258 for any image, which this errs above.
	geminiImages = ImageRule{Kind: ImageGeminiTiles, Base: 258, PerTile: 258, Estimate: true}
)

// GeminiImageRule is Google's rule for Gemini's images (see [ImageGeminiTiles]): what a request sent to
// Gemini pays for an image, whichever model's name it was planned for.
func GeminiImageRule() ImageRule { return geminiImages }

// builtinImageRules are the image rules of the built-in models that take images, by name.
var builtinImageRules = map[string]ImageRule{
	"gpt-4-turbo":          gpt4oImages,
	"gpt-4-vision-preview": gpt4oImages,
	"gpt-4o":               gpt4oImages,
	"gpt-4o-2024-05-13":    gpt4oImages,
	"chatgpt-4o":           gpt4oImages,
	"gpt-4o-mini":          tiles(2833, 5667),
	"gpt-4.1":              gpt4oImages,
	"gpt-4.1-mini":         patches(1.62),
	"gpt-4.1-nano":         patches(2.46),
	"gpt-4.5-preview":      gpt4oImages,
	"o1":                   tiles(75, 150),
	"o3":                   tiles(75, 150),
	"o4-mini":              patches(1.72),
	"gpt-5":                gpt5Images,
	"gpt-5-chat":           gpt5Images,
	"gpt-5-mini":           patches(1.62),
	"gpt-5-nano":           patches(2.46),
	"gpt-5.1":              gpt5PointReleases,
	"gpt-5.1-chat":         gpt5PointReleases,
	"gpt-5.2":              gpt5PointReleases,
	"gpt-5.2-chat":         gpt5PointReleases,

	"claude-3-haiku":    anthropicImages,
	"claude-3-opus":     anthropicImages,
	"claude-3-5-haiku":  anthropicImages,
	"claude-3-5-sonnet": anthropicImages,
	"claude-3-7-sonnet": anthropicImages,
	"claude-sonnet-4":   anthropicImages,
	"claude-opus-4":     anthropicImages,
	"claude-opus-4-1":   anthropicImages,
	"claude-sonnet-4-5": anthropicImages,
	"claude-haiku-4-5":  anthropicImages,
	"claude-opus-4-5":   anthropicImages,

	"gemini-1.5-pro":   geminiImages,
	"gemini-1.5-flash": geminiImages,
	"gemini-2.0-flash": geminiImages,
	"gemini-2.5-pro":   geminiImages,
	"gemini-2.5-flash": geminiImages,
}

// pointReleaseImages is the image rule of a GPT-5 point release that is not registered, resolved to the
// GPT-5 model of its suffix whose rule is r: the point releases' rule in place of GPT-5's tiles.
func pointReleaseImages(r ImageRule) ImageRule {
	if r == gpt5Images {
		return gpt5PointReleases
	}
	return r
}
