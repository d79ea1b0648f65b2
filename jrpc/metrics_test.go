package jrpc

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/venn-gateway/venn/internal/testkit"
)

// metricValue returns the value of the series name{labels}: a counter's or
// gauge's value, a histogram's sample count; 0 when absent.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	known := func(m string) string {
		if m == "test_echo" || m == "test_timeout" {
			return m
		}
		return ""
	}
	s := newTestServer(t, Options{
		Registerer:  reg,
		MethodLabel: known,
		Limits:      Limits{MaxBatchItems: 2, MaxBodyBytes: 4096},
	}, echoHandler())

	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"test_echo","params":[]}`,
		`{"jsonrpc":"2.0","id":1,"method":"test_echo","params":[]}`,
		`{"jsonrpc":"2.0","id":1,"method":"test_timeout"}`,
		`{"jsonrpc":"2.0","id":1,"method":"test_noremote"}`,
		`{"jsonrpc":"2.0","id":1,"method":"test_panic"}`,
		`{"jsonrpc":"2.0","id":1,"method":"test_upstream"}`,
		`{"jsonrpc":"2.0","id":1,"method":"made_up_by_client_123"}`,
		`{"jsonrpc":"2.0","id":1,"method":7}`,
		`{`,
		`[{},{},{}]`,
		`{"jsonrpc":"2.0","id":1,"method":"test_echo","params":["` + strings.Repeat("x", 5000) + `"]}`,
	} {
		s.post(t, body)
	}
	c := s.dial(t)
	testkit.WSWrite(t, c, `{"jsonrpc":"2.0","id":1,"method":"test_echo"}`)
	testkit.WSRead(t, c)

	tests := []struct {
		name   string
		metric string
		labels map[string]string
		want   float64
	}{
		{name: "ok", metric: "venn_requests_total",
			labels: map[string]string{"chain": testChain, "method": "test_echo", "outcome": "ok"}, want: 3},
		{name: "timeout", metric: "venn_requests_total",
			labels: map[string]string{"chain": testChain, "method": "test_timeout", "outcome": "timeout"}, want: 1},
		{name: "no remote", metric: "venn_requests_total",
			labels: map[string]string{"chain": testChain, "method": "other", "outcome": "no_remote"}, want: 1},
		{name: "panic is internal", metric: "venn_requests_total",
			labels: map[string]string{"chain": testChain, "method": "other", "outcome": "internal"}, want: 1},
		{name: "upstream error", metric: "venn_requests_total",
			labels: map[string]string{"chain": testChain, "method": "other", "outcome": "error"}, want: 1},
		// unknown method (-32601), bad method, parse error
		{name: "invalid", metric: "venn_requests_total",
			labels: map[string]string{"chain": testChain, "method": "other", "outcome": "invalid"}, want: 3},
		{name: "limited", metric: "venn_requests_total",
			labels: map[string]string{"chain": testChain, "method": "other", "outcome": "limited"}, want: 2},
		{name: "batch limit", metric: "venn_limit_rejections_total",
			labels: map[string]string{"chain": testChain, "limit": "max_batch_items"}, want: 1},
		{name: "body limit", metric: "venn_limit_rejections_total",
			labels: map[string]string{"chain": testChain, "limit": "max_body_bytes"}, want: 1},
		{name: "duration", metric: "venn_request_duration_seconds",
			labels: map[string]string{"chain": testChain, "method": "test_echo"}, want: 3},
		{name: "ws connections", metric: "venn_ws_connections", labels: map[string]string{}, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := metricValue(t, reg, tt.metric, tt.labels); got != tt.want {
				t.Errorf("%s%v = %v, want %v", tt.metric, tt.labels, got, tt.want)
			}
		})
	}

	// The client's made-up method never becomes a label.
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if strings.Contains(lp.GetValue(), "made_up") {
					t.Errorf("%s has label %s=%q", mf.GetName(), lp.GetName(), lp.GetValue())
				}
			}
		}
	}
}

// A server rebuilt on the same registry (a reload) does not panic, and its
// calls count in the series the first one exported: the collectors are
// reused, not left unregistered.
func TestMetricsSurviveRebuild(t *testing.T) {
	reg := prometheus.NewRegistry()
	echo := func(m string) string { return m }
	const body = `{"jsonrpc":"2.0","id":1,"method":"test_echo","params":[]}`
	first := newTestServer(t, Options{Registerer: reg, MethodLabel: echo}, echoHandler())
	first.post(t, body)
	second := newTestServer(t, Options{Registerer: reg, MethodLabel: echo}, echoHandler())
	second.post(t, body)
	second.post(t, body)
	c := second.dial(t)
	testkit.WSWrite(t, c, body)
	testkit.WSRead(t, c)

	ok := map[string]string{"chain": testChain, "method": "test_echo", "outcome": "ok"}
	if got := metricValue(t, reg, "venn_requests_total", ok); got != 4 {
		t.Errorf("venn_requests_total%v = %v, want the second server's calls counted too: 4", ok, got)
	}
	if got := metricValue(t, reg, "venn_ws_connections", map[string]string{}); got != 1 {
		t.Errorf("venn_ws_connections = %v, want the second server's connection", got)
	}
}
