package subcenter

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/venn-gateway/venn/headstore"
)

// A polled filter's kinds, as stored.
const (
	filterLogs    = "l"
	filterBlocks  = "b"
	filterPending = "p"
)

// FilterState is what a polled filter is, wherever it is polled: its kind
// and criteria, its owner, and its position (pos).
type FilterState struct {
	Kind   string
	Crit   []byte // logs: the criteria object as sent
	FullTx bool   // pending: transaction objects, not hashes
	Owner  string
	Pos    FilterPos
}

// FilterPos is how far a filter's changes were delivered: the last block
// (number and hash), and for a pending filter its place in the pending
// feed.
type FilterPos struct {
	Cursor  headstore.Cursor
	Pending string
}

// Errors of a FilterStore.
var (
	ErrFilterGone  = errors.New("filter not found")
	ErrChainFull   = errors.New("the chain holds as many filters as allowed")
	ErrOwnerFull   = errors.New("the client holds as many filters as allowed")
	ErrFilterMoved = errors.New("another poll moved the filter")
)

// FilterStore holds the polled filters of one chain where every replica
// that polls them reads them: Redis in a cluster (package
// subcenter/redisstore), memory in a process of its own (MemoryFilters). Deadlines are kept by the
// store: a filter not advanced (polled) for its TTL is gone.
type FilterStore interface {
	// Create stores a new filter, unless the chain holds maxChain live
	// filters (ErrChainFull) or its owner maxOwner (ErrOwnerFull).
	Create(ctx context.Context, id string, st *FilterState, ttl time.Duration, maxChain, maxOwner int) error
	// Get reads a filter; ErrFilterGone when there is none.
	Get(ctx context.Context, id string) (*FilterState, error)
	// Advance moves the filter from pos from to pos to and pushes its
	// deadline back, only if it is still at from: ErrFilterMoved when
	// another poll moved it first, ErrFilterGone when it is gone.
	Advance(ctx context.Context, id, owner string, from, to FilterPos, ttl time.Duration) error
	// Remove uninstalls a filter and reports whether it existed.
	Remove(ctx context.Context, id, owner string) (bool, error)
}

var _ FilterStore = (*MemoryFilters)(nil)

// MemoryFilters is the FilterStore of a venn running alone.
type MemoryFilters struct {
	now func() time.Time

	mu        sync.Mutex
	m         map[string]*memFilter
	owners    map[string]int
	lastSweep time.Time
}

type memFilter struct {
	st       FilterState
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
func (s *MemoryFilters) Create(_ context.Context, id string, st *FilterState, ttl time.Duration, maxChain, maxOwner int) error {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweep(now, len(s.m) >= maxChain || s.owners[st.Owner] >= maxOwner)
	switch {
	case len(s.m) >= maxChain:
		return ErrChainFull
	case s.owners[st.Owner] >= maxOwner:
		return ErrOwnerFull
	}
	s.m[id] = &memFilter{st: *st, deadline: now.Add(ttl)}
	s.owners[st.Owner]++
	return nil
}

// Get implements FilterStore.
func (s *MemoryFilters) Get(_ context.Context, id string) (*FilterState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.live(id, s.now())
	if f == nil {
		return nil, ErrFilterGone
	}
	st := f.st
	return &st, nil
}

// Advance implements FilterStore.
func (s *MemoryFilters) Advance(_ context.Context, id, _ string, from, to FilterPos, ttl time.Duration) error {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.live(id, now)
	switch {
	case f == nil:
		return ErrFilterGone
	case f.st.Pos != from:
		return ErrFilterMoved
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
