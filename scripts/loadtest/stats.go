package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// percentile returns the p-th percentile (0 < p <= 100) of sorted, which is in ascending order, by the
// nearest-rank method: the smallest value that at least p percent of the values do not exceed. It returns
// 0 for no values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// tally counts a run's responses by status and keeps the latencies of the successful ones. One goroutine
// owns a tally; merge joins them at the end.
type tally struct {
	latencies []time.Duration // of 2xx responses
	statuses  map[string]int  // by status, "transport" for transport errors
	degraded  int             // 200s of assemblies flagged degraded
}

func newTally() *tally { return &tally{statuses: map[string]int{}} }

// add counts r.
func (t *tally) add(r response) {
	key := strconv.Itoa(r.status)
	if r.err != nil {
		key = "transport"
	}
	t.statuses[key]++
	if r.status >= 200 && r.status <= 299 {
		t.latencies = append(t.latencies, r.latency)
	}
}

// merge adds o's counts to t.
func (t *tally) merge(o *tally) {
	t.latencies = append(t.latencies, o.latencies...)
	for k, n := range o.statuses {
		t.statuses[k] += n
	}
	t.degraded += o.degraded
}

// total counts every response.
func (t *tally) total() int {
	n := 0
	for _, c := range t.statuses {
		n += c
	}
	return n
}

// failed counts the responses that were not 2xx.
func (t *tally) failed() int { return t.total() - len(t.latencies) }

// latencySummary is the distribution of a tally's latencies.
type latencySummary struct {
	n                       int
	mean, p50, p90, p99, mx time.Duration
}

// summary sorts the latencies and summarizes them.
func (t *tally) summary() latencySummary {
	slices.Sort(t.latencies)
	s := latencySummary{n: len(t.latencies), p50: percentile(t.latencies, 50), p90: percentile(t.latencies, 90),
		p99: percentile(t.latencies, 99)}
	if s.n == 0 {
		return s
	}
	var sum time.Duration
	for _, d := range t.latencies {
		sum += d
	}
	s.mean, s.mx = sum/time.Duration(s.n), t.latencies[s.n-1]
	return s
}

// statusList formats the counts by status, such as "200: 1234, 503: 5", or "none".
func (t *tally) statusList() string {
	if len(t.statuses) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(t.statuses)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, t.statuses[k]))
	}
	return strings.Join(parts, ", ")
}

// ms formats d in milliseconds with a precision that suits it.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v < 10:
		return fmt.Sprintf("%.2f ms", v)
	case v < 100:
		return fmt.Sprintf("%.1f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}
