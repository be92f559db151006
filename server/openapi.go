package server

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/context-loom/loom"
)

// openAPISource is the API's OpenAPI 3.1 description as written; its info.version is a placeholder that
// openAPIDocument replaces with loom.Version, so that the version is said in one place.
// TestOpenAPI_MatchesRoutes keeps it in step with the routes.
//
//go:embed openapi.json
var openAPISource []byte

// openAPIVersionPlaceholder is the info.version that openapi.json holds.
const openAPIVersionPlaceholder = "set from loom.Version when served"

// openAPIDocument is the document served: openAPISource with info.version set to loom.Version.
var openAPIDocument = mustWithVersion(openAPISource, loom.Version)

func mustWithVersion(doc []byte, version string) []byte {
	out, err := withVersion(doc, version)
	if err != nil {
		panic("server: openapi.json: " + err.Error()) // the embedded file is part of the build; a test reads it
	}
	return out
}

// withVersion returns doc with its info.version (the placeholder) set to version.
func withVersion(doc []byte, version string) ([]byte, error) {
	v, err := json.Marshal(version)
	if err != nil {
		return nil, err
	}
	old := []byte(`"version": "` + openAPIVersionPlaceholder + `"`)
	if bytes.Count(doc, old) != 1 {
		return nil, fmt.Errorf("want exactly one %s", old)
	}
	out := bytes.Replace(doc, old, append([]byte(`"version": `), v...), 1)
	var check struct {
		Info struct {
			Version string `json:"version"`
		} `json:"info"`
	}
	if err := json.Unmarshal(out, &check); err != nil {
		return nil, err
	}
	if check.Info.Version != version {
		return nil, fmt.Errorf("the placeholder is not info.version")
	}
	return out, nil
}

// OpenAPI returns the API's OpenAPI 3.1 document (JSON). Its info.version is loom.Version.
func OpenAPI() []byte { return append([]byte(nil), openAPIDocument...) }

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPIDocument)
	return nil
}
