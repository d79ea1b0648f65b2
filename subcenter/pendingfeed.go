package subcenter

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/keyspace"
)

// Pending feed bounds.
const (
	// pendingFeedLen is how many relayed pending transactions a feed
	// keeps per mode: a pending filter polled less often than they arrive
	// misses the oldest, as a node's own filter would not, but a feed
	// never grows without bound.
	pendingFeedLen = 10_000
	// pendingSeenTTL is how long a transaction on the feed is remembered,
	// so that replicas relaying it too add it once.
	pendingSeenTTL = 10 * time.Minute
	// pendingReadMax bounds one poll's transactions.
	pendingReadMax = pendingFeedLen
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

var (
	_ PendingFeed = (*memoryPending)(nil)
	_ PendingFeed = (*redisPending)(nil)
)

// memoryPending is the PendingFeed of a venn running alone.
type memoryPending struct {
	mu    sync.Mutex
	modes [2]pendingRing
}

type pendingRing struct {
	items [][]byte // the last pendingFeedLen, oldest first
	next  uint64   // sequence number of the next item; items[i] is next-len+i
	seen  recent
}

// NewMemoryPending returns an empty in-process pending feed.
func NewMemoryPending() PendingFeed {
	p := &memoryPending{}
	for i := range p.modes {
		p.modes[i].seen = newRecent(pendingFeedLen)
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
		if len(r.items) == pendingFeedLen {
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

// redisPending is the PendingFeed of a cluster: a stream per mode under
// the chain's hash tag.
type redisPending struct {
	rdb  redis.UniversalClient
	keys keyspace.Chain
}

// NewRedisPending returns chain's pending feed on rdb.
func NewRedisPending(rdb redis.UniversalClient, chain string) PendingFeed {
	return &redisPending{rdb: rdb, keys: keyspace.For(chain)}
}

func modeName(full bool) string {
	if full {
		return "f"
	}
	return "h"
}

func (p *redisPending) Add(ctx context.Context, full bool, keys []string, items [][]byte) error {
	m := modeName(full)
	args := make([]any, 0, 3+2*len(items))
	args = append(args, p.keys.PendingSeenPrefix+m+":", pendingSeenTTL.Milliseconds(), pendingFeedLen)
	for i, it := range items {
		args = append(args, keys[i], it)
	}
	err := keyspace.PendingAdd.Run(ctx, p.rdb, []string{p.keys.PendingPrefix + m}, args...).Err()
	if err == redis.Nil {
		return nil
	}
	return err
}

func (p *redisPending) Read(ctx context.Context, full bool, pos string, limit int) ([][]byte, string, error) {
	start := "-"
	if pos != "" && pos != "0-0" {
		start = "(" + pos
	}
	msgs, err := p.rdb.XRangeN(ctx, p.keys.PendingPrefix+modeName(full), start, "+", int64(limit)).Result()
	if err != nil || len(msgs) == 0 {
		return nil, pos, err
	}
	out := make([][]byte, 0, len(msgs))
	for _, m := range msgs {
		if s, ok := m.Values["t"].(string); ok {
			out = append(out, []byte(s))
		}
	}
	return out, msgs[len(msgs)-1].ID, nil
}

func (p *redisPending) Tail(ctx context.Context, full bool) (string, error) {
	msgs, err := p.rdb.XRevRangeN(ctx, p.keys.PendingPrefix+modeName(full), "+", "-", 1).Result()
	if err != nil || len(msgs) == 0 {
		return "0-0", err
	}
	return msgs[0].ID, nil
}
