package edge

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/keyspace"
)

// Budgets count the credits tenants spend, per minute and per calendar
// month (UTC). With Redis the count is the cluster's: each replica adds
// what it served to one counter per tenant and period every flush
// interval (INCRBY, one pipeline for every tenant), and learns the total,
// the other replicas' spending included, from the answer. A replica's
// view is that total plus what it has served since: the replicas agree
// within one flush interval, and a tenant can overspend by what the
// cluster serves it in one. Without Redis each process counts alone.
//
// A Budgets outlives configuration reloads (the app owns it); tenants are
// looked up by name.
type Budgets struct {
	rdb   redis.Cmdable // nil: this process alone
	now   func() time.Time
	log   *slog.Logger
	every time.Duration

	mu       sync.Mutex
	accounts map[string]*account
	// The month of the minute last asked about: working out a month
	// (a calendar in UTC) on every call cost more than the rest of it.
	lastMinute, lastMonth int64

	cancel context.CancelFunc
	done   chan struct{}
}

// BudgetsOptions configure Budgets; zero fields take defaults.
type BudgetsOptions struct {
	// Redis holds the cluster's counts; nil: this process alone.
	Redis redis.Cmdable
	// FlushInterval: CreditsConfig.FlushInterval.
	FlushInterval time.Duration
	// Clock, when set, times the periods; for tests.
	Clock  func() time.Time
	Logger *slog.Logger
}

// account is one tenant's spending in its current periods.
type account struct {
	minute, month period
	// limit is the budget last applied to the account (a spend's, a
	// check's, or its tenant's when compiled), by which a flush judges
	// what it learned; bs.mu.
	limit Budget
	// reached is set, under bs.mu, whenever the counts as a spend, a
	// flush or a check leaves them have reached limit. Counts grow only
	// there (with time they can only fall: a new minute or month), so
	// while it is clear a call is admitted without the lock or the
	// clock; once set, a check works the state out under the lock and
	// clears it when a new period has begun.
	reached atomic.Bool
}

// period is a tenant's spending in one minute or month.
type period struct {
	id      int64 // unix minute, or year*100+month
	seen    int64 // the cluster's count at the last flush, ours included
	pending int64 // spent here since, not yet flushed
	flight  int64 // being flushed now
}

// NewBudgets returns empty counters. It does no I/O.
func NewBudgets(opts BudgetsOptions) *Budgets {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = DefaultCreditsFlush
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Budgets{rdb: opts.Redis, now: opts.Clock, log: opts.Logger, every: opts.FlushInterval,
		accounts: make(map[string]*account)}
}

func minuteID(t time.Time) int64 { return t.Unix() / 60 }
func monthID(t time.Time) int64  { t = t.UTC(); return int64(t.Year())*100 + int64(t.Month()) }

// roll moves p to period id, forgetting an older one's counts.
func (p *period) roll(id int64) {
	if p.id != id {
		*p = period{id: id}
	}
}

func (p *period) spent() int64 { return p.seen + p.pending + p.flight }

// BudgetState is what a tenant has left.
type BudgetState struct {
	MinuteLeft, MonthLeft int64 // -1: no budget of that period
	// Over names the period spent ("minute" or "month"), "" when neither.
	Over string
	// Reset is when the spent period starts again.
	Reset time.Time
}

// mayBeOver reports whether account a may have spent its budget: false
// is certain (no lock, no clock), true asks state.
func (a *account) mayBeOver() bool { return a.reached.Load() }

// judge sets a.reached from its counts; bs.mu is held, a rolled.
func (a *account) judge() {
	m, mo := a.minute.spent(), a.month.spent()
	b := a.limit
	a.reached.Store(b.PerMinute > 0 && m >= b.PerMinute || b.PerMonth > 0 && mo >= b.PerMonth)
}

// state says what the tenant of account a (track's) has left of b.
func (bs *Budgets) state(a *account, b Budget) BudgetState {
	now := bs.now()
	bs.mu.Lock()
	bs.roll(a, now)
	a.limit = b
	a.judge()
	m, mo := a.minute.spent(), a.month.spent()
	bs.mu.Unlock()
	return b.left(m, mo, now)
}

// spend adds credits to the periods of account a (track's) at now and
// says what its tenant has left of b: one lock for both.
func (bs *Budgets) spend(a *account, credits int64, b Budget, now time.Time) BudgetState {
	bs.mu.Lock()
	bs.roll(a, now)
	a.minute.pending += credits
	a.month.pending += credits
	a.limit = b
	a.judge()
	m, mo := a.minute.spent(), a.month.spent()
	bs.mu.Unlock()
	return b.left(m, mo, now)
}

// left is what is left of b at now, m and mo credits spent in the minute
// and the month.
func (b Budget) left(m, mo int64, now time.Time) BudgetState {
	st := BudgetState{MinuteLeft: -1, MonthLeft: -1}
	if b.PerMonth > 0 {
		st.MonthLeft = max(b.PerMonth-mo, 0)
		if st.MonthLeft == 0 {
			u := now.UTC()
			st.Over, st.Reset = "month", time.Date(u.Year(), u.Month()+1, 1, 0, 0, 0, 0, time.UTC)
		}
	}
	if b.PerMinute > 0 {
		st.MinuteLeft = max(b.PerMinute-m, 0)
		if st.MinuteLeft == 0 && st.Over == "" {
			st.Over, st.Reset = "minute", time.Unix((minuteID(now)+1)*60, 0)
		}
	}
	return st
}

// roll moves a's periods to now's; bs.mu is held.
func (bs *Budgets) roll(a *account, now time.Time) {
	m := minuteID(now)
	if m != bs.lastMinute || bs.lastMonth == 0 {
		bs.lastMinute, bs.lastMonth = m, monthID(now)
	}
	a.minute.roll(m)
	a.month.roll(bs.lastMonth)
}

func (bs *Budgets) account(tenant string) *account {
	a := bs.accounts[tenant]
	if a == nil {
		a = &account{}
		bs.accounts[tenant] = a
	}
	return a
}

// track makes tenant's account, so that flushes learn the cluster's count
// before its first call here, and returns it: accounts are never removed,
// so a compiled tenant keeps its own and its calls look up none. b is the
// tenant's budget as compiled: a reload that lowers it is judged here,
// before the tenant's next call.
func (bs *Budgets) track(tenant string, b Budget) *account {
	now := bs.now()
	bs.mu.Lock()
	a := bs.account(tenant)
	bs.roll(a, now)
	a.limit = b
	a.judge()
	bs.mu.Unlock()
	return a
}

// Spent returns what tenant has spent in the current minute and month,
// as this replica sees it.
func (bs *Budgets) Spent(tenant string) (minute, month int64) {
	now := bs.now()
	bs.mu.Lock()
	defer bs.mu.Unlock()
	a := bs.account(tenant)
	bs.roll(a, now)
	return a.minute.spent(), a.month.spent()
}

// Flush adds what this replica spent since the last flush to the cluster's
// counts and learns theirs, for every tenant it has seen. Without Redis it
// does nothing. A failed flush keeps the spending for the next.
func (bs *Budgets) Flush(ctx context.Context) error {
	if bs.rdb == nil {
		return nil
	}
	now := bs.now()
	type job struct {
		tenant         string
		minID, monID   int64
		minN, monN     int64
		minCmd, monCmd *redis.IntCmd
	}
	bs.mu.Lock()
	jobs := make([]job, 0, len(bs.accounts))
	for name, a := range bs.accounts {
		bs.roll(a, now)
		j := job{tenant: name, minID: a.minute.id, monID: a.month.id, minN: a.minute.pending, monN: a.month.pending}
		a.minute.flight, a.minute.pending = a.minute.pending, 0
		a.month.flight, a.month.pending = a.month.pending, 0
		jobs = append(jobs, j)
	}
	bs.mu.Unlock()
	if len(jobs) == 0 {
		return nil
	}
	pipe := bs.rdb.Pipeline()
	for i := range jobs {
		j := &jobs[i]
		mk := keyspace.CreditsKey(j.tenant, "m"+strconv.FormatInt(j.minID, 10))
		Mk := keyspace.CreditsKey(j.tenant, "M"+strconv.FormatInt(j.monID, 10))
		j.minCmd = pipe.IncrBy(ctx, mk, j.minN)
		pipe.Expire(ctx, mk, 3*time.Minute)
		j.monCmd = pipe.IncrBy(ctx, Mk, j.monN)
		pipe.Expire(ctx, Mk, 32*24*time.Hour)
	}
	_, err := pipe.Exec(ctx)
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for i := range jobs {
		j := &jobs[i]
		a := bs.accounts[j.tenant]
		if err != nil {
			// Not counted by the cluster: spend it again next time, if its
			// period is still the current one.
			if a.minute.id == j.minID {
				a.minute.pending += a.minute.flight
			}
			if a.month.id == j.monID {
				a.month.pending += a.month.flight
			}
			a.minute.flight, a.month.flight = 0, 0
			continue
		}
		if a.minute.id == j.minID {
			a.minute.seen, a.minute.flight = j.minCmd.Val(), 0
		}
		if a.month.id == j.monID {
			a.month.seen, a.month.flight = j.monCmd.Val(), 0
		}
		a.judge() // the other replicas' spending may have reached it
	}
	if err != nil {
		return fmt.Errorf("credits: flush to redis: %w", err)
	}
	return nil
}

// Start flushes every FlushInterval until Stop.
func (bs *Budgets) Start() {
	if bs.rdb == nil || bs.cancel != nil {
		return
	}
	var ctx context.Context
	ctx, bs.cancel = context.WithCancel(context.Background())
	bs.done = make(chan struct{})
	go bs.loop(ctx)
}

// Stop ends the flushes, after a last one.
func (bs *Budgets) Stop(ctx context.Context) {
	if bs.cancel == nil {
		return
	}
	bs.cancel()
	<-bs.done
	bs.cancel = nil
	if err := bs.Flush(ctx); err != nil {
		bs.log.Warn("credits: last flush", "err", err)
	}
}

func (bs *Budgets) loop(ctx context.Context) {
	defer close(bs.done)
	t := time.NewTicker(bs.every)
	defer t.Stop()
	var failing bool
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fctx, cancel := context.WithTimeout(ctx, bs.every)
		err := bs.Flush(fctx)
		cancel()
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			bs.log.Warn("credits: cannot reach redis; each replica counts alone until it can", "err", err)
			failing = true
		case err == nil && failing:
			bs.log.Info("credits: redis reachable again")
			failing = false
		}
	}
}
