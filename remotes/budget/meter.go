package budget

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Budgets are counted cluster-wide without a Redis call per client call:
// each remote counts what it sends in an atomic (Bill), and the pool's
// budget loop (Run) adds those counts to the cluster's counter every
// FlushInterval, one pipelined round trip for all of the chain's
// budgeted remotes, learning the cluster's total in the same reply.
// Between flushes a remote's use is that total plus what this replica
// counted since, so selection sees its own spending at once and the
// others' within a flush interval. Without a store (no Redis) the counts
// are this process's own.
//
// What is counted is every call sent to the remote, venn's own included
// (head polls, chain checks, the eth_subscribe of a heads or relayed
// subscription): providers bill those too. A units budget also counts
// each subscription notification received, at its cost table's
// NotificationMethod entry (none: free), as providers that bill
// notifications do; a calls budget does not, a notification is not a
// call. Only what this replica's own connections carry is counted: a
// follower in a cluster takes its heads from the leader's feed, so the
// leader's newHeads subscriptions are the ones billed.

// FlushInterval is how often a pool adds its counts to the store.
const FlushInterval = time.Second

// Budget pressure: from soft of its budget a remote's share of its tier
// falls, linearly, to floor of its weight at the budget; past it the
// remote is used only when no other can take the call.
const (
	soft  = 0.8
	floor = 0.05
)

// flushTimeout bounds one flush: a slow Redis must not pile up flushes,
// and counts that did not go are added to the next one.
const flushTimeout = 2 * time.Second

// Store keeps the cluster's budget counters (redisstore.NewBudgets).
type Store interface {
	// Add adds each count's N to its counter, which expires at Expire,
	// and sets each Total to the counter's value after the add, or
	// Failed when the add did not happen or may not have: the caller
	// sends those again, so a count is never lost, at worst added twice.
	// The error, for the log, is set when any count failed or an expiry
	// was not set.
	Add(ctx context.Context, chain string, counts []Count) error
}

// Count is one remote's count for one period.
type Count struct {
	Remote string
	Period string // the period's name (Period.Bounds)
	N      int64
	Expire time.Time
	Total  int64 // set by Add
	Failed bool  // set by Add: N was not added, or may not have been
}

// Meter is a remote's budget at run time; nil is no budget, and its
// methods take it so. Bill, Used, Over and Share run on the hot path;
// Flush is the only other writer.
type Meter struct {
	remote string
	log    *slog.Logger
	limit  float64
	per    Period
	cost   costTable
	counts bool  // in units priced by cost, not calls
	notify int64 // units a notification costs (NotificationMethod)

	pending atomic.Int64 // counted here since the last flush
	shared  atomic.Int64 // the period's total as of the last flush

	gauge prometheus.Gauge

	mu     sync.Mutex
	period string // the current period's name
	end    time.Time
	warned int     // 1: logged at soft, 2: logged exhausted, this period
	carry  []Count // counts of ended periods a flush failed to add
}

// New is the meter of b for the remote named remote, or nil when b is
// not set. gauge shows the share used; log is the remote's.
func New(b Config, remote string, gauge prometheus.Gauge, log *slog.Logger) *Meter {
	if !b.Set() {
		return nil
	}
	m := &Meter{remote: remote, log: log, limit: float64(b.limit()), per: b.Per, cost: compileCost(b.Cost), counts: b.Units > 0, gauge: gauge}
	if m.counts {
		m.notify = int64(min(b.Cost[NotificationMethod], math.MaxInt32))
	}
	return m
}

// Bill counts one call of method sent to the remote, or, with
// NotificationMethod, one subscription notification received from it.
func (m *Meter) Bill(method string) {
	if m == nil {
		return
	}
	n := int64(1)
	switch {
	case method == NotificationMethod:
		n = m.notify
	case m.counts:
		n = int64(min(m.cost.of(method), math.MaxInt32))
	}
	if n > 0 {
		m.pending.Add(n)
	}
}

// Used is the share of its budget the remote has used this period, as
// this replica knows it (0 without a budget).
func (m *Meter) Used() float64 {
	if m == nil {
		return 0
	}
	return float64(m.shared.Load()+m.pending.Load()) / m.limit
}

// Over reports a remote past its budget: used only when nothing else can
// take the call.
func (m *Meter) Over() bool { return m != nil && m.Used() >= 1 }

// Share is the remote's weight in its tier's draw: its configured weight,
// scaled down as it nears its budget.
func (m *Meter) Share(weight float64) float64 {
	if m == nil {
		return weight
	}
	if u := m.Used(); u > soft {
		weight *= 1 - (1-floor)*min(u-soft, 1-soft)/(1-soft)
	}
	return weight
}

// Run flushes every FlushInterval until ctx ends, and once more then, so
// a stopping replica's last counts are not lost. flush is the pool's
// (Flush over its members), now its clock.
func Run(ctx context.Context, now func() time.Time, flush func(context.Context, time.Time)) {
	t := time.NewTicker(FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
			flush(fctx, now())
			cancel()
			return
		case <-t.C:
			fctx, cancel := context.WithTimeout(ctx, flushTimeout)
			flush(fctx, now())
			cancel()
		}
	}
}

// Flush adds the meters' counts to store (or, with none, to their own
// totals), then updates their gauges and logs. The error is the store's,
// for the log.
func Flush(ctx context.Context, store Store, chain string, now time.Time, ms []*Meter) error {
	if len(ms) == 0 {
		return nil
	}
	var counts []Count
	starts := make([]int, len(ms)) // ms[i]'s counts begin at counts[starts[i]]
	for i, m := range ms {
		starts[i] = len(counts)
		counts = m.take(now, counts)
	}
	var err error
	if store != nil {
		err = store.Add(ctx, chain, counts)
	}
	for i, m := range ms {
		end := len(counts)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		m.settle(counts[starts[i]:end], store != nil)
		m.note()
	}
	return err
}

// take appends to counts what the meter has to flush: counts of ended
// periods a flush failed to add, then what was counted since the last
// flush, under the period it was counted in. When now is past that
// period the meter rolls to the next one and a zero count of it follows,
// to learn its total. So the last count is always the current period's.
// What was billed between the period's end and this flush is counted in
// the ended period: the split is as fine as a flush interval.
func (m *Meter) take(now time.Time, counts []Count) []Count {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.carry {
		if now.Before(c.Expire) { // past it, its counter is gone: too late
			counts = append(counts, Count{Remote: m.remote, Period: c.Period, N: c.N, Expire: c.Expire})
		}
	}
	m.carry = m.carry[:0]
	if m.period == "" {
		m.rollLocked(now)
	}
	counts = append(counts, Count{Remote: m.remote, Period: m.period, Expire: m.end.Add(time.Hour), N: m.pending.Swap(0)})
	if !now.Before(m.end) && m.rollLocked(now) {
		counts = append(counts, Count{Remote: m.remote, Period: m.period, Expire: m.end.Add(time.Hour)})
	}
	return counts
}

// settle takes in the outcome of flushing counts (take's): a count the
// store did not add is sent again, with the next flush, and the current
// period's total is what the store answered. Without a store the counts
// are the total.
func (m *Meter) settle(counts []Count, stored bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range counts {
		switch {
		case c.Period != m.period && (!stored || !c.Failed):
			// An ended period's count: added, or without a store of no
			// further use.
		case !stored:
			m.shared.Add(c.N)
		case c.Failed && c.Period == m.period:
			m.pending.Add(c.N)
		case c.Failed:
			m.carry = append(m.carry, c)
		default:
			m.shared.Store(c.Total)
		}
	}
}

// rollLocked starts the period holding now when it is not the current
// one, and reports whether it did. m.mu is held.
func (m *Meter) rollLocked(now time.Time) bool {
	_, end, name := m.per.Bounds(now)
	if name == m.period {
		return false
	}
	m.period, m.end, m.warned = name, end, 0
	m.shared.Store(0)
	return true
}

// note sets the meter's gauge and logs, once a period each, that it
// passed soft and that it used its budget.
func (m *Meter) note() {
	u := m.Used()
	m.gauge.Set(u)
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case u >= 1 && m.warned < 2:
		m.warned = 2
		m.log.Warn("remote budget used: it now takes calls only when no other remote can",
			"used", u, "period", m.period)
	case u >= soft && m.warned < 1:
		m.warned = 1
		m.log.Warn("remote budget nearly used: its share of calls falls", "used", u, "period", m.period)
	}
}

// Inherit carries a replaced remote's count of this period over to m, its
// replacement (a reload changed the remote's settings): without a store
// the count would otherwise start again from nothing.
func (m *Meter) Inherit(old *Meter) {
	if m == nil || old == nil || m.per != old.per {
		return
	}
	old.mu.Lock()
	period, end, warned, carry := old.period, old.end, old.warned, old.carry
	old.carry = nil
	old.mu.Unlock()
	m.mu.Lock()
	m.period, m.end, m.warned, m.carry = period, end, warned, carry
	m.mu.Unlock()
	m.shared.Store(old.shared.Load())
	m.pending.Store(old.pending.Swap(0))
}

// Metrics are the budget series.
type Metrics struct {
	used *prometheus.GaugeVec // chain, remote
}

// NewMetrics makes the series and registers them with reg, if not nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		used: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Subsystem: "remote", Name: "budget_used_ratio",
			Help: "Share of a remote's budget used this period, across the cluster as this replica last learned it."},
			[]string{"chain", "remote"}),
	}
	if reg != nil {
		reg.MustRegister(m.used)
	}
	return m
}

// Used is venn_remote_budget_used_ratio of a chain's remote.
func (m *Metrics) Used(chain, remote string) prometheus.Gauge {
	return m.used.WithLabelValues(chain, remote)
}

// DeletePartialMatch deletes the series matching labels (a removed
// remote's or chain's).
func (m *Metrics) DeletePartialMatch(labels prometheus.Labels) int {
	return m.used.DeletePartialMatch(labels)
}
