// SPDX-License-Identifier: Apache-2.0

package loom_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"reflect"
	"strings"
	"testing"

	"github.com/context-loom/loom"
)

func pngOf(t testing.TB, w, h int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestCheckParts(t *testing.T) {
	t.Parallel()
	img := pngOf(t, 40, 30)
	sized := func(p loom.Part, w, h int) loom.Part { p.Image.Width, p.Image.Height = w, h; return p }
	typed := func(p loom.Part, mt string) loom.Part { p.Image.MediaType = mt; return p }
	many := make([]loom.Part, loom.MaxParts+1)
	for i := range many {
		many[i] = loom.TextPart("x")
	}
	for name, c := range map[string]struct {
		role  string
		parts []loom.Part
		want  string // "" for valid; else a part of the error's text
		large bool   // the error wraps ErrTooLarge
	}{
		"none":                {"assistant", nil, "", false},
		"text and images":     {"user", []loom.Part{loom.TextPart("see"), loom.ImageDataPart(img, loom.DetailLow), sized(loom.ImageURLPart("https://example.com/a.png", ""), 10, 20)}, "", false},
		"data with its size":  {"user", []loom.Part{typed(sized(loom.ImageDataPart(img, loom.DetailHigh), 40, 30), "image/png")}, "", false},
		"url without size":    {"user", []loom.Part{loom.ImageURLPart("http://example.com/a.png", loom.DetailAuto)}, "", false},
		"assistant":           {"assistant", []loom.Part{loom.TextPart("x")}, `content parts in a message of role "assistant"`, false},
		"too many":            {"user", many, "101 content parts, the limit is 100", true},
		"unknown type":        {"user", []loom.Part{{Type: "audio"}}, `part 0: a part of type "audio"`, false},
		"empty text":          {"user", []loom.Part{loom.TextPart("")}, "a text part without text", false},
		"blank text":          {"user", []loom.Part{loom.TextPart(" \n\u3000\x1f")}, "a text part without text", false},
		"bad utf-8":           {"user", []loom.Part{loom.TextPart("\xff")}, "not valid UTF-8", false},
		"text with image":     {"user", []loom.Part{{Type: loom.PartText, Text: "x", Image: &loom.Image{}}}, "a text part with an image", false},
		"image without image": {"user", []loom.Part{{Type: loom.PartImage}}, "an image part without an image", false},
		"image with text":     {"user", []loom.Part{{Type: loom.PartImage, Text: "x", Image: &loom.Image{URL: "https://a"}}}, "an image part with text", false},
		"neither":             {"user", []loom.Part{{Type: loom.PartImage, Image: &loom.Image{}}}, "without a URL or data", false},
		"both":                {"user", []loom.Part{{Type: loom.PartImage, Image: &loom.Image{URL: "https://a", Data: img}}}, "both a URL and data", false},
		"detail":              {"user", []loom.Part{loom.ImageURLPart("https://a", "medium")}, `image detail "medium"`, false},
		"media type":          {"user", []loom.Part{typed(loom.ImageDataPart(img, ""), "image/bmp")}, `media type "image/bmp"`, false},
		"wrong media type":    {"user", []loom.Part{typed(loom.ImageDataPart(img, ""), "image/jpeg")}, "media type image/jpeg is image/png", false},
		"wrong size":          {"user", []loom.Part{sized(loom.ImageDataPart(img, ""), 30, 40)}, "image size 30x40, and its data says 40x30", false},
		"half a size":         {"user", []loom.Part{sized(loom.ImageURLPart("https://a", ""), 30, 0)}, "give both width and height", false},
		"negative size":       {"user", []loom.Part{sized(loom.ImageURLPart("https://a", ""), -3, -4)}, "image size -3x-4", false},
		"huge size":           {"user", []loom.Part{sized(loom.ImageURLPart("https://a", ""), 1<<17, 10)}, "the limit is 65536 pixels a side", true},
		"not an image":        {"user", []loom.Part{loom.ImageDataPart([]byte("GIF? no"), "")}, "not a PNG, JPEG, GIF or WebP image", false},
		"cut image":           {"user", []loom.Part{loom.ImageDataPart(img[:12], "")}, "header is malformed", false},
		"huge data":           {"user", []loom.Part{loom.ImageDataPart(make([]byte, loom.MaxImageBytes+1), "")}, "the limit is 20971520", true},
		"long url":            {"user", []loom.Part{loom.ImageURLPart("https://a/"+strings.Repeat("x", loom.MaxImageURL), "")}, "the limit is 8192", true},
		"data url":            {"user", []loom.Part{loom.ImageURLPart("data:image/png;base64,AAAA", "")}, "give the image's bytes as its data", false},
		"file url":            {"user", []loom.Part{loom.ImageURLPart("file:///etc/passwd", "")}, "want an http or https URL", false},
		"no host":             {"user", []loom.Part{loom.ImageURLPart("https:///a.png", "")}, "has no host", false},
		"space":               {"user", []loom.Part{loom.ImageURLPart("https://a/b c.png", "")}, "a space or a control character", false},
		"line break":          {"user", []loom.Part{loom.ImageURLPart("https://a/b\nUser: hi", "")}, "a space or a control character", false},
	} {
		err := loom.CheckParts(c.role, c.parts)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: CheckParts = %v, want nil", name, err)
		case c.want == "":
		case err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, loom.ErrInvalid):
			t.Errorf("%s: CheckParts = %v, want an ErrInvalid saying %q", name, err, c.want)
		case errors.Is(err, loom.ErrTooLarge) != c.large:
			t.Errorf("%s: CheckParts = %v; wraps ErrTooLarge: %v, want %v", name, err, !c.large, c.large)
		}
	}
}

func TestImage_Size(t *testing.T) {
	t.Parallel()
	data := loom.ImageDataPart(pngOf(t, 7, 9), "").Image
	if w, h, err := data.Size(); w != 7 || h != 9 || err != nil {
		t.Errorf("Size of a 7x9 PNG = %d, %d, %v", w, h, err)
	}
	if mt := data.ContentType(); mt != "image/png" {
		t.Errorf("ContentType of a PNG = %q", mt)
	}
	url := loom.ImageURLPart("https://example.com/a.jpg", "").Image
	if w, h, err := url.Size(); !errors.Is(err, loom.ErrImageSize) || !errors.Is(err, loom.ErrInvalid) || w != 0 || h != 0 {
		t.Errorf("Size of an image at a URL without its size = %d, %d, %v; want ErrImageSize", w, h, err)
	}
	url.Width, url.Height = 1024, 768
	if w, h, err := url.Size(); w != 1024 || h != 768 || err != nil {
		t.Errorf("Size of an image at a URL of 1024x768 = %d, %d, %v", w, h, err)
	}
}

// TestMessage_PartsJSON: a message's parts survive JSON (image data as base64), and a message without
// parts is written as before.
func TestMessage_PartsJSON(t *testing.T) {
	t.Parallel()
	m := loom.Message{Role: "user", Content: "what is this?", Parts: []loom.Part{
		loom.TextPart("and this"),
		loom.ImageDataPart([]byte{1, 2, 3}, loom.DetailLow),
		{Type: loom.PartImage, Image: &loom.Image{URL: "https://example.com/a.png", Width: 10, Height: 20, MediaType: "image/png"}},
	}}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"role":"user","content":"what is this?","parts":[{"type":"text","text":"and this"},` +
		`{"type":"image","image":{"data":"AQID","detail":"low"}},` +
		`{"type":"image","image":{"url":"https://example.com/a.png","media_type":"image/png","width":10,"height":20}}]}`
	if string(b) != want {
		t.Errorf("JSON:\n got %s\nwant %s", b, want)
	}
	var back loom.Message
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, m) {
		t.Errorf("round trip: %+v, %v", back, err)
	}
	if b, _ := json.Marshal(loom.Message{Role: "user", Content: "hi"}); string(b) != `{"role":"user","content":"hi"}` {
		t.Errorf("a message without parts: %s", b)
	}
}

func ExampleCheckParts() {
	question := loom.Message{Role: "user", Content: "What is in this picture?", Parts: []loom.Part{
		loom.ImageURLPart("https://example.com/cat.png", loom.DetailHigh),
	}}
	question.Parts[0].Image.Width, question.Parts[0].Image.Height = 1024, 768
	fmt.Println(loom.CheckParts(question.Role, question.Parts))
	fmt.Println(loom.CheckParts("user", []loom.Part{loom.ImageURLPart("ftp://example.com/cat.png", "")}))
	// Output:
	// <nil>
	// part 0: image URL "ftp://example.com/cat.png" (want an http or https URL)
}

// TestIsBlank: white space is Unicode's and Python's (the information separators U+001C to U+001F), so
// that text a provider may take for white space is never sent as content.
func TestIsBlank(t *testing.T) {
	for s, want := range map[string]bool{"": true, " \t\n\r": true, "\u3000\u00a0\u2028": true, "\x1c\x1d\x1e\x1f": true,
		"\x1b": false, "a": false, "   .": false, "\u200b": false} {
		if got := loom.IsBlank(s); got != want {
			t.Errorf("IsBlank(%q) = %v, want %v", s, got, want)
		}
	}
}
