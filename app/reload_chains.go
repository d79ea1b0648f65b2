package app

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/venn-gateway/venn/chain"
)

// applyChains updates the chains that keep their identity (name and chain
// id: chain.Chain.Reconfigure), removes the ones gone and adds the new
// ones, then serves the new list.
func (r *Reloader) applyChains(ctx context.Context, next *Config, rep *ReloadReport) {
	cs := r.chains
	cs.parts.Limits = next.Limits.Subscriptions
	kept := make(map[string]*chain.Chain)
	for _, c := range cs.all() {
		kept[c.Name()] = c
	}
	var (
		list  []*chain.Chain
		added []*chain.Chain
	)
	for i, cc := range next.Chains {
		if c := kept[cc.Name]; c != nil && c.Config().ChainID == cc.ChainID {
			delete(kept, cc.Name)
			done := c.Reconfigure(cc, fmt.Sprintf("chains[%d]", i))
			rep.Changes = append(rep.Changes, done.Changes...)
			rep.RestartRequired = append(rep.RestartRequired, done.Restart...)
			rep.Problems = append(rep.Problems, done.Problems...)
			list = append(list, c)
			continue
		}
		c, err := chain.New(cc, cs.parts)
		if err != nil {
			rep.Problems = append(rep.Problems, err.Error())
			continue
		}
		list, added = append(list, c), append(added, c)
	}
	for _, c := range kept { // removed, or its chain id changed
		if r.nats != nil {
			r.nats.Unserve(c.Name())
		}
		n, _ := r.rpc.Remove(c.Name(), "chain "+c.Name()+" removed by a config reload")
		rep.change("chain %s removed (%d WebSocket connections closed)", c.Name(), n)
		cs.retire(c)
	}
	failed := map[*chain.Chain]bool{}
	for _, c := range added {
		// Listed only once started: a chain listed but not running would
		// hold /readyz at 503, and the next reload would take it as kept.
		if err := c.Start(ctx, cs.campaigns()); err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("chain %s not added: %v", c.Name(), err))
			_ = c.Stop(ctx) // not run: closes its cache, and what Start opened before it failed
			c.Forget()
			failed[c] = true
			continue
		}
		r.rpc.Handle(c.Name(), c.Router())
		if r.nats != nil {
			if err := r.nats.Serve(c.Name()); err != nil {
				rep.Problems = append(rep.Problems, fmt.Sprintf("chain %s: not served over NATS: %v", c.Name(), err))
			}
		}
		rep.change("chain %s added", c.Name())
	}
	list = slices.DeleteFunc(list, func(c *chain.Chain) bool { return failed[c] })
	cs.publish(list)
	if !cs.campaigns() { // a drain that began after Start, and went over the list before the Store
		for _, c := range added {
			_, _ = c.Drain(ctx)
		}
	}
}

// campaigns reports whether a chain a reload adds campaigns for its
// leadership: not on a drained replica, which hands leaderships over.
// Without Redis a drain keeps leading (drain): there is nobody else.
func (cs *chains) campaigns() bool { return cs.rdb == nil || !cs.draining.Load() }

// retireTimeout bounds a removed chain's campaign and follower stopping.
const retireTimeout = 10 * time.Second

// retire stops a removed chain in the background (chain.Chain.Retire);
// the process's stop cuts its wait for the calls in flight short.
func (cs *chains) retire(c *chain.Chain) {
	cs.retired.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), retireTimeout)
		defer cancel()
		if err := c.Retire(ctx, cs.stopping); err != nil {
			cs.log.Warn("removed chain", "chain", c.Name(), "err", err)
		}
		cs.log.Info("chain stopped: removed by a config reload", "chain", c.Name())
	})
}
