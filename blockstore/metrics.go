package blockstore

import "github.com/prometheus/client_golang/prometheus"

// Operations, the values of the op label.
const (
	opPut     = "put"
	opAnswer  = "answer"
	opLogs    = "logs"
	opCovered = "covered"
	opHighest = "highest"
	opRetain  = "retain"
	opStats   = "stats"
	opPing    = "ping" // the check while up, and Ping's callers
)

type metrics struct {
	up     prometheus.Gauge
	errors *prometheus.CounterVec
	blocks prometheus.Counter
	// Set by History's report from Stats, for the chains it serves.
	rows, bytes *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		up: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "venn", Subsystem: "blockstore", Name: "up",
			Help: "1 while Postgres answers the history store, 0 while it is unreachable.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "venn", Subsystem: "blockstore", Name: "errors_total",
			Help: "History store operations that failed on Postgres, by operation.",
		}, []string{"op"}),
		blocks: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "venn", Subsystem: "blockstore", Name: "blocks_stored_total",
			Help: "Blocks written to the history store (not counting ones already stored).",
		}),
		rows: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "venn", Subsystem: "blockstore", Name: "rows",
			Help: "Rows of a chain's stored history by table (Postgres's estimate, as of the last vacuum or analyze).",
		}, []string{"chain", "table"}),
		bytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "venn", Subsystem: "blockstore", Name: "bytes",
			Help: "Bytes on disk of a chain's stored history by table, indexes and TOAST included.",
		}, []string{"chain", "table"}),
	}
	for _, op := range []string{opPut, opAnswer, opLogs, opCovered, opHighest, opRetain, opStats, opPing} {
		m.errors.WithLabelValues(op)
	}
	if reg != nil {
		reg.MustRegister(m.up, m.errors, m.blocks, m.rows, m.bytes)
	}
	return m
}
