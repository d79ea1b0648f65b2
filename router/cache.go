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

// cached answers c from the response cache, or by fetch through it;
// answered notes the source of a fetched answer (remotes, forger).
func (rt *Router) cached(ctx context.Context, c *evm.Call, answered func(context.Context), fetch cache.Fetch) (json.RawMessage, error) {
	if rt.cache == nil {
		res, err := fetch(ctx)
		answered(ctx)
		return res, err
	}
	res, err, o := rt.cache.Serve(ctx, c, cacheView{rt}, jrpc.SkipCache(ctx), fetch)
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
