package redisstore

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/keyspace"
	"github.com/venn-gateway/venn/subcenter"
)

// pendingSeenTTL is how long a transaction on the feed is remembered, so
// that replicas relaying it too add it once.
const pendingSeenTTL = 10 * time.Minute

var _ subcenter.PendingFeed = (*Pending)(nil)

// Pending is the subcenter.PendingFeed of a cluster: a stream per mode under
// the chain's hash tag.
type Pending struct {
	rdb  redis.UniversalClient
	keys keyspace.Chain
}

// NewPending returns chain's pending feed on rdb.
func NewPending(rdb redis.UniversalClient, chain string) *Pending {
	return &Pending{rdb: rdb, keys: keyspace.For(chain)}
}

func modeName(full bool) string {
	if full {
		return "f"
	}
	return "h"
}

// Add implements subcenter.PendingFeed.
func (p *Pending) Add(ctx context.Context, full bool, keys []string, items [][]byte) error {
	m := modeName(full)
	args := make([]any, 0, 3+2*len(items))
	args = append(args, p.keys.PendingSeenPrefix+m+":", pendingSeenTTL.Milliseconds(), subcenter.PendingFeedLen)
	for i, it := range items {
		args = append(args, keys[i], it)
	}
	err := keyspace.PendingAdd.Run(ctx, p.rdb, []string{p.keys.PendingPrefix + m}, args...).Err()
	if err == redis.Nil {
		return nil
	}
	return err
}

// Read implements subcenter.PendingFeed.
func (p *Pending) Read(ctx context.Context, full bool, pos string, limit int) ([][]byte, string, error) {
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

// Tail implements subcenter.PendingFeed.
func (p *Pending) Tail(ctx context.Context, full bool) (string, error) {
	msgs, err := p.rdb.XRevRangeN(ctx, p.keys.PendingPrefix+modeName(full), "+", "-", 1).Result()
	if err != nil || len(msgs) == 0 {
		return "0-0", err
	}
	return msgs[0].ID, nil
}
