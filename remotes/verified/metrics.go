package verified

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the series of local checks. Label values are bounded: chain
// and remote names come from config, checks and reasons from fixed sets.
type Metrics struct {
	skipped  *prometheus.CounterVec // chain, check, reason
	failures *prometheus.CounterVec // chain, remote, check
}

// NewMetrics registers the series on reg; a nil reg registers nothing
// (the series still work).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "integrity_skipped_total",
			Help: "Integrity checks of an answer venn served that could not be run, by reason (unknown_type, unknown_field, unreproducible, ...)."},
			[]string{"chain", "check", "reason"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "integrity_failures_total",
			Help: "Answers of a remote that failed an integrity check another remote's answer passed: lies, served from another remote."},
			[]string{"chain", "remote", "check"}),
	}
	if reg != nil {
		reg.MustRegister(m.skipped, m.failures)
	}
	return m
}

// DeletePartialMatch deletes the series matching labels (a removed
// remote's or chain's).
func (m *Metrics) DeletePartialMatch(labels prometheus.Labels) int {
	return m.skipped.DeletePartialMatch(labels) + m.failures.DeletePartialMatch(labels)
}

// Skipped is venn_integrity_skipped_total of a check and the reason it
// was skipped.
func (m *Metrics) Skipped(chain, check, reason string) prometheus.Counter {
	return m.skipped.WithLabelValues(chain, check, reason)
}

// Failures is venn_integrity_failures_total of a remote and a check it
// failed.
func (m *Metrics) Failures(chain, remote, check string) prometheus.Counter {
	return m.failures.WithLabelValues(chain, remote, check)
}
