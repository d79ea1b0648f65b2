package app

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/venn-gateway/venn/remotes/status"
)

// A chain's identity is its name and chain id: while they stay, a reload
// keeps the chain's head feed (leadership, the head window, history) and
// its WebSocket clients, and applies its sections below. A chain whose
// identity changed is removed and added again.

// chainSection is one part of a chain's configuration as a reload sees
// it: the ChainConfig fields it covers (every field is some section's:
// TestChainSectionsCoverConfig), and how to apply a change, applied as a
// unit. Without apply, a change takes a restart: it is compared with what
// the chain was built with and named in restart_required.
//
// A new section of ChainConfig joins by adding itself here.
type chainSection struct {
	name   string   // as the file spells it, in the report
	fields []string // ChainConfig's Go field names
	apply  func(c *chain, cc ChainConfig) (changes []string, err error)
}

var chainSections = []chainSection{
	{name: "name, chain_id", fields: []string{"Name", "ChainID"}}, // identity: never changed in place
	{name: "remotes and pool settings", fields: []string{"Pool", "Remotes"}, apply: applyPool},
	{name: "head", fields: []string{"Head"}},           // the head window and stalker are built with it
	{name: "history", fields: []string{"History"}},     // the archiver is built with it
	{name: "integrity", fields: []string{"Integrity"}}, // the router is built in front of it
	{name: "cache", fields: []string{"Cache"}, apply: applyCache},
	{name: "getlogs_limits", fields: []string{"GetLogsLimits"}, apply: applyLogLimits},
	{name: "filters", fields: []string{"Filters"}, apply: applyFilters},
	{name: "static_answers", fields: []string{"StaticAnswers"}, apply: applyStatic},
	{name: "nats", fields: []string{"NATS"}}, // the feed's publisher is built with it
}

// applyStatic puts a chain's static answers in force on its router.
func applyStatic(c *chain, cc ChainConfig) ([]string, error) {
	c.router.SetStaticAnswers(cc.StaticAnswers)
	return []string{fmt.Sprintf("chain %s: static_answers applied", c.name)}, nil
}

// applyFilters puts a chain's filter timeout and caps in force.
func applyFilters(c *chain, cc ChainConfig) ([]string, error) {
	c.head.filters.SetConfig(cc.Filters)
	return []string{fmt.Sprintf("chain %s: filters applied", c.name)}, nil
}

// applyLogLimits puts a chain's eth_getLogs caps in force on its router.
func applyLogLimits(c *chain, cc ChainConfig) ([]string, error) {
	c.router.SetLogLimits(cc.GetLogsLimits)
	return []string{fmt.Sprintf("chain %s: getlogs_limits applied", c.name)}, nil
}

// same reports whether a and b agree on the section's fields.
func (s chainSection) same(a, b ChainConfig) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for _, f := range s.fields {
		if !reflect.DeepEqual(va.FieldByName(f).Interface(), vb.FieldByName(f).Interface()) {
			return false
		}
	}
	return true
}

// applyPool applies the remotes and the pool settings in one step
// (remotes.Pool.Reconfigure), and max_lag to the router.
func applyPool(c *chain, cc ChainConfig) ([]string, error) {
	// The pool keeps its reply budget and misbehaviour_log (opened at
	// start; updateChain names it).
	rec, err := c.pool.Reconfigure(cc.PoolConfig(), cc.Remotes)
	if err != nil {
		return nil, err
	}
	c.router.SetMaxLag(cc.Pool.MaxLag)
	var out []string
	for _, n := range rec.Added {
		out = append(out, fmt.Sprintf("chain %s: remote %s added", c.name, n))
	}
	for _, n := range rec.Replaced {
		out = append(out, fmt.Sprintf("chain %s: remote %s changed (replaced: its health starts afresh)", c.name, n))
	}
	for _, n := range rec.Removed {
		out = append(out, fmt.Sprintf("chain %s: remote %s removed (its calls in flight finish on it)", c.name, n))
	}
	if rec.Settings {
		out = append(out, fmt.Sprintf("chain %s: pool settings applied", c.name))
	}
	return out, nil
}

// applyChains updates the chains that keep their identity, removes the
// ones gone and adds the new ones, then serves the new list.
func (r *Reloader) applyChains(ctx context.Context, next *Config, rep *ReloadReport) {
	cs := r.chains
	cs.parts.limits = next.Limits.Subscriptions
	kept := make(map[string]*chain)
	for _, c := range cs.all() {
		kept[c.name] = c
	}
	var (
		list  []*chain
		added []*chain
	)
	for i, cc := range next.Chains {
		if c := kept[cc.Name]; c != nil && c.cfg.ChainID == cc.ChainID {
			delete(kept, cc.Name)
			r.updateChain(c, cc, fmt.Sprintf("chains[%d]", i), rep)
			list = append(list, c)
			continue
		}
		c, err := cs.build(cc)
		if err != nil {
			rep.Problems = append(rep.Problems, err.Error())
			continue
		}
		list, added = append(list, c), append(added, c)
	}
	for _, c := range kept { // removed, or its chain id changed
		if r.nats != nil {
			r.nats.Unserve(c.name)
		}
		n, _ := r.rpc.Remove(c.name, "chain "+c.name+" removed by a config reload")
		rep.change("chain %s removed (%d WebSocket connections closed)", c.name, n)
		cs.retire(c)
	}
	failed := map[*chain]bool{}
	for _, c := range added {
		// Listed only once started: a chain listed but not running would
		// hold /readyz at 503, and the next reload would take it as kept.
		if err := c.pool.Start(ctx); err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("chain %s not added: %v", c.name, err))
			_ = c.halt(ctx)      // not run: closes its cache
			_ = c.pool.Stop(ctx) // what Start opened before it failed
			cs.forget(c)
			failed[c] = true
			continue
		}
		c.run(cs.campaigns())
		r.rpc.Handle(c.name, c.router)
		if r.nats != nil {
			if err := r.nats.Serve(c.name); err != nil {
				rep.Problems = append(rep.Problems, fmt.Sprintf("chain %s: not served over NATS: %v", c.name, err))
			}
		}
		rep.change("chain %s added", c.name)
	}
	list = slices.DeleteFunc(list, func(c *chain) bool { return failed[c] })
	cs.list.Store(&list)
	if !cs.campaigns() { // a drain that began after run, and went over the list before the Store
		for _, c := range added {
			if h := c.head; h.stopCampaign != nil {
				h.stopCampaign()
			}
		}
	}
}

// updateChain applies the sections of cc that changed to c.
func (r *Reloader) updateChain(c *chain, cc ChainConfig, path string, rep *ReloadReport) {
	for _, s := range chainSections {
		if s.apply == nil {
			if !s.same(c.built, cc) {
				rep.restart(path + " " + s.name)
			}
			continue
		}
		if s.same(c.cfg, cc) {
			continue
		}
		changes, err := s.apply(c, cc)
		if err != nil {
			rep.Problems = append(rep.Problems, err.Error())
			continue
		}
		rep.Changes = append(rep.Changes, changes...)
		for _, f := range s.fields { // what is now in force
			reflect.ValueOf(&c.cfg).Elem().FieldByName(f).Set(reflect.ValueOf(cc).FieldByName(f))
		}
	}
	if cc.Pool.MisbehaviourLog != c.built.Pool.MisbehaviourLog {
		rep.restart(path + ".misbehaviour_log")
	}
}

// campaigns reports whether a chain a reload adds campaigns for its
// leadership: not on a drained replica, which hands leaderships over.
// Without Redis a drain keeps leading (drain): there is nobody else.
func (cs *chains) campaigns() bool { return cs.rdb == nil || !cs.draining.Load() }

// retireTimeout bounds a removed chain's campaign and follower stopping.
const retireTimeout = 10 * time.Second

// retire stops a removed chain in the background: its campaign and
// follower at once (a leader hands its lease over), its pool once the
// calls it was serving have finished, within a call deadline; then its
// series go (series.go). The process's stop cuts the wait short.
func (cs *chains) retire(c *chain) {
	cs.retired.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), retireTimeout)
		defer cancel()
		if err := c.halt(ctx); err != nil {
			cs.log.Warn("removed chain", "chain", c.name, "err", err)
		}
		cs.waitIdle(c)
		if err := c.pool.Stop(ctx); err != nil {
			cs.log.Warn("removed chain", "chain", c.name, "err", err)
		}
		// Its calls have finished (or had their call deadline): what is
		// still in flight counts into series no longer exported, where
		// they were resolved before (most are; see the README).
		cs.forget(c)
		cs.log.Info("chain stopped: removed by a config reload", "chain", c.name)
	})
}

// waitIdle waits, at most a call deadline, for the calls a removed chain's
// pool is sending to finish.
func (cs *chains) waitIdle(c *chain) {
	deadline := time.NewTimer(c.cfg.Pool.CallDeadline)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for status.InFlight(c.pool.Status()) > 0 {
		select {
		case <-tick.C:
		case <-deadline.C:
			return
		case <-cs.stopping:
			return
		}
	}
}

// waitRetired cuts the removed chains' waits short and waits for them.
func (cs *chains) waitRetired(ctx context.Context) error {
	cs.stopOnce.Do(func() { close(cs.stopping) })
	done := make(chan struct{})
	go func() { cs.retired.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("removed chains: stop: %w", ctx.Err())
	}
}
