package testkit

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Series counts the series reg gathers whose labels include all of want:
// what a test of deleted series (a removed chain's, a removed remote's)
// expects to go to zero.
func Series(t testing.TB, reg prometheus.Gatherer, want map[string]string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			match := 0
			for _, l := range m.GetLabel() {
				if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
					match++
				}
			}
			if match == len(want) {
				n++
			}
		}
	}
	return n
}
