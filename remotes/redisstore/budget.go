package redisstore

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/keyspace"
	"github.com/venn-gateway/venn/remotes/budget"
)

// Budgets keeps the budget counters in Redis, shared by the replicas:
// one pipeline per flush, an INCRBY and an EXPIREAT per remote (the
// expiry is the same every time, so setting it again is harmless).
type Budgets struct{ rdb redis.Cmdable }

var _ budget.Store = (*Budgets)(nil)

// NewBudgets returns the counters on rdb. It does no I/O.
func NewBudgets(rdb redis.Cmdable) *Budgets { return &Budgets{rdb: rdb} }

// Add implements budget.Store. Each INCRBY's own reply says whether its
// count was added: a pipeline can fail part way, and the counts it added
// must not be sent again. One whose reply never came (the connection
// broke) may have been added; it is reported failed, to be counted
// twice rather than not at all.
func (s *Budgets) Add(ctx context.Context, chain string, counts []budget.Count) error {
	incr := make([]*redis.IntCmd, len(counts))
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, c := range counts {
			k := keyspace.BudgetKey(chain, c.Remote, c.Period)
			incr[i] = p.IncrBy(ctx, k, c.N)
			p.ExpireAt(ctx, k, c.Expire)
		}
		return nil
	})
	for i, c := range incr {
		if c.Err() != nil {
			counts[i].Failed = true
			continue
		}
		counts[i].Total = c.Val()
	}
	if err != nil {
		return fmt.Errorf("budget counters: %w", err)
	}
	return nil
}
