// SPDX-License-Identifier: Apache-2.0

package loom

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/context-loom/loom/internal/imagesize"
)

// Part is one part of a user message's content: a text or an image, as OpenAI's content parts and
// Anthropic's content blocks are. A message's content is its Content, then its Parts in order, so that a
// message of text alone keeps its Content and no parts, and a question about a picture is
//
//	loom.Message{Role: "user", Content: "What is in this picture?",
//		Parts: []loom.Part{loom.ImageURLPart("https://example.com/cat.png", loom.DetailHigh)}}
//
// Make parts with [TextPart], [ImageURLPart] and [ImageDataPart]; [CheckParts] says which are valid.
type Part struct {
	Type  string `json:"type"`            // PartText or PartImage
	Text  string `json:"text,omitempty"`  // a text part's text
	Image *Image `json:"image,omitempty"` // an image part's image
}

// The types of part.
const (
	PartText  = "text"
	PartImage = "image"
)

// Image is an image in a message: at a URL that the provider fetches, or its bytes (base64 in JSON), with
// how closely the model is to look at it (Detail) and, for an image at a URL, its size, which Loom needs
// to count it (an image's bytes say their own size).
type Image struct {
	// URL is an http or https URL of the image; Data is the image itself, a PNG, JPEG, GIF or WebP file.
	// An image has one of them.
	URL  string `json:"url,omitempty"`
	Data []byte `json:"data,omitempty" textlimit:"body"`
	// MediaType is the type of the image's data: "image/png", "image/jpeg", "image/gif" or "image/webp".
	// For Data it may be left empty (the data's header says it), and must otherwise be what the header
	// says.
	MediaType string `json:"media_type,omitempty"`
	// Detail is OpenAI's detail: DetailLow, DetailHigh or DetailAuto ("" is DetailAuto), which OpenAI's
	// tile-counted models bill differently (see tokenizer.Model.ImageTokens). Anthropic has none.
	Detail string `json:"detail,omitempty"`
	// Width and Height are the image's size in pixels, both or neither: what an image at a URL must say
	// for Loom to count it, and what an image's data, which says its own, must agree with if given.
	Width  int `json:"width,omitempty"`
	Height int `json:"height,omitempty"`
}

// The details of an image.
const (
	DetailAuto = "auto"
	DetailLow  = "low"
	DetailHigh = "high"
)

// Limits of a message's parts, which [CheckParts] applies before any of them is read.
const (
	// MaxParts is the most parts one message may have.
	MaxParts = 100
	// MaxImageBytes is the largest image data, 20 MiB: OpenAI's limit per image (Anthropic's is 5 MB).
	MaxImageBytes = 20 << 20
	// MaxImageURL is the longest image URL, in bytes.
	MaxImageURL = 8192
	// MaxImageSide is the largest width or height of an image, in pixels.
	MaxImageSide = 1 << 16
)

// ErrImageSize is returned, wrapped, for an image whose size Loom cannot know: one at a URL that does not
// give its width and height. It wraps ErrInvalid.
var ErrImageSize = NewError(ErrInvalid, "loom: the image's size is not known (an image at a URL needs its width and height)")

// TextPart returns a part of text.
func TextPart(text string) Part { return Part{Type: PartText, Text: text} }

// ImageURLPart returns a part of the image at url, to be looked at with detail (DetailLow, DetailHigh,
// DetailAuto or ""). Set its Image's Width and Height for Loom to count it: an image at a URL whose size
// is not given cannot be counted, and is an error wrapping ErrImageSize when it is.
func ImageURLPart(url, detail string) Part {
	return Part{Type: PartImage, Image: &Image{URL: url, Detail: detail}}
}

// ImageDataPart returns a part of the image data, a PNG, JPEG, GIF or WebP file, to be looked at with
// detail (DetailLow, DetailHigh, DetailAuto or ""). Its media type and size are read from the data's
// header.
func ImageDataPart(data []byte, detail string) Part {
	return Part{Type: PartImage, Image: &Image{Data: data, Detail: detail}}
}

// Size returns the image's width and height in pixels: what its data's header says, or else its Width
// and Height. It returns an error wrapping ErrInvalid for data that is not a PNG, JPEG, GIF or WebP
// image, and one wrapping ErrImageSize for an image at a URL without its width and height.
func (im *Image) Size() (width, height int, err error) {
	if len(im.Data) > 0 {
		info, err := imagesize.Decode(im.Data)
		if err != nil {
			return 0, 0, NewError(ErrInvalid, "loom: image data: "+err.Error())
		}
		return info.Width, info.Height, nil
	}
	if im.Width > 0 && im.Height > 0 {
		return im.Width, im.Height, nil
	}
	if im.URL != "" {
		return 0, 0, fmt.Errorf("%w: %s", ErrImageSize, quoteName(im.URL))
	}
	return 0, 0, ErrImageSize
}

// ContentType returns the media type of the image's data as its header says ("image/png", ...), or
// MediaType for an image at a URL; "" if neither says.
func (im *Image) ContentType() string {
	if len(im.Data) > 0 {
		if info, err := imagesize.Decode(im.Data); err == nil {
			return info.MediaType
		}
	}
	return im.MediaType
}

// CheckParts returns an error wrapping ErrInvalid, which names the part, unless parts are parts that a
// message of role may have. Only a user message has parts (providers take images from the user alone),
// at most MaxParts of them. A text part has text that is not white space alone, valid UTF-8, and no image. An image part has an Image
// and no text, and the image has either a URL or Data:
//   - a URL of http or https, of at most MaxImageURL bytes, with no space or control character (a data: URL's
//     bytes go in Data instead);
//   - Data of at most MaxImageBytes, whose header says it is a PNG, JPEG, GIF or WebP image of at most
//     MaxImageSide pixels a side, of the MediaType and the Width and Height given, if they are.
//
// Its Detail is "", DetailAuto, DetailLow or DetailHigh; its MediaType, if given, one of the four formats';
// its Width and Height both 0 or both from 1 to MaxImageSide. Every limit is checked before the part's data
// is read. The error for too many parts or too large data wraps ErrTooLarge as well.
func CheckParts(role string, parts []Part) error {
	if len(parts) == 0 {
		return nil
	}
	if role != "user" {
		return NewError(ErrInvalid, fmt.Sprintf("content parts in a message of role %s (only a user message has them)", quoteName(role)))
	}
	if len(parts) > MaxParts {
		return tooLarge(fmt.Sprintf("%d content parts, the limit is %d", len(parts), MaxParts))
	}
	for i := range parts {
		if err := checkPart(&parts[i]); err != nil {
			return fmt.Errorf("part %d: %w", i, err)
		}
	}
	return nil
}

// tooLarge is an error of text that wraps ErrInvalid and ErrTooLarge.
func tooLarge(text string) error {
	return fmt.Errorf("%w: %w", NewError(ErrInvalid, text), ErrTooLarge)
}

func checkPart(p *Part) error {
	switch p.Type {
	case PartText:
		switch {
		case p.Image != nil:
			return NewError(ErrInvalid, "a text part with an image")
		case IsBlank(p.Text):
			return NewError(ErrInvalid, "a text part without text (or of white space alone, which providers refuse)")
		case !utf8.ValidString(p.Text):
			return NewError(ErrInvalid, "a text part that is not valid UTF-8")
		}
		return nil
	case PartImage:
		if p.Image == nil {
			return NewError(ErrInvalid, "an image part without an image")
		}
		if p.Text != "" {
			return NewError(ErrInvalid, "an image part with text")
		}
		return checkImage(p.Image)
	}
	return NewError(ErrInvalid, fmt.Sprintf("a part of type %s (want text or image)", quoteName(p.Type)))
}

// mediaTypes are the media types of the formats an image may have.
var mediaTypes = []string{imagesize.PNG, imagesize.JPEG, imagesize.GIF, imagesize.WebP}

func checkImage(im *Image) error {
	switch im.Detail {
	case "", DetailAuto, DetailLow, DetailHigh:
	default:
		return NewError(ErrInvalid, fmt.Sprintf("image detail %s (want low, high or auto)", quoteName(im.Detail)))
	}
	if im.MediaType != "" && !slices.Contains(mediaTypes, im.MediaType) {
		return NewError(ErrInvalid, fmt.Sprintf("image media type %s (want %s)", quoteName(im.MediaType), strings.Join(mediaTypes, ", ")))
	}
	if (im.Width == 0) != (im.Height == 0) || im.Width < 0 || im.Height < 0 {
		return NewError(ErrInvalid, fmt.Sprintf("image size %dx%d (give both width and height, or neither)", im.Width, im.Height))
	}
	if im.Width > MaxImageSide || im.Height > MaxImageSide {
		return tooLarge(fmt.Sprintf("image size %dx%d, the limit is %d pixels a side", im.Width, im.Height, MaxImageSide))
	}
	switch {
	case im.URL != "" && len(im.Data) > 0:
		return NewError(ErrInvalid, "an image with both a URL and data (give one)")
	case im.URL != "":
		return checkImageURL(im.URL)
	case len(im.Data) == 0:
		return NewError(ErrInvalid, "an image without a URL or data")
	case len(im.Data) > MaxImageBytes:
		return tooLarge(fmt.Sprintf("image data of %d bytes, the limit is %d", len(im.Data), MaxImageBytes))
	}
	info, err := imagesize.Decode(im.Data)
	if err != nil {
		return NewError(ErrInvalid, "image data: "+err.Error())
	}
	switch {
	case im.MediaType != "" && im.MediaType != info.MediaType:
		return NewError(ErrInvalid, fmt.Sprintf("image data of media type %s is %s", im.MediaType, info.MediaType))
	case im.Width > 0 && (im.Width != info.Width || im.Height != info.Height):
		return NewError(ErrInvalid, fmt.Sprintf("image size %dx%d, and its data says %dx%d", im.Width, im.Height, info.Width, info.Height))
	case info.Width > MaxImageSide || info.Height > MaxImageSide:
		return tooLarge(fmt.Sprintf("image data of %dx%d pixels, the limit is %d a side", info.Width, info.Height, MaxImageSide))
	}
	return nil
}

func checkImageURL(u string) error {
	if len(u) > MaxImageURL {
		return tooLarge(fmt.Sprintf("an image URL of %d bytes, the limit is %d", len(u), MaxImageURL))
	}
	scheme, rest, _ := strings.Cut(u, ":")
	switch strings.ToLower(scheme) {
	case "http", "https":
	case "data":
		return NewError(ErrInvalid, "an image URL of scheme data: give the image's bytes as its data")
	default:
		return NewError(ErrInvalid, fmt.Sprintf("image URL %s (want an http or https URL)", quoteName(u)))
	}
	if !strings.HasPrefix(rest, "//") || len(rest) == 2 || rest[2] == '/' {
		return NewError(ErrInvalid, fmt.Sprintf("image URL %s has no host", quoteName(u)))
	}
	if !utf8.ValidString(u) {
		return NewError(ErrInvalid, "an image URL that is not valid UTF-8")
	}
	for _, r := range u {
		if r <= ' ' || r == 0x7f || r >= 0x80 && r <= 0x9f || r == '\u2028' || r == '\u2029' {
			return NewError(ErrInvalid, fmt.Sprintf("image URL %s has a space or a control character", quoteName(u)))
		}
	}
	return nil
}

// IsSpace reports whether r is white space to a provider: Unicode's white space (unicode.IsSpace), and the
// information separators U+001C to U+001F, which Python's str.isspace counts too. Which definition a
// provider applies is not documented; text that is white space by either is taken for white space.
func IsSpace(r rune) bool { return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f }

// IsBlank reports whether s is empty or white space alone (see [IsSpace]), without looking past its first
// other character. A blank text says nothing, and providers refuse some (the Messages API: "text content
// blocks must contain non-whitespace text").
func IsBlank(s string) bool {
	for _, r := range s {
		if !IsSpace(r) {
			return false
		}
	}
	return true
}
