// Package textlimit bounds every text of a decoded request: the HTTP API's and the MCP server's inputs
// are held to one per-text limit by the same walk, so that no text is counted, chunked or stored before
// its limit is checked and no entry point can forget one.
package textlimit

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Error is a text over the limit: Path names it by its JSON path ("history[2].content").
type Error struct {
	Path  string
	Bytes int
	Limit int
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s is %d bytes, the limit for one text is %d", e.Path, e.Bytes, e.Limit)
}

// Check applies limit to every text of v: each string, each JSON value kept raw (a tool's parameters),
// each map key and value, at any depth. A struct field tagged `textlimit:"body"` is not checked (it is
// bounded by a whole body's limit instead: a document's text). It returns an *Error for the first text
// over the limit.
func Check(v any, limit int) error {
	return check(reflect.ValueOf(v), "", limit)
}

func check(v reflect.Value, path string, limit int) error {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return check(v.Elem(), path, limit)
	case reflect.String:
		return checkLen(path, v.Len(), limit)
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 { // json.RawMessage
			return checkLen(path, v.Len(), limit)
		}
		for i := range v.Len() {
			if err := check(v.Index(i), path+"["+strconv.Itoa(i)+"]", limit); err != nil {
				return err
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			k := it.Key()
			if k.Kind() == reflect.String {
				if err := checkLen("a key of "+path, k.Len(), limit); err != nil {
					return err
				}
			}
			name := k.String() // a value read through an unexported field has no Interface
			if k.Kind() != reflect.String && k.CanInterface() {
				name = fmt.Sprint(k.Interface())
			}
			if err := check(it.Value(), path+"["+strconv.Quote(shorten(name))+"]", limit); err != nil {
				return err
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			// An unexported embedded struct's exported fields are decoded as the outer one's, so they
			// are checked too (as encoding/json reads them).
			embedded := f.Anonymous && (f.Type.Kind() == reflect.Struct ||
				f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct)
			if (!f.IsExported() && !embedded) || f.Tag.Get("textlimit") == "body" {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			p := path
			if !f.Anonymous || name != "" { // an embedded struct's fields are the outer one's
				if name == "" {
					name = f.Name
				}
				p = strings.TrimPrefix(path+"."+name, ".")
			}
			if err := check(v.Field(i), p, limit); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkLen(path string, n, limit int) error {
	if n > limit {
		if path == "" {
			path = "the body's text"
		}
		return &Error{Path: path, Bytes: n, Limit: limit}
	}
	return nil
}

// shorten cuts a map key for an error message.
func shorten(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
