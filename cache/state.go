package cache

import (
	"context"
	"sync/atomic"
)

// State is what a chain's cache holds and how well it answers, for the
// admin API: the tiers on, in the order they are asked, and the calls it
// answered since the process started.
type State struct {
	Tiers []TierState `json:"tiers"`
	// Hits and Misses count the calls with a fixed block (Serve's Hit, and
	// Miss or Bypass); HitRatio is Hits over both, 0 before any.
	Hits     uint64  `json:"hits"`
	Misses   uint64  `json:"misses"`
	HitRatio float64 `json:"hit_ratio"`
}

// TierState is one tier's contents; Entries and Bytes are nil when the
// tier cannot say (down, or no Sizer).
type TierState struct {
	Name    string `json:"name"`
	Entries *int64 `json:"entries,omitempty"`
	Bytes   *int64 `json:"bytes,omitempty"`
	Hits    uint64 `json:"hits"`
}

// served counts Serve's outcomes for State.
type served struct{ hits, misses atomic.Uint64 }

func (s *served) note(o Outcome) {
	switch o {
	case Hit:
		s.hits.Add(1)
	case Miss, Bypass:
		s.misses.Add(1)
	}
}

// State reads every tier's size, each bounded by sizeTimeout.
func (c *Cache) State(ctx context.Context) State {
	st := State{Hits: c.served.hits.Load(), Misses: c.served.misses.Load()}
	if n := st.Hits + st.Misses; n > 0 {
		st.HitRatio = float64(st.Hits) / float64(n)
	}
	for _, l := range c.tiers {
		ts := TierState{Name: l.name, Hits: l.hits.Load()}
		if s, ok := l.Tier.(Sizer); ok {
			sctx, cancel := l.sizeContext(ctx)
			entries, bytes, err := s.Size(sctx)
			cancel()
			if err == nil {
				ts.Entries, ts.Bytes = &entries, &bytes
			} else {
				l.failed("size", err)
			}
		}
		st.Tiers = append(st.Tiers, ts)
	}
	return st
}
