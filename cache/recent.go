package cache

import (
	"context"
	"slices"
	"sync"
	"time"
)

// recentIndex lists the keys of near-head entries by their block's hash,
// so that a reorg that orphans the block drops them from the tiers at
// once. A block at or below the settled line leaves the index: its keys
// are no longer made (a settled number is keyed by number) and expire.
//
// It holds only what may still be stored: every tier keeps a near-head
// entry for recent_ttl at most (Layer.RecentTTL), so a key added more than
// that ago names nothing, and it is forgotten. A block's keys are kept in
// generations of a quarter of ttl each; a generation is dropped whole
// once the one after it started ttl ago (every key of it was added before
// that), so the index holds at most 1.25 ttl of keys. Without it, a head
// that stops moving (or a settled line far below it) made the index the
// cache's largest holder of memory: every miss's key, kept until its
// block settled.
type recentIndex struct {
	mu     sync.Mutex
	ttl    time.Duration
	now    func() time.Time
	blocks map[string]*recentBlock // by hash
	// swept is when blocks were last swept for expired generations.
	swept time.Time
}

// recentGenerations is how many generations make up ttl.
const recentGenerations = 4

type recentBlock struct {
	number uint64
	gens   []recentGen // oldest first
	last   time.Time   // of the newest key
}

// recentGen is the keys of a block added from from until the next
// generation's from.
type recentGen struct {
	from time.Time
	keys []Key
}

func newRecentIndex(ttl time.Duration, now func() time.Time) *recentIndex {
	return &recentIndex{blocks: map[string]*recentBlock{}, ttl: ttl, now: now, swept: now()}
}

func (x *recentIndex) add(hash string, number uint64, k Key) {
	now := x.now()
	x.mu.Lock()
	defer x.mu.Unlock()
	if now.Sub(x.swept) >= x.ttl {
		x.sweep(now)
	}
	b := x.blocks[hash]
	if b == nil {
		b = &recentBlock{number: number}
		x.blocks[hash] = b
	}
	b.expire(now, x.ttl)
	if n := len(b.gens); n == 0 || now.Sub(b.gens[n-1].from) >= x.ttl/recentGenerations {
		b.gens = append(b.gens, recentGen{from: now})
	}
	g := &b.gens[len(b.gens)-1]
	g.keys = append(g.keys, k)
	b.last = now
}

// expire drops the generations whose keys were all added ttl ago or
// more: their entries have expired in every tier.
func (b *recentBlock) expire(now time.Time, ttl time.Duration) {
	if now.Sub(b.last) >= ttl {
		b.gens = nil
		return
	}
	drop := 0
	for drop+1 < len(b.gens) && now.Sub(b.gens[drop+1].from) >= ttl {
		drop++
	}
	if drop > 0 {
		b.gens = slices.Delete(b.gens, 0, drop)
	}
}

// keys are the block's keys, appended to out.
func (b *recentBlock) appendKeys(out []Key) []Key {
	for _, g := range b.gens {
		out = append(out, g.keys...)
	}
	return out
}

// sweep ages every block and drops those left without keys.
func (x *recentIndex) sweep(now time.Time) {
	x.swept = now
	for hash, b := range x.blocks {
		b.expire(now, x.ttl)
		if len(b.gens) == 0 {
			delete(x.blocks, hash)
		}
	}
}

// size is how many keys the index holds.
func (x *recentIndex) size() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for _, b := range x.blocks {
		for _, g := range b.gens {
			n += len(g.keys)
		}
	}
	return n
}

// canonView is what orphans asks of the chain.
type canonView interface {
	Settled() (n uint64, ok bool)
	CanonicalHash(n uint64) (hash string, ok bool)
}

// orphans takes out of the index the blocks v no longer holds canonical,
// returning their keys, and forgets the settled ones.
func (x *recentIndex) orphans(v canonView) []Key {
	line, lineOK := v.Settled()
	x.mu.Lock()
	defer x.mu.Unlock()
	x.sweep(x.now())
	var out []Key
	for hash, b := range x.blocks {
		if lineOK && b.number <= line {
			delete(x.blocks, hash)
			continue
		}
		if h, ok := v.CanonicalHash(b.number); ok && h == hash {
			continue
		}
		out = b.appendKeys(out)
		delete(x.blocks, hash)
	}
	return out
}

// Window is the head window as the cache follows it: its changes (a new
// head, a reorg) and what is canonical after them.
type Window interface {
	Changed() <-chan struct{}
	CanonicalHash(n uint64) (hash string, ok bool)
}

// windowView reads a window with the router's settled line.
type windowView struct {
	Window
	settled func() (uint64, bool)
}

var _ canonView = windowView{}

func (v windowView) Settled() (uint64, bool) {
	if v.settled == nil {
		return 0, false
	}
	return v.settled()
}

// Run drops, at every change of w until ctx ends, the near-head entries of
// blocks a reorg orphaned from the tiers that can delete (the memory tier
// at least). Their keys were already unreachable: this frees their room
// before they expire. settled is the chain's settled line.
func (c *Cache) Run(ctx context.Context, w Window, settled func() (uint64, bool)) {
	v := windowView{Window: w, settled: settled}
	for {
		changed := w.Changed()
		if keys := c.recent.orphans(v); len(keys) > 0 {
			c.evict(ctx, keys)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// evict deletes keys from every tier that can, counting them as reorg
// evictions.
func (c *Cache) evict(ctx context.Context, keys []Key) {
	for _, l := range c.tiers {
		d, ok := l.Tier.(Deleter)
		if !ok {
			continue
		}
		for _, k := range keys {
			dctx, cancel := l.opContext(ctx)
			err := d.Delete(dctx, k)
			cancel()
			if err != nil {
				l.failed("delete", err)
				break
			}
			l.evictions.WithLabelValues("reorg").Inc()
		}
	}
}
