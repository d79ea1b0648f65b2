package remotes

// Hedging: a read that its remote is slow to answer is sent to a second
// remote too, and the first good answer wins.
//
// A chain lists groups of methods, each with when to hedge: after a fixed
// delay, or after a quantile of the remote being waited on (its p90, say,
// from latency.go; never before the group's delay), and how many hedges one
// call may send. The hedge goes where a failover attempt would go
// (selection: tiers, health, height, limits), to a remote the call has not
// tried, and never to the fallback tier, which is only for when nothing
// else can serve. A hedge that finds no such remote waits, while the first
// attempt is out, for a remote to report a new head: a new block is asked
// of the first remote to report it, and the others report it a little
// later. A good answer is one the judge (judge.go) calls an answer
// or the caller's own error (a revert is the answer, from either remote).
// The first good answer is returned and the other attempts are cancelled;
// a cancelled attempt is cut by its caller, which the remote is not blamed
// for (send), though its slowness still counts in its latency. When no
// attempt of the race answers well, the attempt takes every reply in the
// order it came, as the failover loop (single.go) takes one, and goes on
// within call_deadline with the hedged remotes counted as tried.
//
// Never hedged: writes and stateful methods (evm.Method.Hedgeable),
// of which eth_sendRawTransaction already goes to several remotes at once;
// calls tied to one remote; calls put to a vote; verified calls
// (integrity.go), whose caller judges every answer with its check, but for
// the hedge a verified call brings of its own (CallVerified's hedge), whose
// answers are each checked. Identical
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
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/remotes/hedge"
)

// hedger is a chain's hedging: its groups, budget and counters.
type hedger struct {
	groups []HedgeGroup
	budget *hedge.Budget

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
		budget:          hedge.NewBudget(cfg.Budget, cfg.Burst),
		won:             m.hs.hedges.WithLabelValues(chain, "won"),
		lost:            m.hs.hedges.WithLabelValues(chain, "lost"),
		skippedBudget:   m.hs.hedges.WithLabelValues(chain, "skipped_budget"),
		skippedNoRemote: m.hs.hedges.WithLabelValues(chain, "skipped_no_remote"),
	}
	return h
}

// hedgeGroup is the group that hedges method on this route, or nil; a
// hedgeable call also earns the budget its share.
func (p *Pool) hedgeGroup(method string, rt route) *HedgeGroup {
	if rt.hedger != nil {
		return &rt.hedger.groups[0]
	}
	h := p.hedger() // one load: a reload may swap it
	if h == nil || rt.once || rt.only != nil || rt.verify != nil || !rt.hedgeable(method) {
		return nil
	}
	for i := range h.groups {
		if g := &h.groups[i]; evm.MatchMethod(g.Methods, method) {
			h.budget.Deposit()
			return g
		}
	}
	return nil
}

// errHedgeDone ends the attempts of a race that is over: another attempt
// answered, or the race returned.
var errHedgeDone = errors.New("hedge race over")

// hedged is the hedged strategy: the failover loop (single.go), each send
// of which is a race while the call has hedges left.
func (a *attempt) hedged(ctx context.Context, g *HedgeGroup) (json.RawMessage, error) {
	return a.failover(ctx, g)
}

// hedgeRace is one send with its hedges. Its fire goroutines pick and
// count under mu, in copies of the attempt's tried and n that the race
// hands back when it ends.
type hedgeRace struct {
	p       *Pool
	h       *hedger // its budget and counters
	jg      judge   // the call's
	params  json.RawMessage
	rt      route // where hedges may go: the call's route minus the fallback tier
	ctx     context.Context
	cancel  context.CancelCauseFunc
	results chan raceResult // one per fired timer

	// over is closed when the first attempt returned: the race has its
	// answer or gives up, and no more hedges go out.
	over chan struct{}

	mu       sync.Mutex
	tried    uint64
	n        int
	launched int
}

type raceResult struct {
	j judged
	// sent: the hedge went out; false when it was skipped (no token, no
	// remote, the race was over).
	sent bool
}

// race sends the call to r (index idx, counted as sent) and arms up to
// g.Max-a.hedges hedges after the group's delay. The first good reply
// wins; without one, the attempt takes every reply in the order they came.
func (a *attempt) race(ctx context.Context, g *HedgeGroup, r *Remote, idx int) {
	p := a.p
	k := min(g.Max-a.hedges, p.conf().MaxAttempts-a.n)
	delay, ok := hedge.Delay(g.Delay, g.Quantile, &r.lat)
	h := a.rt.hedger // the race's, throughout: a reload may swap the chain's, or turn hedging off
	if h == nil {
		h = p.hedger()
	}
	if !ok || k <= 0 || h == nil {
		a.take(ctx, a.call(ctx, r, idx, false))
		return
	}
	rc := &hedgeRace{p: p, h: h, jg: a.judge(), params: a.params, rt: a.rt,
		results: make(chan raceResult, k), over: make(chan struct{}), tried: a.tried, n: a.n}
	accept := a.rt.accept
	rc.rt.accept = func(c *Remote) bool {
		return c.cfg.Tier != TierFallback && (accept == nil || accept(c))
	}
	rc.ctx, rc.cancel = context.WithCancelCause(ctx)
	defer rc.cancel(errHedgeDone)

	var timers [MaxHedges]*time.Timer
	for i := range k {
		p.wg.Add(1)
		timers[i] = time.AfterFunc(delay*time.Duration(i+1), rc.fire)
	}
	first := rc.jg.ask(rc.ctx, r, idx, a.n, a.params)

	close(rc.over)
	pending := 0 // fired timers: each sends one result
	for _, t := range timers[:k] {
		if t.Stop() {
			p.wg.Done()
		} else {
			pending++
		}
	}
	win, rest, won := rc.collect(ctx, first, pending)

	rc.mu.Lock()
	a.tried, a.n = rc.tried, rc.n
	launched := rc.launched
	rc.mu.Unlock()
	a.hedges += launched
	if won {
		h.won.Inc()
		launched--
	}
	h.lost.Add(float64(launched))
	a.take(ctx, win)
	for _, j := range rest {
		if a.stop {
			break
		}
		a.take(ctx, j)
	}
}

// collect is the race's outcome: the first good reply (won when a hedge
// gave it), or, without one, the first reply and then the rest in the
// order they came.
func (rc *hedgeRace) collect(ctx context.Context, first judged, pending int) (win judged, rest []judged, won bool) {
	if first.good() || ctx.Err() != nil {
		return first, nil, false
	}
	for ; pending > 0; pending-- {
		hr := <-rc.results
		switch {
		case !hr.sent:
		case hr.j.good():
			return hr.j, nil, true
		default:
			rest = append(rest, hr.j)
		}
	}
	return first, rest, false
}

// ended reports whether the first attempt returned (over).
func (rc *hedgeRace) ended() bool {
	select {
	case <-rc.over:
		return true
	default:
		return false
	}
}

// await waits, while the first attempt is out, for a remote to report a
// new head: the one a hedge needs may report the block a little after the
// remote being waited on (a new block, fetched from the first remote to
// report it). It reports whether a remote did; false when the race or the
// call ended first.
func (rc *hedgeRace) await(claims <-chan struct{}) bool {
	select {
	case <-claims:
		return true
	case <-rc.over:
	case <-rc.ctx.Done():
	}
	return false
}

// fire sends one hedge, unless the race is over, the call is out of
// attempts, no other remote can take it or the budget is spent.
func (rc *hedgeRace) fire() {
	p := rc.p
	defer p.wg.Done()
	for {
		rc.mu.Lock()
		if rc.ended() || rc.n >= p.conf().MaxAttempts {
			rc.mu.Unlock()
			rc.results <- raceResult{}
			return
		}
		claims := p.heads.ClaimsChanged() // before the pick: a claim after it wakes the wait
		r, idx := p.pick(rc.jg.method, rc.rt, rc.tried)
		if r == nil || r.overBudget() { // a hedge is never worth a spent budget
			rc.mu.Unlock()
			if rc.await(claims) {
				continue
			}
			rc.h.skippedNoRemote.Inc()
			rc.results <- raceResult{}
			return
		}
		if !rc.h.budget.Take() {
			rc.mu.Unlock()
			rc.h.skippedBudget.Inc()
			rc.results <- raceResult{}
			return
		}
		rc.tried |= 1 << idx
		rc.n++
		rc.launched++
		n := rc.n
		rc.mu.Unlock()

		jg := rc.jg
		jg.role = roleHedge
		j := jg.ask(rc.ctx, r, idx, n, rc.params)
		if j.mean == meanLocal {
			// Nothing went out: the token goes back and another remote may
			// take the hedge.
			rc.h.budget.Refund()
			rc.mu.Lock()
			rc.n--
			rc.launched--
			rc.mu.Unlock()
			continue
		}
		if j.good() {
			rc.cancel(errHedgeDone) // the others lost
		}
		rc.results <- raceResult{j: j, sent: true}
		return
	}
}
