package usage

import (
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the usage series: per tenant and chain (tenants and keys are
// bounded by the configuration, chains too; methods are left out, which
// the table keeps), and the writer's own.
type metrics struct {
	calls, credits, errs, bytes *prometheus.CounterVec
	droppedCalls                prometheus.Counter
	buffered                    prometheus.Gauge
	written                     prometheus.Counter
	flushErrors                 prometheus.Counter

	mu       sync.Mutex
	children map[[2]string]*children
}

type children struct{ calls, credits, errs, bytes prometheus.Counter }

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Subsystem: "usage", Name: "calls_total",
			Help: "Calls of tenants (or keys without one), by tenant and chain."}, []string{"tenant", "chain"}),
		credits: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Subsystem: "usage", Name: "credits_total",
			Help: "Credits tenants' calls cost, by tenant and chain."}, []string{"tenant", "chain"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Subsystem: "usage", Name: "errors_total",
			Help: "Tenants' calls answered with an error, by tenant and chain."}, []string{"tenant", "chain"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Subsystem: "usage", Name: "bytes_out_total",
			Help: "Bytes of the answers to tenants' calls, by tenant and chain."}, []string{"tenant", "chain"}),
		droppedCalls: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "venn", Subsystem: "usage", Name: "dropped_calls_total",
			Help: "Calls whose usage was not kept: the buffer was full while Postgres could not take it."}),
		buffered: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "venn", Subsystem: "usage", Name: "buffered_rows",
			Help: "Usage rows held in memory, not yet written to Postgres."}),
		written: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "venn", Subsystem: "usage", Name: "rows_written_total",
			Help: "Usage rows written (added) to Postgres."}),
		flushErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "venn", Subsystem: "usage", Name: "flush_errors_total",
			Help: "Usage flushes Postgres refused; their rows are kept for the next."}),
		children: make(map[[2]string]*children),
	}
	if reg != nil {
		m.calls = register(reg, m.calls)
		m.credits = register(reg, m.credits)
		m.errs = register(reg, m.errs)
		m.bytes = register(reg, m.bytes)
		m.droppedCalls = register(reg, m.droppedCalls)
		m.buffered = register(reg, m.buffered)
		m.written = register(reg, m.written)
		m.flushErrors = register(reg, m.flushErrors)
	}
	return m
}

// children are the series of tenant on chain, made on first use.
func (m *metrics) childrenOf(tenant, chain string) *children {
	k := [2]string{tenant, chain}
	m.mu.Lock()
	defer m.mu.Unlock()
	ch := m.children[k]
	if ch == nil {
		ch = &children{calls: m.calls.WithLabelValues(tenant, chain), credits: m.credits.WithLabelValues(tenant, chain),
			errs: m.errs.WithLabelValues(tenant, chain), bytes: m.bytes.WithLabelValues(tenant, chain)}
		m.children[k] = ch
	}
	return ch
}

func (ch *children) observe(c counts) {
	ch.calls.Add(float64(c.calls))
	if c.credits > 0 {
		ch.credits.Add(float64(c.credits))
	}
	if c.errors > 0 {
		ch.errs.Add(float64(c.errors))
	}
	ch.bytes.Add(float64(c.bytesOut))
}

func (m *metrics) dropped(calls int64) {
	if calls > 0 {
		m.droppedCalls.Add(float64(calls))
	}
}

// register registers c, or returns the collector already registered in its
// place (a second Recorder on the same registry).
func register[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	var are prometheus.AlreadyRegisteredError
	switch err := reg.Register(c); {
	case err == nil:
		return c
	case errors.As(err, &are):
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing
		}
	}
	panic(fmt.Sprintf("usage: register metrics of %T", c))
}
