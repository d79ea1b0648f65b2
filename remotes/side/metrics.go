package side

import "github.com/prometheus/client_golang/prometheus"

// Metrics count the shadows' answers and the routed calls.
type Metrics struct {
	Shadow *prometheus.CounterVec // chain, remote, method, outcome
	Routes *prometheus.CounterVec // chain, group, outcome
}

// NewMetrics makes the side's series, registered on reg (nil: none).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Shadow: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "shadow_calls_total",
			Help: "Reads copied to a shadow remote, by outcome: match, mismatch (its answer differs from the one served), error, dropped (too many in flight)."},
			[]string{"chain", "remote", "method", "outcome"}),
		Routes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "tx_route_calls_total",
			Help: "Calls a transaction route sent to its group, by outcome: ok, caller_error, failed (every member), fallback_public."},
			[]string{"chain", "group", "outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.Shadow, m.Routes)
	}
	return m
}

func (m *Metrics) shadowed(chain, remote, method, outcome string) {
	m.Shadow.WithLabelValues(chain, remote, method, outcome).Inc()
}

func (m *Metrics) routed(chain, group, outcome string) {
	m.Routes.WithLabelValues(chain, group, outcome).Inc()
}
