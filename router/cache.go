package router

import (
	"context"
	"encoding/json"

	"go.opentelemetry.io/otel/trace"

	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jrpc"
)

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

func (v cacheView) SettledHash(ctx context.Context, n uint64) (string, bool) {
	return v.rt.settledHash(ctx, n)
}

func (v cacheView) CanonicalNumber(hash string) (uint64, bool) {
	if v.rt.canonicalNumber == nil || !v.rt.fresh() {
		return 0, false
	}
	return v.rt.canonicalNumber(hash)
}

// SetCache replaces the chain's response cache (nil: none), for a reload;
// calls in flight finish on the one they started with. The router holds
// the concrete *cache.Cache, not an interface of its own: through an
// interface every call the cache keeps would escape to the heap, a hit's
// included (1.2 KB each; docs/benchmarks-log.md, "A hit's whole path").
func (rt *Router) SetCache(c *cache.Cache) { rt.cache.Store(c) }

// cacheFor is the response cache when it keeps c's method; nil: none.
// The one load of the swapped pointer serves the whole call.
func (rt *Router) cacheFor(c *evm.Call) *cache.Cache {
	if ch := rt.cache.Load(); ch != nil && ch.Keeps(c.Method) {
		return ch
	}
	return nil
}

// cachedForward is forward through the response cache. A hit and a miss
// alike read c where it is, on the caller's stack: the cache keeps no
// pointer to a call past Fill.
func (rt *Router) cachedForward(ctx context.Context, ch *cache.Cache, req *jrpc.Request, c *evm.Call) (json.RawMessage, error) {
	pr, sp := rt.look(ctx, ch, c)
	if res, err, ok := pr.Hit(); ok {
		rt.cacheServed(ctx, sp, cache.Hit, nil, err)
		return res, err
	}
	return rt.forwardMiss(ctx, ch, &pr, sp, req, c)
}

// forwardMiss fetches what Look missed through the cache; apart, so that
// the hit's path does not carry the fetch's frames.
func (rt *Router) forwardMiss(ctx context.Context, ch *cache.Cache, pr *cache.Probe, sp trace.Span, req *jrpc.Request, c *evm.Call) (json.RawMessage, error) {
	res, err, o := ch.Fill(ctx, *pr, c, cacheView{rt}, func(ctx context.Context, pinned string) (json.RawMessage, error) {
		if pinned == "" {
			return rt.forward(ctx, c)
		}
		p := pinnedTo(c, pinned)
		return rt.forward(ctx, &p)
	})
	rt.cacheServed(ctx, sp, o, rt.forwarded.answered, err)
	return res, err
}

// cachedReceipts is the forger's eth_getBlockReceipts through the response
// cache.
func (rt *Router) cachedReceipts(ctx context.Context, ch *cache.Cache, c *evm.Call) (json.RawMessage, error) {
	pr, sp := rt.look(ctx, ch, c)
	var built bool
	res, err, o := ch.Fill(ctx, pr, c, cacheView{rt}, func(ctx context.Context, pinned string) (json.RawMessage, error) {
		p := pinnedTo(c, pinned)
		res, b, err := rt.forge.BlockReceipts(ctx, &p)
		built = b
		return res, err
	})
	rt.cacheServed(ctx, sp, o, func(ctx context.Context) {
		if built {
			rt.forged.answered(ctx)
		} else {
			rt.forwarded.answered(ctx)
		}
	}, err)
	return res, err
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

// look asks the response cache ch for c's answer, under the lookup's
// span, which the answer's end closes (cacheServed): it covers a miss's
// fetch too, while the sends stay children of the call's span, as for
// every call that reaches the remotes.
func (rt *Router) look(ctx context.Context, ch *cache.Cache, c *evm.Call) (cache.Probe, trace.Span) {
	_, sp := rt.lookup(ctx, spanCache)
	return ch.Look(ctx, c, cacheView{rt}, jrpc.SkipCache(ctx)), sp
}

// cacheServed ends the lookup's span, notes the cache's word, and counts
// the answer's source: the cache's for a hit, venn's own for an error it
// made itself (jrpc.Local: no cache took part, whatever it missed), else
// answered's (remotes, forger).
func (rt *Router) cacheServed(ctx context.Context, sp trace.Span, o cache.Outcome, answered func(context.Context), err error) {
	endLookup(sp, o == cache.Hit)
	if o != cache.Hit && err != nil && jrpc.IsLocal(err) {
		rt.local.answered(ctx)
		return
	}
	if o != cache.None {
		jrpc.NoteOf(ctx).Cached(o.String())
	}
	if o == cache.Hit {
		rt.fromCache.answered(ctx)
	} else {
		answered(ctx)
	}
}
