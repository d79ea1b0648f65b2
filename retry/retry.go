// Package retry is how venn's retry loops wait between tries: Sleep, a
// wait that the loop's context cuts short, and Double, the bounded
// doubling of the delay after one more failure. It owns no loop and no
// goroutine: each loop keeps its own delay and decides when to retry.
package retry

import (
	"context"
	"time"
)

// Sleep waits d unless ctx ends first; it reports whether ctx is alive.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Double is the delay after one more failure: twice prev, at least lo and
// at most hi.
func Double(prev, lo, hi time.Duration) time.Duration { return min(max(2*prev, lo), hi) }
