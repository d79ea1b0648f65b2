package cache

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"
)

// admission keeps one-off near-head answers out of the tiers while they
// flood in. A near-head answer lives recent_ttl at most, so one asked only
// once is stored for nothing, and its store (otter's write and
// maintenance, the recent index, a claim, the call pinned to its block's
// hash) is most of what the cache costs a miss. So a doorkeeper, as
// TinyLFU's: the keys of near-head misses are recorded in two Bloom
// filters, one per generation (recent_ttl, or doorCapacity keys, whichever
// comes first). The first admitFree near-head misses of a recent_ttl
// that were not seen before are stored as ever; past them, a near-head
// miss is stored only when its key was seen in this generation or the
// one before. One that was not is sent as the client sent it (by number,
// as with the cache off), served, and not stored: a key asked twice is
// stored from its second asking, at the cost of one more upstream call.
// A filter's false positive stores a one-off, as before; nothing the
// doorkeeper decides can make the cache serve an answer it would not have.
type admission struct {
	period time.Duration
	free   int64 // unseen keys a generation admits
	now    func() time.Time
	mu     sync.Mutex // rotations
	cur    atomic.Pointer[doorGen]
	prev   atomic.Pointer[doorGen]
}

const (
	// doorBits is one generation's filter: 128 KiB.
	doorBits = 1 << 20
	// doorCapacity is how many keys a generation records before the next
	// starts: at 4 bits a key its filter then answers about 0.24% of
	// unseen keys as seen (each a one-off stored), 0.05% on average over
	// the generation.
	doorCapacity = 1 << 16
	// admitFree is how many unseen near-head keys a recent_ttl stores: a
	// chain whose near-head misses are fewer stores every one of them, as
	// without the doorkeeper. A generation started because the last one
	// was full has none: the flood goes on.
	admitFree = 1024
)

// doorGen is one generation of the doorkeeper.
type doorGen struct {
	start time.Time
	bits  []uint64     // read and set atomically
	added atomic.Int64 // unseen keys recorded
	full  bool         // started when the last one was full: admits none free
}

func newAdmission(period time.Duration, now func() time.Time) *admission {
	return &admission{period: period, free: admitFree, now: now}
}

// doorClockEvery is how many unseen keys pass between two readings of the
// clock (a reading costs about as much as the rest of admit): a
// generation that has outlived recent_ttl ends at the next of them. At a
// pace too slow to reach admitFree in a generation, every unseen key is
// stored however long the generation lasts.
const doorClockEvery = 64

// admit reports whether the near-head answer under k is to be stored, and
// records k.
func (a *admission) admit(k Key) bool {
	g := a.cur.Load()
	if g == nil {
		g = a.rotate(nil, false)
	}
	if g.has(k) {
		return true
	}
	if p := a.prev.Load(); p != nil && p.has(k) {
		return true
	}
	n := g.add(k)
	if full := n >= doorCapacity; full || n%doorClockEvery == 0 && a.now().Sub(g.start) >= a.period {
		g = a.rotate(g, full)
		n = g.add(k)
	}
	return !g.full && n <= a.free
}

// rotate starts a new generation after old (nil: none yet; full: old
// ended full, not old), unless another call already did; it returns the
// current one.
func (a *admission) rotate(old *doorGen, full bool) *doorGen {
	a.mu.Lock()
	defer a.mu.Unlock()
	if g := a.cur.Load(); g != old {
		return g
	}
	a.prev.Store(old)
	g := &doorGen{start: a.now(), bits: make([]uint64, doorBits/64), full: full}
	a.cur.Store(g)
	return g
}

// doorBitsOf are k's four bits in a filter: slices of the key, a sha256
// digest, so already uniform.
func doorBitsOf(k Key) [4]uint32 {
	x := binary.LittleEndian.Uint64(k[:8])
	y := binary.LittleEndian.Uint64(k[8:16])
	const mask = doorBits - 1
	return [4]uint32{uint32(x) & mask, uint32(x>>32) & mask, uint32(y) & mask, uint32(y>>32) & mask}
}

func (g *doorGen) has(k Key) bool {
	for _, b := range doorBitsOf(k) {
		if atomic.LoadUint64(&g.bits[b/64])&(1<<(b%64)) == 0 {
			return false
		}
	}
	return true
}

// add records k, returning how many unseen keys the generation holds.
func (g *doorGen) add(k Key) int64 {
	for _, b := range doorBitsOf(k) {
		atomic.OrUint64(&g.bits[b/64], 1<<(b%64))
	}
	return g.added.Add(1)
}
