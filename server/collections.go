package server

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/engine"
)

func (s *Server) createCollection(w http.ResponseWriter, r *http.Request) error {
	var c loom.Collection
	if err := s.decode(r, &c); err != nil {
		return err
	}
	c.Dimensions, c.CreatedAt = 0, c.CreatedAt.UTC()
	created, err := s.eng.CreateCollection(r.Context(), c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, created)
	return nil
}

func (s *Server) listCollections(w http.ResponseWriter, r *http.Request) error {
	cs, err := s.eng.Collections(r.Context())
	if err != nil {
		return err
	}
	if cs == nil {
		cs = []loom.Collection{}
	}
	writeJSON(w, http.StatusOK, map[string][]loom.Collection{"collections": cs})
	return nil
}

func (s *Server) getCollection(w http.ResponseWriter, r *http.Request) error {
	c, err := s.eng.Collection(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

// optionalWeight is a fusion weight in a PATCH body: absent (set false), null (set, v nil: back to the
// default) or a number.
type optionalWeight struct {
	set bool
	v   *float64
}

func (o *optionalWeight) UnmarshalJSON(b []byte) error {
	o.set, o.v = true, nil
	if string(b) == "null" {
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("a fusion weight must be a number or null: %w", err)
	}
	o.v = &f
	return nil
}

// updateCollection changes the settings a collection may change after its creation, its fusion weights: a
// weight absent from the body is left as it is, null puts it back to its default.
func (s *Server) updateCollection(w http.ResponseWriter, r *http.Request) error {
	var b struct {
		KeywordWeight optionalWeight `json:"keyword_weight"`
		VectorWeight  optionalWeight `json:"vector_weight"`
	}
	if err := s.decode(r, &b); err != nil {
		return err
	}
	c, err := s.eng.Collection(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	kw, vec := c.KeywordWeight, c.VectorWeight
	if b.KeywordWeight.set {
		kw = b.KeywordWeight.v
	}
	if b.VectorWeight.set {
		vec = b.VectorWeight.v
	}
	updated, err := s.eng.SetFusionWeights(r.Context(), c.ID, kw, vec)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, updated)
	return nil
}

func (s *Server) deleteCollection(w http.ResponseWriter, r *http.Request) error {
	if err := s.eng.DeleteCollection(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// documentBody is the body of POST /v1/collections/{id}/documents.
type documentBody struct {
	// ID identifies the document; default Source, or the text's hash.
	ID     string `json:"id"`
	Source string `json:"source"`
	// ContentType is "text", "markdown", "html" or "code"; "" detects it from Source's extension.
	ContentType string `json:"content_type"`
	// Text is bounded by the body limit and ingestion's own, not by the per-text limit: a document is
	// larger than a message.
	Text     *string           `json:"text" textlimit:"body"`
	Metadata map[string]string `json:"metadata"`
}

func (s *Server) putDocument(w http.ResponseWriter, r *http.Request) error {
	var b documentBody
	if err := s.decode(r, &b); err != nil {
		return err
	}
	if b.Text == nil {
		return errorf(http.StatusBadRequest, "invalid_request", "text is required")
	}
	res, err := s.eng.IngestText(r.Context(), r.PathValue("id"), b.ID, b.Source, b.ContentType, *b.Text, b.Metadata)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if !res.Changed {
		status = http.StatusOK
	}
	writeJSON(w, status, res)
	return nil
}

func (s *Server) listDocuments(w http.ResponseWriter, r *http.Request) error {
	docs, err := s.eng.Documents(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if docs == nil {
		docs = []loom.Document{}
	}
	writeJSON(w, http.StatusOK, map[string][]loom.Document{"documents": docs})
	return nil
}

func (s *Server) deleteDocument(w http.ResponseWriter, r *http.Request) error {
	if err := s.eng.DeleteDocument(r.Context(), r.PathValue("id"), r.PathValue("doc")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) retrieve(w http.ResponseWriter, r *http.Request) error {
	var b struct {
		Collection string            `json:"collection"`
		Query      string            `json:"query"`
		TopK       int               `json:"top_k"`
		MinScore   float64           `json:"min_score"`
		Mode       string            `json:"mode"`
		Filter     map[string]string `json:"filter"`
		MMRLambda  float64           `json:"mmr_lambda"`
		// The weights of the keyword and vector rankings in hybrid and mmr mode; absent, the collection's
		// (or else the defaults).
		KeywordWeight *float64 `json:"keyword_weight"`
		VectorWeight  *float64 `json:"vector_weight"`
	}
	if err := s.decode(r, &b); err != nil {
		return err
	}
	opts := []engine.RetrieveOption{engine.WithCollection(b.Collection), engine.WithTopK(b.TopK), engine.WithMinScore(b.MinScore),
		engine.WithMode(b.Mode), engine.WithMMRLambda(b.MMRLambda)}
	if b.KeywordWeight != nil {
		opts = append(opts, engine.WithKeywordWeight(*b.KeywordWeight))
	}
	if b.VectorWeight != nil {
		opts = append(opts, engine.WithVectorWeight(*b.VectorWeight))
	}
	if len(b.Filter) > 0 {
		opts = append(opts, engine.WithFilter(b.Filter))
	}
	results, err := s.eng.Retrieve(r.Context(), b.Query, opts...)
	if err != nil {
		return err
	}
	out := make([]engine.Hit, len(results))
	for i, res := range results {
		out[i] = engine.NewHit(res)
	}
	writeJSON(w, http.StatusOK, map[string][]engine.Hit{"results": out})
	return nil
}
