// Package breaker keeps calls away from a remote that keeps failing: a
// circuit breaker that opens after a number of faults in a row, waits a
// cooldown, lets exactly one probe call through (half-open) and closes on
// its success. All its state is atomic, so every send may ask it without
// a lock.
//
// It knows no Pool or Remote and sends no call: remotes asks it before
// each send (Ready, Allow), tells it each outcome (Success, Fault,
// Release), logs and exports the transitions it reports, and decides what
// counts as a fault.
package breaker

import (
	"sync/atomic"
	"time"
)

// Breaker states, as exported in venn_remote_breaker_state.
const (
	Closed   int32 = 0
	HalfOpen int32 = 1
	Open     int32 = 2
)

// Breaker keeps calls away from a remote that keeps failing. threshold
// consecutive faults open it for cooldown; then exactly one probe call is let
// through (half-open): its success closes the breaker, its fault reopens it.
// All state is atomic; a state change is a compare-and-swap, so exactly one
// caller observes (and logs) each transition. A reload changes threshold
// and cooldown in place (Set), keeping the state.
type Breaker struct {
	threshold atomic.Int32
	cooldown  atomic.Int64 // nanoseconds

	state    atomic.Int32
	faults   atomic.Int32
	openedAt atomic.Int64 // unix nanos
}

// New returns a closed breaker with the given threshold and cooldown (see
// Set).
func New(threshold int, cooldown time.Duration) *Breaker {
	b := &Breaker{}
	b.Set(threshold, cooldown)
	return b
}

// Set puts a threshold and cooldown in force, both positive (the pool's
// defaulted breaker settings): an open breaker reopens by the new
// cooldown, a closed one opens at the new threshold of faults in a row,
// the ones counted so far included.
func (b *Breaker) Set(threshold int, cooldown time.Duration) {
	b.threshold.Store(int32(threshold))
	b.cooldown.Store(int64(cooldown))
}

// State is Closed, HalfOpen or Open.
func (b *Breaker) State() int32 { return b.state.Load() }

// Cooldown is how long an open breaker waits before its probe.
func (b *Breaker) Cooldown() time.Duration { return time.Duration(b.cooldown.Load()) }

// ProbeAt is when an open breaker lets its probe through.
func (b *Breaker) ProbeAt() time.Time { return time.Unix(0, b.openedAt.Load()+b.cooldown.Load()) }

// Ready reports whether a call may be sent now without claiming the probe.
func (b *Breaker) Ready(now time.Time) bool {
	switch b.state.Load() {
	case Closed:
		return true
	case Open:
		return now.UnixNano()-b.openedAt.Load() >= b.cooldown.Load()
	}
	return false // half-open: the probe is already out
}

// Allow claims the right to send a call. When the cooldown has passed it
// moves open to half-open and the caller carries the probe (probe is true);
// only that caller may release it.
func (b *Breaker) Allow(now time.Time) (ok, probe bool) {
	switch b.state.Load() {
	case Closed:
		return true, false
	case Open:
		if now.UnixNano()-b.openedAt.Load() < b.cooldown.Load() {
			return false, false
		}
		ok = b.state.CompareAndSwap(Open, HalfOpen)
		return ok, ok
	}
	return false, false
}

// Success records a good call; it reports whether the breaker just closed.
func (b *Breaker) Success() bool {
	b.faults.Store(0)
	if b.state.Load() == Closed {
		return false
	}
	old := b.state.Swap(Closed)
	return old != Closed
}

// Fault records a failed call; it reports whether the breaker just opened.
func (b *Breaker) Fault(now time.Time) bool {
	if b.state.Load() == HalfOpen {
		b.openedAt.Store(now.UnixNano())
		b.state.CompareAndSwap(HalfOpen, Open)
		return false // it was already out of rotation
	}
	if b.faults.Add(1) < b.threshold.Load() || b.state.Load() != Closed {
		return false
	}
	b.openedAt.Store(now.UnixNano())
	return b.state.CompareAndSwap(Closed, Open)
}

// Release gives back an unfinished probe (the caller went away, or a local
// limit stopped it): the next call may probe at once. Only the caller that
// Allow made the probe may call it.
func (b *Breaker) Release() {
	b.state.CompareAndSwap(HalfOpen, Open)
}
