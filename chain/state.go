package chain

import (
	"context"

	"github.com/venn-gateway/venn/admin"
	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/router"
	"github.com/venn-gateway/venn/subcenter"
)

// Name is the chain's name, its path on the server.
func (c *Chain) Name() string { return c.name }

// Config is the chain's configuration as last applied.
func (c *Chain) Config() Config { return c.cfg }

// Pool is the chain's remotes pool.
func (c *Chain) Pool() *remotes.Pool { return c.pool }

// Router is the chain's JSON-RPC handler.
func (c *Chain) Router() *router.Router { return c.router }

// SetSubscriptionLimits puts the subscription limits in force on new
// subscriptions and on the notifications queued from now on.
func (c *Chain) SetSubscriptionLimits(l subcenter.Limits) {
	c.head.subs.SetLimits(subcenter.LimitOptions(l))
}

// HeadTracking says how this replica follows the remotes' heads in a
// cluster: leader, feed or own (stalker.HeadShare.Mode); "" without Redis.
func (c *Chain) HeadTracking() string {
	if c.head.heads == nil {
		return ""
	}
	return c.head.heads.Mode()
}

// WindowHead is this replica's head window's head; false when empty.
func (c *Chain) WindowHead() (uint64, bool) {
	n, _, ok := c.head.window.Head()
	return n, ok
}

// Window is this replica's head window, the feed every head stream reads
// (newHeads, gRPC's SubscribeHead); read only.
func (c *Chain) Window() *headstore.Window { return c.head.window }

// NATSFeed is the chain's JetStream feed's state (natsfeed.Publisher's);
// "" when off.
func (c *Chain) NATSFeed() string {
	if c.head.feed == nil {
		return ""
	}
	return c.head.feed.State()
}

// State is the chain's state beside its pool, for the admin API; History
// is left to the caller, which owns the store.
func (c *Chain) State() admin.ChainState {
	st := admin.ChainState{Leading: c.head.leading.Load(), Subscribers: c.head.subs.Subscribers(), History: "off"}
	if tags, ok := c.head.window.Tags(); ok {
		st.Safe, st.Finalized = tags.Safe, tags.Finalized
	}
	if bs := c.head.window.Blocks(); len(bs) > 0 {
		st.Window = admin.Span{From: bs[0].Number, To: bs[len(bs)-1].Number, Blocks: len(bs)}
	}
	if n, ok := c.settled(); ok {
		st.Settled = &n
	}
	if k := c.cache.Load(); k != nil {
		st.Cache = k.c.State(context.Background()) // each tier bounded by its own timeout
	}
	return st
}

// Cached reports whether the chain has a response cache now.
func (c *Chain) Cached() bool { return c.cache.Load() != nil }

// PurgeCache drops the cache's entries p selects, on every tier; none
// without a cache.
func (c *Chain) PurgeCache(ctx context.Context, p cache.Purge) (int64, error) {
	k := c.cache.Load()
	if k == nil {
		return 0, nil
	}
	return k.c.Purge(ctx, p)
}
