// Package sqlite is Loom's embedded default store: everything in one SQLite file, read and written with
// modernc.org/sqlite (pure Go, no cgo), nothing to set up.
//
// # The file
//
// [Open] creates the file if need be and brings its schema to [SchemaVersion]: numbered migrations, applied
// in one transaction and recorded in the schema_version table. Every table is keyed by tenant first (agents,
// facts, sessions, messages, tool_outputs, knowledge, collections, documents, chunks), so a tenant can name
// any id and never reach another tenant's rows. A session's messages, tool outputs and knowledge belong to
// its row in sessions, which holds its expiry and the next sequence numbers.
//
// # Collections
//
// A store opened here keeps collections too ([store.Store.Collections]): collections, their documents and
// chunks (vectors included, as little-endian float32s) live in the same file, a document's metadata once,
// in its row, and each chunk's own metadata in the chunk's. Keywords are ranked by the engine's in-memory
// index of each collection, not here. Every write to a collection appends to a change feed in the same
// transaction; Changes follows it, and sees the writes of other processes on the file too.
//
// # WAL and durability
//
// The file is in WAL mode: readers never block the writer and the writer never blocks readers. Open
// switches the file to WAL, a mode the file keeps; each connection gets its pragmas (busy_timeout,
// foreign_keys, synchronous) from the DSN, so every pooled connection has them. By default
// synchronous=FULL: a write transaction's WAL frames are fsynced before the commit returns, so an
// acknowledged write survives the process being killed and the machine losing power.
// Options.Synchronous = [SynchronousNormal] skips that fsync: an acknowledged write still survives the
// process being killed (kill -9), since the frames are in the operating system's cache, but the last
// commits may be lost if the machine loses power; writes are then faster.
//
// # Concurrency
//
// A store is safe for concurrent use. All writes go through a single connection, one transaction at a
// time, begun IMMEDIATE: writers from many goroutines queue for it instead of failing with SQLITE_BUSY, and
// a message batch gets its contiguous sequence numbers inside its own transaction, so concurrent appends
// lose nothing and never interleave. Reads use a pool of read-only connections; a Load reads every
// source in one read transaction, one consistent snapshot. Another process may open the same file: SQLite
// locks it, and busy_timeout makes each side wait for the other. Many processes may open a new file at
// once: the switch to WAL, whose lock busy_timeout does not always wait for, is retried on SQLITE_BUSY, and
// only one of them migrates the schema while the others read its version until it is made (rather than
// queue for the write lock), within the busy timeout.
//
// # Expiry
//
// With [store.Options.SessionTTL] set, a session expires that long after its last write. Reads treat an
// expired session as empty at once; a write to it starts it again from seq 1. A goroutine that Close stops
// deletes expired sessions' rows now and then (see Options.CleanupInterval and [Backend.DeleteExpired]).
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/context-loom/loom"
	"github.com/context-loom/loom/collection"
	"github.com/context-loom/loom/store"
)

// Errors of this package; every other error wraps one of store's.
var (
	// ErrNewerSchema is returned by Open for a file written by a newer version of this package.
	ErrNewerSchema = loom.NewError(loom.ErrUnsupported, "sqlite: the file's schema is newer than this build")
)

// Synchronous is how hard a commit waits for the disk: SQLite's synchronous pragma.
type Synchronous int

const (
	// SynchronousFull fsyncs the WAL before every commit returns: an acknowledged write survives a crash of
	// the process and of the machine. The default.
	SynchronousFull Synchronous = iota
	// SynchronousNormal leaves the fsync to checkpoints: an acknowledged write survives a crash of the
	// process, but the newest commits may be lost if the machine loses power.
	SynchronousNormal
)

func (s Synchronous) pragma() (string, error) {
	switch s {
	case SynchronousFull:
		return "FULL", nil
	case SynchronousNormal:
		return "NORMAL", nil
	}
	return "", fmt.Errorf("%w: unknown synchronous mode %d", store.ErrInvalid, int(s))
}

// Options configure a SQLite store. The zero value of each field means its documented default, except
// Path, which must name a file.
type Options struct {
	// Options are the settings every store takes (session TTL, limits, the change feed's length).
	store.Options
	// Path is the database file, created if need be. It must name a file: not ":memory:", not a "file:"
	// URI.
	Path string
	// Synchronous is the durability of a commit; the default is [SynchronousFull].
	Synchronous Synchronous
	// BusyTimeout is how long a statement waits for a lock another process (or a checkpoint) holds before
	// it fails, and how long Open retries the switch to WAL and the migration of a file that others are
	// opening at the same time; 0 means DefaultBusyTimeout.
	BusyTimeout time.Duration
	// CleanupInterval is how often the store deletes the rows of expired sessions when a SessionTTL is
	// set; 0 means every SessionTTL, at least once a second and at most once every
	// DefaultCleanupInterval. A negative interval turns the goroutine off (call [Backend.DeleteExpired]
	// yourself then).
	CleanupInterval time.Duration
	// ReadConns is the size of the read connection pool; 0 means GOMAXPROCS, at least 4.
	ReadConns int
}

// config is what of Options the connections need.
type config struct {
	sync        Synchronous
	busyTimeout time.Duration
	cleanup     time.Duration
	readers     int
}

// Defaults of the options.
const (
	// DefaultBusyTimeout is how long a connection waits for a lock another process holds.
	DefaultBusyTimeout = 10 * time.Second
	// DefaultCleanupInterval is how often expired sessions are deleted, at most; with a shorter SessionTTL,
	// they are deleted every SessionTTL (but not more often than once a second).
	DefaultCleanupInterval = time.Minute
)

// Backend is the store.Backend under a SQLite store: one file. It is also a store.MessageSelector (it
// counts a row from its count columns before it decodes it), a store.Loader (one read transaction) and a
// store.CollectionBackend. It is safe for concurrent use.
type Backend struct {
	opts store.Options
	now  func() time.Time

	wdb    *sql.DB // one connection: every write
	rdb    *sql.DB // the read pool
	wstmts *statements
	rstmts *statements

	// feed is closed and replaced whenever this Backend commits a change to a collection, waking the Changes
	// calls that wait; changes of other processes are polled for.
	feedMu sync.Mutex
	feed   chan struct{}

	closed    atomic.Bool
	closeOnce sync.Once
	stop      context.CancelFunc
	done      chan struct{} // closed when the cleanup goroutine has returned
}

var (
	_ store.Backend           = (*Backend)(nil)
	_ store.MessageSelector   = (*Backend)(nil)
	_ store.Loader            = (*Backend)(nil)
	_ store.SummaryBackend    = (*Backend)(nil)
	_ store.CacheStateBackend = (*Backend)(nil)
	_ store.AssemblyBackend   = (*Backend)(nil)
	_ store.CollectionBackend = (*Backend)(nil)
)

// Open opens the store in the file opts.Path, creating it if need be, and migrates its schema: a
// store.Store over a [Backend]. It returns an error wrapping store.ErrInvalid for a bad path or option,
// ErrNewerSchema for a file of a newer version, and store.ErrUnavailable if the file cannot be opened or
// is not a database. Close the store when done.
func Open(ctx context.Context, opts Options) (*store.Store, error) {
	return openClock(ctx, opts, time.Now)
}

// openClock is Open with the backend's clock, now, which decides when sessions expire.
func openClock(ctx context.Context, opts Options, now func() time.Time) (*store.Store, error) {
	b, err := openBackendClock(ctx, opts, now)
	if err != nil {
		return nil, err
	}
	s, err := store.New(b, opts.Options)
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	return s, nil
}

func openBackend(ctx context.Context, opts Options) (*Backend, error) {
	return openBackendClock(ctx, opts, time.Now)
}

func openBackendClock(ctx context.Context, opts Options, now func() time.Time) (*Backend, error) {
	path := opts.Path
	if path == "" || strings.HasPrefix(path, ":memory:") || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("%w: sqlite: the path must name a file, got %q", store.ErrInvalid, path)
	}
	if opts.SessionTTL < 0 {
		return nil, fmt.Errorf("%w: sqlite: negative session TTL", store.ErrInvalid)
	}
	cfg := config{sync: opts.Synchronous, busyTimeout: opts.BusyTimeout, cleanup: opts.CleanupInterval, readers: opts.ReadConns}
	if cfg.busyTimeout == 0 {
		cfg.busyTimeout = DefaultBusyTimeout
	}
	if cfg.readers == 0 {
		cfg.readers = max(4, runtime.GOMAXPROCS(0))
	}
	syncMode, err := cfg.sync.pragma()
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if cfg.busyTimeout < 0 || cfg.readers < 1 {
		return nil, fmt.Errorf("%w: sqlite: a negative busy timeout or fewer than one read connection", store.ErrInvalid)
	}
	s := &Backend{opts: opts.Options, now: now, feed: make(chan struct{})}

	fail := func(err error) (*Backend, error) {
		_ = s.closeDBs() // the error that made Open fail is the one to report
		if errors.Is(err, ErrNewerSchema) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
		}
		return nil, fmt.Errorf("sqlite: open %s: %w: %w", path, store.ErrUnavailable, err)
	}
	if s.wdb, err = sql.Open("sqlite", dsn(path, cfg, syncMode, connWriter)); err != nil {
		return fail(err)
	}
	s.wdb.SetMaxOpenConns(1)
	s.wdb.SetMaxIdleConns(1)
	s.wdb.SetConnMaxLifetime(0)
	s.wdb.SetConnMaxIdleTime(0)
	if err := setUp(ctx, s.wdb, path, cfg, syncMode); err != nil {
		return fail(err)
	}
	if s.rdb, err = sql.Open("sqlite", dsn(path, cfg, syncMode, connReader)); err != nil {
		return fail(err)
	}
	s.rdb.SetMaxOpenConns(cfg.readers)
	s.rdb.SetMaxIdleConns(cfg.readers)
	s.rdb.SetConnMaxLifetime(0)
	s.rdb.SetConnMaxIdleTime(0)
	if err := s.rdb.PingContext(ctx); err != nil {
		return fail(fmt.Errorf("read pool: %w", err))
	}
	if s.wstmts, err = prepare(ctx, s.wdb, writeQueries); err != nil {
		return fail(fmt.Errorf("prepare writes: %w", err))
	}
	if s.rstmts, err = prepare(ctx, s.rdb, readQueries); err != nil {
		return fail(fmt.Errorf("prepare reads: %w", err))
	}

	s.done = make(chan struct{})
	every := cleanupInterval(opts.SessionTTL, cfg.cleanup)
	if every <= 0 {
		close(s.done)
		s.stop = func() {}
		return s, nil
	}
	cctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go s.cleanup(cctx, every)
	return s, nil
}

// cleanupInterval is how often the cleanup goroutine runs; 0 means it does not.
func cleanupInterval(ttl, set time.Duration) time.Duration {
	switch {
	case ttl <= 0 || set < 0:
		return 0
	case set > 0:
		return set
	}
	return min(max(ttl, time.Second), DefaultCleanupInterval)
}

// setUp switches the file at path to WAL on db, the writer, and migrates its schema, retrying SQLITE_BUSY
// (with backoff) until the busy timeout has passed or ctx ends.
//
// Switching to WAL takes an exclusive lock that SQLite does not always let the busy handler wait for (it
// returns SQLITE_BUSY at once to a connection that holds a read lock, lest two connections wait for each
// other), so the switch is retried.
//
// Migrating takes the write lock, and there the busy handler is the wrong tool: when many processes open a
// new file at once, all but the first find no schema yet, and with the busy handler each would queue for
// the write lock, one after another, only to find the schema made by the first; under load that queue
// outlasts the busy timeout (SQLite's handler polls every 100 ms, first come is not first served). So the
// migration runs on a connection of its own without a busy timeout: an opener that finds the write lock
// taken (most likely by the one that is migrating) gets SQLITE_BUSY at once, waits a little and reads the
// schema's version again. Once the first has committed, the others only read; none of them takes the
// write lock.
func setUp(ctx context.Context, db *sql.DB, path string, cfg config, syncMode string) error {
	until := time.Now().Add(cfg.busyTimeout)
	if err := retryBusy(ctx, until, func() error { return useWAL(ctx, db) }); err != nil {
		return fmt.Errorf("switch to WAL: %w", err)
	}
	mdb, err := sql.Open("sqlite", dsn(path, cfg, syncMode, connMigrate))
	if err != nil {
		return err
	}
	defer mdb.Close()
	mdb.SetMaxOpenConns(1)
	if err := retryBusy(ctx, until, func() error { return migrate(ctx, mdb) }); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// useWAL switches the file to WAL mode (a no-op if it is in WAL mode already); the mode is the file's,
// kept in it, so every connection opened after has it.
func useWAL(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, `PRAGMA journal_mode = WAL`).Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("journal mode is %q, not WAL", mode)
	}
	return nil
}

// retryBusy calls fn until it returns anything but SQLITE_BUSY, ctx is done or until has passed, waiting
// a little longer (with jitter, so that processes that collided do not collide again) after each BUSY:
// from 1 to 3 ms at first, at most 50 to 150 ms.
func retryBusy(ctx context.Context, until time.Time, fn func() error) error {
	wait := 2 * time.Millisecond
	for {
		err := fn()
		if err == nil || !isBusy(err) || ctx.Err() != nil {
			return err
		}
		left := time.Until(until)
		if left <= 0 {
			return err
		}
		d := min(wait/2+rand.N(wait), left)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (or one of its extended codes): another connection
// holds the lock.
func isBusy(err error) bool {
	var coded interface{ Code() int }
	return errors.As(err, &coded) && coded.Code()&0xff == 5 // SQLITE_BUSY
}

// connKind is what a connection is for: each kind has its own DSN.
type connKind int

const (
	connWriter  connKind = iota // the one connection every write goes through
	connReader                  // the read pool: query_only
	connMigrate                 // Open's migration (see setUp): a writer without a busy timeout
)

// dsn is the data source name of path for a connection of the kind. The path is a URI path, with the
// characters a URI gives meaning to escaped; the pragmas are applied to every new connection, busy_timeout
// first (the driver runs it before the others, whatever their order), and none of them takes a lock. None
// switches the journal mode: that takes a lock the busy handler does not always wait for, and a pragma of
// the DSN that fails fails the connection, so Open switches the file to WAL itself (see setUp), retrying.
func dsn(path string, cfg config, syncMode string, kind connKind) string {
	busy := cfg.busyTimeout.Milliseconds()
	if kind == connMigrate {
		busy = 0 // setUp retries SQLITE_BUSY itself
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(busy, 10)+")")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous("+syncMode+")")
	if kind == connReader {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
	}
	escaped := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + escaped + "?" + q.Encode()
}

// cleanup deletes expired sessions every interval until ctx is done. An error is retried at the next tick.
func (s *Backend) cleanup(ctx context.Context, every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_, _ = s.DeleteExpired(ctx)
		}
	}
}

// expiredBatch is how many expired sessions one transaction of DeleteExpired deletes, so that writers
// do not wait long behind it.
const expiredBatch = 256

// DeleteExpired deletes the rows of the sessions that have expired and returns how many sessions it
// deleted. Reads never see expired sessions anyway; this reclaims their space. The store calls it every
// cleanup interval when a SessionTTL is set. It returns an error wrapping store.ErrClosed after Close.
func (s *Backend) DeleteExpired(ctx context.Context) (int, error) {
	total := 0
	for {
		var n int64
		err := s.write(ctx, "delete expired sessions", func(t txn) error {
			res, err := t.exec(qDeleteExpired, s.now().UnixNano(), expiredBatch)
			if err != nil {
				return err
			}
			n, err = res.RowsAffected()
			return err
		})
		total += int(n)
		if err != nil || n < expiredBatch {
			return total, err
		}
	}
}

// Ping implements store.Backend: it queries the file through the read pool. It returns an error wrapping
// store.ErrUnavailable if that fails, and store.ErrClosed after Close.
func (s *Backend) Ping(ctx context.Context) error {
	return s.read(ctx, "ping", func(t txn) error {
		var v int
		return t.scan(qPing, nil, &v)
	})
}

// Close implements store.Backend: it stops the cleanup goroutine, waits for it and closes the file. Calls
// after Close return store.ErrClosed; Close itself may be called again, and then returns nil.
func (s *Backend) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.stop()
		<-s.done
		err = s.closeDBs()
	})
	return err
}

func (s *Backend) closeDBs() error {
	var errs []error
	for _, st := range []*statements{s.rstmts, s.wstmts} {
		if st != nil {
			errs = append(errs, st.close())
		}
	}
	// The readers first: the writer, closing last, checkpoints the WAL into the file.
	for _, db := range []*sql.DB{s.rdb, s.wdb} {
		if db != nil {
			errs = append(errs, db.Close())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlite: close: %w", err)
	}
	return nil
}

// check returns an error if the store is closed or ctx is done.
func (s *Backend) check(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}

// wrap gives err its context and, unless it already matches one, a sentinel of the store package:
// ErrClosed after Close, ctx's error once ctx is done, ErrUnavailable for a failing database.
func (s *Backend) wrap(ctx context.Context, op string, err error) error {
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrTooLarge),
		errors.Is(err, store.ErrClosed), errors.Is(err, store.ErrUnavailable),
		errors.Is(err, collection.ErrNotFound), errors.Is(err, collection.ErrExists):
		return err
	case s.closed.Load():
		return fmt.Errorf("sqlite: %s: %w", op, store.ErrClosed)
	case ctx.Err() != nil:
		return fmt.Errorf("sqlite: %s: %w", op, ctx.Err())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("sqlite: %s: %w", op, err)
	}
	return fmt.Errorf("sqlite: %s: %w: %w", op, store.ErrUnavailable, err)
}

// txn is one transaction with the store's prepared statements.
type txn struct {
	ctx   context.Context
	tx    *sql.Tx
	stmts *statements
}

func (t txn) stmt(query string) (*sql.Stmt, error) {
	st, err := t.stmts.get(query)
	if err != nil {
		return nil, err
	}
	return t.tx.StmtContext(t.ctx, st), nil
}

func (t txn) exec(query string, args ...any) (sql.Result, error) {
	st, err := t.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(t.ctx, args...)
}

func (t txn) query(query string, args ...any) (*sql.Rows, error) {
	st, err := t.stmt(query)
	if err != nil {
		return nil, err
	}
	return st.QueryContext(t.ctx, args...)
}

// scan reads the one row query returns into dest; sql.ErrNoRows if there is none.
func (t txn) scan(query string, args []any, dest ...any) error {
	st, err := t.stmt(query)
	if err != nil {
		return err
	}
	return st.QueryRowContext(t.ctx, args...).Scan(dest...)
}

// read runs fn in a read transaction of the read pool.
func (s *Backend) read(ctx context.Context, op string, fn func(t txn) error) error {
	if err := s.check(ctx); err != nil {
		return s.wrap(ctx, op, err)
	}
	tx, err := s.rdb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return s.wrap(ctx, op, err)
	}
	defer func() { _ = tx.Rollback() }() // a read transaction has nothing to commit
	if err := fn(txn{ctx, tx, s.rstmts}); err != nil {
		return s.wrap(ctx, op, err)
	}
	return nil
}

// write runs fn in a write transaction of the writer connection and commits it if fn returns nil.
func (s *Backend) write(ctx context.Context, op string, fn func(t txn) error) error {
	if err := s.check(ctx); err != nil {
		return s.wrap(ctx, op, err)
	}
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return s.wrap(ctx, op, err)
	}
	if err := fn(txn{ctx, tx, s.wstmts}); err != nil {
		_ = tx.Rollback()
		return s.wrap(ctx, op, err)
	}
	if err := tx.Commit(); err != nil {
		return s.wrap(ctx, op, err)
	}
	return nil
}

// statements are the prepared statements of one *sql.DB, all prepared at Open (a writer's statement
// cannot be prepared later: its one connection is busy with the transaction that needs it). database/sql
// prepares each again on every other connection it runs on, once.
type statements struct {
	m map[string]*sql.Stmt
}

func prepare(ctx context.Context, db *sql.DB, queries []string) (*statements, error) {
	p := &statements{m: make(map[string]*sql.Stmt, len(queries))}
	for _, q := range queries {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			_ = p.close()
			return nil, fmt.Errorf("prepare %q: %w", q, err)
		}
		p.m[q] = st
	}
	return p, nil
}

func (p *statements) get(query string) (*sql.Stmt, error) {
	if st := p.m[query]; st != nil {
		return st, nil
	}
	return nil, fmt.Errorf("sqlite: statement not prepared: %q", query) // a bug: add it to the list
}

func (p *statements) close() error {
	var errs []error
	for _, st := range p.m {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}
