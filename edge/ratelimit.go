package edge

import (
	"context"
	"math"
	"sync"
	"time"
)

// Rate limits are GCRA (the generic cell rate algorithm): each bucket keeps
// one number, its theoretical arrival time (TAT), the moment it would be
// full again if nothing more were taken. A call costs one emission interval
// (1/PerSecond); n calls fit when TAT + n·interval − now stays within
// Burst·interval, and then TAT moves forward by n·interval. That is a token
// bucket of Burst tokens refilled at PerSecond, kept as one timestamp
// instead of a count and a refill time: one small value per client, no
// background refill, no window boundary that lets a client send twice its
// rate across two windows, and the wait until calls fit falls out of the
// same subtraction (Retry-After). MemoryLimiter and RedisLimiter run the
// same arithmetic, in Go and in one Lua script.

// Rate is a sustained rate with a burst: RPS calls a second on average,
// and up to Burst at once after a quiet spell. A zero RPS is no limit; a
// Burst below 1 means max(1, ceil(RPS)).
type Rate struct {
	RPS   float64 `yaml:"rps"`
	Burst int     `yaml:"burst"`
}

// Limited reports whether r limits anything.
func (r Rate) Limited() bool { return r.RPS > 0 && !math.IsInf(r.RPS, 1) }

func (r Rate) burst() int {
	if r.Burst >= 1 {
		return r.Burst
	}
	return max(1, int(math.Ceil(r.RPS)))
}

// interval is what one call costs, in nanoseconds.
func (r Rate) interval() float64 { return float64(time.Second) / r.RPS }

// Bucket is one client's rate: all calls made under ID count against Rate.
type Bucket struct {
	ID   string // "key:NAME" or "ip:ADDRESS"; never an API key itself
	Rate Rate
}

// Never is Verdict.RetryAfter for calls that can never fit: more at once
// than the bucket's burst.
const Never time.Duration = -1

// Verdict is a Limiter's answer.
type Verdict struct {
	// OK: the calls were taken from every bucket.
	OK bool
	// Refused is the index of the bucket that refused them (the one that
	// would make them wait longest) when !OK.
	Refused int
	// RetryAfter is how long until they would fit, or Never.
	RetryAfter time.Duration
}

// A Limiter keeps rate-limit state. Take takes n calls from every bucket
// at once, or from none of them: a refusal by one bucket leaves the others
// untouched. An error means the state could not be reached; the edge then
// fails open or closed as configured.
type Limiter interface {
	Take(ctx context.Context, n int, buckets []Bucket) (Verdict, error)
}

var _ Limiter = (*MemoryLimiter)(nil)

// gcra takes n calls from a bucket whose TAT is tat (at least now) at rate
// r, all in nanoseconds. It returns the bucket's new TAT, or how long until
// the calls would fit (Never when n is over the burst).
func gcra(tat, now int64, n int, r Rate) (next int64, wait time.Duration) {
	b := r.burst()
	if n > b {
		return 0, Never
	}
	iv := r.interval()
	next = tat + int64(float64(n)*iv)
	if over := next - now - int64(float64(b)*iv); over > 0 {
		return 0, time.Duration(over)
	}
	return next, 0
}

// memorySweepEvery is how often MemoryLimiter forgets full buckets, which
// are the same as absent ones.
const memorySweepEvery = time.Minute

// maxBuckets bounds the buckets of one Take: a key's and an address's.
const maxBuckets = 4

// MemoryLimiter keeps rate-limit state in this process: every replica
// limits on its own. It is the Limiter when venn has no Redis.
type MemoryLimiter struct {
	now func() time.Time

	mu        sync.Mutex
	tats      map[string]int64 // bucket ID → TAT, unix ns; only buckets not yet full
	lastSweep int64
}

// NewMemoryLimiter returns an empty MemoryLimiter timed by now (nil:
// time.Now).
func NewMemoryLimiter(now func() time.Time) *MemoryLimiter {
	if now == nil {
		now = time.Now
	}
	return &MemoryLimiter{now: now, tats: make(map[string]int64)}
}

// Take implements Limiter; it never fails.
func (m *MemoryLimiter) Take(_ context.Context, n int, buckets []Bucket) (Verdict, error) {
	if len(buckets) > maxBuckets {
		panic("edge: too many rate-limit buckets")
	}
	now := m.now().UnixNano()
	m.mu.Lock()
	defer m.mu.Unlock()
	if now-m.lastSweep > int64(memorySweepEvery) {
		for id, tat := range m.tats {
			if tat <= now {
				delete(m.tats, id)
			}
		}
		m.lastSweep = now
	}
	var next [maxBuckets]int64
	v := Verdict{OK: true}
	for i, b := range buckets {
		tat := max(m.tats[b.ID], now)
		t, wait := gcra(tat, now, n, b.Rate)
		switch {
		case wait == Never:
			return Verdict{Refused: i, RetryAfter: Never}, nil
		case wait > 0:
			if v.OK || wait > v.RetryAfter {
				v = Verdict{Refused: i, RetryAfter: wait}
			}
		}
		next[i] = t
	}
	if v.OK {
		for i, b := range buckets {
			m.tats[b.ID] = next[i]
		}
	}
	return v, nil
}
