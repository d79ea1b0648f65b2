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
	// methods and remotes name the entries' methods and remotes by
	// index (memEntry.method, memEntry.remote).
	methods, remotes nameTable
}

var (
	_ Tier    = (*Memory)(nil)
	_ Sizer   = (*Memory)(nil)
	_ Deleter = (*Memory)(nil)
	_ Purger  = (*Memory)(nil)
)

// memEntry is an Entry packed for otter's node: 40 bytes against the
// Entry's 80 and a TTL's 8, which puts the node in a smaller size class
// (128 bytes, not 160). The method and the remote are indexes into
// Memory.methods and Memory.remotes, the TTL whole milliseconds (0: none).
type memEntry struct {
	value  []byte
	block  uint64
	ttlMS  uint32
	method uint16
	remote uint8 // 0: none, or not known (the table was full)
	flags  uint8 // flagError, flagSettled
}

// memEntryFields is how many fields Entry has that memEntry packs: a
// field added to Entry must be packed too (TestMemoryKeepsEveryField).
const memEntryFields = 6

// memUnpackedFields are Entry's fields the memory tier does not keep:
// Written, which only a Purge reads. A purge since a time drops from
// memory every entry the rest of it selects, whatever its age (more than
// needed, never less), and the memory tier keeps its 128-byte node.
const memUnpackedFields = 1

// nameTable names the methods or the remotes of a memory tier's entries
// by index: replaced whole when a name is added, read without a lock.
type nameTable struct {
	t     atomic.Pointer[names]
	mu    sync.Mutex // adds
	limit int
}

// names are a nameTable's: index is the position in list.
type names struct {
	list  []string
	index map[string]uint16
}

// Bounds of the name tables: the cache's method set (its config) and a
// chain's remotes (and the sets of them that answered one call) are far
// smaller. An entry of a method past the limit is not stored; one of a
// remote past it is stored without its remote (index 0), which a purge
// by any remote drops.
const (
	maxMemMethods = math.MaxUint16
	maxMemRemotes = math.MaxUint8
)

func (t *nameTable) init(limit int, first ...string) {
	n := &names{list: first, index: make(map[string]uint16, len(first))}
	for i, s := range first {
		n.index[s] = uint16(i)
	}
	t.limit = limit
	t.t.Store(n)
}

// name is the name at i.
func (t *nameTable) name(i uint16) string { return t.t.Load().list[i] }

// indexOf is name's index, added when new; ok is false when the table is
// full.
func (t *nameTable) indexOf(name string) (i uint16, ok bool) {
	if i, ok := t.t.Load().index[name]; ok {
		return i, true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := t.t.Load()
	if i, ok := n.index[name]; ok {
		return i, true
	}
	if len(n.list) >= t.limit {
		return 0, false
	}
	i = uint16(len(n.list))
	next := &names{list: append(slices.Clip(n.list), name), index: maps.Clone(n.index)}
	next.index[name] = i
	t.t.Store(next)
	return i, true
}

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
	m.methods.init(maxMemMethods)
	m.remotes.init(maxMemRemotes+1, "") // index 0: none
	return m
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
		Method: m.methods.name(v.method), Block: v.block, Remote: m.remotes.name(uint16(v.remote))}, true, nil
}

// Set stores e under k for ttl (0: until evicted). e.Value is kept, not
// copied: the caller gives it up.
func (m *Memory) Set(_ context.Context, k Key, e Entry, ttl time.Duration) error {
	mi, ok := m.methods.indexOf(e.Method)
	if !ok {
		return nil // past any configured method set: not kept
	}
	ri, _ := m.remotes.indexOf(e.Remote) // 0 when full: dropped by any purge by remote
	v := memEntry{value: e.Value, block: e.Block, method: mi, remote: uint8(ri)}
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

// Purge drops the entries p selects. It keeps no write times, so a purge
// since a time drops every entry the rest of p selects, whatever its age;
// an entry whose remote it could not record (index 0) is dropped by a
// purge of any remote.
func (m *Memory) Purge(_ context.Context, p Purge) (int64, error) {
	p.Since = time.Time{}
	var n int64
	for k, v := range m.c.All() {
		// Names looked up per entry: one stored after a table was read
		// may have a name added since.
		e := Entry{Method: m.methods.name(v.method), Block: v.block, Remote: m.remotes.name(uint16(v.remote))}
		if v.remote == 0 {
			e.Remote = p.Remote
		}
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
