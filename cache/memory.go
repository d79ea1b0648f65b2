package cache

import (
	"context"
	"maps"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maypok86/otter/v2"
)

// entryOverhead is what one memory entry costs beyond its value: the key,
// the packed entry, otter's node and its share of the hash table and
// sketch (measured by BenchmarkMemoryEntries: bytes per entry minus the
// value).
const entryOverhead = 170

// forever stands for "no expiry" in otter, which takes a duration.
const forever = 100 * 365 * 24 * time.Hour

// Memory is the per-replica tier: bounded in bytes (values plus
// entryOverhead each), W-TinyLFU admission and eviction (otter), each
// entry with its own TTL. It never fails.
type Memory struct {
	c *otter.Cache[Key, memEntry]
	// methods names the entries' methods by index (memEntry.method):
	// replaced whole when a method is added, read without a lock.
	methods atomic.Pointer[methodTable]
	mu      sync.Mutex // adds to methods
}

var (
	_ Tier    = (*Memory)(nil)
	_ Sizer   = (*Memory)(nil)
	_ Deleter = (*Memory)(nil)
	_ Purger  = (*Memory)(nil)
)

// memEntry is an Entry packed for otter's node: 40 bytes against the
// Entry's 56 and a TTL's 8, which puts the node in a smaller size class
// (128 bytes, not 160). The method is an index into Memory.methods, the
// TTL whole milliseconds (0: none).
type memEntry struct {
	value  []byte
	block  uint64
	ttlMS  uint32
	method uint16
	flags  uint8 // flagError, flagSettled
}

// memEntryFields is how many fields Entry has that memEntry packs: a
// field added to Entry must be packed too (TestMemoryKeepsEveryField).
const memEntryFields = 5

// memUnpackedFields are Entry's fields the memory tier does not keep:
// Remote and Written, which only a Purge reads. A purge by them drops from
// memory every entry the rest of it selects (more than needed, never
// less), and the memory tier keeps its 128-byte node.
const memUnpackedFields = 2

// methodTable is the methods of a memory tier's entries; index is the
// position in names.
type methodTable struct {
	names []string
	index map[string]uint16
}

// maxMemMethods bounds methodTable: the cache's method set (its config) is
// far smaller; an entry of a method past it is not stored.
const maxMemMethods = math.MaxUint16

// maxTTLMS is the longest TTL memEntry holds; a longer one is kept until
// evicted for room (about 49 days, far past any recent_ttl).
const maxTTLMS = math.MaxUint32

// ttl is the entry's time to live (forever for none).
func (v memEntry) ttl() time.Duration {
	if v.ttlMS == 0 {
		return forever
	}
	return time.Duration(v.ttlMS) * time.Millisecond
}

// NewMemory returns a memory tier of at most maxBytes. evicted, when not
// nil, is told of each entry the tier dropped by itself: "size" (room for
// others) or "expired". Close stops its maintenance goroutine.
func NewMemory(maxBytes int64, evicted func(reason string)) *Memory {
	o := &otter.Options[Key, memEntry]{
		MaximumWeight: uint64(maxBytes),
		Weigher: func(_ Key, v memEntry) uint32 {
			return uint32(min(len(v.value)+entryOverhead, 1<<31))
		},
		ExpiryCalculator: otter.ExpiryWritingFunc(func(e otter.Entry[Key, memEntry]) time.Duration {
			return e.Value.ttl()
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
	m := &Memory{c: otter.Must(o)}
	m.methods.Store(&methodTable{index: map[string]uint16{}})
	return m
}

// methodIndex is method's index in m.methods, added when new; ok is false
// when the table is full.
func (m *Memory) methodIndex(method string) (i uint16, ok bool) {
	if i, ok := m.methods.Load().index[method]; ok {
		return i, true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.methods.Load()
	if i, ok := t.index[method]; ok {
		return i, true
	}
	if len(t.names) >= maxMemMethods {
		return 0, false
	}
	i = uint16(len(t.names))
	next := &methodTable{names: append(slices.Clip(t.names), method), index: maps.Clone(t.index)}
	next.index[method] = i
	m.methods.Store(next)
	return i, true
}

// Name is the tier's metric label.
func (m *Memory) Name() string { return "memory" }

// Get returns the entry under k.
func (m *Memory) Get(_ context.Context, k Key) (Entry, bool, error) {
	v, ok := m.c.GetIfPresent(k)
	if !ok {
		return Entry{}, false, nil
	}
	return Entry{Value: v.value, Error: v.flags&flagError != 0, Settled: v.flags&flagSettled != 0,
		Method: m.methods.Load().names[v.method], Block: v.block}, true, nil
}

// Set stores e under k for ttl (0: until evicted). e.Value is kept, not
// copied: the caller gives it up.
func (m *Memory) Set(_ context.Context, k Key, e Entry, ttl time.Duration) error {
	mi, ok := m.methodIndex(e.Method)
	if !ok {
		return nil // past any configured method set: not kept
	}
	v := memEntry{value: e.Value, block: e.Block, method: mi}
	if e.Error {
		v.flags |= flagError
	}
	if e.Settled {
		v.flags |= flagSettled
	}
	if ttl > 0 && ttl < time.Duration(maxTTLMS)*time.Millisecond {
		v.ttlMS = uint32(max(1, (ttl+time.Millisecond-1)/time.Millisecond))
	}
	m.c.Set(k, v)
	return nil
}

// Delete drops the entry under k.
func (m *Memory) Delete(_ context.Context, k Key) error {
	m.c.Invalidate(k)
	return nil
}

// Purge drops the entries p selects; it keeps no remotes or write times,
// so a purge by them drops every entry the rest of p selects.
func (m *Memory) Purge(_ context.Context, p Purge) (int64, error) {
	p.Remote, p.Since = "", time.Time{}
	names := m.methods.Load().names
	var n int64
	for k, v := range m.c.All() {
		e := Entry{Method: names[v.method], Block: v.block}
		if p.Matches(e) {
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
