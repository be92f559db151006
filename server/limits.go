package server

import (
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
)

// checkTexts applies the per-text limit (Limits.MaxMessageBytes) to every text of a decoded request body:
// each string, each JSON value kept raw (a tool's parameters), each map key and value, at any depth, in
// every route's body, so that no text is counted, chunked or stored before its limit is checked and no
// route can forget one. A struct field tagged `textlimit:"body"` is bounded by the body limit instead (a
// document's text). The error is a 413 naming the field by its JSON path ("history[2].content").
func (s *Server) checkTexts(body any) error {
	return checkTexts(reflect.ValueOf(body), "", s.limits.MaxMessageBytes)
}

func checkTexts(v reflect.Value, path string, limit int) error {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return checkTexts(v.Elem(), path, limit)
	case reflect.String:
		return checkLen(path, v.Len(), limit)
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 { // json.RawMessage
			return checkLen(path, v.Len(), limit)
		}
		for i := range v.Len() {
			if err := checkTexts(v.Index(i), path+"["+strconv.Itoa(i)+"]", limit); err != nil {
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
			if err := checkTexts(it.Value(), path+"["+strconv.Quote(shorten(fmt.Sprint(k.Interface())))+"]", limit); err != nil {
				return err
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("textlimit") == "body" {
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
			if err := checkTexts(v.Field(i), p, limit); err != nil {
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
		return errorf(http.StatusRequestEntityTooLarge, "too_large", "%s is %d bytes, the limit for one text is %d", path, n, limit)
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
