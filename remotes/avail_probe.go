package remotes

// The availability probe: when the chain's first call for old data comes
// (a chain nobody asks for history costs no probe) and every
// availability.probe_every after, each remote whose window config does not
// state is asked for a few old blocks of each kind of data, a bounded
// search for the oldest it serves (avail.go). In a cluster the results are
// shared (AvailShare), so that one replica probes a remote for all of them.
// The search, its calls and whether the probes are wanted yet are
// remotes/avail's; this file runs the probes, asks the remotes and judges
// their answers.

import (
	"context"
	"time"

	"github.com/venn-gateway/venn/remotes/avail"
	"github.com/venn-gateway/venn/remotes/verdict"
)

// Probe bounds (the search's own are avail's).
const (
	// probeTimeout bounds one remote's probe.
	probeTimeout = time.Minute
	// probeRetry is how soon a replica that lost the claim to probe a remote
	// looks for the result of the one that won (and claims again if none).
	probeRetry = 5 * time.Second
	// probeClaimTTL is how long a claim to probe a remote holds.
	probeClaimTTL = 2 * probeTimeout
)

// AvailShare is where a cluster's replicas share the windows one of them
// probed. The app gives a Redis one (package keyspace names its
// keys); without it every process probes for itself.
type AvailShare interface {
	// Load is the probe of remote last stored; ok false when there is none.
	Load(ctx context.Context, chain, remote string) (p Probed, ok bool, err error)
	// Claim takes the right to probe remote for ttl: false when another
	// replica holds it.
	Claim(ctx context.Context, chain, remote string, ttl time.Duration) (bool, error)
	// Store shares a probe's result.
	Store(ctx context.Context, chain, remote string, p Probed) error
}

// Probed is the result of one remote's probe (avail.Probed).
type Probed = avail.Probed

// probeLoop probes r once the chain's first call for old data came and r
// has a head, and every probe_every after; it returns when ctx ends.
func (p *Pool) probeLoop(ctx context.Context, r *Remote) {
	if r.stated() {
		return // config wins: nothing to learn
	}
	for !p.wanted.Due(p.heads.Head()) {
		select {
		case <-ctx.Done():
			return
		case <-p.wanted.C():
		case <-p.heads.HeadChanged():
		}
	}
	for {
		if !p.awaitHead(ctx, r) {
			return
		}
		wait := p.probeOnce(ctx, r)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// awaitHead waits until r is on the right chain with a head deep enough to
// probe below; false when ctx ends first.
func (p *Pool) awaitHead(ctx context.Context, r *Remote) bool {
	tick := time.NewTicker(time.Second) // the chain check reports no event
	defer tick.Stop()
	for !r.chainVerified() || r.Head() <= 2*avail.Depth {
		select {
		case <-ctx.Done():
			return false
		case <-p.heads.HeadChanged():
		case <-tick.C:
		}
	}
	return true
}

// probeOnce brings r's windows up to date, from the cluster's shared probe
// when it is fresh, else by probing (under the cluster's claim when there
// is a share); it returns when to look again.
func (p *Pool) probeOnce(ctx context.Context, r *Remote) time.Duration {
	cfg := p.conf()
	every, share := cfg.Availability.ProbeEvery, cfg.Availability.Share
	if share != nil {
		got, ok, err := share.Load(ctx, cfg.Chain, r.Name())
		if age := p.now().Sub(got.At); err == nil && ok && age < every {
			r.applyProbe(got)
			return every - age
		}
		won, err := share.Claim(ctx, cfg.Chain, r.Name(), probeClaimTTL)
		if err == nil && !won {
			return probeRetry // another replica is probing: take its result
		}
		if err != nil {
			p.log.Warn("availability share unreachable: probing alone", "remote", r.Name(), "err", err)
		}
	}
	got := p.probe(ctx, r)
	r.applyProbe(got)
	if share != nil {
		if err := share.Store(ctx, cfg.Chain, r.Name(), got); err != nil {
			p.log.Warn("availability probe not shared", "remote", r.Name(), "err", err)
		}
	}
	return every
}

// probe searches each kind of data at r for the oldest block it serves.
func (p *Pool) probe(ctx context.Context, r *Remote) Probed {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	head := r.Head()
	got := avail.NewProbed(p.now(), head)
	for _, k := range DataKinds {
		has := func(n uint64) (bool, bool) { return probeHas(ctx, r, k, n) }
		if oldest, lacks, ok := avail.Search(head, has); ok {
			got.Set(k, oldest, lacks)
		}
	}
	r.log.Info("remote availability probed", "head", head, "oldest", got.Oldest)
	return got
}

// probeHas asks r for kind k at block n: served when it answered with the
// data, settled when the answer says either way (a pruned or missing
// answer settles it unserved; a fault, a limit or a method r lacks does
// not).
func probeHas(ctx context.Context, r *Remote, k DataKind, n uint64) (served, settled bool) {
	method, params := avail.Call(k, n)
	if !r.supports(method) {
		return false, false
	}
	res, err := r.call(ctx, method, params)
	if err != nil {
		return false, lacksData(verdict.Classify(method, err))
	}
	if isNull(res) {
		return false, k == KindBlocks
	}
	return true, true
}

// applyProbe sets r's windows from a probe's result, over what answers
// taught: a probe may lower a window they raised. Kinds it could not
// settle keep what they had.
func (r *Remote) applyProbe(got Probed) {
	if r.stated() {
		return
	}
	for _, k := range DataKinds {
		if o, lacks, ok := got.Of(k); ok {
			r.setProbed(k, o, lacks, got.Head, got.At)
		}
	}
}

// setProbed sets r's window of kind k from a probe at head atHead, and its
// gauge.
func (r *Remote) setProbed(k DataKind, oldest, lacks, atHead uint64, at time.Time) {
	r.m.oldest[k].Set(float64(r.av.Probed(k, oldest, lacks, atHead, at, r.Head())))
}
