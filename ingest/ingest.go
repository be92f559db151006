// Package ingest turns files into documents ready for chunking: plain text, Markdown, HTML (its text
// extracted as Markdown, so that structure survives for the markdown chunker) and source code, one file at a
// time with [Read] or a whole directory with [Walk].
//
// A [Document]'s Text is what gets chunked; its Hash is the hex SHA-256 of the raw bytes, so the same file
// read twice gives the same Hash and re-ingesting it can be recognised and skipped. Nothing is silently
// dropped: binary content and oversized input are errors ([ErrBinary], [ErrTooLarge]), and [Walk] reports
// every file it skips for such a reason.
//
// Text must be UTF-8. A leading UTF-8 byte order mark is removed from Text; UTF-16 with a byte order mark is
// decoded. A few invalid UTF-8 sequences (at most 4 bytes, or one byte in 64 of a longer input) are
// tolerated: each run of invalid bytes becomes one U+FFFD, and Metadata["invalid_utf8"] counts the bytes
// replaced. More than that is taken for binary content, as is a NUL byte in the first 8 KiB (or, in UTF-16,
// a NUL character or more unpaired surrogates than the same tolerance). Other encodings (Latin-1,
// Shift JIS, ...) are not detected: a Latin-1 text with more than a few accented letters is rejected.
package ingest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/context-loom/loom"
)

// Content types of a [Document].
const (
	TypeText     = "text"
	TypeMarkdown = "markdown"
	TypeHTML     = "html"
	TypeCode     = "code"
)

// DefaultMaxBytes is the largest input [Read] and [Walk] accept when [Limits.MaxBytes] is 0.
const DefaultMaxBytes = 32 << 20

// Errors returned by [Read] and reported by [Walk].
var (
	ErrBinary     = loom.NewError(loom.ErrInvalid, "ingest: binary content")
	ErrTooLarge   = loom.NewError(loom.ErrTooLarge, "ingest: input larger than the limit")
	ErrNotRegular = loom.NewError(loom.ErrInvalid, "ingest: not a regular file")
	// ErrContentType is returned by [Limits.ReadAs] for a content type it does not know, and for code
	// whose source names no language.
	ErrContentType = loom.NewError(loom.ErrInvalid, "ingest: unsupported content type")
)

// sniffLen is how much of the input is searched for NUL bytes and for an HTML doctype.
const sniffLen = 8 << 10

// Document is one file, ready for chunking.
type Document struct {
	// ID identifies the document in its collection: the source given to [Read], or the path relative to
	// the root, with forward slashes, for [Walk]. Callers may set their own.
	ID string
	// Source is where the document came from: the name given to [Read], or the file's path for [Walk].
	Source string
	// ContentType is TypeText, TypeMarkdown, TypeHTML or TypeCode.
	ContentType string
	// Text is what gets chunked: the file's text, or for HTML the text extracted as Markdown.
	Text string
	// Hash is the hex SHA-256 of the raw bytes: identical input gives an identical Hash.
	Hash string
	// Metadata describes the document. Keys, each present only when it applies:
	//   - "source": Source.
	//   - "format": the syntax of Text, "markdown" (Markdown files and extracted HTML), "code" or "text".
	//   - "title": an HTML document's <title> (or its first <h1>), a Markdown document's first H1, cut to
	//     MaxTitleBytes.
	//   - "language": a code document's language (see [LanguageForFile]).
	//   - "encoding": "utf-16le" or "utf-16be" when the input was UTF-16.
	//   - "invalid_utf8": how many invalid UTF-8 bytes were replaced by U+FFFD.
	Metadata map[string]string
}

// Limits bound what is read. The zero value means the documented defaults.
type Limits struct {
	// MaxBytes is the largest input accepted, in bytes; 0 means DefaultMaxBytes and a negative value means
	// no limit.
	MaxBytes int64
}

func (l Limits) maxBytes() int64 {
	switch {
	case l.MaxBytes == 0:
		return DefaultMaxBytes
	case l.MaxBytes < 0:
		return -1
	}
	return l.MaxBytes
}

// Read turns raw, the content of the file named source, into a Document, with the default [Limits].
// See [Limits.Read].
func Read(source string, raw []byte) (Document, error) {
	return Limits{}.Read(source, raw)
}

// Read turns raw, the content of the file named source, into a Document. The content type comes from
// source's extension: .md and .markdown are Markdown; .html, .htm and .xhtml are HTML; a language
// [LanguageForFile] knows is code; anything else is text, unless its first bytes (after a byte order
// mark and white space) are "<!doctype html" or "<html", in any case, which make it HTML.
//
// Read returns an error wrapping [ErrTooLarge] when raw is larger than MaxBytes, and one wrapping
// [ErrBinary] when the first 8 KiB hold a NUL byte or raw has more invalid UTF-8 than the package
// tolerates (see the package documentation). Empty input is an empty Document, not an error.
func (l Limits) Read(source string, raw []byte) (Document, error) {
	return l.ReadAs(source, "", raw)
}

// ReadAs turns raw, the content of the file named source, into a Document of the given content type,
// as [Read] does but for the type, which is not detected: TypeText, TypeMarkdown, TypeHTML or TypeCode, or
// "" to detect it from source and raw as Read does. A text given as TypeText stays text whatever its name
// or first bytes. Code takes its language from source's extension.
//
// ReadAs returns an error wrapping [ErrContentType] for another type and for code whose source's extension
// names no language [LanguageForFile] knows, and Read's errors.
func ReadAs(source, contentType string, raw []byte) (Document, error) {
	return Limits{}.ReadAs(source, contentType, raw)
}

// ReadAs is [ReadAs] within l.
func (l Limits) ReadAs(source, contentType string, raw []byte) (Document, error) {
	switch contentType {
	case "", TypeText, TypeMarkdown, TypeHTML:
	case TypeCode:
		if LanguageForFile(source) == "" {
			return Document{}, fmt.Errorf("%w: code needs a source whose extension names its language, not %q", ErrContentType, source)
		}
	default:
		return Document{}, fmt.Errorf("%w: %q (known: text, markdown, html, code)", ErrContentType, contentType)
	}
	if limit := l.maxBytes(); limit >= 0 && int64(len(raw)) > limit {
		return Document{}, fmt.Errorf("%w: %s is %d bytes, the limit is %d", ErrTooLarge, source, len(raw), limit)
	}
	sum := sha256.Sum256(raw)
	doc := Document{
		ID:       source,
		Source:   source,
		Hash:     hex.EncodeToString(sum[:]),
		Metadata: map[string]string{"source": source},
	}
	text, err := decode(raw, doc.Metadata)
	if err != nil {
		return Document{}, fmt.Errorf("%w: %s: %v", ErrBinary, source, err)
	}

	doc.ContentType = contentType
	if doc.ContentType == "" {
		doc.ContentType = detect(source, text)
	}
	switch doc.ContentType {
	case TypeHTML:
		doc.Text, doc.Metadata["title"] = htmlToMarkdown(text)
		doc.Metadata["format"] = "markdown"
	case TypeMarkdown:
		doc.Text = text
		doc.Metadata["title"] = markdownTitle(text)
		doc.Metadata["format"] = "markdown"
	case TypeCode:
		doc.Text = text
		doc.Metadata["language"] = LanguageForFile(source)
		doc.Metadata["format"] = "code"
	default:
		doc.Text = text
		doc.Metadata["format"] = "text"
	}
	if doc.Metadata["title"] == "" {
		delete(doc.Metadata, "title")
	} else {
		doc.Metadata["title"] = cutTitle(doc.Metadata["title"])
	}
	return doc, nil
}

// MaxTitleBytes bounds Metadata["title"]: a longer title or first heading is cut there (at the start of a
// character), so that a document's metadata stays within the stores' limits whatever its first heading.
const MaxTitleBytes = 512

func cutTitle(s string) string {
	if len(s) <= MaxTitleBytes {
		return s
	}
	cut := MaxTitleBytes
	for i := 1; i < utf8.UTFMax && !utf8.RuneStart(s[cut]); i++ { // back to the character's start, if valid
		cut--
	}
	return s[:cut]
}

// detect returns the content type of text read from the file called name.
func detect(name, text string) string {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".md", ".markdown":
		return TypeMarkdown
	case ".html", ".htm", ".xhtml":
		return TypeHTML
	}
	if LanguageForFile(name) != "" {
		return TypeCode
	}
	if looksLikeHTML(text) {
		return TypeHTML
	}
	return TypeText
}

// looksLikeHTML reports whether text starts, after white space, with an HTML doctype or <html> tag.
func looksLikeHTML(text string) bool {
	head := strings.TrimLeft(text[:min(len(text), sniffLen)], " \t\r\n\f")
	return hasPrefixFold(head, "<!doctype html") || hasPrefixFold(head, "<html") &&
		len(head) > len("<html") && strings.IndexByte(" \t\r\n\f>", head[len("<html")]) >= 0
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// decode returns raw as valid UTF-8 text, or an error saying why raw looks binary. It strips a UTF-8 byte
// order mark, decodes UTF-16 with a byte order mark and records what it did in meta.
func decode(raw []byte, meta map[string]string) (string, error) {
	if len(raw) >= 2 && (raw[0] == 0xFF && raw[1] == 0xFE || raw[0] == 0xFE && raw[1] == 0xFF) {
		return decodeUTF16(raw, meta)
	}
	raw = bytes.TrimPrefix(raw, []byte("\xEF\xBB\xBF"))
	if i := bytes.IndexByte(raw[:min(len(raw), sniffLen)], 0); i >= 0 {
		return "", fmt.Errorf("NUL byte at offset %d", i)
	}
	if utf8.Valid(raw) {
		return string(raw), nil
	}
	invalid := 0
	for i := 0; i < len(raw); {
		r, n := utf8.DecodeRune(raw[i:])
		if r == utf8.RuneError && n == 1 {
			invalid++
		}
		i += n
	}
	if invalid > max(4, len(raw)/64) {
		return "", fmt.Errorf("%d of %d bytes are not UTF-8", invalid, len(raw))
	}
	meta["invalid_utf8"] = strconv.Itoa(invalid)
	return strings.ToValidUTF8(string(raw), "\uFFFD"), nil
}

// decodeUTF16 decodes raw, which starts with a UTF-16 byte order mark. Unpaired surrogates and an odd last
// byte become U+FFFD.
func decodeUTF16(raw []byte, meta map[string]string) (string, error) {
	big := raw[0] == 0xFE
	units := make([]uint16, 0, len(raw)/2-1)
	for i := 2; i+1 < len(raw); i += 2 {
		if big {
			units = append(units, uint16(raw[i])<<8|uint16(raw[i+1]))
		} else {
			units = append(units, uint16(raw[i+1])<<8|uint16(raw[i]))
		}
	}
	runes := utf16.Decode(units)
	if len(raw)%2 == 1 {
		runes = append(runes, utf8.RuneError)
	}
	invalid := 0
	for i, r := range runes {
		switch {
		case r == 0 && i < sniffLen/2:
			return "", fmt.Errorf("NUL character at UTF-16 unit %d", i)
		case r == utf8.RuneError:
			invalid++
		}
	}
	if invalid > max(4, len(runes)/64) {
		return "", fmt.Errorf("%d of %d UTF-16 units are unpaired surrogates", invalid, len(runes))
	}
	if big {
		meta["encoding"] = "utf-16be"
	} else {
		meta["encoding"] = "utf-16le"
	}
	return string(runes), nil
}

// markdownTitle returns the text of the first level-1 heading of a Markdown document, ATX ("# Title") or
// setext (a line underlined with "="), outside fenced code blocks and front matter; "" when there is none.
func markdownTitle(text string) string {
	lines := strings.Split(text, "\n")
	start := 0
	if len(lines) > 0 && (strings.TrimRight(lines[0], " \r") == "---" || strings.TrimRight(lines[0], " \r") == "+++") {
		for i := 1; i < len(lines); i++ {
			if strings.TrimRight(lines[i], " \r") == strings.TrimRight(lines[0], " \r") {
				start = i + 1
				break
			}
		}
	}
	fence := ""
	prev := ""
	for _, line := range lines[start:] {
		line = strings.TrimRight(line, "\r")
		indented := strings.TrimLeft(line, " ")
		if len(line)-len(indented) > 3 {
			prev = line
			continue
		}
		if fence != "" {
			if strings.HasPrefix(indented, fence) && strings.Trim(indented, fence[:1]+" \t") == "" {
				fence = ""
			}
			prev = ""
			continue
		}
		if f := fenceOf(indented); f != "" {
			fence = f
			prev = ""
			continue
		}
		if rest, ok := strings.CutPrefix(indented, "#"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			title := strings.TrimSpace(rest)
			if t := strings.TrimRight(title, "#"); t == "" || strings.HasSuffix(t, " ") || strings.HasSuffix(t, "\t") {
				title = strings.TrimSpace(t)
			}
			if title != "" {
				return title
			}
		}
		if strings.TrimSpace(prev) != "" && strings.Trim(indented, "= \t") == "" && strings.Contains(indented, "=") {
			return strings.TrimSpace(prev)
		}
		prev = line
	}
	return ""
}

// fenceOf returns the opening fence (three or more backticks or tildes) a line starts with, or "".
func fenceOf(line string) string {
	if len(line) < 3 || line[0] != '`' && line[0] != '~' {
		return ""
	}
	n := 0
	for n < len(line) && line[n] == line[0] {
		n++
	}
	if n < 3 || line[0] == '`' && strings.Contains(line[n:], "`") {
		return ""
	}
	return line[:n]
}
