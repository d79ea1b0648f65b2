package heads

// A replica that was stalled (a VM pause, SIGSTOP, a long stop-the-world)
// wakes with every head it knows as old as its window's, and with the news
// that came meanwhile queued in its sockets: newHeads notifications, the
// leader's feed, answers. Read in the first moments after it wakes, that
// news passes for current, and a window many blocks behind looks within
// max_lag of the heads. So the pool watches for stalls: a ticker that
// should beat every stallTick; a gap of stallGap or more is a stall. From
// the moment a stall is seen (or, before the watch has run again, from
// the moment its beat is overdue) until every remote in rotation was
// polled again with a request sent after it, remotes.Heads.HeardWithin
// says nothing was heard: the head window is judged by its head's
// timestamp alone, and the cluster's heads cap nothing.

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// Stall watch timings.
const (
	stallTick = 100 * time.Millisecond
	// stallGap: a beat this late means the process did not run. A busy
	// machine delays a beat by milliseconds; two seconds are a stall, as
	// long as the head window's minimum allowance (router.minStale).
	stallGap = 2 * time.Second
)

// Stalls is a pool's stall watch. Its zero value has not beaten yet.
type Stalls struct {
	beat       atomic.Int64 // wall clock, unix nanos, of the last beat; 0 before the first
	confirming atomic.Bool  // a stall was seen; the heads are being polled again
	stalls     atomic.Int64 // stalls seen, for tests and the log
}

// Stalled reports whether the heads the pool holds may be old news: a
// stall is being confirmed, or the watch's beat is overdue.
func (s *Stalls) Stalled(now time.Time) bool {
	if s.confirming.Load() {
		return true
	}
	b := s.beat.Load()
	return b != 0 && now.UnixNano()-b >= int64(stallGap)
}

// Seen is how many stalls the watch saw.
func (s *Stalls) Seen() int64 { return s.stalls.Load() }

// Run beats until ctx ends; a late beat is a stall, after which repoll
// polls every remote in rotation again and judges their heads, the heads
// counting as old news until it returns.
func (s *Stalls) Run(ctx context.Context, log *slog.Logger, repoll func(context.Context)) {
	tick := time.NewTicker(stallTick)
	defer tick.Stop()
	last := time.Now()
	s.beat.Store(last.UnixNano())
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		now := time.Now()
		if gap := now.Sub(last); gap >= stallGap {
			s.confirming.Store(true)
			s.stalls.Add(1)
			log.Info("replica was stalled; heads are polled again before they count", "stalled_for", gap.Round(time.Millisecond))
			repoll(ctx)
			s.confirming.Store(false)
			now = time.Now()
		}
		last = now
		s.beat.Store(now.UnixNano())
	}
}
