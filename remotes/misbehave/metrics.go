package misbehave

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the series of votes and misbehaviour.
type Metrics struct {
	misbehaviour *prometheus.CounterVec // chain, remote, kind
	cordons      *prometheus.CounterVec // chain, remote
	cordoned     *prometheus.GaugeVec   // chain, remote
	consensus    *prometheus.CounterVec // chain, method, outcome
	logDropped   *prometheus.CounterVec // chain
}

// NewMetrics makes the series and registers them with reg, if not nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	cr := []string{"chain", "remote"}
	m := &Metrics{
		misbehaviour: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Subsystem: "remote", Name: "misbehaviour_total",
			Help: "Misbehaviours of a remote: disagree (with a consensus answer), disagree_tip (the same near the head, not punished), integrity (failed a local check), bogus_head (a head nothing corroborates)."},
			[]string{"chain", "remote", "kind"}),
		cordons: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Subsystem: "remote", Name: "cordons_total",
			Help: "Times a remote was cordoned (out of rotation) for repeated misbehaviour."}, cr),
		cordoned: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Subsystem: "remote", Name: "cordoned",
			Help: "1 while a remote is cordoned: by hand (the admin API) or for repeated misbehaviour."}, cr),
		consensus: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "consensus_total",
			Help: "Calls put to a vote, by outcome: agreed, resolved (no quorum, answered by on_dispute), disputed (no quorum, -32058), no_answer."},
			[]string{"chain", "method", "outcome"}),
		logDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "misbehaviour_log_dropped_total",
			Help: "Misbehaviour log lines dropped: the writer was behind or the file could not be written."}, []string{"chain"}),
	}
	if reg != nil {
		reg.MustRegister(m.misbehaviour, m.cordons, m.cordoned, m.consensus, m.logDropped)
	}
	return m
}

// Misbehaviours is venn_remote_misbehaviour_total of a remote and kind.
func (m *Metrics) Misbehaviours(chain, remote, kind string) prometheus.Counter {
	return m.misbehaviour.WithLabelValues(chain, remote, kind)
}

// Cordons is venn_remote_cordons_total of a remote.
func (m *Metrics) Cordons(chain, remote string) prometheus.Counter {
	return m.cordons.WithLabelValues(chain, remote)
}

// Cordoned is venn_remote_cordoned of a remote.
func (m *Metrics) Cordoned(chain, remote string) prometheus.Gauge {
	return m.cordoned.WithLabelValues(chain, remote)
}

// Consensus is venn_consensus_total of a method and outcome.
func (m *Metrics) Consensus(chain, method, outcome string) prometheus.Counter {
	return m.consensus.WithLabelValues(chain, method, outcome)
}

// DeletePartialMatch deletes the series matching labels (a removed
// remote's or chain's).
func (m *Metrics) DeletePartialMatch(labels prometheus.Labels) int {
	n := 0
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{m.misbehaviour, m.cordons, m.cordoned, m.consensus, m.logDropped} {
		n += v.DeletePartialMatch(labels)
	}
	return n
}
