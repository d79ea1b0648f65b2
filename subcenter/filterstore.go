package subcenter

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/keyspace"
)

// A polled filter's kinds, as stored.
const (
	filterLogs    = "l"
	filterBlocks  = "b"
	filterPending = "p"
)

// filterState is what a polled filter is, wherever it is polled: its kind
// and criteria, its owner, and its position (pos).
type filterState struct {
	Kind   string
	Crit   []byte // logs: the criteria object as sent
	FullTx bool   // pending: transaction objects, not hashes
	Owner  string
	Pos    filterPos
}

// filterPos is how far a filter's changes were delivered: the last block
// (number and hash), and for a pending filter its place in the pending
// feed.
type filterPos struct {
	Cursor  headstore.Cursor
	Pending string
}

// Errors of a FilterStore.
var (
	errFilterGone  = errors.New("filter not found")
	errChainFull   = errors.New("the chain holds as many filters as allowed")
	errOwnerFull   = errors.New("the client holds as many filters as allowed")
	errFilterMoved = errors.New("another poll moved the filter")
)

// FilterStore holds the polled filters of one chain where every replica
// that polls them reads them: Redis in a cluster (RedisFilters), memory
// in a process of its own (MemoryFilters). Deadlines are kept by the
// store: a filter not advanced (polled) for its TTL is gone.
type FilterStore interface {
	// Create stores a new filter, unless the chain holds maxChain live
	// filters (errChainFull) or its owner maxOwner (errOwnerFull).
	Create(ctx context.Context, id string, st *filterState, ttl time.Duration, maxChain, maxOwner int) error
	// Get reads a filter; errFilterGone when there is none.
	Get(ctx context.Context, id string) (*filterState, error)
	// Advance moves the filter from pos from to pos to and pushes its
	// deadline back, only if it is still at from: errFilterMoved when
	// another poll moved it first, errFilterGone when it is gone.
	Advance(ctx context.Context, id, owner string, from, to filterPos, ttl time.Duration) error
	// Remove uninstalls a filter and reports whether it existed.
	Remove(ctx context.Context, id, owner string) (bool, error)
}

var (
	_ FilterStore = (*MemoryFilters)(nil)
	_ FilterStore = (*RedisFilters)(nil)
)

// MemoryFilters is the FilterStore of a venn running alone.
type MemoryFilters struct {
	now func() time.Time

	mu        sync.Mutex
	m         map[string]*memFilter
	owners    map[string]int
	lastSweep time.Time
}

type memFilter struct {
	st       filterState
	deadline time.Time
}

// NewMemoryFilters returns an empty store.
func NewMemoryFilters() *MemoryFilters {
	return &MemoryFilters{now: time.Now, m: map[string]*memFilter{}, owners: map[string]int{}}
}

// sweep forgets expired filters, at most once a second; the caller holds mu.
func (s *MemoryFilters) sweep(now time.Time, force bool) {
	if !force && now.Sub(s.lastSweep) < time.Second {
		return
	}
	s.lastSweep = now
	for id, f := range s.m {
		if now.After(f.deadline) {
			s.dropLocked(id, f)
		}
	}
}

func (s *MemoryFilters) dropLocked(id string, f *memFilter) {
	delete(s.m, id)
	if s.owners[f.st.Owner]--; s.owners[f.st.Owner] <= 0 {
		delete(s.owners, f.st.Owner)
	}
}

// live returns filter id unless it is missing or expired; the caller
// holds mu.
func (s *MemoryFilters) live(id string, now time.Time) *memFilter {
	f := s.m[id]
	if f == nil {
		return nil
	}
	if now.After(f.deadline) {
		s.dropLocked(id, f)
		return nil
	}
	return f
}

// Create implements FilterStore.
func (s *MemoryFilters) Create(_ context.Context, id string, st *filterState, ttl time.Duration, maxChain, maxOwner int) error {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(now, len(s.m) >= maxChain || s.owners[st.Owner] >= maxOwner)
	switch {
	case len(s.m) >= maxChain:
		return errChainFull
	case s.owners[st.Owner] >= maxOwner:
		return errOwnerFull
	}
	s.m[id] = &memFilter{st: *st, deadline: now.Add(ttl)}
	s.owners[st.Owner]++
	return nil
}

// Get implements FilterStore.
func (s *MemoryFilters) Get(_ context.Context, id string) (*filterState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.live(id, s.now())
	if f == nil {
		return nil, errFilterGone
	}
	st := f.st
	return &st, nil
}

// Advance implements FilterStore.
func (s *MemoryFilters) Advance(_ context.Context, id, _ string, from, to filterPos, ttl time.Duration) error {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.live(id, now)
	switch {
	case f == nil:
		return errFilterGone
	case f.st.Pos != from:
		return errFilterMoved
	}
	f.st.Pos = to
	f.deadline = now.Add(ttl)
	return nil
}

// Remove implements FilterStore.
func (s *MemoryFilters) Remove(_ context.Context, id, _ string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.live(id, s.now())
	if f == nil {
		return false, nil
	}
	s.dropLocked(id, f)
	return true, nil
}

// RedisFilters is the FilterStore of a cluster: every replica reads and
// moves the same filters, under the chain's hash tag (keyspace.Chain's
// f:, filters and fo: keys). Its scripts make a poll's advance a
// compare-and-set, so two replicas polling one filter at once never
// deliver the same changes twice.
type RedisFilters struct {
	rdb  redis.UniversalClient
	keys keyspace.Chain
}

// NewRedisFilters returns chain's filters on rdb.
func NewRedisFilters(rdb redis.UniversalClient, chain string) *RedisFilters {
	return &RedisFilters{rdb: rdb, keys: keyspace.For(chain)}
}

func ms(d time.Duration) int64 { return max(1, d.Milliseconds()) }

// Create implements FilterStore.
func (s *RedisFilters) Create(ctx context.Context, id string, st *filterState, ttl time.Duration, maxChain, maxOwner int) error {
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
		return errChainFull
	case r == -2:
		return errOwnerFull
	}
	return nil
}

// Get implements FilterStore.
func (s *RedisFilters) Get(ctx context.Context, id string) (*filterState, error) {
	m, err := s.rdb.HGetAll(ctx, s.keys.FilterPrefix+id).Result()
	if err != nil {
		return nil, err
	}
	if len(m) == 0 || m["k"] == "" || m["n"] == "" {
		return nil, errFilterGone
	}
	n, err := strconv.ParseUint(m["n"], 10, 64)
	if err != nil {
		return nil, errFilterGone // not a filter venn wrote
	}
	return &filterState{Kind: m["k"], Crit: []byte(m["c"]), FullTx: m["x"] == "1", Owner: m["o"],
		Pos: filterPos{Cursor: headstore.Cursor{Number: n, Hash: m["h"]}, Pending: m["p"]}}, nil
}

// Advance implements FilterStore.
func (s *RedisFilters) Advance(ctx context.Context, id, owner string, from, to filterPos, ttl time.Duration) error {
	r, err := keyspace.FilterAdvance.Run(ctx, s.rdb, s.keys.FilterKeys(id, owner), id, ms(ttl),
		strconv.FormatUint(from.Cursor.Number, 10), from.Cursor.Hash, from.Pending,
		strconv.FormatUint(to.Cursor.Number, 10), to.Cursor.Hash, to.Pending).Int()
	switch {
	case err != nil:
		return err
	case r == 0:
		return errFilterMoved
	case r < 0:
		return errFilterGone
	}
	return nil
}

// Remove implements FilterStore.
func (s *RedisFilters) Remove(ctx context.Context, id, owner string) (bool, error) {
	r, err := keyspace.FilterRemove.Run(ctx, s.rdb, s.keys.FilterKeys(id, owner), id).Int()
	return r == 1, err
}
