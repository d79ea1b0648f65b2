package router

import (
	"context"
	"encoding/json"

	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jrpc"
)

// Cache is the chain's response cache (cache.Cache): state and trace
// answers at a fixed block, asked after the head window and history and
// before the remotes.
type Cache interface {
	Keeps(method string) bool
	Serve(ctx context.Context, c *evm.Call, at cache.View, skip bool, fetch cache.Fetch) (json.RawMessage, error, cache.Outcome)
}

var _ Cache = (*cache.Cache)(nil)

// cacheView is the chain as the cache resolves blocks: the settled line,
// and the head window's canonical hashes only while the window is fresh (a
// stale one could miss a reorg, and key an answer by an orphan's hash).
type cacheView struct{ rt *Router }

func (v cacheView) Settled() (uint64, bool) { return v.rt.settledLine() }

func (v cacheView) CanonicalHash(n uint64) (string, bool) {
	if v.rt.canonical == nil || !v.rt.fresh() {
		return "", false
	}
	return v.rt.canonical(n)
}

// cacheRef holds the chain's response cache for an atomic swap.
type cacheRef struct{ Cache }

// SetCache replaces the chain's response cache (nil: none), for a reload;
// calls in flight finish on the one they started with.
func (rt *Router) SetCache(c Cache) {
	if c == nil {
		rt.cache.Store(nil)
		return
	}
	rt.cache.Store(&cacheRef{c})
}

// cacheNow is the chain's response cache; nil: none.
func (rt *Router) cacheNow() Cache {
	if r := rt.cache.Load(); r != nil {
		return r.Cache
	}
	return nil
}

// cacheFor is the response cache when it keeps c's method; nil: none.
// The one load of the swapped pointer serves the whole call.
func (rt *Router) cacheFor(c *evm.Call) Cache {
	if ch := rt.cacheNow(); ch != nil && ch.Keeps(c.Method) {
		return ch
	}
	return nil
}

// cachedForward is forward through the response cache. c is a copy: the
// cache holds it through the miss, and only the calls it keeps pay for one
// on the heap; every other call stays on its caller's stack.
func (rt *Router) cachedForward(ctx context.Context, ch Cache, req *jrpc.Request, c evm.Call) (json.RawMessage, error) {
	return rt.cached(ctx, ch, &c, rt.forwarded.answered, func(ctx context.Context, pinned string) (json.RawMessage, error) {
		p := pinnedTo(&c, pinned)
		return rt.forward(ctx, req, &p)
	})
}

// cachedReceipts is the forger's eth_getBlockReceipts through the response
// cache; c is a copy, as in cachedForward.
func (rt *Router) cachedReceipts(ctx context.Context, ch Cache, c evm.Call) (json.RawMessage, error) {
	var built bool
	return rt.cached(ctx, ch, &c, func(ctx context.Context) {
		if built {
			rt.forged.answered(ctx)
		} else {
			rt.forwarded.answered(ctx)
		}
	}, func(ctx context.Context, pinned string) (json.RawMessage, error) {
		p := pinnedTo(&c, pinned)
		res, b, err := rt.forge.BlockReceipts(ctx, &p)
		built = b
		return res, err
	})
}

// pinnedTo is c sent pinned by EIP-1898 to the block hash its answer is to
// be stored under (cache.Fetch): a remote on another branch then lacks the
// block and the pool tries another, where by number it would answer for
// its own block. The answer is the node's for that block, as by number.
func pinnedTo(c *evm.Call, hash string) evm.Call {
	if hash != "" {
		if p, ok := c.WithBlockHash(hash); ok {
			return p
		}
	}
	return *c
}

// cached answers c from the response cache ch, or by fetch through it;
// answered notes the source of a fetched answer (remotes, forger).
func (rt *Router) cached(ctx context.Context, ch Cache, c *evm.Call, answered func(context.Context), fetch cache.Fetch) (json.RawMessage, error) {
	// The lookup's span covers a miss's fetch too; the sends stay children
	// of the call's span, as for every call that reaches the remotes.
	_, sp := rt.lookup(ctx, spanCache)
	res, err, o := ch.Serve(ctx, c, cacheView{rt}, jrpc.SkipCache(ctx), fetch)
	endLookup(sp, o == cache.Hit)
	if o != cache.None {
		jrpc.NoteOf(ctx).Cached(o.String())
	}
	if o == cache.Hit {
		rt.fromCache.answered(ctx)
	} else {
		answered(ctx)
	}
	return res, err
}
