package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/assembler"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/tokenizer"
)

// RecordOptions say which assemblies the engine records in their session for the inspector, and how
// many: an assembly of a session the store holds anything of (messages, tool outputs, knowledge) is
// recorded after it is assembled, where the store keeps records (store.Store.Assemblies). The zero value
// records with the defaults.
type RecordOptions struct {
	// Off records no assembly.
	Off bool
	// Keep is how many of a session's newest records are kept; 0 means store.DefaultAssembliesKept.
	Keep int
	// MaxBytes bounds one record; 0 means store.DefaultMaxAssemblyBytes. A record over it goes without the
	// rendered output (Recorded.OutputOmitted), and if that is still too large it is not recorded.
	MaxBytes int
}

// WithAssemblyRecords sets what the engine records of its assemblies (see RecordOptions); by default it
// records every assembly of a stored session, the newest store.DefaultAssembliesKept of each kept.
// RecordOptions{Off: true} turns recording off.
func WithAssemblyRecords(o RecordOptions) Option {
	return func(e *Engine) error {
		if o.Keep < 0 || o.MaxBytes < 0 {
			return fmt.Errorf("%w: assembly records' keep and max bytes must not be negative", ErrInvalidRequest)
		}
		e.records = o
		return nil
	}
}

// Recording reports whether the engine records assemblies: it was not told not to, and its store keeps
// records.
func (e *Engine) Recording() bool { return !e.records.Off && e.store.Assemblies() }

// Recorded is one assembly as its session's record keeps it: what was asked, the model's window, the
// result (its report, prefix hash and, unless OutputOmitted, its rendered output) and the sources it went
// without.
type Recorded struct {
	Seq     int64           `json:"seq"`
	Time    time.Time       `json:"time"`
	Request RecordedRequest `json:"request"`
	// Window is the model's context window in tokens (0 when the model is not known).
	Window int `json:"window,omitempty"`
	// Result is the assembly's result; with OutputOmitted, without what it rendered (messages, system,
	// text, input, contents, context, tools), which did not fit the record's bound.
	Result        *assembler.Result `json:"result"`
	OutputOmitted bool              `json:"output_omitted,omitempty"`
	Degraded      []Degradation     `json:"degraded,omitempty"`
}

// RecordedRequest is what a record keeps of its request.
type RecordedRequest struct {
	Agent   string `json:"agent,omitempty"`
	User    string `json:"user,omitempty"`
	Session string `json:"session"`
	// Message is the request's new message, its first MaxRecordedMessageBytes bytes.
	Message      string `json:"message,omitempty"`
	Model        string `json:"model,omitempty"`
	MaxTokens    int    `json:"max_tokens,omitempty"`
	Format       string `json:"format,omitempty"`
	Preset       string `json:"preset,omitempty"`
	HistoryLimit int    `json:"history_limit,omitempty"`
}

// MaxRecordedMessageBytes is how much of a request's message its record keeps.
const MaxRecordedMessageBytes = 1024

// record records the assembly of req in its session, if the engine records and the snapshot shows the
// session stored. A record that cannot be written is left out: the assembly it describes has succeeded,
// and the inspector shows what was recorded.
func (e *Engine) record(ctx context.Context, req *Request, snap *store.Snapshot, res *Result) {
	if e.records.Off || req.NoRecord || req.Session == "" || !e.store.Assemblies() ||
		len(snap.Messages)+len(snap.ToolOutputs)+len(snap.Knowledge) == 0 {
		return
	}
	msg := req.Message
	if len(msg) > MaxRecordedMessageBytes {
		cut := MaxRecordedMessageBytes
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
	}
	rec := Recorded{
		Request: RecordedRequest{Agent: req.Agent, User: req.User, Session: req.Session, Message: msg,
			Model: req.Model, MaxTokens: req.MaxTokens, Format: req.Format, Preset: req.Preset, HistoryLimit: req.HistoryLimit},
		Result:   res.Result,
		Degraded: res.Degraded,
	}
	if m, err := tokenizer.ForModel(res.Model); err == nil {
		rec.Window = m.ContextWindow
	}
	maxBytes := cmp.Or(e.records.MaxBytes, store.DefaultMaxAssemblyBytes)
	data, err := json.Marshal(rec)
	if err == nil && len(data) > maxBytes {
		bare := *res.Result
		bare.Messages, bare.System, bare.SystemBlocks, bare.Tools, bare.Text = nil, "", nil, nil, ""
		bare.Instructions, bare.Input, bare.SystemInstruction, bare.Contents, bare.Context = "", nil, nil, nil, ""
		rec.Result, rec.OutputOmitted = &bare, true
		data, err = json.Marshal(rec)
	}
	if err != nil || len(data) > maxBytes {
		return
	}
	_, _ = e.store.RecordAssembly(ctx, loom.Tenant(ctx), req.Session, data, e.records.Keep, maxBytes) // see the doc comment
}

// Assemblies returns the session's recorded assemblies, newest first; none for a session without any. It
// returns an error wrapping store.ErrUnsupported when the store keeps no records.
func (e *Engine) Assemblies(ctx context.Context, session string) ([]Recorded, error) {
	recs, err := e.store.AssemblyRecords(ctx, loom.Tenant(ctx), session)
	if err != nil {
		return nil, err
	}
	out := make([]Recorded, 0, len(recs))
	for _, r := range recs {
		rec, err := decodeRecord(r)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// Assembly returns the session's recorded assembly seq; an error wrapping store.ErrNotFound when there is
// none of that seq.
func (e *Engine) Assembly(ctx context.Context, session string, seq int64) (Recorded, error) {
	r, err := e.store.AssemblyRecord(ctx, loom.Tenant(ctx), session, seq)
	if err != nil {
		return Recorded{}, err
	}
	return decodeRecord(r)
}

func decodeRecord(r store.AssemblyRecord) (Recorded, error) {
	var rec Recorded
	if err := json.Unmarshal(r.Data, &rec); err != nil {
		return Recorded{}, fmt.Errorf("decode assembly record %d: %w", r.Seq, err)
	}
	rec.Seq, rec.Time = r.Seq, r.Time
	return rec, nil
}
