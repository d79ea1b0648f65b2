package remotes

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Budgets are counted cluster-wide without a Redis call per client call:
// each remote counts what it sends in an atomic (bill), and the pool's
// budget loop adds those counts to the cluster's counter every
// BudgetFlushInterval, one pipelined round trip for all of the chain's
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
// notificationMethod entry (none: free), as providers that bill
// notifications do; a calls budget does not, a notification is not a
// call. Only what this replica's own connections carry is counted: a
// follower in a cluster takes its heads from the leader's feed
// (feed.go), so the leader's newHeads subscriptions are the ones billed.

// BudgetFlushInterval is how often a pool adds its counts to the store.
const BudgetFlushInterval = time.Second

// Budget pressure: from budgetSoft of its budget a remote's share of its
// tier falls, linearly, to budgetFloor of its weight at the budget; past
// it the remote is used only when no other can take the call.
const (
	budgetSoft  = 0.8
	budgetFloor = 0.05
)

// budgetFlushTimeout bounds one flush: a slow Redis must not pile up
// flushes, and counts that did not go are added to the next one.
const budgetFlushTimeout = 2 * time.Second

// BudgetStore keeps the cluster's budget counters (redisstore.NewBudgets).
type BudgetStore interface {
	// Add adds each count's N to its counter, which expires at Expire,
	// and sets each Total to the counter's value after the add, or
	// Failed when the add did not happen or may not have: the caller
	// sends those again, so a count is never lost, at worst added twice.
	// The error, for the log, is set when any count failed or an expiry
	// was not set.
	Add(ctx context.Context, chain string, counts []BudgetCount) error
}

// BudgetCount is one remote's count for one period.
type BudgetCount struct {
	Remote string
	Period string // the period's name (Period.bounds)
	N      int64
	Expire time.Time
	Total  int64 // set by Add
	Failed bool  // set by Add: N was not added, or may not have been
}

// budget is a remote's budget at run time. bill and used run on the hot
// path; flush, the pool's budget loop, is the only other writer.
type budget struct {
	limit  float64
	per    Period
	cost   costTable
	counts bool  // in units priced by cost, not calls
	notify int64 // units a notification costs (notificationMethod)

	pending atomic.Int64 // counted here since the last flush
	shared  atomic.Int64 // the period's total as of the last flush

	gauge prometheus.Gauge

	mu     sync.Mutex
	period string // the current period's name
	end    time.Time
	warned int           // 1: logged at budgetSoft, 2: logged exhausted, this period
	carry  []BudgetCount // counts of ended periods a flush failed to add
}

func newBudget(b Budget, gauge prometheus.Gauge) *budget {
	if !b.Set() {
		return nil
	}
	bud := &budget{limit: float64(b.limit()), per: b.Per, cost: compileCost(b.Cost), counts: b.Units > 0, gauge: gauge}
	if bud.counts {
		bud.notify = int64(min(b.Cost[notificationMethod], math.MaxInt32))
	}
	return bud
}

// bill counts one call of method sent to the remote, or, with
// notificationMethod, one subscription notification received from it.
func (r *Remote) bill(method string) {
	b := r.bud
	if b == nil {
		return
	}
	n := int64(1)
	switch {
	case method == notificationMethod:
		n = b.notify
	case b.counts:
		n = int64(min(b.cost.of(method), math.MaxInt32))
	}
	if n > 0 {
		b.pending.Add(n)
	}
}

// budgetUsed is the share of its budget the remote has used this period,
// as this replica knows it (0 without a budget).
func (r *Remote) budgetUsed() float64 {
	b := r.bud
	if b == nil {
		return 0
	}
	return float64(b.shared.Load()+b.pending.Load()) / b.limit
}

// overBudget reports a remote past its budget: used only when nothing else
// can take the call.
func (r *Remote) overBudget() bool { return r.bud != nil && r.budgetUsed() >= 1 }

// share is the remote's weight in its tier's draw: its configured weight,
// scaled down as it nears its budget.
func (r *Remote) share() float64 {
	w := r.weight
	if r.bud == nil {
		return w
	}
	if u := r.budgetUsed(); u > budgetSoft {
		f := 1 - (1-budgetFloor)*min(u-budgetSoft, 1-budgetSoft)/(1-budgetSoft)
		w *= f
	}
	return w
}

// budgetLoop flushes the members' counts every BudgetFlushInterval until
// ctx ends, and once more then, so a stopping replica's last counts are
// not lost.
func (p *Pool) budgetLoop(ctx context.Context) {
	t := time.NewTicker(BudgetFlushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), budgetFlushTimeout)
			p.flushBudgets(fctx, p.now())
			cancel()
			return
		case <-t.C:
			fctx, cancel := context.WithTimeout(ctx, budgetFlushTimeout)
			p.flushBudgets(fctx, p.now())
			cancel()
		}
	}
}

// flushBudgets adds every budgeted member's counts to the store (or, with
// none, to its own total), then updates their gauges and logs.
func (p *Pool) flushBudgets(ctx context.Context, now time.Time) {
	var (
		rs     []*Remote
		counts []BudgetCount
		starts []int // rs[i]'s counts begin at counts[starts[i]]
	)
	for _, r := range p.members() {
		b := r.bud
		if b == nil {
			continue
		}
		rs = append(rs, r)
		starts = append(starts, len(counts))
		counts = b.take(now, r.Name(), counts)
	}
	if len(rs) == 0 {
		return
	}
	store := p.conf().Budgets
	var err error
	if store != nil {
		err = store.Add(ctx, p.conf().Chain, counts)
	}
	for i, r := range rs {
		end := len(counts)
		if i+1 < len(starts) {
			end = starts[i+1]
		}
		r.bud.settle(counts[starts[i]:end], store != nil)
		r.noteBudget()
	}
	if err != nil {
		p.budgetErr(err)
	}
}

// take appends to counts what the budget has to flush: counts of ended
// periods a flush failed to add, then what was counted since the last
// flush, under the period it was counted in. When now is past that
// period the budget rolls to the next one and a zero count of it follows,
// to learn its total. So the last count is always the current period's.
// What was billed between the period's end and this flush is counted in
// the ended period: the split is as fine as a flush interval.
func (b *budget) take(now time.Time, remote string, counts []BudgetCount) []BudgetCount {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.carry {
		if now.Before(c.Expire) { // past it, its counter is gone: too late
			counts = append(counts, BudgetCount{Remote: remote, Period: c.Period, N: c.N, Expire: c.Expire})
		}
	}
	b.carry = b.carry[:0]
	if b.period == "" {
		b.rollLocked(now)
	}
	counts = append(counts, BudgetCount{Remote: remote, Period: b.period, Expire: b.end.Add(time.Hour), N: b.pending.Swap(0)})
	if !now.Before(b.end) && b.rollLocked(now) {
		counts = append(counts, BudgetCount{Remote: remote, Period: b.period, Expire: b.end.Add(time.Hour)})
	}
	return counts
}

// settle takes in the outcome of flushing counts (take's): a count the
// store did not add is sent again, with the next flush, and the current
// period's total is what the store answered. Without a store the counts
// are the total.
func (b *budget) settle(counts []BudgetCount, stored bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range counts {
		switch {
		case c.Period != b.period && (!stored || !c.Failed):
			// An ended period's count: added, or without a store of no
			// further use.
		case !stored:
			b.shared.Add(c.N)
		case c.Failed && c.Period == b.period:
			b.pending.Add(c.N)
		case c.Failed:
			b.carry = append(b.carry, c)
		default:
			b.shared.Store(c.Total)
		}
	}
}

// budgetErr logs a failed flush, at most once a minute.
func (p *Pool) budgetErr(err error) {
	now := p.now().UnixNano()
	if last := p.budgetLogAt.Load(); now-last < int64(time.Minute) || !p.budgetLogAt.CompareAndSwap(last, now) {
		return
	}
	p.log.Warn("budget counts not flushed; counting locally until the store answers", "err", err)
}

// rollLocked starts the period holding now when it is not the current
// one, and reports whether it did. b.mu is held.
func (b *budget) rollLocked(now time.Time) bool {
	_, end, name := b.per.bounds(now)
	if name == b.period {
		return false
	}
	b.period, b.end, b.warned = name, end, 0
	b.shared.Store(0)
	return true
}

// noteBudget sets the remote's gauge and logs, once a period each, that it
// passed budgetSoft and that it used its budget.
func (r *Remote) noteBudget() {
	b := r.bud
	u := r.budgetUsed()
	b.gauge.Set(u)
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case u >= 1 && b.warned < 2:
		b.warned = 2
		r.log.Warn("remote budget used: it now takes calls only when no other remote can",
			"used", u, "period", b.period)
	case u >= budgetSoft && b.warned < 1:
		b.warned = 1
		r.log.Warn("remote budget nearly used: its share of calls falls", "used", u, "period", b.period)
	}
}

// budgetMetrics are the budget series.
type budgetMetrics struct {
	used *prometheus.GaugeVec // chain, remote
}

func newBudgetMetrics(reg prometheus.Registerer) *budgetMetrics {
	m := &budgetMetrics{
		used: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Subsystem: "remote", Name: "budget_used_ratio",
			Help: "Share of a remote's budget used this period, across the cluster as this replica last learned it."},
			[]string{"chain", "remote"}),
	}
	if reg != nil {
		reg.MustRegister(m.used)
	}
	return m
}

// inherit carries a replaced remote's count of this period over to b, its
// replacement (a reload changed the remote's settings): without a store
// the count would otherwise start again from nothing.
func (b *budget) inherit(old *budget) {
	if b == nil || old == nil || b.per != old.per {
		return
	}
	old.mu.Lock()
	period, end, warned, carry := old.period, old.end, old.warned, old.carry
	old.carry = nil
	old.mu.Unlock()
	b.mu.Lock()
	b.period, b.end, b.warned, b.carry = period, end, warned, carry
	b.mu.Unlock()
	b.shared.Store(old.shared.Load())
	b.pending.Store(old.pending.Swap(0))
}
