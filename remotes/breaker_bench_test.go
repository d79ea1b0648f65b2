package remotes

import (
	"testing"
	"time"
)

// BenchmarkBreakerAllow is what every send asks its remote's breaker
// (ready, then allow), closed as it is nearly always: the hot-path cost of
// thresholds a reload can change in place.
func BenchmarkBreakerAllow(b *testing.B) {
	brk := newBreaker(DefaultBreakerFailures, DefaultBreakerCooldown)
	now := time.Now()
	for b.Loop() {
		if !brk.ready(now) {
			b.Fatal("not ready")
		}
		if ok, _ := brk.allow(now); !ok {
			b.Fatal("refused")
		}
		brk.success()
	}
}
