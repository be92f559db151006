package valkey

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/store"
)

// FuzzDecodeMessage: the hand parser agrees with encoding/json on what json.Marshal writes, and on any
// other input either agrees or leaves it to encoding/json.
func FuzzDecodeMessage(f *testing.F) {
	f.Add("user", "Hi, I need help with my account", "", "", "", int64(1), int64(1700000000123456789), 7)
	f.Add("assistant", "line\nbreak \"quoted\" <tag> & \u2028 🧵 e\u0301", "bob", "", `{"a":[1,"]"]}`, int64(42), int64(0), 0)
	f.Add("tool", "\x00\x1f\\", "", "call_1", "", int64(3), int64(-5), -1)
	f.Fuzz(func(t *testing.T, role, content, name, callID, args string, seq, nanos int64, count int) {
		m := store.Message{Seq: seq, Role: role, Content: content, Name: name, ToolCallID: callID,
			TokenCounts: map[string]int{"o200k_base": count, "cl100k_base": count + 1}}
		if nanos != 0 {
			m.Time = time.Unix(0, nanos).UTC()
		}
		if args != "" {
			m.ToolCalls = []assembler.ToolCall{{ID: "c", Type: "function", Function: assembler.ToolCallFunction{Name: "f", Arguments: args}}}
		}
		if count%3 == 0 { // content parts, the fuzzed texts in them
			m.Parts = []loom.Part{loom.TextPart(name), {Type: loom.PartImage, Image: &loom.Image{URL: callID, Data: []byte(args), Width: count}}}
		}
		b, err := json.Marshal(m)
		if err != nil {
			return
		}
		var want, got store.Message
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if err := decodeMessage(string(b), &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n got %+v\nwant %+v", b, got, want)
		}
		// Arbitrary text: the same answer, or both fail.
		var w2, g2 store.Message
		errW := json.Unmarshal([]byte(content), &w2)
		errG := decodeMessage(content, &g2)
		if (errW == nil) != (errG == nil) || errW == nil && !reflect.DeepEqual(g2, w2) {
			t.Fatalf("%q: got %+v, %v; want %+v, %v", content, g2, errG, w2, errW)
		}
	})
}

func TestParseMessage_FastPathTaken(t *testing.T) {
	parts := []loom.Part{loom.TextPart("see"), loom.ImageDataPart([]byte{1, 2}, "low")}
	b, _ := json.Marshal(store.Message{Seq: 3, Role: "user", Content: "a \"b\"\n", Parts: parts, Time: time.Now().UTC(), TokenCounts: map[string]int{"o200k_base": 4}})
	var m store.Message
	if !parseMessage(string(b), &m) || m.Content != "a \"b\"\n" || m.Seq != 3 || m.TokenCounts["o200k_base"] != 4 || !reflect.DeepEqual(m.Parts, parts) {
		t.Fatalf("parseMessage(%s) = %+v", b, m)
	}
}

// FuzzDecodeKnowledge: the hand parser agrees with encoding/json on what json.Marshal writes and on text.
func FuzzDecodeKnowledge(f *testing.F) {
	f.Add("k1", "Premium costs $20/month.\n\"q\"", "Pricing", "title", 0.92, true, 10, 34, 5)
	f.Add("", "", "", "", 1e-300, false, -1, 0, 0)
	f.Fuzz(func(t *testing.T, id, content, source, metaKey string, score float64, trusted bool, start, end, count int) {
		k := store.Knowledge{ID: id, DocumentID: id + "d", Content: content, Score: score, Source: source, Type: "rag", Trusted: trusted,
			StartOffset: start, EndOffset: end, TokenCounts: map[string]int{"o200k_base": count}}
		if metaKey != "" {
			k.Metadata = map[string]string{metaKey: content, "x": source}
		}
		b, err := json.Marshal(k)
		if err != nil {
			return
		}
		var want, got store.Knowledge
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		if err := decodeKnowledgeItem(string(b), &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n got %+v\nwant %+v", b, got, want)
		}
		var w2, g2 store.Knowledge
		errW := json.Unmarshal([]byte(content), &w2)
		errG := decodeKnowledgeItem(content, &g2)
		if (errW == nil) != (errG == nil) || errW == nil && !reflect.DeepEqual(g2, w2) {
			t.Fatalf("%q: got %+v, %v; want %+v, %v", content, g2, errG, w2, errW)
		}
	})
}
