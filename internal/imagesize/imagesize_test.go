// SPDX-License-Identifier: Apache-2.0

package imagesize

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"runtime"
	"testing"
)

// encode encodes a w x h image in the format of mediaType with the standard library's encoders.
func encode(t testing.TB, mediaType string, w, h int) []byte {
	t.Helper()
	img := image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{color.Black, color.White})
	var b bytes.Buffer
	var err error
	switch mediaType {
	case PNG:
		err = png.Encode(&b, img)
	case JPEG:
		err = jpeg.Encode(&b, img, nil)
	case GIF:
		err = gif.Encode(&b, img, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestDecode_StandardFormats(t *testing.T) {
	t.Parallel()
	for _, mt := range []string{PNG, JPEG, GIF} {
		for _, size := range [][2]int{{1, 1}, {1024, 1024}, {2048, 4096}, {37, 23}, {1, 3000}} {
			got, err := Decode(encode(t, mt, size[0], size[1]))
			if want := (Info{mt, size[0], size[1]}); err != nil || got != want {
				t.Errorf("Decode(%s %dx%d) = %+v, %v; want %+v", mt, size[0], size[1], got, err, want)
			}
		}
	}
}

// TestDecode_WebPSamples reads files that libwebp's cwebp made (testdata/make-webp.sh): one of each kind
// of first chunk.
func TestDecode_WebPSamples(t *testing.T) {
	t.Parallel()
	for file, want := range map[string]Info{
		"lossy-1025x3.webp":    {WebP, 1025, 3}, // VP8
		"lossless-1025x3.webp": {WebP, 1025, 3}, // VP8L
		"alpha-37x23.webp":     {WebP, 37, 23},  // VP8X
	} {
		data, err := os.ReadFile("testdata/" + file)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := Decode(data); err != nil || got != want {
			t.Errorf("Decode(%s) = %+v, %v; want %+v", file, got, err, want)
		}
	}
}

// webpFile is a WebP file whose first chunk is of kind and says w x h, written as the WebP container
// specification lays each out.
func webpFile(kind string, w, h int) []byte {
	var body []byte
	switch kind {
	case "VP8 ":
		body = []byte{0x10, 0x02, 0x00, 0x9d, 0x01, 0x2a}
		body = binary.LittleEndian.AppendUint16(body, uint16(w))
		body = binary.LittleEndian.AppendUint16(body, uint16(h))
	case "VP8L":
		body = binary.LittleEndian.AppendUint32([]byte{0x2f}, uint32(w-1)|uint32(h-1)<<14|1<<28)
	case "VP8X":
		body = []byte{0x10, 0, 0, 0, byte(w - 1), byte((w - 1) >> 8), byte((w - 1) >> 16), byte(h - 1), byte((h - 1) >> 8), byte((h - 1) >> 16)}
	}
	out := []byte("RIFF\x00\x00\x00\x00WEBP" + kind)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(body)))
	out = append(out, body...)
	binary.LittleEndian.PutUint32(out[4:], uint32(len(out)-8))
	return out
}

// TestDecode_WebPHeaders: every size each kind of chunk can hold reads back, sampled.
func TestDecode_WebPHeaders(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		kind string
		most int
	}{{"VP8 ", 1<<14 - 1}, {"VP8L", 1 << 14}, {"VP8X", 1 << 24}} {
		for i := range 2000 {
			w, h := 1+r.IntN(c.most), 1+r.IntN(c.most)
			if i == 0 {
				w, h = 1, 1
			} else if i == 1 {
				w, h = c.most, c.most
			}
			got, err := Decode(webpFile(c.kind, w, h))
			if want := (Info{WebP, w, h}); err != nil || got != want {
				t.Fatalf("Decode(%q %dx%d) = %+v, %v; want %+v", c.kind, w, h, got, err, want)
			}
		}
	}
}

func TestDecode_Errors(t *testing.T) {
	t.Parallel()
	png1 := encode(t, PNG, 5, 5)
	interframe := webpFile("VP8 ", 5, 5)
	interframe[20] |= 1
	badVersion := webpFile("VP8L", 5, 5)
	badVersion[24] |= 0xe0
	for name, c := range map[string]struct {
		data []byte
		want error
	}{
		"empty":           {nil, ErrFormat},
		"text":            {[]byte("hello, world"), ErrFormat},
		"svg":             {[]byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`), ErrFormat},
		"png signature":   {png1[:8], ErrHeader},
		"png header cut":  {png1[:20], ErrHeader},
		"jpeg marker":     {[]byte{0xff, 0xd8}, ErrHeader},
		"gif header":      {[]byte("GIF89a"), ErrHeader},
		"riff only":       {[]byte("RIFF\x04\x00\x00\x00WEBP"), ErrHeader},
		"webp cut":        {webpFile("VP8X", 5, 5)[:25], ErrHeader},
		"webp no start":   {append(webpFile("VP8 ", 5, 5)[:23], 0, 0, 0, 5, 0, 5, 0), ErrHeader},
		"webp zero size":  {webpFile("VP8 ", 0, 5), ErrHeader},
		"webp interframe": {interframe, ErrHeader},
		"webp version":    {badVersion, ErrHeader},
		"webp alph":       {[]byte("RIFF\x0e\x00\x00\x00WEBPALPH\x02\x00\x00\x00\x00\x00"), ErrHeader},
	} {
		if info, err := Decode(c.data); !errors.Is(err, c.want) {
			t.Errorf("%s: Decode = %+v, %v; want an error wrapping %v", name, info, err, c.want)
		}
	}
}

// TestDecode_ReadsOnlyTheHeader: what Decode allocates does not grow with the data after the header, and
// JPEG's scan of markers before its frame header allocates nothing per marker.
func TestDecode_ReadsOnlyTheHeader(t *testing.T) {
	allocated := func(data []byte) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range 10 {
			if _, err := Decode(data); err != nil {
				t.Fatal(err)
			}
		}
		runtime.ReadMemStats(&after)
		return (after.TotalAlloc - before.TotalAlloc) / 10
	}
	big := func(head []byte) []byte { return append(head[:len(head):len(head)], make([]byte, 8<<20)...) }
	for _, mt := range []string{PNG, JPEG, GIF} {
		data := encode(t, mt, 64, 64)
		if small, large := allocated(data), allocated(big(data)); large > small+4096 || large > 64<<10 {
			t.Errorf("%s: Decode allocates %d bytes, and %d with 8 MiB after the image", mt, small, large)
		}
	}
	// A JPEG whose frame header follows 100,000 comment markers.
	jpg := encode(t, JPEG, 64, 64)
	var b bytes.Buffer
	b.Write(jpg[:2])
	for range 100000 {
		b.Write([]byte{0xff, 0xfe, 0x00, 0x04, 'h', 'i'})
	}
	b.Write(jpg[2:])
	if n := allocated(b.Bytes()); n > 64<<10 {
		t.Errorf("a JPEG with 100,000 markers before its frame: Decode allocates %d bytes", n)
	}
}

// FuzzDecode: Decode never panics; what it reads is one of the four formats, as the data's first bytes
// say, with a positive size no larger than its format can hold; an error wraps ErrFormat or ErrHeader;
// and it reads only the header: bytes appended to data that decodes change nothing.
func FuzzDecode(f *testing.F) {
	for _, mt := range []string{PNG, JPEG, GIF} {
		f.Add(encode(f, mt, 37, 23))
	}
	for _, kind := range []string{"VP8 ", "VP8L", "VP8X"} {
		f.Add(webpFile(kind, 300, 7))
	}
	for _, file := range []string{"lossy-1025x3.webp", "lossless-1025x3.webp", "alpha-37x23.webp"} {
		data, err := os.ReadFile("testdata/" + file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	most := map[string]int{PNG: 1<<31 - 1, JPEG: 1<<16 - 1, GIF: 1<<16 - 1, WebP: 1 << 24}
	magic := map[string]func([]byte) bool{
		PNG:  func(b []byte) bool { return bytes.HasPrefix(b, []byte("\x89PNG")) },
		JPEG: func(b []byte) bool { return bytes.HasPrefix(b, []byte("\xff\xd8")) },
		GIF:  func(b []byte) bool { return bytes.HasPrefix(b, []byte("GIF8")) },
		WebP: func(b []byte) bool { return bytes.HasPrefix(b, []byte("RIFF")) },
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<20 {
			return
		}
		info, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrHeader) {
				t.Fatalf("Decode: %v, which wraps neither ErrFormat nor ErrHeader", err)
			}
			return
		}
		if m := most[info.MediaType]; m == 0 || info.Width <= 0 || info.Height <= 0 || info.Width > m || info.Height > m || !magic[info.MediaType](data) {
			t.Fatalf("Decode = %+v for data starting %q", info, data[:min(len(data), 16)])
		}
		longer := append(data[:len(data):len(data)], "trailing bytes \xff\xd9\x00"...)
		if again, err := Decode(longer); err != nil || again != info {
			t.Fatalf("with bytes appended, Decode = %+v, %v; want %+v", again, err, info)
		}
	})
}
