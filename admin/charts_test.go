package admin

import (
	"math"
	"strings"
	"testing"
	"time"
)

// TestChartQuantile: quantiles of bucket deltas, as histogram_quantile
// reads them.
func TestChartQuantile(t *testing.T) {
	bs := []bucket{{0.01, 50}, {0.1, 90}, {1, 100}, {math.Inf(1), 100}}
	tests := []struct {
		q, want float64
	}{
		{0.5, 0.01},
		{0.7, 0.01 + 0.09*20/40},
		{0.99, 0.1 + 0.9*9/10},
	}
	for _, tt := range tests {
		if got := quantile(tt.q, bs); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if got := quantile(0.5, []bucket{{1, 0}, {math.Inf(1), 0}}); !math.IsNaN(got) {
		t.Errorf("quantile of no calls = %v, want NaN", got)
	}
}

// TestChartRing: the ring keeps chartSteps steps, starts again when the
// counters do, forgets removed chains; a view's totals and points are
// over one window, from the oldest sample to the live one.
func TestChartRing(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	var r chartRing
	sample := func(i int, requests float64) chainSample {
		s := chainSample{at: t0.Add(time.Duration(i) * time.Second), requests: requests, errors: requests / 10, headAge: 1,
			remotes: map[string]remoteSample{"a": {calls: requests, buckets: []bucket{{0.1, requests}, {math.Inf(1), requests}}}}}
		s.answers[0] = requests
		return s
	}
	for i := range 200 {
		r.add(map[string]chainSample{"c": sample(i, float64(10*i))})
	}
	live := sample(200, 2000)
	ss := r.samples("c", live)
	if len(ss) != chartSteps+2 || ss[0].at != t0.Add(109*time.Second) {
		t.Fatalf("%d samples from %v, want %d from the 109th", len(ss), ss[0].at.Sub(t0), chartSteps+2)
	}
	v := chartView(ss)
	if v.WindowSeconds != 91 || v.Calls != 910 || math.Abs(v.ErrorShare-0.1) > 1e-9 || v.Answers[0].Calls != 910 {
		t.Errorf("view over %v s: %v calls, %v errors share, head %v", v.WindowSeconds, v.Calls, v.ErrorShare, v.Answers[0])
	}
	if p := v.CallsChart.Lines[0].Points; len(p) != 91 || p[0] != 10 {
		t.Errorf("calls chart %d points from %v, want 91 at 10/s", len(p), p[:1])
	}
	if p := v.ShareChart.Lines[0].Points; p[len(p)-1] != 100 {
		t.Errorf("share of a's calls %v, want 100", p[len(p)-1])
	}
	svg := string(chartSVG(v.CallsChart, v.WindowSeconds))
	if !strings.Contains(svg, `data-points="91"`) || !strings.Contains(svg, "last 1 min 31 s") {
		t.Errorf("svg: %s", svg[:300])
	}
	r.add(map[string]chainSample{"c": sample(201, 5)})
	if ss := r.samples("c", sample(202, 6)); len(ss) != 2 {
		t.Errorf("after the counters started again: %d samples, want 2", len(ss))
	}
	r.add(map[string]chainSample{})
	if len(r.byChain) != 0 {
		t.Errorf("a removed chain's samples are kept")
	}
}
