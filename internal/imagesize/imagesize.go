// SPDX-License-Identifier: Apache-2.0

// Package imagesize reads the format and the size of an image from its header, without decoding its
// pixels: PNG, JPEG and GIF with the standard library's DecodeConfig, WebP with a parser of its RIFF header
// (lossy VP8, lossless VP8L and extended VP8X), the four formats that OpenAI's and Anthropic's APIs take.
package imagesize

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
)

// The formats, by their media types.
const (
	PNG  = "image/png"
	JPEG = "image/jpeg"
	GIF  = "image/gif"
	WebP = "image/webp"
)

// Errors of Decode.
var (
	ErrFormat = errors.New("not a PNG, JPEG, GIF or WebP image")
	ErrHeader = errors.New("the image's header is malformed")
)

// Info is what a header says of an image.
type Info struct {
	MediaType     string // PNG, JPEG, GIF or WebP
	Width, Height int    // in pixels, both positive
}

// Decode reads the header of data. It returns an error wrapping ErrFormat for data that does not start
// as one of the four formats does, and one wrapping ErrHeader for a header it cannot read or that says
// the image has no pixels. It reads only the header (a JPEG's markers up to its frame header), so its time
// is linear in len(data) at most and it allocates a small constant amount.
func Decode(data []byte) (Info, error) {
	var (
		info Info
		cfg  image.Config
		err  error
	)
	r := bytes.NewReader(data)
	switch {
	case bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")):
		info.MediaType = PNG
		cfg, err = png.DecodeConfig(r)
	case bytes.HasPrefix(data, []byte("\xff\xd8")):
		info.MediaType = JPEG
		cfg, err = jpeg.DecodeConfig(r)
	case bytes.HasPrefix(data, []byte("GIF87a")) || bytes.HasPrefix(data, []byte("GIF89a")):
		info.MediaType = GIF
		cfg, err = gif.DecodeConfig(r)
	case len(data) >= 12 && string(data[:4]) == "RIFF" && string(data[8:12]) == "WEBP":
		info.MediaType = WebP
		cfg.Width, cfg.Height, err = webpSize(data)
	default:
		return Info{}, ErrFormat
	}
	if err != nil {
		return Info{}, fmt.Errorf("%w: %w", ErrHeader, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 {
		return Info{}, fmt.Errorf("%w: it gives a size of %dx%d pixels", ErrHeader, cfg.Width, cfg.Height)
	}
	info.Width, info.Height = cfg.Width, cfg.Height
	return info, nil
}

// webpSize reads the size from a WebP file's first chunk (the WebP container specification, "RIFF file
// format"): a lossy "VP8 " key frame's 14-bit width and height, a lossless "VP8L" bitstream's 14-bit
// width-1 and height-1, or an extended "VP8X" header's 24-bit canvas width-1 and height-1.
func webpSize(data []byte) (w, h int, err error) {
	if len(data) < 20 {
		return 0, 0, errors.New("webp: no chunk")
	}
	chunk := string(data[12:16])
	size := binary.LittleEndian.Uint32(data[16:20])
	body := data[20:]
	if uint64(size) < uint64(len(body)) { // (a truncated file: what is there)
		body = body[:size]
	}
	switch chunk {
	case "VP8 ":
		// A frame tag of 3 bytes (bit 0 clear for a key frame), the start code 9d 01 2a, then the width
		// and height, 14 bits each (the top 2 bits are a scale, not part of the size).
		if len(body) < 10 {
			return 0, 0, errors.New("webp: short VP8 chunk")
		}
		if body[0]&1 != 0 {
			return 0, 0, errors.New("webp: the VP8 frame is not a key frame")
		}
		if body[3] != 0x9d || body[4] != 0x01 || body[5] != 0x2a {
			return 0, 0, errors.New("webp: no VP8 start code")
		}
		w = int(binary.LittleEndian.Uint16(body[6:8]) & 0x3fff)
		h = int(binary.LittleEndian.Uint16(body[8:10]) & 0x3fff)
	case "VP8L":
		// The signature 2f, then 14 bits of width-1, 14 of height-1, 1 of alpha and 3 of version (0).
		if len(body) < 5 {
			return 0, 0, errors.New("webp: short VP8L chunk")
		}
		if body[0] != 0x2f {
			return 0, 0, errors.New("webp: no VP8L signature")
		}
		bits := binary.LittleEndian.Uint32(body[1:5])
		if bits>>29 != 0 {
			return 0, 0, errors.New("webp: unknown VP8L version")
		}
		w = int(bits&0x3fff) + 1
		h = int(bits>>14&0x3fff) + 1
	case "VP8X":
		// Flags and 3 reserved bytes, then 24 bits of canvas width-1 and 24 of canvas height-1.
		if len(body) < 10 {
			return 0, 0, errors.New("webp: short VP8X chunk")
		}
		w = int(uint32(body[4])|uint32(body[5])<<8|uint32(body[6])<<16) + 1
		h = int(uint32(body[7])|uint32(body[8])<<8|uint32(body[9])<<16) + 1
	default:
		return 0, 0, errors.New("webp: the first chunk is not VP8, VP8L or VP8X")
	}
	return w, h, nil
}
