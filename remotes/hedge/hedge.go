// Package hedge is what hedging decides without a remote: how long to
// wait for a remote before a hedge goes out (Delay: a fixed delay, or a
// quantile of the remote's recent latency, never less than the delay),
// and the budget that bounds the extra load (Budget: a token bucket
// counted in calls).
//
// It knows no Pool or Remote and sends no call: remotes (hedge.go) races
// the sends, picks where a hedge goes, judges the replies and counts the
// outcomes; it reads a remote's latency through the Quantiler this
// package declares.
package hedge

import (
	"math"
	"sync/atomic"
	"time"
)

// Quantiler is a remote's recent latency as a hedge's delay reads it
// (score.Latency): the latency below which fraction q of its recent calls
// answered, ok false while it has too few samples.
type Quantiler interface {
	Quantile(q float64) (d time.Duration, ok bool)
}

// Delay is how long to wait for a remote of latency lat before hedging:
// delay, or with a quantile above 0 that quantile of lat but at least
// delay; ok is false when the call is not to be hedged (a quantile of a
// remote not measured yet, and no delay to fall back on).
func Delay(delay time.Duration, quantile float64, lat Quantiler) (time.Duration, bool) {
	if quantile <= 0 {
		return delay, true
	}
	q, ok := lat.Quantile(quantile)
	switch {
	case ok:
		return max(q, delay), true
	case delay > 0:
		return delay, true
	}
	return 0, false
}

// unit is one hedge in the budget's fixed-point tokens.
const unit = 1_000_000

// Budget is a token bucket counted in calls, not time: each hedgeable
// call adds its share of a hedge (Deposit), each hedge takes a whole one
// (Take), and it holds at most burst hedges. Safe for concurrent use
// without a lock.
type Budget struct {
	tokens    atomic.Int64
	earn, cap int64
}

// NewBudget returns a full budget that lets on average share of the
// hedgeable calls have a hedge, and burst hedges beyond that.
func NewBudget(share float64, burst int) *Budget {
	b := &Budget{earn: int64(math.Round(share * unit)), cap: int64(burst) * unit}
	b.tokens.Store(b.cap)
	return b
}

// Deposit adds one hedgeable call's share.
func (b *Budget) Deposit() {
	for {
		t := b.tokens.Load()
		if t >= b.cap || b.tokens.CompareAndSwap(t, min(t+b.earn, b.cap)) {
			return
		}
	}
}

// Take takes one hedge; false when the budget is spent.
func (b *Budget) Take() bool {
	for {
		t := b.tokens.Load()
		if t < unit {
			return false
		}
		if b.tokens.CompareAndSwap(t, t-unit) {
			return true
		}
	}
}

// Refund gives back a hedge taken but never sent.
func (b *Budget) Refund() { b.tokens.Add(unit) }
