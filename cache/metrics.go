package cache

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// sizeTimeout bounds one tier's Size at a scrape.
const sizeTimeout = time.Second

// closing is a cache's switch from counting to not. ifOpen runs f, which
// resolves a series, only while the cache is open, and close waits for
// those running: once Close returns, no call still on the cache makes a
// series again, and DropChain's deletes hold.
type closing struct {
	mu     sync.RWMutex
	closed bool
}

func (g *closing) ifOpen(f func()) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if !g.closed {
		f()
	}
}

func (g *closing) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// Metrics are the response caches' series, one set for every chain.
type Metrics struct {
	requests    *prometheus.CounterVec
	evictions   *prometheus.CounterVec
	storeErrors *prometheus.CounterVec
	proofs      *prometheus.CounterVec
	distrusted  *prometheus.CounterVec

	mu          sync.Mutex
	caches      []*Cache
	bytesDesc   *prometheus.Desc
	entriesDesc *prometheus.Desc
}

// NewMetrics registers the caches' metrics on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "venn", Name: "cache_requests_total",
			Help: "Cache lookups of calls in the cached set, by tier and outcome: hit, miss or error " +
				"per tier asked; bypass (the client asked for a fresh answer) and unkeyed (the call's block " +
				"is not fixed: a tag not pinned, pending, a number the head window does not know), claimed (another " +
				"replica's answer, after its claim) and unpinned (a near-head miss no remote had the block of by hash, " +
				"answered by number and not stored) and unadmitted (a near-head miss asked for the first time while " +
				"one-off misses flood in, answered by number and not stored) with tier \"any\"; stored per tier an " +
				"answer was written to.",
		}, []string{"chain", "method", "tier", "outcome"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "venn", Name: "cache_evictions_total",
			Help: "Entries a tier dropped, by reason: size (room for others), expired, reorg (its block was orphaned).",
		}, []string{"chain", "tier", "reason"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "venn", Name: "cache_store_errors_total",
			Help: "Failed tier operations (get, set, claim, delete, size); each is a miss, never a client's error.",
		}, []string{"chain", "tier", "op"}),
		proofs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "venn", Name: "cache_proof_checks_total",
			Help: "Provable state answers checked against their block's state root before they are stored (cache.verify: proofs), " +
				"by result: verified (stored), mismatch (the proof verifies and the answer is not what it proves: not stored, " +
				"the proved state served), bad_proof (the proof does not verify), no_proof (no remote answered eth_getProof), " +
				"no_root (the block's state root is not known), unreadable (params venn does not read): not stored, served.",
		}, []string{"chain", "method", "result"}),
		distrusted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "venn", Name: "cache_distrust_purges_total",
			Help: "Purges of a remote's answers since its last good check, made when it was found on another chain " +
				"(wrong_chain), misbehaving (disagree, integrity, bogus_head) or cordoned for it (cordoned). " +
				"The entries they dropped count in venn_cache_evictions_total{reason=\"purge\"}.",
		}, []string{"chain", "remote", "cause"}),
		bytesDesc: prometheus.NewDesc("venn_cache_bytes", "Bytes a tier holds (memory: as weighed against memory_bytes).",
			[]string{"chain", "tier"}, nil),
		entriesDesc: prometheus.NewDesc("venn_cache_entries", "Entries a tier holds.", []string{"chain", "tier"}, nil),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.evictions, m.storeErrors, m.proofs, m.distrusted, m)
	}
	return m
}

// watch adds c's tiers to the bytes and entries gauges.
func (m *Metrics) watch(c *Cache) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.caches = append(m.caches, c)
}

// unwatch takes c's tiers out of the gauges: c was closed, and a cache
// that replaced it (a reload) reports the chain's, under the same labels.
func (m *Metrics) unwatch(c *Cache) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.caches = slices.DeleteFunc(m.caches, func(o *Cache) bool { return o == c })
}

// DropChain deletes chain's series, once its cache has been closed for
// good (a reload removed the chain): a cache of the chain built later
// resolves them afresh.
func (m *Metrics) DropChain(chain string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"chain": chain}
	m.requests.DeletePartialMatch(l)
	m.evictions.DeletePartialMatch(l)
	m.proofs.DeletePartialMatch(l)
	m.storeErrors.DeletePartialMatch(l)
	m.distrusted.DeletePartialMatch(l)
}

// Describe implements prometheus.Collector for the gauges.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.bytesDesc
	ch <- m.entriesDesc
}

// Collect asks every tier that can say its size, each bounded by
// sizeTimeout; a tier that fails is left out of the scrape.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	caches := append([]*Cache(nil), m.caches...)
	m.mu.Unlock()
	for _, c := range caches {
		for _, l := range c.tiers {
			s, ok := l.Tier.(Sizer)
			if !ok {
				continue
			}
			ctx, cancel := l.sizeContext(context.Background())
			entries, bytes, err := s.Size(ctx)
			cancel()
			if err != nil {
				l.failed("size", err)
				continue
			}
			ch <- prometheus.MustNewConstMetric(m.bytesDesc, prometheus.GaugeValue, float64(bytes), c.chain, l.name)
			ch <- prometheus.MustNewConstMetric(m.entriesDesc, prometheus.GaugeValue, float64(entries), c.chain, l.name)
		}
	}
}
