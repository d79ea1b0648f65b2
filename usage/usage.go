// Package usage keeps what tenants' calls cost, to bill from: per tenant,
// chain, method and UTC day, the calls, credits, errors and bytes
// answered. The edge adds each answered message to a Recorder (memory,
// under a lock, never I/O; a series it resolved once, per tenant, chain
// and method, so no lookup); a Writer drains it into Postgres
// (the usage_daily table, migrations/sql/00005_usage.sql) every flush
// interval, one statement per batch, off the call path. While Postgres is
// down the rows stay in memory, bounded: calls that find the buffer full
// are dropped and counted (venn_usage_dropped_calls_total). Query reads
// the table back for the admin API and `venn usage`.
//
// It owns the usage table and nothing of the edge: tenants and methods
// arrive bounded (configured names, known methods or "other").
package usage

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxRows bounds the rows a Recorder holds before they are
// written: days × tenants × chains × methods, which a flush empties. Only
// a long Postgres outage fills it.
const DefaultMaxRows = 200_000

// Recorder adds up usage in memory until a Writer takes it.
type Recorder struct {
	now     func() time.Time
	maxRows int
	keep    bool // rows are kept for a Writer
	m       *metrics

	mu   sync.Mutex
	rows map[rowKey]*counts
	gen  uint64 // rows' generation: each take starts a new one
	// series hold, per tenant, chain and method, the metric children and
	// the current row, so that a call is added under one lock with one
	// map lookup (none through Series). Remade on demand; emptied when it
	// reaches maxRows (a series handed out keeps working).
	series map[seriesKey]*series
}

type seriesKey struct{ tenant, chain, method string }

// series is what a tenant's calls of one method on one chain add to.
type series struct {
	r   *Recorder
	key seriesKey
	ch  *children
	// r.mu:
	day int64
	gen uint64
	row *counts // rows[{day, ...}] while gen is rows'; nil: none yet, or the rows were full
}

// RecorderOptions configure a Recorder; zero fields take defaults.
type RecorderOptions struct {
	MaxRows int // default DefaultMaxRows
	// MetricsOnly keeps no rows, only the metrics: without Postgres.
	MetricsOnly bool
	Clock       func() time.Time // default time.Now; dates the rows Add adds (Series takes its caller's time)
	Registerer  prometheus.Registerer
}

// NewRecorder returns an empty Recorder.
func NewRecorder(opts RecorderOptions) *Recorder {
	if opts.MaxRows <= 0 {
		opts.MaxRows = DefaultMaxRows
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	return &Recorder{now: opts.Clock, maxRows: opts.MaxRows, keep: !opts.MetricsOnly, m: newMetrics(opts.Registerer),
		rows: make(map[rowKey]*counts), series: make(map[seriesKey]*series)}
}

// Add counts calls of method on chain by tenant, today (UTC). It never
// blocks on I/O; with the buffer full, a row not yet held is dropped and
// its calls counted as dropped.
func (r *Recorder) Add(tenant, chain, method string, calls, credits, errors, bytesOut int64) {
	r.seriesOf(tenant, chain, method).add(r.now(), calls, credits, errors, bytesOut)
}

// Series resolves tenant's calls of method on chain once, for a caller
// that adds to them often (the edge, per tenant, chain and method): the
// function it returns is Add without the lookup, dated by now (UTC) rather
// than the Recorder's clock.
func (r *Recorder) Series(tenant, chain, method string) func(now time.Time, calls, credits, errors, bytesOut int64) {
	return r.seriesOf(tenant, chain, method).add
}

// seriesOf is the series of tenant, chain and method, made on first use.
func (r *Recorder) seriesOf(tenant, chain, method string) *series {
	sk := seriesKey{tenant: tenant, chain: chain, method: method}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.series[sk]
	if s == nil {
		if len(r.series) >= r.maxRows {
			clear(r.series)
		}
		s = &series{r: r, key: sk, ch: r.m.childrenOf(tenant, chain)}
		r.series[sk] = s
	}
	return s
}

// add counts calls of s at now: one lock, no lookup while s's row is the
// current one.
func (s *series) add(now time.Time, calls, credits, errors, bytesOut int64) {
	r := s.r
	day := now.Unix() / 86400
	c := counts{calls: calls, credits: credits, errors: errors, bytesOut: bytesOut}
	ok := true
	if r.keep {
		r.mu.Lock()
		if s.row == nil || s.gen != r.gen || s.day != day {
			s.day, s.gen, s.row = day, r.gen, r.rowLocked(rowKey{day: day, tenant: s.key.tenant, chain: s.key.chain, method: s.key.method})
		}
		if ok = s.row != nil; ok {
			s.row.add(c)
		}
		r.mu.Unlock()
	}
	s.ch.observe(c)
	if !ok {
		r.m.dropped(calls)
	}
}

// rowLocked is k's row, made (empty) unless the rows are full: then nil.
// r.mu is held.
func (r *Recorder) rowLocked(k rowKey) *counts {
	if have := r.rows[k]; have != nil {
		return have
	}
	if len(r.rows) >= r.maxRows {
		return nil
	}
	c := new(counts)
	r.rows[k] = c
	r.m.buffered.Set(float64(len(r.rows)))
	return c
}

func (r *Recorder) addLocked(k rowKey, c counts) bool {
	row := r.rowLocked(k)
	if row == nil {
		return false
	}
	row.add(c)
	return true
}

// take empties the Recorder and returns what it held.
func (r *Recorder) take() map[rowKey]*counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.rows
	r.rows = make(map[rowKey]*counts, len(out))
	r.gen++
	r.m.buffered.Set(0)
	return out
}

// giveBack returns rows a write failed to store, to be written next time;
// rows that no longer fit are dropped and counted.
func (r *Recorder) giveBack(rows map[rowKey]*counts) {
	var dropped int64
	r.mu.Lock()
	for k, c := range rows {
		if !r.addLocked(k, *c) {
			dropped += c.calls
		}
	}
	r.mu.Unlock()
	r.m.dropped(dropped)
}

// Pending returns the rows held, not yet written, in no order: for tests
// and the admin API's view of the last minutes.
func (r *Recorder) Pending() []Row {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Row, 0, len(r.rows))
	for k, c := range r.rows {
		out = append(out, k.row(*c))
	}
	return out
}

func (k rowKey) row(c counts) Row {
	return Row{Day: time.Unix(k.day*86400, 0).UTC(), Tenant: k.tenant, Chain: k.chain, Method: k.method,
		Calls: c.calls, Credits: c.credits, Errors: c.errors, BytesOut: c.bytesOut}
}
