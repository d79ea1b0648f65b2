package remotes

import (
	"math/rand/v2"
	"time"
)

// Selection: which remote takes a call's next send. The tier walk goes
// from primary to fallback and stops at the first tier with a candidate
// (fallback only when nothing else can serve); the candidate filter keeps
// the remotes of that tier the route allows and the pool's view puts in
// reach of the call; the score chooser picks among them (score.go keeps
// the preferred sets it reads). A remote past its budget (budget.go) is
// left out of the walk; only when no other remote can take the call does a
// second walk admit it. Calls and relays (remotes/relay, through
// relays.go) alike are picked here, and available (below) is the one
// predicate of reach.

// view is the pool's membership at one moment: what the candidate filter
// reads.
type view struct {
	now    time.Time
	best   uint64 // the highest head among the remotes in rotation
	maxLag uint64
	// allow is what the candidate filter overlooks of Remote.available:
	// for a relay, what passes with calls (outBusy); outManual admits
	// manually cordoned remotes when no other is left in rotation
	// (lastResort).
	allow outs
	// spentOK admits remotes past their budget: no other can take the call.
	spentOK bool
}

// lagging reports a remote too far behind the best head to be in rotation.
func (v *view) lagging(r *Remote) bool { return r.Head()+v.maxLag < v.best }

// outs is a set of reasons a remote cannot take a call now (available).
type outs uint8

const (
	outBroken    outs = 1 << iota // not verified on the chain, or its breaker holds calls back (healthy)
	outThrottled                  // backed off after a 429
	outFull                       // at its max_in_flight
	outCordoned                   // cordoned for misbehaviour
	outManual                     // cordoned by hand

	// outBusy passes with calls: a subscription, which is no call in
	// flight, and rotation (Status's in_rotation) overlook it.
	outBusy = outThrottled | outFull
)

// available is why r cannot take a call at now: none (0) when it can. It
// is the one predicate of reach, read by selection and everything that
// asks whether a remote is in rotation; a caller masks out what it
// overlooks (outBusy). It only reads: a cordon's end is noted by
// endCordons.
func (r *Remote) available(now time.Time) outs {
	var o outs
	if !r.healthy(now) {
		o = outBroken
	}
	n := now.UnixNano()
	if n < r.throttledTil.Load() {
		o |= outThrottled
	}
	if mx := r.cfg.MaxInFlight; mx > 0 && r.inFlight.Load() >= int64(mx) {
		o |= outFull
	}
	if n < r.mb.cordonedUntil.Load() {
		o |= outCordoned
	}
	if r.manuallyOut() {
		o |= outManual
	}
	return o
}

// selector is a chain's selection over its remotes (by tier, then config
// order).
type selector struct {
	remotes  []*Remote
	probe    float64 // score.Config.ProbeShare
	budgeted bool    // some remote has a budget
}

// pick chooses the next remote for a call on route rt that has not tried
// the remotes in tried (a mask of slots), or nil; and the remote's slot.
func (s *selector) pick(v *view, method string, rt *route, tried uint64) (*Remote, int) {
	r, slot := s.pickWithin(v, method, rt, tried)
	if r != nil || v.spentOK || !s.budgeted {
		return r, slot
	}
	spent := *v
	spent.spentOK = true
	return s.pickWithin(&spent, method, rt, tried)
}

// pickWithin is pick among the remotes v admits.
func (s *selector) pickWithin(v *view, method string, rt *route, tried uint64) (*Remote, int) {
	need := max(min(rt.need, v.best), rt.floor)
	// Above every remote's head (need > best): the remotes at the best head
	// give the node's own answer (null, or an error).
	if r, slot := s.walk(v, method, rt, tried, need); r != nil || v.allow&outManual != 0 || !s.lastResort(v) {
		return r, slot
	}
	// A manual cordon never takes the chain's last remote out (cordon.go):
	// SetCordons decides it when the cordons change, but the others may
	// break after; here it holds at call time.
	last := *v
	last.allow |= outManual
	return s.walk(&last, method, rt, tried, need)
}

// lastResort reports whether only manually cordoned remotes are left in
// rotation, so selection may use them.
func (s *selector) lastResort(v *view) bool {
	cordoned := false
	for _, r := range s.remotes {
		switch o := r.available(v.now) &^ outBusy; {
		case o&outManual != 0:
			cordoned = true
		case o == 0 && !v.lagging(r):
			return false
		}
	}
	return cordoned
}

// walk is the tier walk over the candidates v admits.
func (s *selector) walk(v *view, method string, rt *route, tried uint64, need uint64) (*Remote, int) {
	var cand [maxRemotes]int
	for tier := TierPrimary; tier <= TierFallback; tier++ {
		k := 0
		for i, r := range s.remotes {
			if r.cfg.Tier == tier && tried&(1<<r.slot) == 0 && s.admits(v, r, method, rt, need) {
				cand[k] = i
				k++
			}
		}
		switch k {
		case 0:
			continue
		case 1:
			return s.remotes[cand[0]], s.remotes[cand[0]].slot
		}
		return s.choose(cand[:k])
	}
	return nil, 0
}

// admits is the candidate filter: r may take the call now. An empty
// method leaves what the remote serves to rt.accept (a relay's).
func (s *selector) admits(v *view, r *Remote, method string, rt *route, need uint64) bool {
	switch {
	case rt.only != nil && r != rt.only:
		return false
	case r.available(v.now)&^v.allow != 0 || v.lagging(r) || r.Head() < need || method != "" && !r.supports(method):
		return false
	case !r.serves(rt.hist, rt.histAt, rt.unsure):
		return false // older than its window (avail.go)
	case !v.spentOK && r.overBudget():
		return false
	}
	return rt.accept == nil || rt.accept(r)
}

// choose is the score chooser among the candidates of one tier (indices
// into remotes, at least two), and its slot: usually the less loaded of two
// preferred ones drawn by their shares (weight, less near a budget), load
// being calls in flight per unit of share; with the probe share, a random
// one outside the preferred set; with no preferred candidate, the
// best-scored.
func (s *selector) choose(cand []int) (*Remote, int) {
	rs := s.remotes
	np := 0
	for _, i := range cand {
		if rs[i].sc.preferred.Load() {
			np++
		}
	}
	no := len(cand) - np
	switch {
	case np == 0:
		best := cand[0]
		for _, i := range cand[1:] {
			if rs[i].score() < rs[best].score() {
				best = i
			}
		}
		return rs[best], rs[best].slot
	case no > 0 && s.probe > 0 && rand.Float64() < s.probe:
		i := nthWhere(rs, cand, false, rand.IntN(no))
		return rs[i], rs[i].slot
	}
	var (
		shares [maxRemotes]float64
		total  float64
	)
	for k, i := range cand {
		if rs[i].sc.preferred.Load() {
			shares[k] = rs[i].share()
			total += shares[k]
		}
	}
	a := drawShare(cand, shares[:len(cand)], total)
	if np > 1 {
		// b is less loaded than a when its calls in flight per unit of
		// share are fewer: with equal shares, simply fewer calls.
		b := drawShare(cand, shares[:len(cand)], total)
		if float64(rs[b].inFlight.Load())*rs[a].share() < float64(rs[a].inFlight.Load())*rs[b].share() {
			a = b
		}
	}
	return rs[a], rs[a].slot
}

// drawShare draws a candidate with probability in proportion to its share
// (0 for those left out of the draw).
func drawShare(cand []int, shares []float64, total float64) int {
	x := rand.Float64() * total
	last := cand[0]
	for k, i := range cand {
		if shares[k] <= 0 {
			continue
		}
		if x < shares[k] {
			return i
		}
		x -= shares[k]
		last = i
	}
	return last // rounding: the last with a share
}

// nthWhere is the k-th candidate (from 0) whose preferred flag is pref.
func nthWhere(rs []*Remote, cand []int, pref bool, k int) int {
	for _, i := range cand {
		if rs[i].sc.preferred.Load() == pref {
			if k == 0 {
				return i
			}
			k--
		}
	}
	return cand[0] // the flags moved under us: any candidate will do
}
