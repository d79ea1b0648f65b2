package nats

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// connMetrics are the connection's series. With no registry they are
// built but never exported.
type connMetrics struct {
	connected   prometheus.Gauge
	disconnects prometheus.Counter
	reconnects  prometheus.Counter
	asyncErrors *prometheus.CounterVec
}

func newConnMetrics(reg prometheus.Registerer) *connMetrics {
	return &connMetrics{
		connected: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "venn", Subsystem: "nats", Name: "connected",
			Help: "1 while the connection to NATS is up.",
		})),
		disconnects: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "venn", Subsystem: "nats", Name: "disconnects_total",
			Help: "Times the connection to NATS was lost.",
		})),
		reconnects: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "venn", Subsystem: "nats", Name: "reconnects_total",
			Help: "Times the connection to NATS was made again after a loss.",
		})),
		asyncErrors: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "venn", Subsystem: "nats", Name: "errors_total",
			Help: "Errors NATS reported on the connection, by kind: slow_consumer, permission, authorization, other.",
		}, []string{"kind"})),
	}
}

// rpcMetrics are the request/reply service's series.
type rpcMetrics struct {
	messages *prometheus.CounterVec
	inFlight prometheus.Gauge
}

// Outcomes of one request message, as venn_nats_rpc_messages_total
// labels them.
const (
	outcomeAnswered     = "answered"      // served and answered (calls may still have failed)
	outcomeParseError   = "parse_error"   // not JSON
	outcomeInvalid      = "invalid"       // JSON, not a JSON-RPC request or batch
	outcomeOverLimit    = "over_limit"    // over max_body_bytes or max_batch_items
	outcomeRefused      = "refused"       // no valid API key, or rate limited
	outcomeBusy         = "busy"          // rpc.max_in_flight requests were being served
	outcomeShuttingDown = "shutting_down" // the process is draining
	outcomeUnknownChain = "unknown_chain" // the chain was removed by a reload
	outcomeNoReply      = "no_reply"      // published without a reply subject: dropped
	outcomeReplyFailed  = "reply_failed"  // the answer could not be published
)

var outcomes = []string{outcomeAnswered, outcomeParseError, outcomeInvalid, outcomeOverLimit, outcomeRefused,
	outcomeBusy, outcomeShuttingDown, outcomeUnknownChain, outcomeNoReply, outcomeReplyFailed}

func newRPCMetrics(reg prometheus.Registerer) *rpcMetrics {
	return &rpcMetrics{
		messages: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "venn", Subsystem: "nats", Name: "rpc_messages_total",
			Help: "JSON-RPC request messages received over NATS, by chain and outcome (answered, parse_error, invalid, over_limit, refused, busy, shutting_down, unknown_chain, no_reply, reply_failed).",
		}, []string{"chain", "outcome"})),
		inFlight: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "venn", Subsystem: "nats", Name: "rpc_in_flight",
			Help: "JSON-RPC request messages over NATS being served.",
		})),
	}
}

// register registers c on reg (nil: none), or returns the collector
// already registered in its place.
func register[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	if reg == nil {
		return c
	}
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(T); ok {
			return existing
		}
	}
	panic(fmt.Sprintf("nats: register metrics: %v", err))
}
