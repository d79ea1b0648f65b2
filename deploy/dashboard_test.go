package deploy

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/testkit"
)

// absenceHandled reports a query written to show 0 where its series do
// not exist yet.
func absenceHandled(expr string) bool {
	return strings.HasSuffix(strings.TrimSpace(expr), "or on() vector(0)")
}

// TestDashboardAtStart: on a venn that has just started and served
// nothing, every panel of the dashboard has data: each metric it queries
// has a series (counters start at 0 for their known labels), or its query
// shows 0 where there is none. No panel says "no data" for a counter that
// has not moved.
func TestDashboardAtStart(t *testing.T) {
	v := launchVenn(t)
	// Gauges are set as the first head arrives and the history store
	// reports; counters that nothing moves never appear, so the wait is
	// for the gauges only.
	var has map[string]bool
	testkit.Poll(10*time.Second, func() bool {
		has = series(t, v)
		return has["venn_head_number"] && has["venn_head_age_seconds"] && has["venn_blockstore_bytes"]
	})
	panels, _ := dashboardExprs(t)
	missing := map[string][]string{} // metric -> panels
	for title, exprs := range panels {
		for _, e := range exprs {
			if absenceHandled(e) {
				continue
			}
			for _, name := range metricNames(t, e) {
				base := name
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(name, suffix); ok && has[b] {
						base = b
					}
				}
				if !has[base] && !prometheusOwn[name] {
					missing[name] = append(missing[name], title)
				}
			}
		}
	}
	names := make([]string, 0, len(missing))
	for n := range missing {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t.Errorf("%s has no series at start: panels %q show no data", n, missing[n])
	}
	t.Logf("%d panels checked at start", len(panels))
}

// series lists the metric families v has a series of, of its chain where
// they have a chain label.
func series(t *testing.T, v *running) map[string]bool {
	t.Helper()
	mfs, err := v.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	has := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			chain, chained := "", false
			for _, l := range m.GetLabel() {
				if l.GetName() == "chain" {
					chain, chained = l.GetValue(), true
				}
			}
			if !chained || chain == v.chain {
				has[mf.GetName()] = true
			}
		}
	}
	return has
}
