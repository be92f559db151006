// Package kvserver serves a small in-memory key-value store over HTTP.
//
// It exists to exercise the code chunker: a realistic mix of types, methods, functions, constants and
// variables, with doc comments.
package kvserver

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Limits of the store.
const (
	MaxKeyLength   = 256
	MaxValueLength = 1 << 20
)

// ErrNotFound is returned for a key the store does not hold.
var ErrNotFound = errors.New("kvserver: key not found")

// Store holds values by key. The zero value is not usable; call NewStore.
type Store struct {
	mu      sync.RWMutex
	values  map[string]entry
	expires bool // whether entries expire at all
}

type entry struct {
	value   []byte
	expires time.Time
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{values: make(map[string]entry)}
}

// Get returns the value of key, or ErrNotFound.
func (s *Store) Get(key string, now time.Time) ([]byte, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.values[key]
	if !ok || (!e.expires.IsZero() && now.After(e.expires)) {
		return nil, ErrNotFound
	}
	return e.value, nil
}

// Put stores value under key until ttl has passed (for ever when ttl is 0).
func (s *Store) Put(key string, value []byte, ttl time.Duration, now time.Time) error {
	if len(key) == 0 || len(key) > MaxKeyLength {
		return errors.New("kvserver: bad key length")
	}
	if len(value) > MaxValueLength {
		return errors.New("kvserver: value too large")
	}
	e := entry{value: append([]byte(nil), value...)}
	if ttl > 0 {
		e.expires = now.Add(ttl)
		s.expires = true
	}
	s.mu.Lock()
	s.values[key] = e
	s.mu.Unlock()
	return nil
}

// Sweep drops the entries that have expired and returns how many it dropped.
func (s *Store) Sweep(now time.Time) int {
	if !s.expires {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, e := range s.values {
		if !e.expires.IsZero() && now.After(e.expires) {
			delete(s.values, k)
			n++
		}
	}
	return n
}

// Server is the HTTP face of a Store.
type Server struct {
	Store *Store
	Now   func() time.Time
}

// ServeHTTP answers GET and PUT on /kv/{key}.
func (srv *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, ok := strings.CutPrefix(r.URL.Path, "/kv/")
	if !ok || key == "" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	now := time.Now()
	if srv.Now != nil {
		now = srv.Now()
	}
	switch r.Method {
	case http.MethodGet:
		value, err := srv.Store.Get(key, now)
		if errors.Is(err, ErrNotFound) {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(value)
	case http.MethodPut:
		var body struct {
			Value string `json:"value"`
			TTL   string `json:"ttl"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, "bad body: "+err.Error(), http.StatusBadRequest)
			return
		}
		var ttl time.Duration
		if body.TTL != "" {
			d, err := time.ParseDuration(body.TTL)
			if err != nil {
				http.Error(w, "bad ttl: "+err.Error(), http.StatusBadRequest)
				return
			}
			ttl = d
		}
		if err := srv.Store.Put(key, []byte(body.Value), ttl, now); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, PUT")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

func main() {
	srv := &Server{Store: NewStore()}
	_ = http.ListenAndServe("localhost:8080", srv) // a demo, not a daemon
}
