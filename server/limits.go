package server

import (
	"errors"
	"net/http"

	"github.com/context-loom/loom/internal/textlimit"
)

// checkTexts applies the per-text limit (Limits.MaxMessageBytes) to every text of a decoded request body:
// each string, each JSON value kept raw (a tool's parameters), each map key and value, at any depth, in
// every route's body, so that no text is counted, chunked or stored before its limit is checked and no
// route can forget one. A struct field tagged `textlimit:"body"` is bounded by the body limit instead (a
// document's text). The error is a 413 naming the field by its JSON path ("history[2].content").
func (s *Server) checkTexts(body any) error {
	var te *textlimit.Error
	if err := textlimit.Check(body, s.limits.MaxMessageBytes); errors.As(err, &te) {
		return errorf(http.StatusRequestEntityTooLarge, "too_large", "%s", te.Error())
	}
	return nil
}
