package heads

import "time"

// Head corroboration limits.
const (
	// MaxStepBack: a remote reporting a head more than this below the
	// one it reported before was reset, or its earlier report was bogus.
	// Its head follows, so one bad report cannot hold the chain's head
	// (and every other remote's lag) hostage until a restart. A smaller
	// step back (a reorg to a shorter chain, a load-balanced provider's
	// slower backend) is ignored, so routing does not jitter.
	MaxStepBack = 64
	// Slack blocks beyond what the timestamps allow are taken on
	// trust: a fast remote a block or two ahead of the others.
	Slack = 2
	// pace: a chain may run up to this many times faster than its
	// learned block time for a while (bursty L2s, a missed slot caught up).
	pace = 2
	// MaxClockSkew: a head whose timestamp is further ahead of this
	// host's clock is bogus, whatever else vouches for it.
	MaxClockSkew = 15 * time.Second
	// HoldFor: the only remote in rotation, reporting a head nothing
	// corroborates, is followed once it has stood by it this long (its
	// timestamps may be right and the learned block time stale).
	HoldFor = 30 * time.Second
)

// Plausible reports whether c can follow ref on one chain: it is no
// further above ref than Slack plus what pace times the block
// time allows in the time between their timestamps.
func Plausible(c, ref *Report, bt time.Duration) bool {
	if c.Number <= ref.Number+Slack {
		return true
	}
	if c.Time < ref.Time {
		return false
	}
	// +1 s: timestamps tick in whole seconds.
	span := time.Duration(min(c.Time-ref.Time+1, uint64(maxSpan/time.Second))) * time.Second
	allowed := uint64(pace * (span / bt))
	return c.Number-ref.Number <= Slack+allowed
}

// maxSpan caps the time between two heads Plausible considers, so
// that its arithmetic cannot overflow (a year is plenty).
const maxSpan = 365 * 24 * time.Hour
