package admin

import (
	"math"
	"testing"
	"time"
)

// TestRecentErrorShare: the error share is over the last errorWindow of
// the reads' samples, not since start.
func TestRecentErrorShare(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	tests := []struct {
		at               time.Duration
		requests, errors float64
		want, seconds    float64
	}{
		{at: 0, requests: 1000, errors: 500, want: 0.5},                                           // first read: since start
		{at: time.Minute, requests: 1100, errors: 500, want: 0, seconds: 60},                      // the outage is over
		{at: 6 * time.Minute, requests: 1200, errors: 550, want: 0.5, seconds: 300},               // against the read of minute 1
		{at: 6*time.Minute + 5*time.Second, requests: 1200, errors: 550, want: 0.5, seconds: 305}, // no sample within 10 s
		{at: 7 * time.Minute, requests: 10, errors: 1, want: 0.1},                                 // counters started again
	}
	var h trafficHistory
	for i, tt := range tests {
		tr := map[string]*Traffic{"c": {Requests: tt.requests, errors: tt.errors, ErrorShare: tt.errors / tt.requests}}
		h.recent(t0.Add(tt.at), tr)
		if got := tr["c"]; math.Abs(got.ErrorShare-tt.want) > 1e-9 || got.ErrorShareSeconds != tt.seconds {
			t.Errorf("read %d: share %v over %v s, want %v over %v s", i, got.ErrorShare, got.ErrorShareSeconds, tt.want, tt.seconds)
		}
	}
	h.recent(t0, map[string]*Traffic{})
	if len(h.byChain) != 0 {
		t.Errorf("a removed chain's samples are kept: %v", h.byChain)
	}
}
