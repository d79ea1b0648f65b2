package redisstore

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/keyspace"
	"github.com/venn-gateway/venn/subcenter"
)

var _ subcenter.FilterStore = (*Filters)(nil)

// Filters is the subcenter.FilterStore of a cluster: every replica reads and
// moves the same filters, under the chain's hash tag (keyspace.Chain's
// f:, filters and fo: keys). Its scripts make a poll's advance a
// compare-and-set, so two replicas polling one filter at once never
// deliver the same changes twice.
type Filters struct {
	rdb  redis.UniversalClient
	keys keyspace.Chain
}

// NewFilters returns chain's filters on rdb.
func NewFilters(rdb redis.UniversalClient, chain string) *Filters {
	return &Filters{rdb: rdb, keys: keyspace.For(chain)}
}

func ms(d time.Duration) int64 { return max(1, d.Milliseconds()) }

// Create implements subcenter.FilterStore.
func (s *Filters) Create(ctx context.Context, id string, st *subcenter.FilterState, ttl time.Duration, maxChain, maxOwner int) error {
	full := "0"
	if st.FullTx {
		full = "1"
	}
	args := []any{id, ms(ttl), maxChain, maxOwner,
		"k", st.Kind, "c", string(st.Crit), "x", full, "o", st.Owner,
		"n", strconv.FormatUint(st.Pos.Cursor.Number, 10), "h", st.Pos.Cursor.Hash, "p", st.Pos.Pending}
	r, err := keyspace.FilterCreate.Run(ctx, s.rdb, s.keys.FilterKeys(id, st.Owner), args...).Int()
	switch {
	case err != nil:
		return err
	case r == -1:
		return subcenter.ErrChainFull
	case r == -2:
		return subcenter.ErrOwnerFull
	}
	return nil
}

// Get implements subcenter.FilterStore.
func (s *Filters) Get(ctx context.Context, id string) (*subcenter.FilterState, error) {
	m, err := s.rdb.HGetAll(ctx, s.keys.FilterPrefix+id).Result()
	if err != nil {
		return nil, err
	}
	if len(m) == 0 || m["k"] == "" || m["n"] == "" {
		return nil, subcenter.ErrFilterGone
	}
	n, err := strconv.ParseUint(m["n"], 10, 64)
	if err != nil {
		return nil, subcenter.ErrFilterGone // not a filter venn wrote
	}
	return &subcenter.FilterState{Kind: m["k"], Crit: []byte(m["c"]), FullTx: m["x"] == "1", Owner: m["o"],
		Pos: subcenter.FilterPos{Cursor: headstore.Cursor{Number: n, Hash: m["h"]}, Pending: m["p"]}}, nil
}

// Advance implements subcenter.FilterStore.
func (s *Filters) Advance(ctx context.Context, id, owner string, from, to subcenter.FilterPos, ttl time.Duration) error {
	r, err := keyspace.FilterAdvance.Run(ctx, s.rdb, s.keys.FilterKeys(id, owner), id, ms(ttl),
		strconv.FormatUint(from.Cursor.Number, 10), from.Cursor.Hash, from.Pending,
		strconv.FormatUint(to.Cursor.Number, 10), to.Cursor.Hash, to.Pending).Int()
	switch {
	case err != nil:
		return err
	case r == 0:
		return subcenter.ErrFilterMoved
	case r < 0:
		return subcenter.ErrFilterGone
	}
	return nil
}

// Remove implements subcenter.FilterStore.
func (s *Filters) Remove(ctx context.Context, id, owner string) (bool, error) {
	r, err := keyspace.FilterRemove.Run(ctx, s.rdb, s.keys.FilterKeys(id, owner), id).Int()
	return r == 1, err
}
