package remotes

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/venn-gateway/venn/remotes/verdict"
)

// Whatever a remote sends, the error series stay a small fixed set.
func TestErrorLabelsBounded(t *testing.T) {
	codes := map[string]bool{}
	for c := -70000; c <= 70000; c++ {
		codes[codeLabel(c)] = true
	}
	if len(codes) > 112 {
		t.Fatalf("%d code labels, want at most 112", len(codes))
	}
	for code, want := range map[int]string{-32000: "-32000", -32005: "-32005", 3: "3", -32601: "-32601", -32700: "-32700", -31999: "other", 12345: "other", 0: "0"} {
		if got := codeLabel(code); got != want {
			t.Errorf("codeLabel(%d) = %q, want %q", code, got, want)
		}
	}
	statuses := map[string]bool{}
	for s := -10; s < 2000; s++ {
		statuses[statusLabel(s)] = true
	}
	if len(statuses) > 20 {
		t.Fatalf("%d status labels, want at most 20", len(statuses))
	}
	for status, want := range map[int]string{429: "429", 503: "503", 521: "5xx", 418: "4xx", 0: "0", 999: "other"} {
		if got := statusLabel(status); got != want {
			t.Errorf("statusLabel(%d) = %q, want %q", status, got, want)
		}
	}
}

// A failure is counted by its verdict's class and reason, beside its code
// and status.
func TestFailuresByClassAndReason(t *testing.T) {
	m := NewMetrics(nil)
	rm := m.forRemote("test", "n0")
	rm.failed(verdict.Verdict{Class: verdict.ClassRetry, Reason: verdict.ReasonHTTP5xx, Fault: true}, 0, 503)
	rm.failed(verdict.Verdict{Class: verdict.ClassRetry, Reason: verdict.ReasonHTTP5xx, Fault: true}, 0, 502)
	rm.failed(verdict.Verdict{Class: verdict.ClassThrottled, Reason: verdict.ReasonRateLimited}, 0, 429)
	for _, tt := range []struct {
		class, reason string
		want          float64
	}{{"retry", "http_5xx", 2}, {"throttled", "rate_limited", 1}, {"caller", "revert", 0}} {
		if got := testutil.ToFloat64(m.failures.WithLabelValues("test", "n0", tt.class, tt.reason)); got != tt.want {
			t.Errorf("venn_remote_failures_total{class=%q,reason=%q} = %v, want %v", tt.class, tt.reason, got, tt.want)
		}
	}
}
