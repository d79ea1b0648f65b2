package chain

import (
	"context"
	"errors"
	"time"

	"github.com/venn-gateway/venn/remotes/status"
)

// Drain hands the chain's leadership over: it ends the campaign (the
// elector releases a held lease as it returns) and waits for it, at most
// until ctx ends; the follower keeps the head window for the calls still
// served. released says this replica led and has let go; err is ctx's
// when the campaign outlived it (its lease is released when its stalker
// stops, or expires). A chain not started, or not campaigning, has
// nothing to hand over.
func (c *Chain) Drain(ctx context.Context) (released bool, err error) {
	h := c.head
	if h.stopCampaign == nil {
		return false, nil
	}
	led := h.leading.Load()
	h.stopCampaign()
	select {
	case <-h.campaignDone:
		return led, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// Campaigns reports whether the chain was started campaigning for its
// leadership (Start's campaign), drained or not since.
func (c *Chain) Campaigns() bool { return c.head.stopCampaign != nil }

// Retire stops a chain removed for good: its campaign and follower at
// once (a leader hands its lease over), its pool once the calls it was
// serving have finished, within a call deadline (cut, when closed, cuts
// that wait short); then its series go (Forget). ctx bounds the stopping.
func (c *Chain) Retire(ctx context.Context, cut <-chan struct{}) error {
	err := c.halt(ctx)
	c.waitIdle(cut)
	err = errors.Join(err, c.pool.Stop(ctx))
	// Its calls have finished (or had their call deadline): what is
	// still in flight counts into series no longer exported, where
	// they were resolved before (most are; see the README).
	c.Forget()
	return err
}

// waitIdle waits, at most a call deadline, for the calls the chain's pool
// is sending to finish.
func (c *Chain) waitIdle(cut <-chan struct{}) {
	deadline := time.NewTimer(c.cfg.Pool.CallDeadline)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for status.InFlight(c.pool.Status()) > 0 {
		select {
		case <-tick.C:
		case <-deadline.C:
			return
		case <-cut:
			return
		}
	}
}
