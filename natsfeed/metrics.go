package natsfeed

import (
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the JetStream feed's metrics, per chain.
type Metrics struct {
	messages *prometheus.CounterVec
	bytes    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	gaps     *prometheus.CounterVec
	up       *prometheus.GaugeVec
	delay    *prometheus.HistogramVec
	ack      *prometheus.HistogramVec
}

// NewMetrics registers the feed's metrics on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "nats_feed_messages_total",
			Help: "Messages this replica published to a chain's JetStream stream, by type (block, reorg, gap, finality)."},
			[]string{"chain", "type"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "nats_feed_bytes_total",
			Help: "Bytes of message data this replica published to a chain's JetStream stream."}, []string{"chain"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "nats_feed_errors_total",
			Help: "Times publishing a chain's feed stopped (NATS away, a refused publish, a conflicting stream) and was retried."},
			[]string{"chain"}),
		gaps: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "nats_feed_gaps_total",
			Help: "Gap events published, by reason (behind, too_large, fresh)."}, []string{"chain", "reason"}),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Name: "nats_feed_up",
			Help: "1 while this replica leads the chain and its JetStream stream is up to date, 0 otherwise."}, []string{"chain"}),
		delay: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "venn", Name: "nats_feed_delay_seconds",
			Help:    "Time from the leader publishing a head event to its last message stored in JetStream.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}}, []string{"chain"}),
		ack: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "venn", Name: "nats_feed_publish_seconds",
			Help:    "Time for JetStream to store one message and acknowledge it.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}}, []string{"chain"}),
	}
	if reg != nil {
		reg.MustRegister(m.messages, m.bytes, m.errors, m.gaps, m.up, m.delay, m.ack)
	}
	return m
}

// DropChain deletes chain's series once its publisher stopped for good.
func (m *Metrics) DropChain(chain string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"chain": chain}
	for _, v := range []*prometheus.MetricVec{m.messages.MetricVec, m.bytes.MetricVec, m.errors.MetricVec,
		m.gaps.MetricVec, m.up.MetricVec, m.delay.MetricVec, m.ack.MetricVec} {
		v.DeletePartialMatch(l)
	}
}

type chainMetrics struct {
	chain    string
	messages *prometheus.CounterVec
	gaps     *prometheus.CounterVec
	bytes    prometheus.Counter
	errors   prometheus.Counter
	up       prometheus.Gauge
	delay    prometheus.Observer
	ack      prometheus.Observer
}

func (m *Metrics) forChain(chain string) chainMetrics {
	l := prometheus.Labels{"chain": chain}
	return chainMetrics{chain: chain,
		messages: m.messages.MustCurryWith(l), gaps: m.gaps.MustCurryWith(l),
		bytes: m.bytes.WithLabelValues(chain), errors: m.errors.WithLabelValues(chain),
		up: m.up.WithLabelValues(chain), delay: m.delay.WithLabelValues(chain), ack: m.ack.WithLabelValues(chain)}
}

// published counts one stored message; evTime (Unix ns, 0: none) is when
// the head event it is of was published by the leader.
func (c chainMetrics) published(o *out, took time.Duration, evTime int64) {
	typ := typeOf(o.subject)
	c.messages.WithLabelValues(typ).Inc()
	c.bytes.Add(float64(len(o.data)))
	c.ack.Observe(took.Seconds())
	if typ == TypeGap {
		if ev, err := Decode(o.data); err == nil {
			c.gaps.WithLabelValues(ev.Reason).Inc()
		}
	}
	if evTime > 0 && o.after.done {
		c.delay.Observe(time.Since(time.Unix(0, evTime)).Seconds())
	}
}

// typeOf is the event type a subject of Subjects names.
func typeOf(subject string) string {
	for _, t := range []string{TypeReorg, TypeGap, TypeFinality} {
		if strings.HasSuffix(subject, ".events."+t) {
			return t
		}
	}
	return TypeBlock
}
