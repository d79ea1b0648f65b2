package remotes

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"reflect"
	"slices"
	"time"

	"github.com/venn-gateway/venn/remotes/breaker"
	"github.com/venn-gateway/venn/remotes/consensus"
	"github.com/venn-gateway/venn/remotes/wire"
)

// A reload changes a running pool in place (Reconfigure): whoever holds
// the *Pool (the router, the stalker, the subcenter's relay) keeps it.
// What may change is held in one poolState, swapped whole, so a call reads
// one consistent set of settings and remotes; the hot path pays an atomic
// load for it, and nothing waits on a lock.

// poolState is a pool's settings, its remotes and what is compiled from
// them.
type poolState struct {
	cfg     PoolConfig
	remotes []*Remote                 // by tier, then config order
	sel     selector                  // select.go: which remote takes a call's next send
	hedge   *hedger                   // hedge.go; nil: no hedging
	rules   map[string]*consensusRule // consensus.go; nil: no votes
}

func (p *Pool) conf() *PoolConfig                { return &p.state.Load().cfg }
func (p *Pool) members() []*Remote               { return p.state.Load().remotes }
func (p *Pool) selection() *selector             { return &p.state.Load().sel }
func (p *Pool) hedger() *hedger                  { return p.state.Load().hedge }
func (p *Pool) rules() map[string]*consensusRule { return p.state.Load().rules }

// compile builds the state of cfg over members (in config order); old is
// the state it replaces (nil at first), whose hedge budget is kept while
// the hedge section is unchanged.
func (p *Pool) compile(cfg PoolConfig, members []*Remote, old *poolState) (*poolState, error) {
	rules, err := consensus.Compile(cfg.Consensus, len(members), TierFallback)
	if err != nil {
		return nil, err
	}
	st := &poolState{cfg: cfg, rules: rules}
	for tier := TierPrimary; tier <= TierFallback; tier++ {
		for _, r := range members {
			if r.cfg.Tier == tier {
				st.remotes = append(st.remotes, r)
			}
		}
	}
	st.sel = selector{remotes: st.remotes, probe: cfg.Scoring.Probe()}
	for _, r := range st.remotes {
		st.sel.budgeted = st.sel.budgeted || r.bud != nil
	}
	if old != nil && reflect.DeepEqual(old.cfg.Hedge, cfg.Hedge) {
		st.hedge = old.hedge
	} else {
		st.hedge = newHedger(cfg.Hedge, cfg.Chain, p.m)
	}
	return st, nil
}

// newRemote builds the remote rc of a pool with settings cfg, in a free
// slot. It does no I/O: the transport dials on its first call.
func (p *Pool) newRemote(cfg PoolConfig, rc Config) (*Remote, error) {
	rc = forPool(rc, cfg)
	slot, err := p.takeSlot()
	if err != nil {
		return nil, fmt.Errorf("chain %s: remote %s: %w", cfg.Chain, rc.Name, err)
	}
	var r *Remote // set before any call: the transport dials on its first
	opts := wire.Options{Name: rc.Name, URL: rc.URL,
		Headers: headerOf(rc.Headers), MaxIdleConns: max(rc.MaxInFlight, 64),
		MaxResponseBytes: rc.MaxResponseBytes, Budget: cfg.Replies,
		OtherURLs: []string{rc.WSURL}, Logger: p.log, Tracer: cfg.Tracer,
		OnRedial: func() { r.cc.Soon() }, Forward: forwardingOf(rc)}
	t, err := wire.New(opts)
	if err != nil {
		p.freeSlot(slot)
		return nil, fmt.Errorf("chain %s: %w", cfg.Chain, err)
	}
	brk := breaker.New(cfg.Breaker.Failures, cfg.Breaker.Cooldown)
	r = newRemote(cfg.Chain, rc, t, p.log, p.m.forRemote(cfg.Chain, rc.Name), brk)
	r.slot = slot
	r.distrust = func(cause string) { p.distrusted(r, cause) }
	r.red = opts.Redactor()
	r.initScoring(&cfg, p.m)
	r.initMisbehaviour(p.m)
	r.retune(&cfg)
	return r, nil
}

// retune puts in force on r the chain's settings every remote holds:
// breaker thresholds, chain_recheck and the misbehaviour half-life. A
// reload changes them in place, so the remote keeps its health, breaker
// state, score and misbehaviour level.
func (r *Remote) retune(cfg *PoolConfig) {
	r.brk.Set(cfg.Breaker.Failures, cfg.Breaker.Cooldown)
	r.cc.SetEvery(cfg.ChainRecheck)
	r.sc.level.SetHalfLife(r.now(), cfg.Scoring.MisbehaviourHalfLife)
}

// forPool is rc as a pool with settings cfg runs it.
func forPool(rc Config, cfg PoolConfig) Config {
	if rc.MaxResponseBytes <= 0 {
		rc.MaxResponseBytes = wire.DefaultMaxResponseBytes
	}
	// No larger reply could be read.
	rc.MaxResponseBytes = min(rc.MaxResponseBytes, cfg.Replies.Size())
	// The chain's forwarding is folded in, so a change to it rebuilds the
	// remote's transport.
	if len(cfg.ForwardHeaders) > 0 {
		rc.ForwardHeaders = append(slices.Clone(cfg.ForwardHeaders), rc.ForwardHeaders...)
	}
	rc.ForwardClientIP = rc.ForwardClientIP || cfg.ForwardClientIP
	return rc
}

var errNoSlot = errors.New("no free slot: too many remotes still finishing calls")

// takeSlot takes the lowest slot no member and no retiring remote holds:
// a call's mask of remotes tried (by slot) must not mistake a new remote
// for the one it replaced.
func (p *Pool) takeSlot() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.slots == ^uint64(0) {
		return 0, errNoSlot
	}
	s := bits.TrailingZeros64(^p.slots)
	p.slots |= 1 << s
	return s, nil
}

func (p *Pool) freeSlot(s int) {
	p.mu.Lock()
	p.slots &^= 1 << s
	p.mu.Unlock()
}

// follow starts r's trackers (chain id and head, and newHeads where it has
// a ws url) under the pool's context. Called with p.mu held, once started.
func (p *Pool) follow(r *Remote) {
	ctx, cancel := context.WithCancel(p.bg)
	r.unfollow = cancel
	h := &p.heads
	r.trackers.Go(func() { r.track(ctx, p.conf().ChainID, h.pollCadence, h, h.changed) })
	if r.relayURL() != "" {
		r.trackers.Go(func() { r.watch(ctx, h.pollCadence, h, h.changed) })
	}
	if p.conf().Availability.probing() {
		r.trackers.Go(func() { p.probeLoop(ctx, r) })
	}
}

// Reconfiguration is what a Reconfigure did, by remote name.
type Reconfiguration struct {
	Added    []string `json:"added,omitempty"`
	Removed  []string `json:"removed,omitempty"`
	Replaced []string `json:"replaced,omitempty"` // its settings changed: a new remote, made before the old one breaks (rotate.go)
	Settings bool     `json:"settings,omitempty"` // the chain's pool settings changed
}

// Reconfigure applies a reloaded chain's pool settings and remotes, all
// at once. A remote whose own settings are unchanged is kept with its
// health, breaker, score and head, and the chain's settings it holds
// change on it in place (retune); a new one starts fresh, preferred, and
// is followed at once; a removed one leaves selection now. A changed one
// is replaced make-before-break (rotate.go): at the same endpoint its
// replacement takes over its verified chain and head at once; at another,
// it stays in selection until its replacement is verified. A remote that
// leaves finishes its calls in flight before its transport closes. The
// chain's name and id must be the pool's; misbehaviour_log is read at
// Start only and keeps its value, as do the fields the app sets (Replies,
// Tracer, Budgets, Availability.Share, OnDistrust). On an error nothing
// changed.
func (p *Pool) Reconfigure(cfg PoolConfig, rs []Config) (Reconfiguration, error) {
	p.reconfMu.Lock()
	defer p.reconfMu.Unlock()
	old := p.state.Load()
	rs, sideRs := splitSide(rs)
	cfg = cfg.WithDefaults(len(rs))
	switch {
	case cfg.Chain != old.cfg.Chain || cfg.ChainID != old.cfg.ChainID:
		return Reconfiguration{}, fmt.Errorf("chain %s: reconfigure: another chain (%s, id %d)", old.cfg.Chain, cfg.Chain, cfg.ChainID)
	case len(rs) == 0:
		return Reconfiguration{}, fmt.Errorf("chain %s: no remotes", cfg.Chain)
	case len(rs) > maxRemotes:
		return Reconfiguration{}, fmt.Errorf("chain %s: %d remotes, at most %d", cfg.Chain, len(rs), maxRemotes)
	}
	cfg.Replies, cfg.MisbehaviourLog, cfg.Tracer = old.cfg.Replies, old.cfg.MisbehaviourLog, old.cfg.Tracer
	cfg.Availability.Share = old.cfg.Availability.Share
	cfg.Budgets, cfg.OnDistrust = old.cfg.Budgets, old.cfg.OnDistrust
	p.mu.Lock()
	started := p.bg != nil
	p.mu.Unlock()
	rec, members, fresh, gone, pending, err := p.match(cfg, rs, old, started)
	if err != nil {
		return Reconfiguration{}, err
	}
	st, err := p.compile(cfg, members, old)
	if err != nil {
		p.discard(fresh)
		return Reconfiguration{}, fmt.Errorf("chain %s: %w", cfg.Chain, err)
	}
	sd, err := p.buildSide(cfg, sideRs)
	if err != nil {
		p.discard(fresh)
		return Reconfiguration{}, err
	}
	rec.Settings = !reflect.DeepEqual(old.cfg, cfg)
	for _, r := range members { // the kept ones take the new settings
		r.retune(&cfg)
	}
	for _, s := range pending { // and their replacements
		s.new.retune(&cfg)
	}
	p.endSwaps() // replacements still pending were judged again by match

	p.mu.Lock()
	p.setSide(sd)
	p.state.Store(st)
	if started {
		for _, r := range fresh {
			p.follow(r)
		}
		for _, r := range gone {
			p.wg.Go(func() { p.retire(r, old.cfg.CallDeadline) })
		}
		gen := p.swapGen
		for _, s := range pending {
			p.wg.Go(func() { p.swapIn(gen, s, cfg.CallDeadline) })
		}
	}
	p.mu.Unlock()
	p.swaps = pending
	if !started {
		p.discard(gone)
	}
	return rec, nil
}

// match pairs the remotes rs with the members of old: kept (unchanged),
// fresh (new or changed, built here), gone (removed, or changed and
// replaced now) and pending (changed, at another endpoint: the old one
// stays a member until its replacement is ready; rotate.go). Before the
// pool starts nothing is pending: no remote is verified yet.
func (p *Pool) match(cfg PoolConfig, rs []Config, old *poolState, started bool) (rec Reconfiguration, members, fresh, gone []*Remote, pending []swap, err error) {
	byName := make(map[string]*Remote, len(old.remotes))
	for _, r := range old.remotes {
		byName[r.Name()] = r
	}
	for _, rc := range rs {
		o, had := byName[rc.Name]
		delete(byName, rc.Name)
		if had && reflect.DeepEqual(o.cfg, forPool(rc, cfg)) {
			members = append(members, o)
			continue
		}
		r, err := p.newRemote(cfg, rc)
		if err != nil {
			p.discard(fresh)
			return Reconfiguration{}, nil, nil, nil, nil, err
		}
		fresh = append(fresh, r)
		switch {
		case !had:
			members = append(members, r)
			rec.Added = append(rec.Added, rc.Name)
			continue
		case sameEndpoint(o.cfg, r.cfg):
			p.carryOver(r, o)
			members, gone = append(members, r), append(gone, o)
		case started && o.chainVerified():
			members, pending = append(members, o), append(pending, swap{old: o, new: r})
		default: // nothing to stand in with: the old one is not verified either
			members, gone = append(members, r), append(gone, o)
		}
		r.bud.Inherit(o.bud)
		rec.Replaced = append(rec.Replaced, rc.Name)
	}
	for _, r := range old.remotes { // config order of what is left
		if byName[r.Name()] != nil {
			rec.Removed, gone = append(rec.Removed, r.Name()), append(gone, r)
		}
	}
	return rec, members, fresh, gone, pending, nil
}

// discard closes remotes that never served a call (never started, or
// built for a reconfiguration that failed), frees their slots and lets go
// of their series.
func (p *Pool) discard(rs []*Remote) {
	for _, r := range rs {
		r.t.Close()
		p.freeSlot(r.slot)
		r.m.release()
	}
}

// retireEvery is how often a retired remote's calls in flight are counted.
const retireEvery = 20 * time.Millisecond

// retire ends a remote that left the pool: its trackers stop at once; its
// calls in flight (sent before it left selection) finish, for at most a
// call deadline, before its transport closes, its slot is free again and
// its series are deleted. The pool's Stop cuts the wait short.
func (p *Pool) retire(r *Remote, deadline time.Duration) {
	r.unfollow()
	r.trackers.Wait()
	// A call that picked r just before it left is a few instructions from
	// counting itself in flight: the first look comes a tick later.
	t := time.NewTicker(retireEvery)
	defer t.Stop()
	limit := time.NewTimer(deadline + time.Second)
	defer limit.Stop()
	for done := false; !done; {
		select {
		case <-t.C:
			done = r.inFlight.Load() == 0
		case <-limit.C:
			done = true
		case <-p.bg.Done():
			done = true
		}
	}
	r.t.Close()
	p.freeSlot(r.slot)
	r.m.release() // its series go, unless a remote of its name took them over
	r.log.Info("remote left the pool")
}
