package remotes

// Manual cordons: an operator takes a remote out of rotation by hand (the
// admin API), with a reason and an optional expiry. The admin package
// stores them (in Redis, so every replica of the cluster applies them) and
// hands the whole set to SetCordons whenever it changes and again every
// second or so; the pool only applies what it is given. Like a cordon for
// misbehaviour, a manual cordon never takes the chain's last remote in
// rotation out: SetCordons holds such a cordon back (CordonState.Held) and
// applies it on a later call, once another remote is in rotation again;
// and when the others break between two calls, selection falls back to
// the cordoned remote (selector.lastResort) rather than fail the call.
// Expiry is decided by SetCordons's caller from its clock: a cordon whose
// Until has passed is simply no longer in the set.

import (
	"slices"
	"time"
)

// manualCordon is a remote's manual cordon and whether it is applied.
type manualCordon struct {
	ManualCordon
	applied bool // false: held back, it would take the last remote out
}

// manuallyOut reports whether an applied manual cordon keeps r out.
func (r *Remote) manuallyOut() bool {
	m := r.manual.Load()
	return m != nil && m.applied
}

// SetCordons makes cs (those of other chains' remotes or unknown names are
// ignored) the pool's manual cordons as of now; a remote not in cs is
// uncordoned. Cordons apply oldest first, each only while another remote
// stays in rotation. It logs each change once and reports the names whose
// cordon is held back.
func (p *Pool) SetCordons(now time.Time, cs []ManualCordon) (held []string) {
	want := make(map[string]ManualCordon, len(cs))
	for _, c := range cs {
		if c.Active(now) {
			want[c.Remote] = c
		}
	}
	members := p.members() // one list throughout: a reload may swap it
	order := slices.Clone(members)
	slices.SortStableFunc(order, func(a, b *Remote) int {
		return want[a.Name()].At.Compare(want[b.Name()].At)
	})
	p.cons.mu.Lock() // with the misbehaviour cordons: the last-remote rule is one decision
	defer p.cons.mu.Unlock()
	// Decided afresh each time, the applied ones of last time included: a
	// remote that came back may let a held cordon apply.
	best := p.healthyBest(now)
	out := make(map[*Remote]bool, len(want))
	inRotation := func(r *Remote) bool {
		return r.available(now)&^(outBusy|outManual) == 0 && !p.lagging(r, best) && !out[r]
	}
	for _, r := range order {
		if _, ok := want[r.Name()]; !ok {
			continue
		}
		for _, o := range members {
			if o != r && inRotation(o) {
				out[r] = true
				break
			}
		}
		if !out[r] {
			held = append(held, r.Name())
		}
	}
	for _, r := range members {
		if c, ok := want[r.Name()]; ok {
			r.setManual(&manualCordon{ManualCordon: c, applied: out[r]})
		} else {
			r.setManual(nil)
		}
	}
	return held
}

// setManual replaces r's manual cordon, logging a change of what it does.
func (r *Remote) setManual(next *manualCordon) {
	old := r.manual.Swap(next)
	was, is := old != nil && old.applied, next != nil && next.applied
	switch {
	case is && !was:
		r.log.Warn("remote cordoned by hand: out of rotation", "by", next.By, "reason", next.Reason, "until", next.Until)
	case next == nil && old != nil:
		r.log.Info("remote's manual cordon lifted or over")
	case next != nil && !is && (old == nil || was):
		r.log.Error("remote cordoned by hand but it is the last in rotation: not applied", "by", next.By)
	}
	r.syncCordonGauge(r.now())
}

// syncCordonGauge sets venn_remote_cordoned: 1 while a cordon keeps r out,
// by hand or for misbehaviour.
func (r *Remote) syncCordonGauge(now time.Time) {
	if g := r.mb.cordonedGauge; g != nil {
		v := 0.0
		if r.manuallyOut() || now.UnixNano() < r.mb.cordonedUntil.Load() {
			v = 1
		}
		g.Set(v)
	}
}
