package assembler

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/context-loom/loom"
)

// A history's user messages may carry content parts after their Content (see loom.Part): texts and
// images. The openai format sends them as Chat Completions content parts ("text" and "image_url", an
// image's data as a data: URL), the anthropic format as content blocks ("text" and "image", with a
// "base64" or a "url" source); each text part is counted as a text of its own, and each image as the
// model bills it (tokenizer.Model.ImageTokens: OpenAI's tile or patch rule, Anthropic's area rule, an
// estimate). The text and cookbook formats send text alone: each image is written ImagePlaceholder, and a
// message's Content and parts are its lines, one a part (see messageText).

// ImagePlaceholder is what the text and cookbook formats write in place of an image, on a line of its own.
const ImagePlaceholder = "[image]"

// ContentPart is a part of a Chat Completions message's content: a text, or an image by its URL (a data:
// URL for an image's bytes).
type ContentPart struct {
	Type     string   `json:"type"` // "text" or "image_url"
	Text     string   `json:"text,omitempty"`
	ImageURL ImageURL `json:"image_url,omitzero"`
}

// ImageURL is a Chat Completions image: its URL and detail.
type ImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// ImageSource is the source of an Anthropic image block: its data ("base64", with its media type) or its
// URL ("url").
type ImageSource struct {
	Type      string `json:"type"` // "base64" or "url"
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// sendsImages reports whether f sends a message's images as images; the others write ImagePlaceholder.
func sendsImages(f Format) bool {
	switch f.(type) {
	case openAI, anthropic, responses, gemini:
		return true
	}
	return false
}

// prepareParts checks the content parts of the history's messages (see loom.CheckParts), and, for a format
// that sends images, counts each message's parts and renders them in the format's shape once, for every
// rendering: a data URL or base64 text of a large image is made once.
func (a *assembly) prepareParts() error {
	h := a.req.History
	for i := range h {
		msg := &h[i]
		if len(msg.Parts) == 0 {
			continue
		}
		if err := loom.CheckParts(msg.Role, msg.Parts); err != nil {
			return fmt.Errorf("history[%d]: %w", i, invalidRequest(err))
		}
		if !sendsImages(a.f) {
			continue
		}
		if a.partTokens == nil {
			a.partTokens = make([]int, len(h))
			a.rendered = make([]renderedParts, len(h))
		}
		n, r, err := a.renderParts(msg.Content, msg.Parts, fmt.Sprintf("history[%d]", i))
		if err != nil {
			return err
		}
		a.partTokens[i], a.rendered[i] = n, r
	}
	return nil
}

// renderParts counts parts, a user message's after content, and renders them in the shapes of the formats
// that send them (what names the message in an error).
func (a *assembly) renderParts(content string, parts []loom.Part, what string) (int, renderedParts, error) {
	var r renderedParts
	n := 0
	if content != "" {
		r.openAI = append(r.openAI, ContentPart{Type: "text", Text: content})
	}
	for j := range parts {
		p := &parts[j]
		if p.Type == loom.PartText {
			n += a.m.Count(p.Text)
			r.openAI = append(r.openAI, ContentPart{Type: "text", Text: p.Text})
			r.blocks = append(r.blocks, Block{Type: "text", Text: p.Text})
			continue
		}
		im := p.Image
		w, h, err := im.Size()
		if err != nil {
			return 0, r, fmt.Errorf("%s.parts[%d]: %w", what, j, invalidRequest(err))
		}
		tokens, err := a.model.ImageTokens(w, h, im.Detail)
		if err != nil {
			return 0, r, fmt.Errorf("%s.parts[%d]: %w", what, j, err)
		}
		n += tokens
		a.imageEstimate = a.imageEstimate || a.model.Image.Estimate
		url, source := im.URL, ImageSource{Type: "url", URL: im.URL}
		if len(im.Data) > 0 {
			data := base64.StdEncoding.EncodeToString(im.Data)
			mt := im.ContentType()
			url, source = "data:"+mt+";base64,"+data, ImageSource{Type: "base64", MediaType: mt, Data: data}
		} else if mt := urlMediaType(im); mt != "" { // for the gemini format's fileData
			if a.urlTypes == nil {
				a.urlTypes = map[string]string{}
			}
			a.urlTypes[im.URL] = mt
		}
		r.openAI = append(r.openAI, ContentPart{Type: "image_url", ImageURL: ImageURL{URL: url, Detail: im.Detail}})
		r.blocks = append(r.blocks, Block{Type: "image", Source: source})
	}
	return n, r, nil
}

// prepareMessage sets the current message as the format renders it (a.message, a.hasMessage set from its
// text), with its content parts (Request.MessageParts): counted and rendered for a format that sends them,
// written into a.message for one that sends text alone.
func (a *assembly) prepareMessage() error {
	parts := a.req.MessageParts
	if len(parts) == 0 {
		return nil
	}
	if err := loom.CheckParts("user", parts); err != nil {
		return fmt.Errorf("message: %w", invalidRequest(err))
	}
	a.hasMessage = true
	a.dropped[RegionMessage] = nil // not empty: it has parts
	if !sendsImages(a.f) {
		a.message = messageText(a.message, parts)
		return nil
	}
	n, r, err := a.renderParts(a.message, parts, "message")
	if err != nil {
		return err
	}
	a.messageParts, a.messageRendered = n, &r
	return nil
}

// renderedParts is a message's parts in the shapes of the formats that send them: for Chat Completions
// its whole content (Content first, when it is not empty), for the Messages API the blocks after
// Content's.
type renderedParts struct {
	openAI []ContentPart
	blocks []Block
}

// partCost is what the parts of the history's message i cost in the format, besides its Content.
func (a *assembly) partCost(i int) int {
	if a.partTokens == nil {
		return 0
	}
	return a.partTokens[i]
}

// messageText is a history message's text as a format that sends text alone writes it: its Content, then
// each part on a line of its own, an image as ImagePlaceholder. A format that sends parts writes Content
// alone.
func (a *assembly) messageText(msg *Message) string {
	if len(msg.Parts) == 0 || sendsImages(a.f) {
		return msg.Content
	}
	return messageText(msg.Content, msg.Parts)
}

// messageText is content, then each of parts, on lines of their own, an image as ImagePlaceholder.
func messageText(content string, parts []loom.Part) string {
	lines := make([]string, 0, len(parts)+1)
	if content != "" {
		lines = append(lines, content)
	}
	for _, p := range parts {
		if p.Type == loom.PartImage {
			lines = append(lines, ImagePlaceholder)
		} else {
			lines = append(lines, p.Text)
		}
	}
	return strings.Join(lines, "\n")
}

// keptEstimatedImages reports whether a kept message of the history has an image, counted by an estimate.
func (a *assembly) keptEstimatedImages() bool {
	if !a.imageEstimate {
		return false
	}
	kept := func(gs []group) bool {
		for _, g := range gs {
			for _, m := range a.msgs(&g) {
				if hasImage(m.Parts) {
					return true
				}
			}
		}
		return false
	}
	return kept(a.groups[a.keepFrom:]) || kept(a.required)
}

// hasImage reports whether parts hold an image.
func hasImage(parts []loom.Part) bool {
	for _, p := range parts {
		if p.Type == loom.PartImage {
			return true
		}
	}
	return false
}

// urlMediaType is the media type of an image by URL: its MediaType, or the one its path's extension
// names (.png, .jpg or .jpeg, .gif, .webp); "" if neither says.
func urlMediaType(im *loom.Image) string {
	if mt := im.ContentType(); mt != "" {
		return mt
	}
	u, err := url.Parse(im.URL)
	if err != nil {
		return ""
	}
	switch strings.ToLower(path.Ext(u.Path)) {
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".gif":
		return "image/gif"
	case ".webp":
		return "image/webp"
	}
	return ""
}
