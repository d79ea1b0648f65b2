package heads

import (
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"
)

// TestPollPlan drives the leader's poll plan against simulated chains of
// each shape the shape bench runs (block time, release jitter, a remote's
// round trip, slots left empty): every block is seen within a tenth of a
// block time at the median and half a block time at worst, for at most 4
// polls per block. Polling once a block time, as every poller did,
// sees a block half a block time late at the median.
func TestPollPlan(t *testing.T) {
	tests := []struct {
		name       string
		bt, jitter time.Duration
		rtt        time.Duration
		emptyEvery int // every emptyEvery-th slot has no block (0: none)
		// learned is the block time the plan is told (0: bt), as whole-
		// second timestamps tell a sub-second one only roughly.
		learned time.Duration
	}{
		{name: "l2", bt: 250 * time.Millisecond, jitter: 20 * time.Millisecond, rtt: 3 * time.Millisecond},
		{name: "base", bt: 2 * time.Second, jitter: 100 * time.Millisecond, rtt: 30 * time.Millisecond},
		{name: "bsc", bt: 750 * time.Millisecond, jitter: 50 * time.Millisecond, rtt: 10 * time.Millisecond},
		{name: "mainnet", bt: 12 * time.Second, jitter: time.Second, rtt: 80 * time.Millisecond},
		{name: "mainnet with empty slots", bt: 12 * time.Second, jitter: time.Second, rtt: 80 * time.Millisecond, emptyEvery: 7},
		{name: "no jitter", bt: time.Second, rtt: time.Millisecond},
		{name: "bsc, block time learned 11% short", bt: 750 * time.Millisecond, jitter: 50 * time.Millisecond,
			rtt: 10 * time.Millisecond, learned: 667 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const blocks, warm = 300, 10
			rng := rand.New(rand.NewPCG(1, 2))
			t0 := time.Unix(1_700_000_000, 0)
			var release []time.Time // release[i] is block i+1's
			for slot := 1; len(release) < blocks; slot++ {
				if tt.emptyEvery > 0 && slot%tt.emptyEvery == 0 {
					continue
				}
				j := time.Duration(0)
				if tt.jitter > 0 {
					j = time.Duration(rng.Int64N(int64(tt.jitter)))
				}
				release = append(release, t0.Add(time.Duration(slot)*tt.bt+j))
			}
			headAt := func(at time.Time) uint64 {
				return uint64(sort.Search(len(release), func(i int) bool { return release[i].After(at) }))
			}
			pc := &Plan{leading: true}
			learned := tt.learned
			if learned == 0 {
				learned = tt.bt
			}
			now := t0
			var seen uint64
			var delays []time.Duration
			polls, counted := 0, 0
			for seen < blocks {
				head := headAt(now.Add(tt.rtt / 2)) // the remote answers mid-trip
				pc.Saw(now, head, true, learned)
				if seen >= warm {
					polls++
				}
				done := now.Add(tt.rtt)
				for n := seen + 1; n <= head; n++ {
					if n > warm {
						delays = append(delays, done.Sub(release[n-1]))
						counted++
					}
				}
				seen = max(seen, head)
				wait, ok := pc.Next(done, learned)
				if !ok || wait <= 0 {
					t.Fatalf("next poll: %v, %v", wait, ok)
				}
				now = done.Add(wait)
			}
			slices.Sort(delays)
			p50, worst := delays[len(delays)/2], delays[len(delays)-1]
			perBlock := float64(polls) / float64(counted)
			t.Logf("p50 %v, max %v, %.2f polls per block", p50, worst, perBlock)
			if p50 > tt.bt/10 || worst > tt.bt/2 {
				t.Errorf("seen %v after release at the median, %v at worst; want within %v and %v", p50, worst, tt.bt/10, tt.bt/2)
			}
			if perBlock > 4 {
				t.Errorf("%.2f polls per block, want at most 4", perBlock)
			}
		})
	}
}
