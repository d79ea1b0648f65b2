package cache

import (
	"context"
	"sync"
)

// recentIndex lists the keys of near-head entries by their block's hash,
// so that a reorg that orphans the block drops them from the tiers at
// once. A block at or below the settled line leaves the index: its keys
// are no longer made (a settled number is keyed by number) and expire.
type recentIndex struct {
	mu     sync.Mutex
	blocks map[string]*recentBlock // by hash
}

type recentBlock struct {
	number uint64
	keys   map[Key]struct{}
}

func newRecentIndex() *recentIndex {
	return &recentIndex{blocks: map[string]*recentBlock{}}
}

func (x *recentIndex) add(hash string, number uint64, k Key) {
	x.mu.Lock()
	defer x.mu.Unlock()
	b := x.blocks[hash]
	if b == nil {
		b = &recentBlock{number: number, keys: map[Key]struct{}{}}
		x.blocks[hash] = b
	}
	b.keys[k] = struct{}{}
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
	var out []Key
	for hash, b := range x.blocks {
		if lineOK && b.number <= line {
			delete(x.blocks, hash)
			continue
		}
		if h, ok := v.CanonicalHash(b.number); ok && h == hash {
			continue
		}
		for k := range b.keys {
			out = append(out, k)
		}
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
