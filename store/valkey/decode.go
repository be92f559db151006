package valkey

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/context-loom/loom/internal/xmltext"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/tokenizer"
)

// decodeMessage decodes one stored message. Messages are most of what a Load reads, so the JSON that
// json.Marshal writes for them is parsed by hand (parseMessage), without reflection and without copying
// the text; anything the hand parser does not expect goes to encoding/json instead.
func decodeMessage(v string, m *store.Message) error {
	if parseMessage(v, m) {
		return nil
	}
	*m = store.Message{}
	return json.Unmarshal([]byte(v), m)
}

// parser reads JSON from s at i.
type parser struct {
	s string
	i int
}

func (p *parser) ws() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

// next consumes c (after white space) if it is next.
func (p *parser) next(c byte) bool {
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a string: a slice of s when it has no escapes, else a new string.
func (p *parser) str() (string, bool) {
	if !p.next('"') {
		return "", false
	}
	start := p.i
	ascii := true
	for p.i < len(p.s) && plain[p.s[p.i]] {
		p.i++
	}
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case plain[c]:
		case c == '"':
			out := p.s[start:p.i]
			p.i++
			if !ascii && !utf8.ValidString(out) {
				return "", false // encoding/json replaces bad bytes; let it
			}
			return out, true
		case c == '\\':
			return p.unquote(start)
		case c < 0x20:
			return "", false
		case c >= 0x80:
			ascii = false
		}
		p.i++
	}
	return "", false
}

// plain marks the bytes a JSON string holds as they are: printable ASCII but '"' and '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// unquote reads the rest of a string with escapes that started at start.
func (p *parser) unquote(start int) (string, bool) {
	b := make([]byte, 0, p.i-start+64)
	b = append(b, p.s[start:p.i]...)
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			if !utf8.Valid(b) {
				return "", false
			}
			return string(b), true
		case c < 0x20:
			return "", false
		case c != '\\':
			b = append(b, c)
			p.i++
			continue
		}
		if p.i+1 >= len(p.s) {
			return "", false
		}
		e := p.s[p.i+1]
		p.i += 2
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				if p.i+1 >= len(p.s) || p.s[p.i] != '\\' || p.s[p.i+1] != 'u' {
					return "", false // a lone surrogate: encoding/json decides
				}
				p.i += 2
				r2, ok := p.hex4()
				if !ok {
					return "", false
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return "", false
				}
			}
			b = utf8.AppendRune(b, r)
		default:
			return "", false
		}
	}
	return "", false
}

func (p *parser) hex4() (rune, bool) {
	if p.i+4 > len(p.s) {
		return 0, false
	}
	n, err := strconv.ParseUint(p.s[p.i:p.i+4], 16, 32)
	if err != nil {
		return 0, false
	}
	p.i += 4
	return rune(n), true
}

// int reads an integer.
func (p *parser) int() (int64, bool) {
	p.ws()
	start := p.i
	if p.i < len(p.s) && p.s[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.s) && '0' <= p.s[p.i] && p.s[p.i] <= '9' {
		p.i++
	}
	if p.i-digits > 1 && p.s[digits] == '0' {
		return 0, false // JSON has no leading zeros
	}
	n, err := strconv.ParseInt(p.s[start:p.i], 10, 64)
	return n, err == nil
}

// skip passes over one array or object and returns its text, for encoding/json to decode.
func (p *parser) skip() (string, bool) {
	p.ws()
	start, depth := p.i, 0
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case '[', '{':
			depth++
		case ']', '}':
			depth--
			if depth == 0 {
				p.i++
				return p.s[start:p.i], true
			}
		case '"':
			for p.i++; p.i < len(p.s) && p.s[p.i] != '"'; p.i++ {
				if p.s[p.i] == '\\' {
					p.i++
				}
			}
		}
		if depth == 0 {
			return "", false // not an array or object
		}
		p.i++
	}
	return "", false
}

// countKeys are the keys of the counts a store caches on messages and knowledge (see store.MessageCounts
// and xmltext.KnowledgeCounts).
var countKeys = func() []string {
	keys := append(slices.Clone(store.CountedEncodings), tokenizer.EstimateKey)
	for _, k := range keys[:len(keys):len(keys)] {
		keys = append(keys, xmltext.KnowledgeCountKey(k))
	}
	return keys
}()

// intern returns the usual roles and count keys without holding on to the text they were read from.
func intern(s string) string {
	switch s {
	case "user":
		return "user"
	case "assistant":
		return "assistant"
	case "system":
		return "system"
	case "tool":
		return "tool"
	}
	for _, k := range countKeys {
		if s == k {
			return k
		}
	}
	return s
}

// parseMessage parses the JSON object json.Marshal makes of a store.Message; false means it met something
// else, and m is then undefined.
func parseMessage(s string, m *store.Message) bool {
	p := parser{s: s}
	if !p.next('{') {
		return false
	}
	if p.next('}') {
		return p.end()
	}
	for {
		key, ok := p.str()
		if !ok || !p.next(':') {
			return false
		}
		switch key {
		case "seq":
			m.Seq, ok = p.int()
		case "role":
			m.Role, ok = p.str()
			m.Role = intern(m.Role)
		case "content":
			m.Content, ok = p.str()
		case "name":
			m.Name, ok = p.str()
		case "tool_call_id":
			m.ToolCallID, ok = p.str()
		case "ts":
			var ts string
			if ts, ok = p.str(); ok {
				var err error
				m.Time, err = time.Parse(time.RFC3339Nano, ts)
				ok = err == nil
			}
		case "tool_calls":
			var raw string
			if raw, ok = p.skip(); ok {
				ok = json.Unmarshal([]byte(raw), &m.ToolCalls) == nil
			}
		case "parts":
			var raw string
			if raw, ok = p.skip(); ok {
				ok = json.Unmarshal([]byte(raw), &m.Parts) == nil
			}
		case "token_counts":
			m.TokenCounts, ok = p.counts()
		default:
			return false
		}
		if !ok {
			return false
		}
		if p.next(',') {
			continue
		}
		if p.next('}') {
			return p.end()
		}
		return false
	}
}

func (p *parser) end() bool {
	p.ws()
	return p.i == len(p.s)
}

// counts parses {"name":n,...}.
func (p *parser) counts() (map[string]int, bool) {
	if !p.next('{') {
		return nil, false
	}
	out := make(map[string]int, len(store.CountedEncodings)+1)
	if p.next('}') {
		return out, true
	}
	for {
		k, ok := p.str()
		if !ok || !p.next(':') {
			return nil, false
		}
		n, ok := p.int()
		if !ok || n != int64(int(n)) {
			return nil, false
		}
		out[intern(k)] = int(n)
		if p.next(',') {
			continue
		}
		return out, p.next('}')
	}
}

// strings parses {"key":"value",...}.
func (p *parser) strings() (map[string]string, bool) {
	if !p.next('{') {
		return nil, false
	}
	out := map[string]string{}
	if p.next('}') {
		return out, true
	}
	for {
		k, ok := p.str()
		if !ok || !p.next(':') {
			return nil, false
		}
		if out[k], ok = p.str(); !ok {
			return nil, false
		}
		if p.next(',') {
			continue
		}
		return out, p.next('}')
	}
}

// float reads a number as encoding/json does.
func (p *parser) float() (float64, bool) {
	p.ws()
	start := p.i
	for p.i < len(p.s) && (('0' <= p.s[p.i] && p.s[p.i] <= '9') || p.s[p.i] == '-' || p.s[p.i] == '+' || p.s[p.i] == '.' || p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
	}
	num := p.s[start:p.i]
	if d := strings.TrimPrefix(num, "-"); len(d) == 0 || d[0] < '0' || d[0] > '9' || len(d) > 1 && d[0] == '0' && d[1] != '.' && d[1] != 'e' && d[1] != 'E' {
		return 0, false
	}
	f, err := strconv.ParseFloat(num, 64)
	return f, err == nil
}

// bool reads true or false.
func (p *parser) bool() (bool, bool) {
	p.ws()
	switch {
	case strings.HasPrefix(p.s[p.i:], "true"):
		p.i += 4
		return true, true
	case strings.HasPrefix(p.s[p.i:], "false"):
		p.i += 5
		return false, true
	}
	return false, false
}

// decodeKnowledgeItem decodes one stored knowledge item, by hand when it can (see decodeMessage).
func decodeKnowledgeItem(v string, k *store.Knowledge) error {
	if parseKnowledge(v, k) {
		return nil
	}
	*k = store.Knowledge{}
	return json.Unmarshal([]byte(v), k)
}

// parseKnowledge parses the JSON object json.Marshal makes of a store.Knowledge; false means it met
// something else.
func parseKnowledge(s string, k *store.Knowledge) bool {
	p := parser{s: s}
	if !p.next('{') {
		return false
	}
	if p.next('}') {
		return p.end()
	}
	for {
		key, ok := p.str()
		if !ok || !p.next(':') {
			return false
		}
		var n int64
		switch key {
		case "id":
			k.ID, ok = p.str()
		case "document_id":
			k.DocumentID, ok = p.str()
		case "content":
			k.Content, ok = p.str()
		case "score":
			k.Score, ok = p.float()
		case "source":
			k.Source, ok = p.str()
		case "type":
			k.Type, ok = p.str()
		case "trusted":
			k.Trusted, ok = p.bool()
		case "start":
			n, ok = p.int()
			k.StartOffset = int(n)
		case "end":
			n, ok = p.int()
			k.EndOffset = int(n)
		case "metadata":
			k.Metadata, ok = p.strings()
		case "token_counts":
			k.TokenCounts, ok = p.counts()
		default:
			return false
		}
		if !ok {
			return false
		}
		if p.next(',') {
			continue
		}
		if p.next('}') {
			return p.end()
		}
		return false
	}
}
