package assembler

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/context-loom/loom/internal/xmltext"
)

// Loom's context markup: untrusted text (knowledge, tool outputs, memory) goes inside elements whose tags
// only Loom writes. Each kind of element has one renderer of its open tag (knowledgeElement for <context>,
// toolOutputElement for <tool_output>, memoryElement for <user_memory>), which Tag and XMLTag, the builder,
// the region assembler's formats and the cookbook format all use, and every element escapes alike, with
// EscapeText for text and escapeAttr for attribute values.

// Tag renders text as an element of Loom's context markup: the open tag with its attributes, the text on
// lines of its own, the close tag.
//
//	<tool_output tool="check_account" trusted="false">
//	{&quot;plan&quot;: &quot;free&quot;}
//	</tool_output>
//
// attrs are attribute names and values in pairs, in order (a last name without a value has the value "").
// The text is escaped as [EscapeText] escapes it and the values as attribute values (every line break and
// tab as a character reference too, so that a value stays on its line), so that neither can close the
// element, open another, add an attribute or spell one, such as trusted="true", even as inert text. The
// element's name and the attribute names are the caller's own and are written as given.
func Tag(name, text string, attrs ...string) string {
	return elem{openTag(name, attrs...), name}.wrap(text)
}

// XMLTag wraps text in a context tag as Phronomy's builder does (its xml_tag), escaped as [Tag] escapes,
// with the knowledge items' tag of every other renderer: the type "rag" when typ is empty.
//
//	<context type="entity" trusted="false">
//	The user lives in Tokyo.
//	</context>
func XMLTag(text, typ string, trusted bool) string {
	return knowledgeElement(typ, "", trusted).wrap(text)
}

// elem is one element of Loom's context markup: its open tag, with its attributes, and its name.
type elem struct{ open, name string }

func (e elem) close() string { return "</" + e.name + ">" }

// wrap renders text as the element: the open tag, the text escaped (see [EscapeText]) on lines of its
// own, the close tag.
func (e elem) wrap(text string) string { return e.open + "\n" + EscapeText(text) + "\n" + e.close() }

// itemOpen and itemClose are what a context item of Loom's formats has around its text, which the text
// format indents (tagEnd: a line break, written as the format writes it): the open tag and the line break,
// then a line break, the close tag and a blank line, as [Tag] writes an element and a blank line after it.
// A knowledge item's text holds its own last line break (see [RenderedKnowledge]), so that the count that
// stores cache covers it; the item ends with lineClose.
func (e elem) itemOpen(tagEnd string) string { return e.open + tagEnd }
func (e elem) itemClose() string             { return "\n" + e.lineClose() }
func (e elem) lineClose() string             { return e.close() + "\n\n" }

// knowledgeElement is the <context> element of a knowledge item: its type ("rag" when it has none), its
// source when it has one, and whether it is trusted.
func knowledgeElement(typ, source string, trusted bool) elem {
	if typ == "" {
		typ = "rag"
	}
	if source == "" {
		return elem{openTag("context", "type", typ, "trusted", strconv.FormatBool(trusted)), "context"}
	}
	return elem{openTag("context", "type", typ, "source", source, "trusted", strconv.FormatBool(trusted)), "context"}
}

// contextElement names the <context> element, for its close tag.
var contextElement = elem{name: "context"}

// toolOutputElement is the <tool_output> element of a tool's result, always untrusted: the tool's name and
// the call's id, each when it has one.
func toolOutputElement(tool, callID string) elem {
	attrs := make([]string, 0, 6)
	if tool != "" {
		attrs = append(attrs, "tool", tool)
	}
	if callID != "" {
		attrs = append(attrs, "call_id", callID)
	}
	return elem{openTag("tool_output", append(attrs, "trusted", "false")...), "tool_output"}
}

// memoryElement is the <user_memory> element of a user's facts, always untrusted, and pinned="true" for
// those that are pinned.
func memoryElement(pinned bool) elem {
	if pinned {
		return elem{openTag("user_memory", "pinned", "true", "trusted", "false"), "user_memory"}
	}
	return elem{openTag("user_memory", "trusted", "false"), "user_memory"}
}

// openTag renders an element's open tag, <name a="v" ...>, its attribute values escaped (see [Tag]).
func openTag(name string, attrs ...string) string {
	var b strings.Builder
	b.WriteByte('<')
	b.WriteString(name)
	for i := 0; i < len(attrs); i += 2 {
		value := ""
		if i+1 < len(attrs) {
			value = attrs[i+1]
		}
		b.WriteByte(' ')
		b.WriteString(attrs[i])
		b.WriteString(`="`)
		b.WriteString(escapeAttr(value))
		b.WriteByte('"')
	}
	b.WriteByte('>')
	return b.String()
}

var (
	// An attribute value stays on its line: every line break (see lineBreak) and tab is a reference too.
	attrEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;",
		"\n", "&#10;", "\r", "&#13;", "\t", "&#9;", "\v", "&#11;", "\f", "&#12;",
		"\u0085", "&#133;", "\u2028", "&#8232;", "\u2029", "&#8233;")
)

// EscapeText escapes s for the text of an element of Loom's context markup: & < > " ' become &amp; &lt;
// &gt; &quot; &#39;, as Phronomy's builder escapes (Ruby's CGI.escapeHTML), so that untrusted text can
// neither open nor close a tag, nor spell an attribute such as trusted="true", even as inert text. Invalid
// UTF-8 becomes U+FFFD. Line breaks and other white space are kept.
func EscapeText(s string) string { return xmltext.Escape(s) }

// escapeAttr escapes text for a double-quoted attribute value.
func escapeAttr(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '&', '<', '>', '"', '\'', '\n', '\r', '\t', '\v', '\f', 0xC2, 0xE2: // 0xC2, 0xE2: NEL, LS, PS may follow
			return attrEscaper.Replace(s)
		}
	}
	return s // the replacer would copy it
}
