package heads

import (
	"slices"
	"time"
)

// Block time learning limits.
const (
	// clockSamples bounds the heads whose timestamps are kept.
	clockSamples = 64
	// clockMinSpan is the chain time one measured interval spans at
	// least: timestamps tick in whole seconds, and blocks may come faster.
	clockMinSpan = 2
	// MinBlockTime floors what the timestamps say.
	MinBlockTime = 50 * time.Millisecond
)

// Clock learns a chain's block time from the timestamps of the chain's
// heads: the median of the intervals between them, each measured over at
// least clockMinSpan seconds so that one-second timestamps resolve
// sub-second blocks, and a median so that one halt or burst does not move
// it.
type Clock struct {
	samples []sample // ascending by number
}

type sample struct{ number, time uint64 }

// Tip records the chain's new tip. Samples at or above it belong to a
// view the chain left (a reorg, a head that healed down); a tip older than
// the samples below it starts over.
func (c *Clock) Tip(number, ts uint64) {
	i := len(c.samples)
	for i > 0 && c.samples[i-1].number >= number {
		i--
	}
	c.samples = c.samples[:i]
	if i > 0 && c.samples[i-1].time > ts {
		c.samples = c.samples[:0]
	}
	c.samples = append(c.samples, sample{number, ts})
	if n := len(c.samples); n > clockSamples {
		c.samples = slices.Delete(c.samples, 0, n-clockSamples)
	}
}

// Below records an older block's timestamp, below every sample; one that
// does not fit their order is ignored.
func (c *Clock) Below(number, ts uint64) {
	if len(c.samples) == 0 || c.samples[0].number <= number || c.samples[0].time < ts {
		return
	}
	c.samples = slices.Insert(c.samples, 0, sample{number, ts})
}

// Estimate is the block time the samples say, and the shortest of the
// intervals it is the median of; ok is false until they span
// clockMinSpan seconds.
func (c *Clock) Estimate() (median, fastest time.Duration, ok bool) {
	var ivs []time.Duration
	for i, j := 0, 1; j < len(c.samples); j++ {
		a, b := c.samples[i], c.samples[j]
		if b.time-a.time < clockMinSpan {
			continue
		}
		ivs = append(ivs, time.Duration(b.time-a.time)*time.Second/time.Duration(b.number-a.number))
		i = j
	}
	if len(ivs) == 0 {
		return 0, 0, false
	}
	slices.Sort(ivs)
	return max(ivs[len(ivs)/2], MinBlockTime), max(ivs[0], MinBlockTime), true
}
