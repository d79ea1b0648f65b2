package remotes

// Misbehaviour: a remote that served data the pool could not trust (it
// disagreed with an accepted consensus answer, or its data failed an
// integrity check) is logged, counted, written to the chain's misbehaviour
// log if one is configured (remotes/misbehave), and punished: its score
// drops, and after Cordon.Strikes misbehaviours within Cordon.Within it is
// cordoned, out of rotation for Cordon.Period. Its head is still polled
// meanwhile (the probe traffic that keeps its state current), and when the
// period ends it comes back on its own. A cordon never takes the chain's
// last remote in rotation.
//
// Other parts of the pool report misbehaviour through Pool.misbehaved.

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/remotes/misbehave"
)

// Defaults of misbehaviour handling.
const (
	DefaultCordonStrikes = 3
	DefaultCordonWithin  = time.Minute
	DefaultCordonPeriod  = 5 * time.Minute
)

// misbehaviourState is a remote's part: its cordon and recent strikes.
type misbehaviourState struct {
	cordonedUntil atomic.Int64 // unix nanos; 0: not cordoned
	// suspectUntil (unix nanos): a check passed before it is not a good
	// check (distrust.go): within cordon.within of a misbehaviour, or
	// while cordoned for it.
	suspectUntil atomic.Int64
	warnedAt     atomic.Int64 // unix nanos of the last warning
	// count is every punished misbehaviour: the score's signal.
	count atomic.Int64

	strikes []int64 // unix nanos within the window, guarded by Pool.cons.mu

	cordonedGauge prometheus.Gauge // nil for a remote built outside NewPool
	cordons       prometheus.Counter
}

// cordoned reports whether the remote is out of rotation for misbehaviour
// (available's outCordoned). It only reads: endCordons notes the end.
func (r *Remote) cordoned(now time.Time) bool { return now.UnixNano() < r.mb.cordonedUntil.Load() }

// endCordons notes each misbehaviour cordon over by now, once: the log
// line and venn_remote_cordoned. Rescoring calls it every interval, so
// the predicates (cordoned, available) never write.
func (p *Pool) endCordons(now time.Time) {
	for _, r := range p.members() {
		until := r.mb.cordonedUntil.Load()
		if until == 0 || now.UnixNano() < until || !r.mb.cordonedUntil.CompareAndSwap(until, 0) {
			continue
		}
		if r.log != nil {
			r.log.Info("remote back in rotation: cordon over")
		}
		r.syncCordonGauge(now)
	}
}

// consensusState is the pool's part of votes and misbehaviour.
type consensusState struct {
	*misbehave.Recorder
	mu sync.Mutex // strikes and cordon decisions: rare, and must not race to cordon every remote
	// late counts the ballots of accepted votes still to be judged in
	// the background (vote.judgeLate): a misbehaviour they find is
	// recorded after the call returned.
	late atomic.Int64
}

// initConsensus prepares misbehaviour handling; the vote rules are
// compiled with the rest of the settings (reconfig.go). It does no I/O:
// Start opens the log file.
func (p *Pool) initConsensus(m *Metrics) {
	cfg := p.conf()
	p.cons.Recorder = misbehave.NewRecorder(cfg.Chain, m.mb, p.log, cfg.MisbehaviourLog)
}

// initMisbehaviour gives a new remote its cordon series.
func (r *Remote) initMisbehaviour(m *Metrics) {
	mm := m.mb
	if mm == nil {
		return
	}
	r.mb.cordonedGauge = mm.Cordoned(r.chain, r.Name())
	r.mb.cordons = mm.Cordons(r.chain, r.Name())
	r.mb.cordonedGauge.Set(0)
}

// misbehaved records that r served data the pool could not trust: kind is
// one of misbehave's kinds, method the call, detail a short description
// (digests, a failed check's name; never params, results or URLs). It
// logs, counts and writes the event, and punishes r unless the kind is
// not evidence (disagree_tip). Safe for concurrent use; it does not block.
func (p *Pool) misbehaved(r *Remote, kind, method, detail string) {
	now := p.now()
	label, punish := p.cons.Record(now, r.Name(), &r.mb.warnedAt, kind, method, detail)
	if !punish {
		return
	}
	r.mb.count.Add(1)
	cc := p.conf().Cordon
	if r.suspect(now, now.Add(cc.Within)) {
		// The first finding since its last good check: its answers
		// since are dropped now; later ones within the episode are
		// dropped by the cordon, if it comes.
		p.distrusted(r, label)
	}
	if until, ok := p.strike(r, now); ok {
		r.suspect(now, until)
		p.distrusted(r, DistrustCordoned)
	}
}

// strike counts one misbehaviour against r and cordons it at the limit:
// then it reports until when.
func (p *Pool) strike(r *Remote, now time.Time) (until time.Time, cordoned bool) {
	cc := p.conf().Cordon
	p.cons.mu.Lock()
	defer p.cons.mu.Unlock()
	var earned bool
	if r.mb.strikes, earned = misbehave.Strike(r.mb.strikes, now, cc.Within, cc.Strikes); !earned {
		return time.Time{}, false
	}
	for _, o := range p.members() {
		if o != r && o.available(now)&^outBusy == 0 {
			r.mb.cordonedUntil.Store(now.Add(cc.Period).UnixNano())
			if r.mb.cordons != nil {
				r.mb.cordons.Inc()
			}
			r.syncCordonGauge(now)
			r.log.Warn("remote cordoned: out of rotation after repeated misbehaviour",
				"strikes", cc.Strikes, "within", cc.Within, "for", cc.Period)
			return now.Add(cc.Period), true
		}
	}
	r.log.Error("remote keeps misbehaving but is the last in rotation: not cordoned",
		"strikes", cc.Strikes, "within", cc.Within)
	return time.Time{}, false
}
