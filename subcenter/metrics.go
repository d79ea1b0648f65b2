package subcenter

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the subscriptions' metrics on one replica.
type Metrics struct {
	subs     *prometheus.GaugeVec
	sent     *prometheus.CounterVec
	slow     *prometheus.CounterVec
	gaps     *prometheus.CounterVec
	dispatch *prometheus.HistogramVec
	filters  *prometheus.GaugeVec
}

// NewMetrics registers the subscriptions' metrics on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		subs: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Name: "subscriptions",
			Help: "Client subscriptions open on this replica."}, []string{"chain", "kind"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "subscription_notifications_total",
			Help: "Notifications written to subscribers."}, []string{"chain", "kind"}),
		slow: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "subscription_slow_disconnects_total",
			Help: "Connections closed because their notification queue was full."}, []string{"chain"}),
		gaps: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "subscription_missed_blocks_total",
			Help: "Blocks subscribers never got because the window moved past more than it keeps (a feed outage longer than the window)."}, []string{"chain"}),
		dispatch: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "venn", Name: "subscription_dispatch_seconds",
			Help:    "Time to queue one head change's notifications for every subscriber and write what the connections take at once.",
			Buckets: []float64{.0001, .0005, .001, .0025, .005, .01, .025, .05, .1, .25}}, []string{"chain"}),
		filters: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Name: "subscription_filter_bytes",
			Help: "JSON bytes of the logs filters subscriptions hold (what max_filter_bytes_per_connection counts)."}, []string{"chain"}),
	}
	if reg != nil {
		reg.MustRegister(m.subs, m.sent, m.slow, m.gaps, m.dispatch, m.filters)
	}
	return m
}

// DropChain deletes chain's series, once its subscriptions have ended
// for good (a reload removed the chain): a center of the chain built later
// resolves them afresh, and what the old one still counts (a connection
// closing) goes to series no longer exported.
func (m *Metrics) DropChain(chain string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"chain": chain}
	for _, v := range []*prometheus.MetricVec{m.subs.MetricVec, m.sent.MetricVec, m.slow.MetricVec,
		m.gaps.MetricVec, m.dispatch.MetricVec, m.filters.MetricVec} {
		v.DeletePartialMatch(l)
	}
}

type chainMetrics struct {
	subs        [numKinds]prometheus.Gauge
	sent        [numKinds]prometheus.Counter
	slow        prometheus.Counter
	gaps        prometheus.Counter
	dispatch    prometheus.Observer
	filterBytes prometheus.Gauge
}

func (m *Metrics) forChain(chain string) chainMetrics {
	cm := chainMetrics{
		slow:        m.slow.WithLabelValues(chain),
		gaps:        m.gaps.WithLabelValues(chain),
		dispatch:    m.dispatch.WithLabelValues(chain),
		filterBytes: m.filters.WithLabelValues(chain),
	}
	for k := range numKinds {
		cm.subs[k] = m.subs.WithLabelValues(chain, k.String())
		cm.sent[k] = m.sent.WithLabelValues(chain, k.String())
	}
	return cm
}
