package server

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the API's OpenAPI 3.1 description. TestOpenAPI_MatchesRoutes keeps it in step with
// the routes.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns the API's OpenAPI 3.1 document (JSON).
func OpenAPI() []byte { return append([]byte(nil), openAPIDocument...) }

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPIDocument)
	return nil
}
