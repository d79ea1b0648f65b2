package remotes

// Key rotation without a dropped call. A reload that changes a remote's
// url, ws_url or headers (a provider key rotated, the normal case) replaces
// the remote, and the replacement knows neither its chain id nor its head:
// it may not serve until it has both. Taking the old one out at once would
// leave a chain whose remotes all rotate with none for a round trip and a
// head poll, and every call in between would fail. So a replacement is made
// before the old one breaks:
//
//   - same endpoint (sameEndpoint: the same scheme, host and port, and the
//     URLs differ only in what looks like a credential: user info, a
//     key-like path segment, a credential's query value, a header's
//     value): the replacement takes over the verified chain and the head
//     at once, and its chain id is checked again at once; it stays in
//     rotation meanwhile, as a remote whose connection was dialled again
//     does (chaincheck.go), and a wrong answer takes it out and drops its
//     answers in flight;
//   - another endpoint: the old remote stays a member, in selection, until
//     its replacement's chain id is verified and its head corroborated
//     (swapIn), then the two trade places in one state swap; the old one
//     then finishes its calls in flight and retires. A replacement not
//     ready within swapWait takes the old one's place anyway: the config
//     says so, and the old key may be the one that stopped working.
//
// A reload that comes while replacements are pending drops them (they
// never served) and judges the remotes afresh against the members.

import (
	"net/url"
	"strings"
	"time"

	"github.com/venn-gateway/venn/remotes/wire"
)

// Swap timings.
const (
	// swapWait bounds how long an old remote stands in for its replacement.
	swapWait = 30 * time.Second
	// swapEvery is how often a pending replacement is looked at.
	swapEvery = 10 * time.Millisecond
)

// swap is a pending replacement: old stays in selection until new is ready.
type swap struct {
	old, new *Remote
}

// sameEndpoint reports whether b reaches the same endpoint as a, with
// other credentials at most: the chain and head a verified for it hold for
// b, once b's chain id is checked again.
func sameEndpoint(a, b Config) bool {
	if !sameURLButKeys(a.URL, b.URL) || !sameURLButKeys(a.WSURL, b.WSURL) || len(a.Headers) != len(b.Headers) {
		return false
	}
	for k, av := range a.Headers {
		bv, ok := b.Headers[k]
		if !ok || av != bv && !wire.SecretName(k) && !(wire.LooksLikeKey(av) && wire.LooksLikeKey(bv)) {
			return false
		}
	}
	return true
}

// sameURLButKeys reports whether x and y differ only in credentials: user
// info, path segments that both look like keys, and query values that
// are named like credentials or both look like keys. A path segment that
// does not look like a key may select a network ("/eth/KEY",
// "/polygon/KEY"): it must be the same.
func sameURLButKeys(x, y string) bool {
	if x == y {
		return true
	}
	if x == "" || y == "" {
		return false
	}
	ux, errX := url.Parse(x)
	uy, errY := url.Parse(y)
	if errX != nil || errY != nil || !strings.EqualFold(ux.Scheme, uy.Scheme) ||
		!strings.EqualFold(ux.Host, uy.Host) || ux.Fragment != uy.Fragment {
		return false
	}
	px, py := strings.Split(ux.EscapedPath(), "/"), strings.Split(uy.EscapedPath(), "/")
	if len(px) != len(py) {
		return false
	}
	for i := range px {
		if px[i] != py[i] && !(wire.LooksLikeKey(px[i]) && wire.LooksLikeKey(py[i])) {
			return false
		}
	}
	qx, qy := ux.Query(), uy.Query()
	if len(qx) != len(qy) {
		return false
	}
	for k, vx := range qx {
		vy, ok := qy[k]
		if !ok || len(vx) != len(vy) {
			return false
		}
		for i := range vx {
			if vx[i] != vy[i] && !wire.SecretName(k) && !(wire.LooksLikeKey(vx[i]) && wire.LooksLikeKey(vy[i])) {
				return false
			}
		}
	}
	return true
}

// carryOver gives r, the replacement of old at the same endpoint, old's
// verified chain and head, and asks for r's chain id to be checked at once
// (it is checked when r is followed). h.mu guards the head judgement.
func (p *Pool) carryOver(r, old *Remote) {
	if !old.chainVerified() {
		return // nothing verified to carry: r starts like any new remote
	}
	p.heads.t.Lock()
	r.ht = old.ht.Carried()
	r.claim.Store(old.claim.Load())
	r.head.Store(old.head.Load())
	p.heads.t.Unlock()
	r.wsHeadAt.Store(old.wsHeadAt.Load())
	r.latencyEWMA.Store(old.latencyEWMA.Load())
	r.cc.Carried()                    // verified, and checked again at once
	r.goodAt.Store(old.goodAt.Load()) // the same endpoint: its answers since are suspect alike
	r.mb.suspectUntil.Store(old.mb.suspectUntil.Load())
}

// swapIn puts s.new in s.old's place once s.new is ready (or swapWait has
// passed), unless a later reload (generation gen moved on) or Stop came
// first.
func (p *Pool) swapIn(gen uint64, s swap, deadline time.Duration) {
	tick := time.NewTicker(swapEvery)
	defer tick.Stop()
	limit := time.NewTimer(swapWait)
	defer limit.Stop()
	waited := false
	for {
		select {
		case <-p.bg.Done():
			return // Stop: endSwaps closes it
		case <-limit.C:
			waited = true
		case <-tick.C:
		}
		if !waited && !p.ready(s.new) {
			continue
		}
		p.reconfMu.Lock()
		if p.swapGen != gen {
			p.reconfMu.Unlock()
			return // a later reload dropped s.new
		}
		cur := p.state.Load()
		members := make([]*Remote, len(cur.remotes))
		for i, r := range cur.remotes {
			if r == s.old {
				r = s.new
			}
			members[i] = r
		}
		st, err := p.compile(cur.cfg, members, cur)
		if err != nil { // cannot be: the same number of remotes compiled before
			p.reconfMu.Unlock()
			p.log.Error("remote replacement failed; the old remote stays", "remote", s.new.Name(), "err", err)
			return
		}
		p.mu.Lock()
		p.state.Store(st)
		p.wg.Go(func() { p.retire(s.old, deadline) })
		p.mu.Unlock()
		p.swaps = dropSwap(p.swaps, s)
		p.reconfMu.Unlock()
		p.heads.changed()
		if waited {
			s.new.log.Warn("remote replaced before its replacement was ready", "waited", swapWait)
		} else {
			s.new.log.Info("remote replaced: its replacement is verified and has a head")
		}
		return
	}
}

// ready reports whether r, a pending replacement, could take calls: its
// chain id verified and its latest head corroborated against the members'
// heads, within max_lag of the chain's.
func (p *Pool) ready(r *Remote) bool {
	if !r.chainVerified() || r.claim.Load() == nil {
		return false
	}
	now := p.now()
	p.heads.judge(r, now) // a held head is not logged: r is not followed yet
	return r.Head() > 0 && r.healthy(now) && !p.lagging(r, p.healthyBest(now))
}

func dropSwap(ss []swap, s swap) []swap {
	out := ss[:0]
	for _, o := range ss {
		if o != s {
			out = append(out, o)
		}
	}
	return out
}

// endSwaps drops the pending replacements (a reload supersedes them, or
// the pool stops): they never served, so their trackers stop and they
// close at once. p.reconfMu must be held.
func (p *Pool) endSwaps() {
	p.swapGen++
	for _, s := range p.swaps {
		if s.new.unfollow != nil {
			s.new.unfollow()
			s.new.trackers.Wait()
		}
		p.discard([]*Remote{s.new})
	}
	p.swaps = nil
}
