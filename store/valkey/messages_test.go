package valkey_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	valkeygo "github.com/valkey-io/valkey-go"

	"github.com/context-loom/loom/internal/valkeytest"
	"github.com/context-loom/loom/store"
	"github.com/context-loom/loom/store/valkey"
)

// TestNative_ReadsOnlyWhatTheBoundKeeps: with MaxTokens, the native layout counts on the server and sends
// back only the messages it keeps. The message just past the bound, whose value the client could not
// decode, and an older one that is not even JSON are never read, by Messages or by Load.
func TestNative_ReadsOnlyWhatTheBoundKeeps(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	prefix := fmt.Sprintf("bound%d", prefixes.Add(1))
	s := open(t, valkey.Options{Prefix: prefix}, addr)
	ctx := t.Context()
	var msgs []store.Message
	for i := range 40 {
		msgs = append(msgs, store.Message{Role: []string{"user", "assistant"}[i%2], Content: fmt.Sprintf("turn %d", i)})
	}
	if _, err := s.AppendMessages(ctx, "acme", "s", msgs...); err != nil {
		t.Fatal(err)
	}
	key := prefix + ":{t:acme:s:s}:msgs"
	do(t, addr, "LSET", key, "35", `{"seq":36,"role":"user","content":"\q","token_counts":{"cl100k_base":1000000,"o200k_base":1000000}}`)
	do(t, addr, "LSET", key, "4", "not JSON")
	if _, err := s.Messages(ctx, "acme", "s", store.MessageQuery{}); err == nil {
		t.Fatal("the values do not decode, yet reading them all succeeded")
	}
	got, err := s.Messages(ctx, "acme", "s", store.MessageQuery{MaxTokens: 200})
	if err != nil || fmt.Sprint(seqsOf(got)) != "[37 38 39 40]" {
		t.Fatalf("MaxTokens 200: seqs %v (%v), want [37 38 39 40]", seqsOf(got), err)
	}
	snap, err := s.Load(ctx, "acme", store.LoadQuery{Session: "s", MaxTokens: 200})
	if err != nil || snap.Errors[store.SourceHistory] != nil || fmt.Sprint(seqsOf(snap.Messages)) != "[37 38 39 40]" || snap.NextBefore != 37 {
		t.Fatalf("Load with MaxTokens 200: seqs %v, next before %d (%v, %v)", seqsOf(snap.Messages), snap.NextBefore, err, snap.Errors)
	}
}

// byteCounter counts the bytes read from the connections it dials.
type byteCounter struct{ n atomic.Int64 }

func (b *byteCounter) dial(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
	c, err := d.DialContext(ctx, "tcp", dst)
	if err != nil {
		return nil, err
	}
	return &readCounted{Conn: c, b: b}, nil
}

type readCounted struct {
	net.Conn
	b *byteCounter
}

func (c *readCounted) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.b.n.Add(int64(n))
	return n, err
}

// TestLoad_ReadsWhatTheBudgetCanUse: a Load bounded by 500 tokens of a session of 2,000 messages of about
// 1 KB reads tens of kilobytes, not the megabyte of its 1,000 newest messages, and stays one round trip
// once the server has the script (package cookbook checks its layout alike).
func TestLoad_ReadsWhatTheBudgetCanUse(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 22) // ~1 KB, ~220 tokens
	addr := valkeytest.Start(t)
	prefix := fmt.Sprintf("budget%d", prefixes.Add(1))
	bytes := &byteCounter{}
	writes := &writeCounter{match: []byte(":")}
	dial := func(ctx context.Context, dst string, d *net.Dialer, c *tls.Config) (net.Conn, error) {
		conn, err := bytes.dial(ctx, dst, d, c)
		if err != nil {
			return nil, err
		}
		return &countedConn{Conn: conn, w: writes, dst: dst}, nil
	}
	s := open(t, valkey.Options{Prefix: prefix, Client: valkeygo.ClientOption{DialCtxFn: dial}}, addr)
	tenant := "acme"
	ctx := t.Context()
	batch := make([]store.Message, 500)
	for i := range batch {
		batch[i] = store.Message{Role: []string{"user", "assistant"}[i%2], Content: text}
	}
	for range 4 {
		if _, err := s.AppendMessages(ctx, tenant, "long", batch...); err != nil {
			t.Fatal(err)
		}
	}
	q := store.LoadQuery{Session: "long", MaxTokens: 500, CountToolCalls: true}
	if _, err := s.Load(ctx, tenant, q); err != nil { // the server learns the script
		t.Fatal(err)
	}
	bytes.n.Store(0)
	writes.take()
	snap, err := s.Load(ctx, tenant, q)
	read, w := bytes.n.Load(), total(writes.take())
	if err != nil || len(snap.Messages) != 2 || snap.NextBefore != 1999 {
		t.Fatalf("Load: %d messages, next before %d (%v), want 2 and 1999", len(snap.Messages), snap.NextBefore, err)
	}
	if limit := int64(16 * 1100); read > limit {
		t.Errorf("Load read %d bytes, more than %d", read, limit)
	}
	if w != 1 {
		t.Errorf("Load made %d writes, want one round trip", w)
	}
}

// BenchmarkMessages reads the newest messages of a session of 1,000 (about 60 tokens each) from a server
// on loopback: 150 of them by count (one LRANGE), or as many as 8,000 tokens hold (about as many, counted
// on the server).
func BenchmarkMessages(b *testing.B) {
	s := open(b, valkey.Options{Prefix: fmt.Sprintf("benchmsgs%d", prefixes.Add(1))}, valkeytest.Start(b))
	ctx := context.Background()
	msgs := make([]store.Message, 1000)
	for i := range msgs {
		msgs[i] = store.Message{Role: []string{"user", "assistant"}[i%2], Content: strings.Repeat("upgrade my plan ", 5+i%20)}
	}
	if _, err := s.AppendMessages(ctx, "acme", "s", msgs...); err != nil {
		b.Fatal(err)
	}
	for _, q := range []store.MessageQuery{{Limit: 150}, {MaxTokens: 8000, CountToolCalls: true}} {
		b.Run(fmt.Sprintf("limit=%d/tokens=%d", q.Limit, q.MaxTokens), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				got, err := s.Messages(ctx, "acme", "s", q)
				if err != nil || len(got) < 100 {
					b.Fatalf("%d messages (%v)", len(got), err)
				}
			}
		})
	}
}

func seqsOf(msgs []store.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Seq
	}
	return out
}
