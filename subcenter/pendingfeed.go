package subcenter

import (
	"context"
	"strconv"
	"sync"
)

// Pending feed bounds.
const (
	// PendingFeedLen is how many relayed pending transactions a feed
	// keeps per mode, in memory or in Redis: a pending filter polled less
	// often than they arrive misses the oldest, as a node's own filter
	// would not, but a feed never grows without bound.
	PendingFeedLen = 10_000
	// pendingReadMax bounds one poll's transactions.
	pendingReadMax = PendingFeedLen
)

// PendingFeed is where the pending transactions relayed for
// pending-transaction filters are kept, in the order they were seen, for
// every replica that polls those filters: a Redis stream per mode in a
// cluster, a ring in memory alone. Positions are opaque strings; "" is
// before everything.
type PendingFeed interface {
	// Add appends relayed items (hashes, or full objects when full) each
	// with its hash key, skipping those already on the feed.
	Add(ctx context.Context, full bool, keys []string, items [][]byte) error
	// Read returns up to max items after pos, and the position after them
	// (pos when there are none).
	Read(ctx context.Context, full bool, pos string, max int) ([][]byte, string, error)
	// Tail is the position after the last item: where a new filter starts.
	Tail(ctx context.Context, full bool) (string, error)
}

var _ PendingFeed = (*memoryPending)(nil)

// memoryPending is the PendingFeed of a venn running alone.
type memoryPending struct {
	mu    sync.Mutex
	modes [2]pendingRing
}

type pendingRing struct {
	items [][]byte // the last PendingFeedLen, oldest first
	next  uint64   // sequence number of the next item; items[i] is next-len+i
	seen  recent
}

// NewMemoryPending returns an empty in-process pending feed.
func NewMemoryPending() PendingFeed {
	p := &memoryPending{}
	for i := range p.modes {
		p.modes[i].seen = newRecent(PendingFeedLen)
	}
	return p
}

func mode(full bool) int {
	if full {
		return 1
	}
	return 0
}

func (p *memoryPending) Add(_ context.Context, full bool, keys []string, items [][]byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := &p.modes[mode(full)]
	for i, it := range items {
		if !r.seen.add(keys[i]) {
			continue
		}
		if len(r.items) == PendingFeedLen {
			copy(r.items, r.items[1:])
			r.items = r.items[:len(r.items)-1]
		}
		r.items = append(r.items, it)
		r.next++
	}
	return nil
}

func (p *memoryPending) Read(_ context.Context, full bool, pos string, limit int) ([][]byte, string, error) {
	after, _ := strconv.ParseUint(pos, 10, 64)
	p.mu.Lock()
	defer p.mu.Unlock()
	r := &p.modes[mode(full)]
	first := r.next - uint64(len(r.items))
	from := max(after, first)
	if from >= r.next {
		return nil, pos, nil
	}
	n := min(uint64(limit), r.next-from)
	out := append([][]byte(nil), r.items[from-first:from-first+n]...)
	return out, strconv.FormatUint(from+n, 10), nil
}

func (p *memoryPending) Tail(_ context.Context, full bool) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strconv.FormatUint(p.modes[mode(full)].next, 10), nil
}
