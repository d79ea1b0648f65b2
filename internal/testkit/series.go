package testkit

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Series counts the series reg gathers whose labels include all of want:
// what a test of deleted series (a removed chain's, a removed remote's)
// expects to go to zero.
func Series(t testing.TB, reg prometheus.Gatherer, want map[string]string) int {
	t.Helper()
	n := 0
	for _, mf := range gather(t, reg) {
		for _, m := range mf.GetMetric() {
			if hasLabels(m, want) {
				n++
			}
		}
	}
	return n
}

// Value is the value of the gauge or counter name whose labels include all
// of want (the sum where several do), and whether any does.
func Value(t testing.TB, reg prometheus.Gatherer, name string, want map[string]string) (float64, bool) {
	t.Helper()
	var sum float64
	found := false
	for _, mf := range gather(t, reg) {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, want) {
				continue
			}
			found = true
			if g := m.GetGauge(); g != nil {
				sum += g.GetValue()
			} else {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum, found
}

func gather(t testing.TB, reg prometheus.Gatherer) []*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// hasLabels reports whether m's labels include all of want.
func hasLabels(m *dto.Metric, want map[string]string) bool {
	match := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			match++
		}
	}
	return match == len(want)
}
