package textlimit_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/context-loom/loom/internal/textlimit"
)

type inner struct {
	Content string `json:"content"`
}

type body struct {
	Name     string            `json:"name,omitempty"`
	History  []inner           `json:"history"`
	Meta     map[string]string `json:"meta"`
	Raw      json.RawMessage   `json:"raw"`
	Document string            `json:"document" textlimit:"body"`
	Hidden   string            `json:"-"`
	inner
}

func TestCheck_NamesTheTextByItsPath(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 11)
	for _, tc := range []struct {
		name string
		v    any
		path string
	}{
		{"a field", body{Name: long}, "name"},
		{"an element of a list", &body{History: []inner{{"ok"}, {long}}}, "history[1].content"},
		{"a map value", body{Meta: map[string]string{"k": long}}, `meta["k"]`},
		{"a map key", body{Meta: map[string]string{long: "v"}}, "a key of meta"},
		{"raw JSON", body{Raw: json.RawMessage(`"` + long + `"`)}, "raw"},
		{"an embedded struct's field", body{inner: inner{long}}, "content"},
		{"a bare string", long, "the body's text"},
		{"within the limit", body{Name: "0123456789", Document: long + long, Hidden: long}, ""},
	} {
		err := textlimit.Check(tc.v, 10)
		var te *textlimit.Error
		switch {
		case tc.path == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.path != "" && (!errors.As(err, &te) || te.Path != tc.path || te.Limit != 10 || te.Bytes <= 10):
			t.Errorf("%s: %v, want the path %q", tc.name, err, tc.path)
		}
	}
}

type hiddenMap struct {
	Meta map[string]string `json:"meta"`
}

// TestCheck_UnexportedEmbedded: the exported fields of an unexported embedded struct are decoded by
// encoding/json, so they are held to the limit too, maps included.
func TestCheck_UnexportedEmbedded(t *testing.T) {
	t.Parallel()
	v := struct {
		hiddenMap
	}{hiddenMap{Meta: map[string]string{"k": strings.Repeat("x", 11)}}}
	var te *textlimit.Error
	if err := textlimit.Check(v, 10); !errors.As(err, &te) || te.Path != `meta["k"]` {
		t.Errorf("%v", err)
	}
}
