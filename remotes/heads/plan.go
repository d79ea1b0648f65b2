package heads

// Polling when the block is due. A remote polled once per block time
// (remotes' track) reports a block half a block time after it came, on
// average, and a whole one at worst: a poll that just missed it waits a
// whole interval. The chain says when its next block is due: blocks come
// one block time apart. So while this replica leads the chain
// (Plan.Lead), its pollers follow a plan (Plan): they stay quiet
// until a little before the next block is due, poll densely from then
// until some remote reports it, and then go quiet until the one after. A
// block that is late is polled for a little longer, then every quarter of
// a block time, never in a storm. Pollers of a replica that does not lead
// keep the block-time cadence: their heads come from the leader's feed.
//
// The plan's inputs are the block time (Clock, from the chain's
// timestamps) and when each block came, as the polls saw it: a block
// first seen by a poll sent at hi, after one sent at lo saw nothing new,
// came between the two, and the midpoint is the estimate. How far each
// block came from where the last one predicted it (the chain's jitter and
// the remotes' spread, plus the polls' own uncertainty) sets how early
// the dense polling starts and how dense it is: as dense as the
// uncertainty, between minPaceInterval and a quarter of a block time, so
// that a block costs a few polls whatever the chain's pace.

import (
	"slices"
	"sync"
	"time"
)

// Pacing limits.
const (
	// minPaceInterval is the densest polling around a due block.
	minPaceInterval = 25 * time.Millisecond
	// paceSamples is how many blocks' prediction errors are kept.
	paceSamples = 16
	// paceLatePolls: a block not seen this many dense polls after it was
	// due is late; from then on it is polled every quarter block time.
	paceLatePolls = 3
	// paceExactFrom: a block time this long or longer is taken from the
	// timestamps as is; a shorter one is measured from the arrivals.
	paceExactFrom = 2 * time.Second
)

// Plan is the leader's plan for its polls. Its zero value does not lead.
type Plan struct {
	mu      sync.Mutex
	leading bool
	tip     uint64    // the highest block seen by a poll or newHeads
	arrival time.Time // when tip came, as estimated; zero: unknown
	missAt  time.Time // the send time of the last poll that saw no block above tip
	errs    []time.Duration
	// gaps are the recent intervals between consecutive blocks' arrivals:
	// their median paces the plan once there are a few, since timestamps
	// in whole seconds tell a sub-second block time only roughly.
	gaps []time.Duration
}

// Lead switches the plan on (this replica leads the chain) or off, and
// reports whether that changed it. A plan switched on starts afresh.
func (pc *Plan) Lead(on bool) (changed bool) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	changed = pc.leading != on
	pc.leading = on
	if on && changed {
		pc.tip, pc.arrival, pc.missAt, pc.errs, pc.gaps = 0, time.Time{}, time.Time{}, nil, nil
	}
	return changed
}

// Leading reports whether the plan is on.
func (pc *Plan) Leading() bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.leading
}

// Saw records what a poll sent at sent saw: the remote's head number. A
// head over newHeads is recorded with sent its arrival (poll false). bt is
// the chain's block time.
func (pc *Plan) Saw(sent time.Time, head uint64, poll bool, bt time.Duration) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if !pc.leading {
		return
	}
	bt = pc.period(bt)
	if head <= pc.tip {
		if poll && sent.After(pc.missAt) {
			pc.missAt = sent
		}
		return
	}
	_, step := pc.plan(bt)
	est := sent
	if poll {
		// It came after the last poll that missed it, if that poll was
		// recent enough to say so.
		lo := pc.missAt
		if lo.IsZero() || sent.Sub(lo) > 2*step || lo.After(sent) {
			lo = sent.Add(-step)
		}
		est = lo.Add(sent.Sub(lo) / 2)
	}
	if head == pc.tip+1 && !pc.arrival.IsZero() {
		e := est.Sub(pc.arrival.Add(bt))
		if e < 0 {
			e = -e
		}
		if e < bt { // a missed slot is not jitter
			pc.errs = appendSample(pc.errs, e)
		}
		pc.gaps = appendSample(pc.gaps, est.Sub(pc.arrival))
	}
	pc.tip, pc.arrival, pc.missAt = head, est, time.Time{}
}

func appendSample(s []time.Duration, d time.Duration) []time.Duration {
	s = append(s, d)
	if len(s) > paceSamples {
		s = s[1:]
	}
	return s
}

// period is the interval the plan expects between blocks: bt, the block
// time the timestamps say, for blocks paceExactFrom apart or more, which
// whole-second timestamps measure well; for faster chains the median of
// the recent gaps between arrivals, when there are a few and they are
// within a factor of two of bt. pc.mu must be held.
func (pc *Plan) period(bt time.Duration) time.Duration {
	if bt >= paceExactFrom || len(pc.gaps) < 4 {
		return bt
	}
	gs := slices.Clone(pc.gaps)
	slices.Sort(gs)
	if m := gs[len(gs)/2]; m >= bt/2 && m <= 2*bt {
		return m
	}
	return bt
}

// plan is how early before a due block the dense polling starts (the
// spread of the recent blocks' arrivals around their predictions) and
// how far apart its polls are. pc.mu must be held.
func (pc *Plan) plan(bt time.Duration) (spread, step time.Duration) {
	spread = bt / 10 // until blocks have been seen
	if len(pc.errs) >= 4 {
		// Not the very worst: one GC pause must not widen every window.
		es := slices.Clone(pc.errs)
		slices.Sort(es)
		spread = es[len(es)*9/10]
	}
	spread = min(spread, bt/4)
	step = min(max(spread, minPaceInterval), max(bt/4, minPaceInterval))
	return spread, step
}

// Next is how long a leader's poller waits before its next poll, and
// false when the plan does not lead (the block-time cadence applies).
func (pc *Plan) Next(now time.Time, bt time.Duration) (time.Duration, bool) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if !pc.leading {
		return 0, false
	}
	bt = pc.period(bt)
	spread, step := pc.plan(bt)
	if pc.arrival.IsZero() {
		return max(bt/4, minPaceInterval), true // the first block sets the plan
	}
	due := pc.arrival.Add(bt)
	start := due.Add(-spread - step/2)
	switch {
	case now.Before(start):
		return start.Sub(now), true
	case now.Before(due.Add(spread + paceLatePolls*step)):
		return step, true
	default:
		return max(bt/4, step), true // late: sparse
	}
}
