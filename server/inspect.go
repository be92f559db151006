package server

import (
	"embed"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/store"
)

// inspectorFiles are the inspector page's assets: plain HTML, CSS and JavaScript, served as they are.
//
//go:embed inspector/index.html inspector/app.js inspector/app.css
var inspectorFiles embed.FS

// inspectorCSP is the inspector page's Content-Security-Policy: its own script and style files only (no
// inline script or style, no eval), requests to this server only, never framed.
const inspectorCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'self'; object-src 'none'; frame-ancestors 'none'"

// inspectorPage serves one of the page's files with the page's security headers. The page holds no data:
// what it shows it asks the API for, with the key the user gives it.
func inspectorPage(name, contentType string) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		b, err := inspectorFiles.ReadFile("inspector/" + name)
		if err != nil {
			return err
		}
		h := w.Header()
		h.Set("Content-Type", contentType)
		h.Set("Content-Security-Policy", inspectorCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		w.Write(b)
		return nil
	}
}

// assemblySummary is one recorded assembly in a session's list: enough for the timeline, the rest by its
// seq.
type assemblySummary struct {
	Seq           int64                   `json:"seq"`
	Time          time.Time               `json:"time"`
	Request       engine.RecordedRequest  `json:"request"`
	Window        int                     `json:"window,omitempty"`
	Format        string                  `json:"format"`
	Model         string                  `json:"model"`
	Budget        int                     `json:"budget"`
	TotalTokens   int                     `json:"total_tokens"`
	PrefixHash    string                  `json:"prefix_hash"`
	Regions       []regionSummary         `json:"regions"`
	Summary       *assembler.SummaryRange `json:"summary,omitempty"`
	Degraded      int                     `json:"degraded,omitempty"`
	OutputOmitted bool                    `json:"output_omitted,omitempty"`
}

type regionSummary struct {
	Name     assembler.Region `json:"name"`
	Budget   int              `json:"budget"`
	Used     int              `json:"used"`
	Included int              `json:"included"`
	Dropped  int              `json:"dropped"`
}

// listAssemblies answers GET /v1/sessions/{session}/assemblies: the session's recorded assemblies,
// newest first, each summed up.
func (s *Server) listAssemblies(w http.ResponseWriter, r *http.Request) error {
	recs, err := s.eng.Assemblies(r.Context(), r.PathValue("session"))
	if err != nil {
		s.metrics.storeError("list_assemblies", err)
		return err
	}
	out := make([]assemblySummary, 0, len(recs))
	for _, rec := range recs {
		sum := assemblySummary{Seq: rec.Seq, Time: rec.Time, Request: rec.Request, Window: rec.Window,
			Degraded: len(rec.Degraded), OutputOmitted: rec.OutputOmitted, Regions: []regionSummary{}}
		if res := rec.Result; res != nil {
			sum.Format, sum.Model, sum.Budget, sum.TotalTokens, sum.PrefixHash = res.Format, res.Model, res.Budget, res.TotalTokens, res.PrefixHash
			sum.Summary = res.Report.Summary
			for _, rg := range res.Report.Regions {
				sum.Regions = append(sum.Regions, regionSummary{Name: rg.Name, Budget: rg.Budget, Used: rg.Used,
					Included: len(rg.Included), Dropped: len(rg.Dropped)})
			}
		}
		out = append(out, sum)
	}
	writeJSON(w, http.StatusOK, map[string]any{"session": r.PathValue("session"), "recording": s.eng.Recording(), "assemblies": out})
	return nil
}

// getAssembly answers GET /v1/sessions/{session}/assemblies/{seq}: one recorded assembly, whole.
func (s *Server) getAssembly(w http.ResponseWriter, r *http.Request) error {
	seq, err := strconv.ParseInt(r.PathValue("seq"), 10, 64)
	if err != nil || seq <= 0 {
		return errorf(http.StatusBadRequest, "invalid_request", "an assembly's seq is a positive integer, not %q", r.PathValue("seq"))
	}
	rec, err := s.eng.Assembly(r.Context(), r.PathValue("session"), seq)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.metrics.storeError("get_assembly", err)
		}
		return err
	}
	writeJSON(w, http.StatusOK, rec)
	return nil
}

// listAssemblySessions answers GET /v1/assemblies: the tenant's sessions that have recorded assemblies,
// the most recently recorded first, at most limit of them (default store.DefaultAssemblySessions, at most
// store.MaxAssemblySessions; a larger one is refused, not cut): the inspector's session picker.
func (s *Server) listAssemblySessions(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryLimit(r, store.DefaultAssemblySessions, store.MaxAssemblySessions)
	if err != nil {
		return err
	}
	sessions, err := s.st.AssemblySessions(r.Context(), tenant(r.Context()), limit)
	if err != nil {
		s.metrics.storeError("list_assembly_sessions", err)
		return err
	}
	if sessions == nil {
		sessions = []store.AssemblySession{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"recording": s.eng.Recording(), "sessions": sessions})
	return nil
}
