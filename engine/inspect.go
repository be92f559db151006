package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
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
//
// An engine records only when told to (WithAssemblyRecords): a record costs about as much CPU as the
// assembly it records (encoding its rendered output) and one store write, which a library user who does
// not look at the inspector should not pay. `loom serve`, the inspector's home, records by default.
type RecordOptions struct {
	// Off records no assembly.
	Off bool
	// Keep is how many of a session's newest records are kept; 0 means store.DefaultAssembliesKept.
	Keep int
	// MaxBytes bounds one record; 0 means store.DefaultMaxAssemblyBytes. A record over it goes without the
	// rendered output (Recorded.OutputOmitted), and if that is still too large it is not recorded.
	MaxBytes int
}

// WithAssemblyRecords turns recording on and sets what the engine records of its assemblies (see
// RecordOptions): with the zero value, every assembly of a stored session, the newest
// store.DefaultAssembliesKept of each kept. Without it, or with RecordOptions{Off: true}, the engine
// records none.
func WithAssemblyRecords(o RecordOptions) Option {
	return func(e *Engine) error {
		if o.Keep < 0 || o.MaxBytes < 0 {
			return fmt.Errorf("%w: assembly records' keep and max bytes must not be negative", ErrInvalidRequest)
		}
		e.records, e.recordsOn = o, !o.Off
		return nil
	}
}

// Recording reports whether the engine records assemblies: it was told to (WithAssemblyRecords), and its
// store keeps records.
func (e *Engine) Recording() bool { return e.rec != nil }

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

// recorded reports whether the assembly of req is recorded: the engine records, the request does not say
// otherwise, and the snapshot shows the session stored. A recorded assembly counts the items it drops
// (assembler.Request.CountDropped), for the inspector to show.
func (e *Engine) recorded(req *Request, snap *store.Snapshot) bool {
	return e.rec != nil && !req.NoRecord && req.Session != "" &&
		len(snap.Messages)+len(snap.ToolOutputs)+len(snap.Knowledge) > 0
}

// record queues the assembly of req for its session's records, if the engine records and the snapshot
// shows the session stored. The record is encoded and written by the engine's recorder, off the
// assembly's path (see recorder); one that cannot be written is left out: the assembly it describes has
// succeeded, and the inspector shows what was recorded.
func (e *Engine) record(ctx context.Context, req *Request, snap *store.Snapshot, res *Result) {
	if !e.recorded(req, snap) {
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
	result := *res.Result // the fields as returned; Assemble's caller treats the result as read-only
	e.rec.add(recordJob{tenant: loom.Tenant(ctx), rec: Recorded{
		Request: RecordedRequest{Agent: req.Agent, User: req.User, Session: req.Session, Message: msg,
			Model: req.Model, MaxTokens: req.MaxTokens, Format: req.Format, Preset: req.Preset, HistoryLimit: req.HistoryLimit},
		Result:   &result,
		Degraded: slices.Clone(res.Degraded),
	}})
}

// recordJob is one assembly to record.
type recordJob struct {
	tenant string
	rec    Recorded
}

// recordQueue is how many assemblies may wait for the recorder; past it, an assembly goes unrecorded
// (Engine.RecordsDropped counts them) rather than wait.
const recordQueue = 256

// recorder encodes and writes assembly records on a goroutine of its own, so that an assembly pays
// nothing for being recorded but a queue send. It is the engine's: Close stops it after it has written
// what was queued.
type recorder struct {
	e       *Engine
	jobs    chan recordJob
	done    chan struct{}
	mu      sync.Mutex
	cond    *sync.Cond
	pending int // queued or being written
	dropped atomic.Int64
	closed  bool
}

func newRecorder(e *Engine) *recorder {
	r := &recorder{e: e, jobs: make(chan recordJob, recordQueue), done: make(chan struct{})}
	r.cond = sync.NewCond(&r.mu)
	go r.run()
	return r
}

func (r *recorder) add(j recordJob) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	select {
	case r.jobs <- j:
		r.pending++
	default:
		r.dropped.Add(1)
	}
}

func (r *recorder) run() {
	defer close(r.done)
	for j := range r.jobs {
		r.write(j)
		r.mu.Lock()
		r.pending--
		if r.pending == 0 {
			r.cond.Broadcast()
		}
		r.mu.Unlock()
	}
}

// write encodes and stores one record: without its rendered output if it is over the bound, not at all
// if it is still over.
func (r *recorder) write(j recordJob) {
	rec := j.rec
	if m, err := tokenizer.ForModel(rec.Result.Model); err == nil {
		rec.Window = m.ContextWindow
	}
	maxBytes := cmp.Or(r.e.records.MaxBytes, store.DefaultMaxAssemblyBytes)
	data, err := json.Marshal(rec)
	if err == nil && len(data) > maxBytes {
		bare := *rec.Result
		bare.Messages, bare.System, bare.SystemBlocks, bare.Tools, bare.Text = nil, "", nil, nil, ""
		bare.Instructions, bare.Input, bare.SystemInstruction, bare.Contents, bare.Context = "", nil, nil, nil, ""
		rec.Result, rec.OutputOmitted = &bare, true
		data, err = json.Marshal(rec)
	}
	if err != nil || len(data) > maxBytes {
		r.dropped.Add(1)
		return
	}
	// The engine's own context: the request that was recorded may be over, the engine not.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.e.closing), r.e.sourceTimeout)
	defer cancel()
	if _, err := r.e.store.RecordAssembly(ctx, j.tenant, rec.Request.Session, data, r.e.records.Keep, maxBytes); err != nil {
		r.dropped.Add(1)
	}
}

// flush waits until what was queued before it is written, or ctx is done.
func (r *recorder) flush(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.cond.Broadcast()
	})
	defer stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.pending > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		r.cond.Wait()
	}
	return nil
}

// close stops taking records and waits until the queued ones are written.
func (r *recorder) close() {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.jobs)
	}
	r.mu.Unlock()
	<-r.done
}

// FlushRecords waits until the assemblies recorded before it was called are in the store (or left out:
// see RecordsDropped), or ctx is done. Records are written in the background, so a reader that must see
// the record of an assembly it just made (a test, say) calls it first.
func (e *Engine) FlushRecords(ctx context.Context) error {
	if e.rec == nil {
		return nil
	}
	return e.rec.flush(ctx)
}

// RecordsDropped is how many assemblies went unrecorded though recording was on: the recorder's queue was
// full, the record was too large even without its output, or the store refused it.
func (e *Engine) RecordsDropped() int64 {
	if e.rec == nil {
		return 0
	}
	return e.rec.dropped.Load()
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
