package remotes

import (
	"sync/atomic"
	"time"
)

// Breaker states, as exported in venn_remote_breaker_state.
const (
	breakerClosed   int32 = 0
	breakerHalfOpen int32 = 1
	breakerOpen     int32 = 2
)

// breaker keeps calls away from a remote that keeps failing. threshold
// consecutive faults open it for cooldown; then exactly one probe call is let
// through (half-open): its success closes the breaker, its fault reopens it.
// All state is atomic; a state change is a compare-and-swap, so exactly one
// caller observes (and logs) each transition. A reload changes threshold
// and cooldown in place (set), keeping the state.
type breaker struct {
	threshold atomic.Int32
	cooldown  atomic.Int64 // nanoseconds

	state    atomic.Int32
	faults   atomic.Int32
	openedAt atomic.Int64 // unix nanos
}

func newBreaker(threshold int, cooldown time.Duration) *breaker {
	b := &breaker{}
	b.set(threshold, cooldown)
	return b
}

// set puts a threshold and cooldown in force (zero: the defaults): an
// open breaker reopens by the new cooldown, a closed one opens at the new
// threshold of faults in a row, the ones counted so far included.
func (b *breaker) set(threshold int, cooldown time.Duration) {
	if threshold <= 0 {
		threshold = DefaultBreakerFailures
	}
	if cooldown <= 0 {
		cooldown = DefaultBreakerCooldown
	}
	b.threshold.Store(int32(threshold))
	b.cooldown.Store(int64(cooldown))
}

// cooldownFor is how long an open breaker waits before its probe.
func (b *breaker) cooldownFor() time.Duration { return time.Duration(b.cooldown.Load()) }

// ready reports whether a call may be sent now without claiming the probe.
func (b *breaker) ready(now time.Time) bool {
	switch b.state.Load() {
	case breakerClosed:
		return true
	case breakerOpen:
		return now.UnixNano()-b.openedAt.Load() >= b.cooldown.Load()
	}
	return false // half-open: the probe is already out
}

// allow claims the right to send a call. When the cooldown has passed it
// moves open to half-open and the caller carries the probe (probe is true);
// only that caller may release it.
func (b *breaker) allow(now time.Time) (ok, probe bool) {
	switch b.state.Load() {
	case breakerClosed:
		return true, false
	case breakerOpen:
		if now.UnixNano()-b.openedAt.Load() < b.cooldown.Load() {
			return false, false
		}
		ok = b.state.CompareAndSwap(breakerOpen, breakerHalfOpen)
		return ok, ok
	}
	return false, false
}

// success records a good call; it reports whether the breaker just closed.
func (b *breaker) success() bool {
	b.faults.Store(0)
	if b.state.Load() == breakerClosed {
		return false
	}
	old := b.state.Swap(breakerClosed)
	return old != breakerClosed
}

// fault records a failed call; it reports whether the breaker just opened.
func (b *breaker) fault(now time.Time) bool {
	if b.state.Load() == breakerHalfOpen {
		b.openedAt.Store(now.UnixNano())
		b.state.CompareAndSwap(breakerHalfOpen, breakerOpen)
		return false // it was already out of rotation
	}
	if b.faults.Add(1) < b.threshold.Load() || b.state.Load() != breakerClosed {
		return false
	}
	b.openedAt.Store(now.UnixNano())
	return b.state.CompareAndSwap(breakerClosed, breakerOpen)
}

// release gives back an unfinished probe (the caller went away, or a local
// limit stopped it): the next call may probe at once. Only the caller that
// allow made the probe may call it.
func (b *breaker) release() {
	b.state.CompareAndSwap(breakerHalfOpen, breakerOpen)
}
