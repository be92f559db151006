// SPDX-License-Identifier: Apache-2.0

// Package xmltext is the text escaping of Loom's context markup, and the text of a knowledge item as the
// assembler renders it, which a store counts when the item is written. It is a leaf, so that the store
// counts knowledge as the assembler renders it without importing the assembler.
package xmltext

import (
	"strings"
	"unicode/utf8"

	"github.com/context-loom/loom/tokenizer"
)

// The characters that Ruby's CGI.escapeHTML escapes (which Phronomy's builder applies), and the references
// it writes for them.
var (
	markupChars = [...]byte{'&', '<', '>', '"', '\''}
	markupRefs  = [...]string{"&amp;", "&lt;", "&gt;", "&quot;", "&#39;"}
)

// Escape escapes s for the text of an element of Loom's context markup: & < > " ' become &amp; &lt;
// &gt; &quot; &#39;, as Phronomy's builder escapes (Ruby's CGI.escapeHTML), so that untrusted text can
// neither open nor close a tag, nor spell an attribute such as trusted="true", even as inert text. Invalid
// UTF-8 becomes U+FFFD. Line breaks and other white space are kept.
func Escape(s string) string { return escape(s, "") }

// escape returns Escape(s) followed by end, in one allocation (none when s needs no escape and end is
// empty).
func escape(s, end string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	// Sized first, then written run by run between the characters, each found with IndexByte: texts are
	// long (knowledge, tool outputs) and their characters to escape few.
	size := len(s)
	var next [len(markupChars)]int // where the next of each character is, len(s) when there is none
	for i, c := range markupChars {
		if n := strings.Count(s, string(c)); n > 0 {
			size += n * (len(markupRefs[i]) - 1)
			next[i] = strings.IndexByte(s, c)
		} else {
			next[i] = len(s)
		}
	}
	if size == len(s) && end == "" {
		return s
	}
	var b strings.Builder
	b.Grow(size + len(end))
	for at := 0; ; {
		k := 0 // the character that comes first
		for i := 1; i < len(next); i++ {
			if next[i] < next[k] {
				k = i
			}
		}
		p := next[k]
		b.WriteString(s[at:p])
		if p == len(s) {
			b.WriteString(end)
			return b.String()
		}
		b.WriteString(markupRefs[k])
		at = p + 1
		if j := strings.IndexByte(s[at:], markupChars[k]); j >= 0 {
			next[k] = at + j
		} else {
			next[k] = len(s)
		}
	}
}

// HasMarkup reports whether s has a character that Escape escapes.
func HasMarkup(s string) bool {
	for _, c := range markupChars {
		if strings.IndexByte(s, c) >= 0 {
			return true
		}
	}
	return false
}

// Knowledge is a knowledge item's content as the assembler renders it inside its tag: trimmed of
// surrounding whitespace, escaped (see [Escape]), and ended by the line break that puts the close tag on a
// line of its own. The count of this text covers the join of the content's last character and that line
// break, which a tokenizer may write as one token (o200k_base writes ".\n" as one), so that the join after
// it, before the close tag, is one whose counts add up whatever the content: a cached count then makes the
// item's count known without counting its text.
func Knowledge(content string) string { return escape(strings.TrimSpace(content), "\n") }

// knowledgeRendering is the version of Knowledge's text, which changes whenever the text does. 3: the text
// ends with its line break (2, which ended with the content, was followed by a space in the output; 1, whose
// counts were kept under the bare encoding name, escaped only & < >).
const knowledgeRendering = "3"

// KnowledgeCountKey is the key under which the count of an item's [Knowledge] text in the named encoding
// is cached: the encoding's name and the version of the rendering, as in "o200k_base/3". A count kept for
// an earlier rendering of the text is then never taken for this one's.
func KnowledgeCountKey(encoding string) string { return encoding + "/" + knowledgeRendering }

// KnowledgeCounts returns the counts of content's [Knowledge] text in o200k_base and cl100k_base, and
// its estimate (tokenizer.Estimate, under tokenizer.EstimateKey), under their [KnowledgeCountKey]s.
func KnowledgeCounts(content string) map[string]int {
	rendered := Knowledge(content)
	counts := make(map[string]int, 3)
	for _, enc := range []*tokenizer.Encoding{tokenizer.O200K(), tokenizer.CL100K()} {
		counts[KnowledgeCountKey(enc.Name())] = enc.Count(rendered)
	}
	counts[KnowledgeCountKey(tokenizer.EstimateKey)] = tokenizer.Estimate(rendered)
	return counts
}
