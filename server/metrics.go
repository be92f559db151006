package server

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/context-loom/loom/engine"
)

// metrics are the server's Prometheus metrics.
type metrics struct {
	latency     *prometheus.HistogramVec
	tokens      prometheus.Counter
	dropped     *prometheus.CounterVec
	degraded    *prometheus.CounterVec
	storeErrors *prometheus.CounterVec
	shared      prometheus.Histogram
	breaks      *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, eng *engine.Engine) (*metrics, error) {
	m := &metrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "loom_http_request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route and status code.",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"route", "code"}),
		tokens: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "loom_tokens_assembled_total",
			Help: "Tokens of all assembled contexts (their total_tokens).",
		}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_items_dropped_total",
			Help: "Items left out of assemblies, by region and reason.",
		}, []string{"region", "reason"}),
		degraded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_assemblies_degraded_total",
			Help: "Assemblies returned without a source that could not be read, by source.",
		}, []string{"source"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_store_errors_total",
			Help: "Store calls that failed other than for bad input or a missing item, by operation.",
		}, []string{"op"}),
		shared: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "loom_prefix_tokens_shared",
			Help:    "Tokens at the start of a session's assembled prompt that are byte-identical to its previous assembly's (the result's cache.shared_tokens).",
			Buckets: prometheus.ExponentialBuckets(256, 2, 10), // 256 to 131,072
		}),
		breaks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_cache_breaks_total",
			Help: "Session assemblies whose prefix shared with the previous one ended early, by the region that changed first (tools, instructions, memory, summary, history), or first_assembly or format_changed.",
		}, []string{"region"}),
	}
	for _, c := range []prometheus.Collector{m.latency, m.tokens, m.dropped, m.degraded, m.storeErrors, m.shared, m.breaks,
		indexCollector{eng}, compactionCollector{eng}, recordsCollector{eng}, cacheStateCollector{eng}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) observe(route string, status int, d time.Duration) {
	m.latency.WithLabelValues(route, strconv.Itoa(status)).Observe(d.Seconds())
}

func (m *metrics) assembled(res *engine.Result) {
	m.tokens.Add(float64(res.TotalTokens))
	for _, r := range res.Report.Regions {
		for _, d := range r.Dropped {
			m.dropped.WithLabelValues(r.Name.String(), d.Reason).Inc()
		}
	}
	for _, d := range res.Degraded {
		m.degraded.WithLabelValues(d.Source).Inc()
	}
	if c := res.Cache; c != nil {
		m.shared.Observe(float64(c.SharedTokens))
		switch {
		case c.Region != "":
			m.breaks.WithLabelValues(c.Region).Inc()
		case c.Reason != "":
			m.breaks.WithLabelValues(c.Reason).Inc()
		}
	}
}

// storeError counts a store call that failed for the store's sake (isStoreFailure).
func (m *metrics) storeError(op string, err error) {
	if isStoreFailure(err) {
		m.storeErrors.WithLabelValues(op).Inc()
	}
}

// The search indexes' metrics, read from the engine at each scrape.
var (
	indexMemoryDesc = prometheus.NewDesc("loom_index_memory_bytes",
		"Estimated memory of the loaded search indexes.", nil, nil)
	indexMemoryLimitDesc = prometheus.NewDesc("loom_index_memory_limit_bytes",
		"The cap on the search indexes' memory (--index-memory); 0: none.", nil, nil)
	indexesLoadedDesc = prometheus.NewDesc("loom_indexes_loaded",
		"Collections whose search index is loaded.", nil, nil)
	indexBuildsDesc = prometheus.NewDesc("loom_index_builds_total",
		"Search index builds started: first uses, uses after an eviction, rebuilds after the change feed was lost.", nil, nil)
	indexBuildFailuresDesc = prometheus.NewDesc("loom_index_build_failures_total",
		"Search index builds that failed.", nil, nil)
	indexEvictionsDesc = prometheus.NewDesc("loom_index_evictions_total",
		"Idle search indexes evicted to keep under the memory cap.", nil, nil)
)

// indexCollector exports the engine's IndexStats.
type indexCollector struct{ eng *engine.Engine }

func (indexCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{indexMemoryDesc, indexMemoryLimitDesc, indexesLoadedDesc, indexBuildsDesc, indexBuildFailuresDesc, indexEvictionsDesc} {
		ch <- d
	}
}

func (c indexCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.eng.IndexStats()
	ch <- prometheus.MustNewConstMetric(indexMemoryDesc, prometheus.GaugeValue, float64(s.MemoryBytes))
	ch <- prometheus.MustNewConstMetric(indexMemoryLimitDesc, prometheus.GaugeValue, float64(s.MemoryLimit))
	ch <- prometheus.MustNewConstMetric(indexesLoadedDesc, prometheus.GaugeValue, float64(s.Loaded))
	ch <- prometheus.MustNewConstMetric(indexBuildsDesc, prometheus.CounterValue, float64(s.Builds))
	ch <- prometheus.MustNewConstMetric(indexBuildFailuresDesc, prometheus.CounterValue, float64(s.BuildFailures))
	ch <- prometheus.MustNewConstMetric(indexEvictionsDesc, prometheus.CounterValue, float64(s.Evictions))
}

// compactionsDesc is loom_compactions_total, read from the engine at each scrape.
var compactionsDesc = prometheus.NewDesc("loom_compactions_total",
	"Compactions of sessions (background and on demand), by result: compacted, not_needed, busy, backoff, failed, conflict.",
	[]string{"result"}, nil)

// compactionCollector exports the engine's CompactionStats.
type compactionCollector struct{ eng *engine.Engine }

func (compactionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- compactionsDesc }

func (c compactionCollector) Collect(ch chan<- prometheus.Metric) {
	for _, result := range []string{engine.CompactCompacted, engine.CompactNotNeeded, engine.CompactBusy, engine.CompactBackoff,
		engine.CompactFailed, engine.CompactConflict} {
		ch <- prometheus.MustNewConstMetric(compactionsDesc, prometheus.CounterValue, float64(c.eng.CompactionStats()[result]), result)
	}
}

// cacheStateWritesDesc is loom_cache_state_writes_total, read from the engine at each scrape.
var cacheStateWritesDesc = prometheus.NewDesc("loom_cache_state_writes_total",
	"Writes of sessions' cache states (the hashes the next assembly's cache report compares with), made behind the assemblies, by result: written, failed, dropped (too many under way), skipped (a session without stored messages).",
	[]string{"result"}, nil)

// cacheStateCollector exports the engine's CacheStateStats.
type cacheStateCollector struct{ eng *engine.Engine }

func (cacheStateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- cacheStateWritesDesc }

func (c cacheStateCollector) Collect(ch chan<- prometheus.Metric) {
	stats := c.eng.CacheStateStats()
	for _, result := range []string{engine.CacheStateWritten, engine.CacheStateFailed, engine.CacheStateDropped, engine.CacheStateSkipped} {
		ch <- prometheus.MustNewConstMetric(cacheStateWritesDesc, prometheus.CounterValue, float64(stats[result]), result)
	}
}

// recordsDroppedDesc is the count of assemblies that went unrecorded though recording was on.
var recordsDroppedDesc = prometheus.NewDesc("loom_assembly_records_dropped_total",
	"Assemblies the inspector's records left out though recording was on: the recorder's queue was full, the record was too large even without its rendered output, or the store refused it.",
	nil, nil)

// recordsCollector exports the engine's RecordsDropped.
type recordsCollector struct{ eng *engine.Engine }

func (recordsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- recordsDroppedDesc }

func (c recordsCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(recordsDroppedDesc, prometheus.CounterValue, float64(c.eng.RecordsDropped()))
}
