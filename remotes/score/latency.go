package score

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Latency estimates a remote's recent latency quantiles (p50 and p90
// for its score, any quantile for a hedge delay) in fixed memory.
//
// It is a log-linear histogram: four buckets per power of two of the
// latency in µs units (HDR-style), so a quantile is off by at most one
// bucket width, about 19% of the value at the bucket's lower edge, and
// is interpolated within the bucket. Recording is two atomic adds and no
// allocation; the hot path never takes a lock.
//
// It forgets: every histWindow observations all counts are halved, so a
// sample's weight halves with every window that follows it and a change in
// the remote's behaviour shows within a few windows (p90 moves past the
// old regime after about 3 windows of the new one). A remote without
// traffic keeps its last picture; the pool's probe share and head polls
// keep that picture from going stale for long.
type Latency struct {
	counts [histBuckets]atomic.Uint64
	seen   atomic.Uint64 // observations ever, to time the halving
}

const (
	histShift   = 10 // the bucket unit is 1024 ns
	histSubBits = 2  // 4 sub-buckets per power of two
	histSub     = 1 << histSubBits
	histBuckets = 128 // up to 7<<30 µs: far past any timeout
	histWindow  = 256 // observations between halvings
	// minLatencySamples: below this many samples (after decay) a remote's
	// quantiles are unknown, not a guess from one cold connection.
	minLatencySamples = 16
)

// histIndex is the bucket of d.
func histIndex(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	v := uint64(d) >> histShift
	if v < histSub {
		return int(v)
	}
	l := bits.Len64(v) // >= histSubBits+1
	i := (l-histSubBits)<<histSubBits | int(v>>(l-1-histSubBits))&(histSub-1)
	return min(i, histBuckets-1)
}

// histBounds is bucket i's lower edge and width, in histShift units.
func histBounds(i int) (lower, width uint64) {
	if i < histSub {
		return uint64(i), 1
	}
	o, s := i>>histSubBits, uint64(i&(histSub-1))
	width = 1 << (o - 1)
	return (histSub + s) * width, width
}

// Observe records one latency.
func (h *Latency) Observe(d time.Duration) {
	h.counts[histIndex(d)].Add(1)
	if h.seen.Add(1)%histWindow == 0 {
		h.halve()
	}
}

// halve ages every count by half. Run by the one observer that completes a
// window; an add racing with it may lose its half too, which only shifts
// the estimate by a sample.
func (h *Latency) halve() {
	for i := range h.counts {
		c := &h.counts[i]
		if v := c.Load(); v > 0 {
			c.Store(v / 2)
		}
	}
}

// Quantile is the latency below which fraction q of the recent samples
// fall; ok is false while there are fewer than minLatencySamples.
func (h *Latency) Quantile(q float64) (d time.Duration, ok bool) {
	var counts [histBuckets]uint64
	total := h.load(&counts)
	if total < minLatencySamples {
		return 0, false
	}
	return quantileOf(&counts, total, q), true
}

// load reads the counts into counts and returns their total.
func (h *Latency) load(counts *[histBuckets]uint64) (total uint64) {
	for i := range h.counts {
		counts[i] = h.counts[i].Load()
		total += counts[i]
	}
	return total
}

// Quantiles is Quantile for several fractions at once (one read of the
// counts, so they are consistent with each other).
func (h *Latency) Quantiles(qs []float64, out []time.Duration) bool {
	var counts [histBuckets]uint64
	total := h.load(&counts)
	if total < minLatencySamples {
		return false
	}
	for i, q := range qs {
		out[i] = quantileOf(&counts, total, q)
	}
	return true
}

func quantileOf(counts *[histBuckets]uint64, total uint64, q float64) time.Duration {
	q = min(max(q, 0), 1)
	target := q * float64(total)
	var cum float64
	for i, c := range counts {
		if c == 0 {
			continue
		}
		next := cum + float64(c)
		if next >= target {
			lower, width := histBounds(i)
			frac := (target - cum) / float64(c)
			units := float64(lower) + frac*float64(width)
			return time.Duration(units * (1 << histShift))
		}
		cum = next
	}
	lower, width := histBounds(histBuckets - 1)
	return time.Duration((lower + width) << histShift)
}
