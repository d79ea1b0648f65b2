package remotes

// Hedging: a read that its remote is slow to answer is sent to a second
// remote too, and the first good answer wins.
//
// A chain lists groups of methods, each with when to hedge: after a fixed
// delay, or after a quantile of the remote being waited on (its p90, say,
// from latency.go; never before the group's delay), and how many hedges one
// call may send. The hedge goes where a failover attempt would go (pick:
// tiers, health, height, limits), to a remote the call has not tried, and
// never to the fallback tier, which is only for when nothing else can
// serve. A good answer is one the failover loop would return: a result it
// accepts, or the caller's own error (a revert is the answer, from either
// remote). The first good answer is returned and the other attempts are
// cancelled; a cancelled attempt is cut by its caller, which the remote is
// not blamed for (send), though its slowness still counts in its latency.
// When no attempt of the race answers well, its most useful failure goes
// back to the failover loop, which goes on within call_deadline with the
// hedged remotes counted as tried.
//
// Never hedged: writes and stateful methods (evm.IsWrite, evm.IsStateful),
// of which eth_sendRawTransaction already goes to several remotes at once;
// calls tied to one remote; calls put to a vote; verified calls
// (integrity.go), whose caller judges every answer with its check. Identical
// concurrent reads are deduplicated before they get here, so one flight
// hedges once.
//
// A budget bounds the extra load: a token bucket per chain that every
// hedgeable call fills by Budget and every hedge drains by one, so a slow
// provider cannot double the chain's traffic; a hedge without a token is
// skipped and counted.

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/evm"
)

// HedgeGroup is a set of methods hedged alike.
type HedgeGroup struct {
	// Methods are names; entries ending in "_" or "*" are prefixes.
	Methods []string
	// Delay is how long the first remote has before the hedge is sent; with
	// a Quantile it is the least wait. 0 sends the hedge at once.
	Delay time.Duration
	// Quantile, when above 0, waits for this quantile of the first remote's
	// recent latency (0.9: its p90). Until the remote has enough samples
	// Delay is used, and without a Delay the call is not hedged.
	Quantile float64
	// Max is the hedges one call may send; 0 takes 1. Each waits another
	// delay after the previous one.
	Max int
}

// HedgeConfig is a chain's hedging; no groups, no hedging.
type HedgeConfig struct {
	// Groups in order: a method takes the first group that lists it.
	Groups []HedgeGroup
	// Budget: on average at most this fraction of the hedgeable calls gets
	// a hedge. 0 takes the default.
	Budget float64
	// Burst: hedges allowed beyond the average in a burst. 0 takes the
	// default.
	Burst int
}

// Hedging defaults and limits.
const (
	DefaultHedgeBudget = 0.1
	DefaultHedgeBurst  = 10
	// MaxHedges bounds HedgeGroup.Max.
	MaxHedges = 4
)

func (c *HedgeConfig) applyDefaults() {
	if c.Budget <= 0 {
		c.Budget = DefaultHedgeBudget
	}
	if c.Burst <= 0 {
		c.Burst = DefaultHedgeBurst
	}
	for i := range c.Groups {
		if c.Groups[i].Max <= 0 {
			c.Groups[i].Max = 1
		}
		c.Groups[i].Max = min(c.Groups[i].Max, MaxHedges)
	}
}

// Hedgeable reports whether a method may be hedged at all: not a write, and
// not a method whose answer depends on one remote's state.
func Hedgeable(method string) bool {
	return !evm.IsWrite(method) && !evm.IsStateful(method)
}

// hedgeScoreMetrics are the series of hedging and scoring.
type hedgeScoreMetrics struct {
	hedges *prometheus.CounterVec // chain, outcome
	score  *prometheus.GaugeVec   // chain, remote
}

func newHedgeScoreMetrics(reg prometheus.Registerer) *hedgeScoreMetrics {
	m := &hedgeScoreMetrics{
		hedges: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "hedges_total",
			Help: "Hedged attempts by outcome: won (its answer was used), lost (another answered first, or none answered well), skipped_budget (no token in the chain's hedge budget), skipped_no_remote (no other remote could take it)."},
			[]string{"chain", "outcome"}),
		score: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Subsystem: "remote", Name: "score",
			Help: "A remote's routing score, about its effective latency in ms; lower is better."}, []string{"chain", "remote"}),
	}
	if reg != nil {
		reg.MustRegister(m.hedges, m.score)
	}
	return m
}

// hedger is a chain's hedging: its groups, budget and counters.
type hedger struct {
	groups []HedgeGroup
	budget hedgeBudget

	won, lost, skippedBudget, skippedNoRemote prometheus.Counter
}

// newHedger returns nil when no group is configured: the pool then never
// looks at hedging again.
func newHedger(cfg HedgeConfig, chain string, m *Metrics) *hedger {
	if len(cfg.Groups) == 0 {
		return nil
	}
	h := &hedger{
		groups:          cfg.Groups,
		won:             m.hs.hedges.WithLabelValues(chain, "won"),
		lost:            m.hs.hedges.WithLabelValues(chain, "lost"),
		skippedBudget:   m.hs.hedges.WithLabelValues(chain, "skipped_budget"),
		skippedNoRemote: m.hs.hedges.WithLabelValues(chain, "skipped_no_remote"),
	}
	h.budget.earn = int64(math.Round(cfg.Budget * hedgeUnit))
	h.budget.cap = int64(cfg.Burst) * hedgeUnit
	h.budget.tokens.Store(h.budget.cap)
	return h
}

// hedgeGroup is the group that hedges method on this route, or nil; a
// hedgeable call also earns the budget its share.
func (p *Pool) hedgeGroup(method string, rt route) *HedgeGroup {
	if p.hedge == nil || rt.once || rt.only != nil || rt.verify != nil || !rt.hedgeable(method) {
		return nil
	}
	for i := range p.hedge.groups {
		if g := &p.hedge.groups[i]; evm.MatchMethod(g.Methods, method) {
			p.hedge.budget.deposit()
			return g
		}
	}
	return nil
}

// hedgeUnit is one hedge in the budget's fixed-point tokens.
const hedgeUnit = 1_000_000

// hedgeBudget is a token bucket counted in calls, not time: each hedgeable
// call adds earn, each hedge takes hedgeUnit, and it holds at most cap.
type hedgeBudget struct {
	tokens    atomic.Int64
	earn, cap int64
}

func (b *hedgeBudget) deposit() {
	for {
		t := b.tokens.Load()
		if t >= b.cap || b.tokens.CompareAndSwap(t, min(t+b.earn, b.cap)) {
			return
		}
	}
}

func (b *hedgeBudget) take() bool {
	for {
		t := b.tokens.Load()
		if t < hedgeUnit {
			return false
		}
		if b.tokens.CompareAndSwap(t, t-hedgeUnit) {
			return true
		}
	}
}

func (b *hedgeBudget) refund() { b.tokens.Add(hedgeUnit) }

// hedgeDelay is how long to wait for r before hedging; ok is false when the
// call is not to be hedged (a quantile of a remote not measured yet, and
// no delay to fall back on).
func hedgeDelay(g *HedgeGroup, r *Remote) (time.Duration, bool) {
	if g.Quantile <= 0 {
		return g.Delay, true
	}
	q, ok := r.lat.quantile(g.Quantile)
	switch {
	case ok:
		return max(q, g.Delay), true
	case g.Delay > 0:
		return g.Delay, true
	}
	return 0, false
}

// errHedgeDone ends the attempts of a race that is over: another attempt
// answered, or the race returned.
var errHedgeDone = errors.New("hedge race over")

// hedgeRace is one attempt with its hedges.
type hedgeRace struct {
	p       *Pool
	method  string
	params  json.RawMessage
	rt      route // where hedges may go: the call's route minus the fallback tier
	check   route // the call's own route, to judge answers
	ctx     context.Context
	cancel  context.CancelCauseFunc
	results chan raceResult // one per fired timer

	mu       sync.Mutex
	done     bool // the race has its answer (or gave up): no more hedges
	tried    uint64
	n        int
	launched int
}

type raceResult struct {
	r   *Remote
	idx int
	res json.RawMessage
	err error
	// sent: the hedge went out; false when it was skipped (no token, no
	// remote, the race was over).
	sent bool
}

// race sends one attempt to r (the caller's pick, index idx) and arms up to
// g.Max-*hedges hedges after the group's delay. It returns the remote
// whose answer it returns. tried, n and hedges are the failover loop's,
// brought up to date.
func (p *Pool) race(ctx context.Context, g *HedgeGroup, method string, params json.RawMessage, rt route,
	r *Remote, idx int, tried *uint64, n, hedges *int) (*Remote, int, json.RawMessage, error) {
	k := min(g.Max-*hedges, p.cfg.MaxAttempts-*n)
	delay, ok := hedgeDelay(g, r)
	if !ok || k <= 0 {
		res, err := r.call(ctx, method, params)
		return r, idx, res, err
	}
	hrt := rt
	hrt.accept = func(c *Remote) bool {
		return c.cfg.Tier != TierFallback && (rt.accept == nil || rt.accept(c))
	}
	rc := &hedgeRace{p: p, method: method, params: params, rt: hrt, check: rt,
		results: make(chan raceResult, k), tried: *tried, n: *n}
	rc.ctx, rc.cancel = context.WithCancelCause(ctx)
	defer rc.cancel(errHedgeDone)

	var timers [MaxHedges]*time.Timer
	for i := range k {
		p.wg.Add(1)
		timers[i] = time.AfterFunc(delay*time.Duration(i+1), rc.fire)
	}
	res, err := r.call(rc.ctx, method, params)

	rc.mu.Lock()
	rc.done = true
	rc.mu.Unlock()
	pending := 0 // fired timers: each sends one result
	for _, t := range timers[:k] {
		if t.Stop() {
			p.wg.Done()
		} else {
			pending++
		}
	}
	win, hedgeWon := raceResult{r: r, idx: idx, res: res, err: err, sent: true}, false
	if !rc.good(res, err) && ctx.Err() == nil {
		for ; pending > 0 && !hedgeWon; pending-- {
			hr := <-rc.results
			switch {
			case !hr.sent:
			case rc.good(hr.res, hr.err):
				win, hedgeWon = hr, true
			default:
				win = rc.worse(win, hr)
			}
		}
	}

	rc.mu.Lock()
	*tried, *n = rc.tried, rc.n
	launched := rc.launched
	rc.mu.Unlock()
	*hedges += launched
	if hedgeWon {
		p.hedge.won.Inc()
		launched--
	}
	p.hedge.lost.Add(float64(launched))
	return win.r, win.idx, win.res, win.err
}

// fire sends one hedge, unless the race is over, the call is out of
// attempts, no other remote can take it or the budget is spent.
func (rc *hedgeRace) fire() {
	p := rc.p
	defer p.wg.Done()
	for {
		rc.mu.Lock()
		if rc.done || rc.n >= p.cfg.MaxAttempts {
			rc.mu.Unlock()
			rc.results <- raceResult{}
			return
		}
		r, idx := p.pick(rc.method, rc.rt, rc.tried)
		if r == nil {
			rc.mu.Unlock()
			p.hedge.skippedNoRemote.Inc()
			rc.results <- raceResult{}
			return
		}
		if !p.hedge.budget.take() {
			rc.mu.Unlock()
			p.hedge.skippedBudget.Inc()
			rc.results <- raceResult{}
			return
		}
		rc.tried |= 1 << idx
		rc.n++
		rc.launched++
		rc.mu.Unlock()

		res, err := r.call(rc.ctx, rc.method, rc.params)
		if errors.Is(err, errLocalLimit) {
			// Nothing went out: the token goes back and another remote may
			// take the hedge.
			p.hedge.budget.refund()
			rc.mu.Lock()
			rc.n--
			rc.launched--
			rc.mu.Unlock()
			continue
		}
		if rc.good(res, err) {
			rc.cancel(errHedgeDone) // the others lost
		}
		rc.results <- raceResult{r: r, idx: idx, res: res, err: err, sent: true}
		return
	}
}

// good reports an answer the failover loop would return as it is.
func (rc *hedgeRace) good(res json.RawMessage, err error) bool {
	if err == nil {
		if rc.check.nullIsMissing && isNull(res) {
			return false
		}
		return rc.check.check == nil || rc.check.check(res) == nil
	}
	if errors.Is(err, errLocalLimit) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return Classify(rc.method, err).Class == ClassCaller
}

// worse picks which of two answers that are not good the failover loop
// should see: a null (the loop keeps it as the answer of last resort), then
// a too-large error (eth_getLogs splits on it), then a failure of a call
// that went out over a local limit. The other one is dropped, and a result
// the route's check rejects is charged to its remote here, since the loop
// will not see it.
func (rc *hedgeRace) worse(a, b raceResult) raceResult {
	rank := func(x raceResult) int {
		switch {
		case x.err == nil && isNull(x.res) && rc.check.nullIsMissing:
			return 3
		case x.err == nil:
			return 0 // rejected by the check
		case Classify(rc.method, x.err).Class == ClassTooLarge:
			return 2
		case errors.Is(x.err, errLocalLimit) || errors.Is(x.err, context.Canceled):
			return -1
		}
		return 1
	}
	keep, drop := a, b
	if rank(b) > rank(a) {
		keep, drop = b, a
	}
	if drop.err == nil && drop.r != nil && rc.check.check != nil {
		if cerr := rc.check.check(drop.res); cerr != nil {
			drop.r.rejected(rc.method, cerr)
		}
	}
	return keep
}
