package remotes

// Scoring: which remotes of a tier get the chain's calls.
//
// Every score.Config.Interval the pool scores each remote (lower is
// better):
//
//	score = latency^w.Latency × (1 + w.Errors·errors) × (1 + w.Throttle·throttles)
//	        × (1 + w.Lag·lag/max_lag) × (1 + w.Misbehaviour·misbehaviour)
//
// latency is the mean of the remote's recent p50 and p90 in milliseconds
// (latency.go); errors and throttles are the shares of its recent calls
// that were faults and rate-limit refusals (moving averages over about 20
// calls); lag is its distance behind the best head in blocks, averaged over
// a few score intervals so that a remote polled once per block does not
// look behind half the time; misbehaviour is the decaying level the
// consensus and integrity checks raise (Pool.misbehaved counts each). The product reads as
// "effective latency": with the default weights, 10% faults cost like
// 1.8× the latency, one misbehaviour a few minutes ago like 17×. A remote
// whose latency is not known yet (too few samples) is taken to be as fast
// as the best of its tier, so only its penalties count.
//
// Routing (select.go's chooser) uses the score through each tier's
// preferred set, with hysteresis: a remote joins the set when its score is
// within Margin of the tier's best score among the remotes in rotation,
// and leaves it only when it is more than twice Margin behind. Calls go to the preferred remotes of
// the first tier that has one (the less loaded of two drawn by their
// shares, weight and budget: budget.go; so
// near-equal remotes share the load evenly and do not trade it back and
// forth), then to the others of the tier in score order. A single
// "preferred remote" would flap between two near-equal remotes as noise
// moves their scores past each other, and piling every call on it would
// move its latency too; the band and the gap between join and leave stop
// both.
//
// A remote outside the set still gets ProbeShare of the tier's calls (a
// random one of those that can take a call): that is how a remote that
// recovered shows it. This builds on the breaker rather than beside it: a
// remote whose breaker is open takes no call until its cooldown ends; then
// the probe share routes a call to it, which the breaker lets through as
// its one half-open probe. A remote that was lagging, throttled or
// cordoned comes back the same way once the condition ends, and rejoins
// the set when its score has recovered. Head polls keep every remote's
// head and latency current meanwhile.

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/remotes/score"
)

// Smoothing of the score's inputs.
const (
	throttleAlpha = 0.05 // per call, like errorEWMA
	lagAlpha      = 0.3  // per scoring
)

// scoreQuantiles are the latency quantiles the score reads.
var scoreQuantiles = [2]float64{0.5, 0.9}

// scoreState is a remote's part of scoring. The atomics are read on the
// hot path; the scorer goroutine is their only writer, except throttles
// (every call) and the misbehaviour level (misbehaviour, which folds in
// the counts Pool.misbehaved keeps).
type scoreState struct {
	throttles atomic.Uint64 // float64 bits: share of recent calls refused for rate limits
	lagAvg    atomic.Uint64 // float64 bits: blocks behind, smoothed over scorings
	score     atomic.Uint64 // float64 bits: the last score; lower is better
	preferred atomic.Bool   // in its tier's preferred set
	switches  atomic.Int64  // joins and leaves of the preferred set
	gauge     prometheus.Gauge
	level     score.Level // misbehaviour, folding in misbehaviourState.count
}

// misbehaviour is the remote's misbehaviour level now, with the
// misbehaviours counted since the last look folded in.
func (r *Remote) misbehaviour(now time.Time) float64 {
	return r.sc.level.At(now, r.mb.count.Load())
}

// noteThrottle records whether one call was refused for a rate limit, in
// the throttle share.
func (r *Remote) noteThrottle(yes bool) {
	x := 0.0
	if yes {
		x = 1
	}
	ewma(&r.sc.throttles, x, throttleAlpha)
}

// score is the remote's last score (lower is better).
func (r *Remote) score() float64 { return math.Float64frombits(r.sc.score.Load()) }

// Preferred reports whether the remote is in its tier's preferred set.
func (r *Remote) Preferred() bool { return r.sc.preferred.Load() }

// initScoring prepares a new remote for scoring: it starts preferred, so
// a new pool, or a remote a reload added, takes calls until scores say
// otherwise.
func (r *Remote) initScoring(cfg *PoolConfig, m *Metrics) {
	r.sc.preferred.Store(true)
	r.sc.gauge = m.hs.score.WithLabelValues(cfg.Chain, r.Name())
}

// scoreLoop rescores the remotes every interval until ctx ends.
func (p *Pool) scoreLoop(ctx context.Context) {
	every := p.conf().Scoring.Interval
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.rescore(p.now())
		}
		if d := p.conf().Scoring.Interval; d != every { // a reload changed it
			every = d
			t.Reset(d)
		}
	}
}

// rescore computes every remote's score and updates the preferred sets.
func (p *Pool) rescore(now time.Time) {
	p.endCordons(now)
	s := scoring{p: p, rs: p.members(), now: now, best: p.healthyBest(now)}
	s.measure()
	for tier := TierPrimary; tier <= TierFallback; tier++ {
		s.rank(tier)
	}
}

// scoring is one rescore: its inputs and scores, by remote index.
type scoring struct {
	p    *Pool
	rs   []*Remote // the members when it began: indices below are into it
	now  time.Time
	best uint64
	es   [maxRemotes]score.Entry
}

// measure reads every remote's latency and penalty terms.
func (s *scoring) measure() {
	p, now, best := s.p, s.now, s.best
	w := p.conf().Scoring.Weights()
	maxLag := float64(max(p.conf().MaxLag, 1))
	var q [len(scoreQuantiles)]time.Duration
	for i, r := range s.rs {
		e := &s.es[i]
		*e = score.Entry{Group: int(r.cfg.Tier), Preferred: r.sc.preferred.Load()}
		// A head not known yet is no lag; a lag past max_lag already keeps
		// the remote out of rotation, and counting all of it would keep it
		// out of the preferred set long after it caught up.
		if h := r.Head(); h > 0 {
			lag := float64(0)
			if h < best {
				lag = float64(min(best-h, 2*max(p.conf().MaxLag, 1)))
			}
			ewma(&r.sc.lagAvg, lag, lagAlpha)
		}
		if r.lat.Quantiles(scoreQuantiles[:], q[:]) {
			ms := float64(q[0]+q[1]) / 2 / float64(time.Millisecond)
			e.Latency, e.Known = math.Pow(max(ms, 0.001), w.Latency), true
		}
		errs := math.Float64frombits(r.errorEWMA.Load())
		thr := math.Float64frombits(r.sc.throttles.Load())
		lagAvg := math.Float64frombits(r.sc.lagAvg.Load())
		e.Penalty = (1 + w.Errors*errs) * (1 + w.Throttle*thr) * (1 + w.Lag*lagAvg/maxLag) *
			(1 + w.Misbehaviour*r.misbehaviour(now))
		e.InRotation = r.available(now)&^outBusy == 0 && !p.lagging(r, best)
	}
}

// rank scores the remotes of one tier and updates its preferred set
// (score.Rank).
func (s *scoring) rank(tier Tier) {
	es := s.es[:len(s.rs)]
	best := score.Rank(es, int(tier), s.p.conf().Scoring.Margin)
	for i, r := range s.rs {
		if r.cfg.Tier != tier {
			continue
		}
		e := &es[i]
		r.sc.score.Store(math.Float64bits(e.Score))
		r.sc.gauge.Set(e.Score)
		if e.Preferred != r.sc.preferred.Load() {
			r.sc.preferred.Store(e.Preferred)
			r.sc.switches.Add(1)
			r.log.Debug("remote preferred set", "preferred", e.Preferred, "score", e.Score, "best", best)
		}
	}
}
