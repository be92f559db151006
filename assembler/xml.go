package assembler

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// XMLTag wraps text in a context tag as seed 001 does, escaped so that neither the text nor the type can
// close the tag or add an attribute:
//
//	<context type="entity" trusted="false">
//	The user lives in Tokyo.
//	</context>
func XMLTag(text, typ string, trusted bool) string {
	return "<context type=\"" + escapeAttr(typ) + "\" trusted=\"" + strconv.FormatBool(trusted) + "\">\n" +
		escapeText(text) + "\n</context>"
}

var (
	textEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
	attrEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;",
		"\n", "&#10;", "\r", "&#13;", "\t", "&#9;")
)

// escapeText escapes text for an XML element: untrusted text cannot open or close a tag. Invalid UTF-8
// becomes U+FFFD.
func escapeText(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexByte(s, '<') < 0 && strings.IndexByte(s, '>') < 0 && strings.IndexByte(s, '&') < 0 {
		return s
	}
	return textEscaper.Replace(s)
}

// needsEscape reports whether escapeText changes s.
func needsEscape(s string) bool {
	return !utf8.ValidString(s) || strings.IndexByte(s, '<') >= 0 || strings.IndexByte(s, '>') >= 0 || strings.IndexByte(s, '&') >= 0
}

// escapeAttr escapes text for a double-quoted XML attribute.
func escapeAttr(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return attrEscaper.Replace(s)
}
