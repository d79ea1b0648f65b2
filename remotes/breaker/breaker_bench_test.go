package breaker

import (
	"testing"
	"time"
)

// BenchmarkBreakerAllow is what every send asks its remote's breaker
// (Ready, then Allow), closed as it is nearly always: the hot-path cost of
// thresholds a reload can change in place.
func BenchmarkBreakerAllow(b *testing.B) {
	brk := New(5, 10*time.Second) // the pool's default failures and cooldown
	now := time.Now()
	for b.Loop() {
		if !brk.Ready(now) {
			b.Fatal("not ready")
		}
		if ok, _ := brk.Allow(now); !ok {
			b.Fatal("refused")
		}
		brk.Success()
	}
}
