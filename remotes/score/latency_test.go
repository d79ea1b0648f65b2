package score

import (
	"math/rand/v2"
	"testing"
	"time"
)

// Bucket edges are continuous and every duration falls in the bucket whose
// bounds hold it.
func TestHistBuckets(t *testing.T) {
	for i := 1; i < histBuckets; i++ {
		pl, pw := histBounds(i - 1)
		l, _ := histBounds(i)
		if pl+pw != l {
			t.Fatalf("bucket %d starts at %d, previous ends at %d", i, l, pl+pw)
		}
	}
	for _, d := range []time.Duration{0, 1, time.Microsecond, 3 * time.Microsecond, 5 * time.Microsecond,
		137 * time.Microsecond, time.Millisecond, 2500 * time.Microsecond, time.Second, 10 * time.Minute} {
		i := histIndex(d)
		l, w := histBounds(i)
		u := uint64(d) >> histShift
		if u < l || u >= l+w {
			t.Errorf("%v: bucket %d holds [%d,%d) units, not %d", d, i, l, l+w, u)
		}
	}
	if i := histIndex(time.Duration(1 << 62)); i != histBuckets-1 {
		t.Errorf("a huge latency lands in bucket %d, want the last", i)
	}
}

func TestHistQuantiles(t *testing.T) {
	tests := []struct {
		name string
		give func(i int) time.Duration // the i-th sample
		n    int
		q    float64
		want time.Duration
	}{
		{name: "constant", give: func(int) time.Duration { return 3 * time.Millisecond }, n: 200, q: 0.9, want: 3 * time.Millisecond},
		{name: "uniform 1..100ms p50", give: func(i int) time.Duration { return time.Duration(i%100+1) * time.Millisecond }, n: 200, q: 0.5, want: 50 * time.Millisecond},
		{name: "uniform 1..100ms p90", give: func(i int) time.Duration { return time.Duration(i%100+1) * time.Millisecond }, n: 200, q: 0.9, want: 90 * time.Millisecond},
		{name: "5% slow tail: p90 is fast", give: func(i int) time.Duration {
			if i%20 == 0 {
				return 500 * time.Millisecond
			}
			return 2 * time.Millisecond
		}, n: 200, q: 0.9, want: 2 * time.Millisecond},
		{name: "5% slow tail: p99 is slow", give: func(i int) time.Duration {
			if i%20 == 0 {
				return 500 * time.Millisecond
			}
			return 2 * time.Millisecond
		}, n: 200, q: 0.99, want: 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Latency
			for i := range tt.n {
				h.Observe(tt.give(i))
			}
			got, ok := h.Quantile(tt.q)
			if !ok {
				t.Fatal("no quantile after enough samples")
			}
			// One bucket is at most a quarter of its lower edge wide.
			if lo, hi := tt.want*3/4, tt.want*5/4; got < lo || got > hi {
				t.Errorf("q%.2f = %v, want %v within a bucket", tt.q, got, tt.want)
			}
		})
	}
}

func TestHistUnknownUntilSamples(t *testing.T) {
	var h Latency
	for range minLatencySamples - 1 {
		h.Observe(time.Millisecond)
	}
	if _, ok := h.Quantile(0.5); ok {
		t.Fatal("a quantile from fewer than minLatencySamples samples")
	}
	h.Observe(time.Millisecond)
	if _, ok := h.Quantile(0.5); !ok {
		t.Fatal("no quantile at minLatencySamples samples")
	}
}

// The estimate follows a change of regime within a few windows.
func TestHistForgets(t *testing.T) {
	var h Latency
	for range 10 * histWindow {
		h.Observe(40 * time.Millisecond)
	}
	calls := 0
	for {
		h.Observe(2 * time.Millisecond)
		calls++
		if p90, _ := h.Quantile(0.9); p90 < 3*time.Millisecond {
			break
		}
		if calls > 5*histWindow {
			t.Fatalf("p90 still %v after %d fast samples", func() time.Duration { d, _ := h.Quantile(0.9); return d }(), calls)
		}
	}
	if calls < histWindow/2 {
		t.Errorf("p90 forgot 10 windows of slow samples after only %d fast ones", calls)
	}
}

// Recording and reading quantiles allocate nothing: both run per call.
func TestHistAllocationFree(t *testing.T) {
	var h Latency
	d := time.Millisecond
	if n := testing.AllocsPerRun(1000, func() {
		h.Observe(d)
		d += time.Duration(rand.IntN(1000))
	}); n != 0 {
		t.Errorf("observe: %v allocs", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = h.Quantile(0.9) }); n != 0 {
		t.Errorf("quantile: %v allocs", n)
	}
}

func BenchmarkHistObserve(b *testing.B) {
	var h Latency
	b.RunParallel(func(pb *testing.PB) {
		d := time.Millisecond
		for pb.Next() {
			h.Observe(d)
			d = d*7/8 + time.Microsecond*time.Duration(rand.IntN(400))
		}
	})
}

func BenchmarkHistQuantile(b *testing.B) {
	var h Latency
	for i := range 1000 {
		h.Observe(time.Duration(i) * time.Microsecond)
	}
	for b.Loop() {
		_, _ = h.Quantile(0.9)
	}
}
