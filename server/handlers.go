package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/chunker"
	"github.com/context-loom/loom/engine"
	"github.com/context-loom/loom/promptcount"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/tokenizer"
)

// kindStatuses maps the kinds of error (package loom's) to a status and a code, first match wins. Every
// package wraps one of these kinds in its errors, so classify needs nothing else.
var kindStatuses = []struct {
	kind   error
	status int
	code   string
}{
	{loom.ErrBudget, http.StatusUnprocessableEntity, "budget_exceeded"},
	{loom.ErrExists, http.StatusConflict, "conflict"},
	// Before ErrInvalid, which it wraps: the request is fine, the collection's vectors are of another embedder.
	{engine.ErrEmbedderMismatch, http.StatusConflict, "embedder_mismatch"},
	{loom.ErrNotFound, http.StatusNotFound, "not_found"},
	{loom.ErrTooLarge, http.StatusRequestEntityTooLarge, "too_large"},
	{loom.ErrInvalid, http.StatusBadRequest, "invalid_request"},
	{loom.ErrUnsupported, http.StatusBadRequest, "invalid_request"},
}

// classify maps an error to its status and code: by its kind (kindStatuses), or as a failure of the store
// or a service Loom depends on, a timeout, or an internal error whose text is not shown.
func (s *Server) classify(err error) *apiError {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errorf(http.StatusRequestEntityTooLarge, "too_large", "the body is larger than %d bytes", mbe.Limit)
	}
	for _, k := range kindStatuses {
		if errors.Is(err, k.kind) {
			return errorf(k.status, k.code, "%s", err.Error())
		}
	}
	switch {
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, loom.ErrClosed):
		return errorf(http.StatusServiceUnavailable, "unavailable", "the store is unavailable; retry later")
	case errors.Is(err, loom.ErrUnavailable):
		// An embedder, say: its message may name a host or echo a server's text; it is logged, not shown.
		return errorf(http.StatusServiceUnavailable, "unavailable", "a service Loom depends on is unavailable; retry later")
	case errors.Is(err, context.DeadlineExceeded):
		return errorf(http.StatusServiceUnavailable, "timeout", "the request took longer than %s", s.limits.RequestTimeout)
	case errors.Is(err, context.Canceled): // the client went away; nobody reads this
		return errorf(http.StatusServiceUnavailable, "canceled", "the request was canceled")
	case errors.Is(err, engine.ErrSourceFailed):
		// A source that failed for good (data that does not decode), not for a while: retrying will not help.
		return errorf(http.StatusInternalServerError, "source_failed", "a source of the assembly could not be read")
	}
	return errorf(http.StatusInternalServerError, "internal", "internal error")
}

// isStoreFailure reports whether err is the store's failure (unreachable, timed out or closed; stores wrap
// every failure of their own as store.ErrUnavailable), not the caller's doing, a client gone away, or a
// failure of something else (an embedder).
func isStoreFailure(err error) bool {
	return errors.Is(err, store.ErrUnavailable) || errors.Is(err, store.ErrClosed) || errors.Is(err, context.DeadlineExceeded)
}

// writeJSON writes v with status. HTML characters are not escaped: the text is for models and programs.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		b.Reset()
		b.WriteString(`{"error":{"code":"internal","message":"cannot encode the response"}}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// decode reads the body into v strictly: valid UTF-8, one JSON value, no unknown fields, within the body
// limit, and every text within the per-text limit (checkTexts).
func (s *Server) decode(r *http.Request, v any) error {
	data, err := io.ReadAll(r.Body)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return errorf(http.StatusRequestEntityTooLarge, "too_large", "the body is larger than %d bytes", mbe.Limit)
	case err != nil:
		return errorf(http.StatusBadRequest, "invalid_body", "cannot read the body: %v", err)
	case len(bytes.TrimSpace(data)) == 0:
		return errorf(http.StatusBadRequest, "invalid_json", "the body is empty; want a JSON object")
	case !utf8.Valid(data):
		return errorf(http.StatusBadRequest, "invalid_utf8", "the body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, loom.ErrInvalid) { // well-formed, but a value its type refuses (a region's name)
			return errorf(http.StatusBadRequest, "invalid_request", "%v", err)
		}
		return errorf(http.StatusBadRequest, "invalid_json", "malformed JSON: %v", err)
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, "invalid_json", "malformed JSON: data after the value")
	}
	return s.checkTexts(v)
}

func (s *Server) checkItems(what string, n int) error {
	if n > s.limits.MaxItems {
		return errorf(http.StatusRequestEntityTooLarge, "too_large", "%d %s, the limit is %d", n, what, s.limits.MaxItems)
	}
	return nil
}

// checkRequest applies the item limit to an assembly's inline parts (decode checked their texts).
func (s *Server) checkRequest(req *engine.Request) error {
	r := &req.Request
	return s.checkItems("items in the request", len(r.Tools)+len(r.Memory)+len(r.Knowledge)+len(r.History)+len(r.ToolOutputs))
}

func (s *Server) assemble(w http.ResponseWriter, r *http.Request) error {
	var req engine.Request
	if err := s.decode(r, &req); err != nil {
		return err
	}
	if err := s.checkRequest(&req); err != nil {
		return err
	}
	req.DropTokenCounts() // a client's counts could make the budget wrong; the store's are Loom's own
	res, err := s.eng.Assemble(r.Context(), req)
	if err != nil {
		return err
	}
	s.metrics.assembled(res)
	writeJSON(w, http.StatusOK, res)
	return nil
}

// messagesBody is the body of POST /v1/sessions/{session}/messages: one message, or {"messages": [...]}.
type messagesBody struct {
	Messages []store.Message `json:"messages"`
	store.Message
}

func (s *Server) appendMessages(w http.ResponseWriter, r *http.Request) error {
	var body messagesBody
	if err := s.decode(r, &body); err != nil {
		return err
	}
	msgs := body.Messages
	if body.Messages == nil {
		msgs = []store.Message{body.Message}
	} else if body.Message.Role != "" || body.Message.Content != "" {
		return errorf(http.StatusBadRequest, "invalid_request", "give one message or {\"messages\": [...]}, not both")
	}
	if err := s.checkItems("messages", len(msgs)); err != nil {
		return err
	}
	for i := range msgs {
		msgs[i].TokenCounts = nil // counted by the store, never taken from a client
	}
	agent := r.URL.Query().Get("agent")
	if agent != "" {
		if err := store.ValidateID(store.Limits{}, "agent", agent); err != nil {
			return err
		}
	}
	stored, err := s.st.AppendMessages(r.Context(), tenant(r.Context()), r.PathValue("session"), msgs...)
	if err != nil {
		s.metrics.storeError("append_messages", err)
		return err
	}
	// By the agent's policy (?agent=), in the background: the append does not wait for it.
	s.eng.ScheduleCompaction(r.Context(), engine.CompactRequest{Session: r.PathValue("session"), Agent: agent})
	writeJSON(w, http.StatusCreated, map[string][]store.Message{"messages": stored})
	return nil
}

// Pages of GET /v1/sessions/{session}/messages.
const (
	// DefaultMessagePage is how many messages a listing returns without a limit.
	DefaultMessagePage = 100
	// MaxMessagePage is the largest limit a listing takes; a larger one is refused (400), not cut.
	MaxMessagePage = 1000
)

// messagePage is the answer of GET /v1/sessions/{session}/messages.
type messagePage struct {
	Messages []store.Message `json:"messages"` // oldest first
	// NextBefore is the before of the page of older messages, absent when this page holds the first.
	NextBefore int64 `json:"next_before,omitempty"`
}

// queryLimit is the request's limit query parameter: def when it has none, an invalid_request error
// unless it is an integer from 1 to most.
func queryLimit(r *http.Request, def, most int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, errorf(http.StatusBadRequest, "invalid_request", "limit must be an integer from 1 to %d", most)
	}
	return n, nil
}

// listMessages serves a page of the session's messages: the newest limit of those before the seq before
// (the newest of all without it), oldest first, and next_before for the older page. Reading with each
// answer's next_before until it is absent returns every message once.
func (s *Server) listMessages(w http.ResponseWriter, r *http.Request) error {
	limit, err := queryLimit(r, DefaultMessagePage, MaxMessagePage)
	if err != nil {
		return err
	}
	before := int64(0)
	if v := r.URL.Query().Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return errorf(http.StatusBadRequest, "invalid_request", "before must be a positive integer (a seq)")
		}
		before = n
	}
	// One more than the page tells whether there is an older page.
	msgs, err := s.st.Messages(r.Context(), tenant(r.Context()), r.PathValue("session"), store.MessageQuery{Before: before, Limit: limit + 1})
	if err != nil {
		s.metrics.storeError("messages", err)
		return err
	}
	page := messagePage{Messages: msgs}
	if len(msgs) > limit {
		page.Messages = msgs[1:]
		page.NextBefore = page.Messages[0].Seq
	}
	if page.Messages == nil {
		page.Messages = []store.Message{}
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// apiErrorBody is the error member of an answer that says more beside it (compact's).
type apiErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// compactBody is the body of POST /v1/sessions/{session}/compact.
type compactBody struct {
	Agent string `json:"agent,omitempty"`
	Force bool   `json:"force,omitempty"`
}

// compact compacts the session now and answers with the result and the session's summary record: 200
// when it compacted or had nothing to do, 409 when another compaction holds the session, 502 when the
// summarizer failed (the record says why), 400 without a summarizer.
func (s *Server) compact(w http.ResponseWriter, r *http.Request) error {
	var body compactBody
	if err := s.decode(r, &body); err != nil {
		return err
	}
	res, err := s.eng.Compact(r.Context(), engine.CompactRequest{Session: r.PathValue("session"), Agent: body.Agent, Force: body.Force})
	switch {
	case errors.Is(err, engine.ErrCompactionBusy):
		writeJSON(w, http.StatusConflict, map[string]any{"error": apiErrorBody{Code: "compaction_busy",
			Message: "another compaction of the session is under way"}, "result": res.Result, "summary": res.Summary})
		return nil
	case errors.Is(err, engine.ErrCompactionFailed):
		s.log.Warn("compaction failed", "session", r.PathValue("session"), "err", err)
		writeJSON(w, http.StatusBadGateway, map[string]any{"error": apiErrorBody{Code: "summarizer_failed",
			Message: "the summarizer failed; the summary record's last_error says why, and retry_at when to try again"},
			"result": res.Result, "summary": res.Summary})
		return nil
	case err != nil:
		s.metrics.storeError("compact", err)
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// getSummary serves the session's summary record: the summary, the range it covers, and its compaction's
// state (a claim under way, the failures in a row, the last error and when the next try may start).
func (s *Server) getSummary(w http.ResponseWriter, r *http.Request) error {
	sum, err := s.st.Summary(r.Context(), tenant(r.Context()), r.PathValue("session"))
	if err != nil {
		s.metrics.storeError("get_summary", err)
		return err
	}
	writeJSON(w, http.StatusOK, sum)
	return nil
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) error {
	if err := s.st.DeleteSession(r.Context(), tenant(r.Context()), r.PathValue("session")); err != nil {
		s.metrics.storeError("delete_session", err)
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) appendToolOutput(w http.ResponseWriter, r *http.Request) error {
	var o store.ToolOutput
	if err := s.decode(r, &o); err != nil {
		return err
	}
	stored, err := s.st.AppendToolOutput(r.Context(), tenant(r.Context()), r.PathValue("session"), o)
	if err != nil {
		s.metrics.storeError("append_tool_output", err)
		return err
	}
	writeJSON(w, http.StatusCreated, stored)
	return nil
}

func (s *Server) setKnowledge(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Knowledge []store.Knowledge `json:"knowledge"`
	}
	if err := s.decode(r, &body); err != nil {
		return err
	}
	if err := s.checkItems("knowledge items", len(body.Knowledge)); err != nil {
		return err
	}
	if err := s.st.SetKnowledge(r.Context(), tenant(r.Context()), r.PathValue("session"), body.Knowledge); err != nil {
		s.metrics.storeError("set_knowledge", err)
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) setFact(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Value  string `json:"value"`
		Pinned bool   `json:"pinned"`
		Source string `json:"source"`
	}
	if err := s.decode(r, &body); err != nil {
		return err
	}
	f := store.Fact{Key: r.PathValue("key"), Value: body.Value, Pinned: body.Pinned, Source: body.Source}
	if err := s.st.SetFact(r.Context(), tenant(r.Context()), r.PathValue("user"), f); err != nil {
		s.metrics.storeError("set_fact", err)
		return err
	}
	writeJSON(w, http.StatusOK, f)
	return nil
}

func (s *Server) listFacts(w http.ResponseWriter, r *http.Request) error {
	facts, err := s.st.Facts(r.Context(), tenant(r.Context()), r.PathValue("user"))
	if err != nil {
		s.metrics.storeError("facts", err)
		return err
	}
	if facts == nil {
		facts = []store.Fact{}
	}
	writeJSON(w, http.StatusOK, map[string][]store.Fact{"facts": facts})
	return nil
}

func (s *Server) deleteFact(w http.ResponseWriter, r *http.Request) error {
	if err := s.st.DeleteFact(r.Context(), tenant(r.Context()), r.PathValue("user"), r.PathValue("key")); err != nil {
		s.metrics.storeError("delete_fact", err)
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) putAgent(w http.ResponseWriter, r *http.Request) error {
	var a store.Agent
	if err := s.decode(r, &a); err != nil {
		return err
	}
	id := r.PathValue("agent")
	if a.ID != "" && a.ID != id {
		return errorf(http.StatusBadRequest, "invalid_request", "the body's id %q is not the path's %q", a.ID, id)
	}
	a.ID = id
	if err := s.checkItems("tools", len(a.Tools)); err != nil {
		return err
	}
	if err := s.st.PutAgent(r.Context(), tenant(r.Context()), a); err != nil {
		s.metrics.storeError("put_agent", err)
		return err
	}
	got, err := s.st.GetAgent(r.Context(), tenant(r.Context()), id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, got)
	return nil
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) error {
	a, err := s.st.GetAgent(r.Context(), tenant(r.Context()), r.PathValue("agent"))
	if err != nil {
		s.metrics.storeError("get_agent", err)
		return err
	}
	writeJSON(w, http.StatusOK, a)
	return nil
}

func (s *Server) deleteAgent(w http.ResponseWriter, r *http.Request) error {
	if err := s.st.DeleteAgent(r.Context(), tenant(r.Context()), r.PathValue("agent")); err != nil {
		s.metrics.storeError("delete_agent", err)
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// counterFor returns the counter a body's model or encoding names, and what to report about it.
func counterFor(model, encoding string) (c tokenizer.Counter, name, enc string, exact bool, err error) {
	switch {
	case model != "" && encoding != "":
		return nil, "", "", false, errorf(http.StatusBadRequest, "invalid_request", "give a model or an encoding, not both")
	case model != "":
		m, err := tokenizer.ForModel(model)
		if err != nil {
			return nil, "", "", false, err
		}
		enc = m.Encoding
		if !m.Exact() {
			enc = "estimate"
		}
		return m.Counter(), m.Name, enc, m.Exact(), nil
	default:
		if encoding == "" {
			encoding = tokenizer.CL100KBase
		}
		e, err := tokenizer.Get(encoding)
		if err != nil {
			return nil, "", "", false, err
		}
		return e, "", e.Name(), true, nil
	}
}

// countTokens counts a text ({"text"}, with a model or an encoding) or a whole provider request
// ({"request"}, a Chat Completions or Messages API body, counted by promptcount as loom tokens --request
// counts it: "provider" names its shape, "model" the model of a body that names none).
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Text     *string `json:"text"`
		Model    string  `json:"model"`
		Encoding string  `json:"encoding"`
		// Request is bounded by the body's limit, not one text's: promptcount applies the per-text limit
		// to each of its texts.
		Request  json.RawMessage `json:"request" textlimit:"body"`
		Provider string          `json:"provider"`
	}
	if err := s.decode(r, &body); err != nil {
		return err
	}
	if body.Request != nil {
		switch {
		case body.Text != nil:
			return errorf(http.StatusBadRequest, "invalid_request", "give a text or a request, not both")
		case body.Encoding != "":
			return errorf(http.StatusBadRequest, "invalid_request", "a request is counted as its model; encoding does not apply")
		}
		c, err := promptcount.CountRequest(r.Context(), body.Request, promptcount.Options{
			Shape: body.Provider, Model: body.Model, Provider: s.providerCount,
			Limits: promptcount.Limits{MaxBytes: int(s.limits.MaxBodyBytes), MaxTextBytes: s.limits.MaxMessageBytes, MaxItems: s.limits.MaxItems}})
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, c)
		return nil
	}
	if body.Provider != "" {
		return errorf(http.StatusBadRequest, "invalid_request", "provider names the shape of a request")
	}
	if body.Text == nil {
		return errorf(http.StatusBadRequest, "invalid_request", "text or request is required")
	}
	c, model, enc, exact, err := counterFor(body.Model, body.Encoding)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": c.Count(*body.Text), "encoding": enc, "model": model, "exact": exact, "bytes": len(*body.Text)})
	return nil
}

// chunkJSON is one chunk in POST /v1/chunk's answer, as loom chunk prints it.
type chunkJSON struct {
	Index    int               `json:"index"`
	Start    int               `json:"start"`
	End      int               `json:"end"`
	Tokens   int               `json:"tokens"`
	Text     string            `json:"text"`
	Metadata map[string]string `json:"metadata"`
}

func (s *Server) chunk(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Text         *string `json:"text"`
		Strategy     string  `json:"strategy"`
		ChunkSize    int     `json:"chunk_size"`
		ChunkOverlap *int    `json:"chunk_overlap"`
		Language     string  `json:"language"`
		Model        string  `json:"model"`
		Encoding     string  `json:"encoding"`
	}
	if err := s.decode(r, &body); err != nil {
		return err
	}
	if body.Text == nil {
		return errorf(http.StatusBadRequest, "invalid_request", "text is required")
	}
	if body.ChunkSize != 0 && body.ChunkSize < engine.MinChunkSize {
		return errorf(http.StatusBadRequest, "invalid_request", "chunk_size %d is below the least, %d tokens", body.ChunkSize, engine.MinChunkSize)
	}
	c, _, _, _, err := counterFor(body.Model, body.Encoding)
	if err != nil {
		return err
	}
	if body.Strategy == "" {
		body.Strategy = chunker.DefaultStrategy
	}
	// The engine's strategies: without a parsing code chunker registered (a build without cgo), "code" is
	// chunked as plain text and its chunks say so in their metadata.
	ch, err := s.eng.Chunkers().Lookup(body.Strategy)
	if err != nil {
		return err
	}
	// The chunker stops as soon as the answer would pass the item limit, rather than after chunking all.
	opts := &chunker.Options{Strategy: body.Strategy, ChunkSize: body.ChunkSize, Counter: c, Language: body.Language, MaxChunks: s.limits.MaxItems}
	if body.ChunkOverlap != nil {
		opts.ChunkOverlap = *body.ChunkOverlap
		opts.NoOverlap = *body.ChunkOverlap == 0
	}
	chunks, err := ch.Chunk(r.Context(), *body.Text, opts)
	if errors.Is(err, chunker.ErrTooManyChunks) {
		return errorf(http.StatusRequestEntityTooLarge, "too_large", "the text makes more than %d chunks, the limit of one response", s.limits.MaxItems)
	}
	if err != nil {
		if chunker.IsOptionError(err) || r.Context().Err() != nil {
			return err
		}
		return fmt.Errorf("chunk: %w", err)
	}
	if err := s.checkItems("chunks in the response", len(chunks)); err != nil {
		return err
	}
	out := make([]chunkJSON, len(chunks))
	for i, c := range chunks {
		meta := c.Metadata
		if meta == nil {
			meta = map[string]string{}
		}
		out[i] = chunkJSON{Index: c.Index, Start: c.StartOffset, End: c.EndOffset, Tokens: c.TokenCount, Text: c.Content, Metadata: meta}
	}
	writeJSON(w, http.StatusOK, map[string][]chunkJSON{"chunks": out})
	return nil
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) error {
	if err := s.st.Ping(r.Context()); err != nil {
		s.metrics.storeError("ping", err)
		return errorf(http.StatusServiceUnavailable, "unavailable", "the store is not reachable")
	}
	if s.ready != nil {
		if err := s.ready(); err != nil {
			markRoutine(r.Context()) // not ready yet (loading at start): expected, not a failure
			return errorf(http.StatusServiceUnavailable, "not_ready", "%s", err)
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	return nil
}
