package score

import (
	"math"
	"sync"
	"time"
)

// Level is a remote's misbehaviour level: one per misbehaviour, halving
// every half-life, so a remote that lied a few minutes ago still scores
// worse than one that never did, and one that mended its ways recovers.
// The misbehaviours come as a count that only grows (the remote's
// record), folded in whenever the level is read. Safe for concurrent use.
type Level struct {
	mu       sync.Mutex
	halfLife time.Duration
	level    float64   // as of at
	at       time.Time // zero: level is 0
	seen     int64     // the part of the count already folded into level
}

// At is the level at now, with the misbehaviours of count (the record's
// total) since the last look folded in.
func (l *Level) At(now time.Time, count int64) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.decayTo(now)
	if count > l.seen {
		l.level += float64(count - l.seen)
		l.seen = count
	}
	return l.level
}

// SetHalfLife ages the level to now by the half-life in force, then puts
// d in force.
func (l *Level) SetHalfLife(now time.Time, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.decayTo(now)
	l.halfLife = d
}

// decayTo ages the level to now. Called with mu held.
func (l *Level) decayTo(now time.Time) {
	if l.level > 0 && !l.at.IsZero() && l.halfLife > 0 {
		if dt := now.Sub(l.at); dt > 0 {
			l.level *= math.Exp2(-float64(dt) / float64(l.halfLife))
			if l.level < 1e-6 {
				l.level = 0
			}
		}
	}
	l.at = now
}
