package cache

import (
	"context"
	"time"

	"github.com/maypok86/otter/v2"
)

// entryOverhead is what one memory entry costs beyond its value: the key,
// the Entry, otter's node and its share of the hash table and sketch
// (measured by BenchmarkMemoryEntries: bytes per entry minus the value).
const entryOverhead = 200

// forever stands for "no expiry" in otter, which takes a duration.
const forever = 100 * 365 * 24 * time.Hour

// Memory is the per-replica tier: bounded in bytes (values plus
// entryOverhead each), W-TinyLFU admission and eviction (otter), each
// entry with its own TTL. It never fails.
type Memory struct {
	c *otter.Cache[Key, memEntry]
}

var (
	_ Tier    = (*Memory)(nil)
	_ Sizer   = (*Memory)(nil)
	_ Deleter = (*Memory)(nil)
	_ Purger  = (*Memory)(nil)
)

type memEntry struct {
	e   Entry
	ttl time.Duration
}

// NewMemory returns a memory tier of at most maxBytes. evicted, when not
// nil, is told of each entry the tier dropped by itself: "size" (room for
// others) or "expired". Close stops its maintenance goroutine.
func NewMemory(maxBytes int64, evicted func(reason string)) *Memory {
	o := &otter.Options[Key, memEntry]{
		MaximumWeight: uint64(maxBytes),
		Weigher: func(_ Key, v memEntry) uint32 {
			return uint32(min(len(v.e.Value)+len(v.e.Method)+len(v.e.Remote)+entryOverhead, 1<<31))
		},
		ExpiryCalculator: otter.ExpiryWritingFunc(func(e otter.Entry[Key, memEntry]) time.Duration {
			return e.Value.ttl
		}),
		// Callbacks on the goroutine that deleted: no goroutine per
		// eviction, none left behind. They only count.
		Executor: func(fn func()) { fn() },
	}
	if evicted != nil {
		o.OnDeletion = func(e otter.DeletionEvent[Key, memEntry]) {
			switch e.Cause {
			case otter.CauseOverflow:
				evicted("size")
			case otter.CauseExpiration:
				evicted("expired")
			}
		}
	}
	return &Memory{c: otter.Must(o)}
}

// Name is the tier's metric label.
func (m *Memory) Name() string { return "memory" }

// Get returns the entry under k.
func (m *Memory) Get(_ context.Context, k Key) (Entry, bool, error) {
	v, ok := m.c.GetIfPresent(k)
	return v.e, ok, nil
}

// Set stores e under k for ttl (0: until evicted).
func (m *Memory) Set(_ context.Context, k Key, e Entry, ttl time.Duration) error {
	if ttl <= 0 {
		ttl = forever
	}
	m.c.Set(k, memEntry{e: e, ttl: ttl})
	return nil
}

// Delete drops the entry under k.
func (m *Memory) Delete(_ context.Context, k Key) error {
	m.c.Invalidate(k)
	return nil
}

// Purge drops the entries p selects.
func (m *Memory) Purge(_ context.Context, p Purge) (int64, error) {
	var n int64
	for k, v := range m.c.All() {
		if p.Matches(v.e) {
			if _, ok := m.c.Invalidate(k); ok {
				n++
			}
		}
	}
	return n, nil
}

// Size is the tier's entries and the bytes they are weighed at.
func (m *Memory) Size(context.Context) (entries, bytes int64, err error) {
	return int64(m.c.EstimatedSize()), int64(m.c.WeightedSize()), nil
}

// Close stops the tier's maintenance goroutine; it keeps answering.
func (m *Memory) Close() { m.c.StopAllGoroutines() }
