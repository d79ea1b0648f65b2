package jrpc

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// otherMethod labels every method MethodLabel does not name, so a client
// cannot grow the label set by sending made-up methods.
const otherMethod = "other"

// outcome is the bounded class of an answer, derived from its wire code.
type outcome uint8

const (
	outcomeOK outcome = iota
	outcomeError
	outcomeTimeout
	outcomeNoRemote
	outcomeLimited
	outcomeInvalid
	outcomeInternal
	numOutcomes
)

func (o outcome) String() string {
	switch o {
	case outcomeOK:
		return "ok"
	case outcomeTimeout:
		return "timeout"
	case outcomeNoRemote:
		return "no_remote"
	case outcomeLimited:
		return "limited"
	case outcomeInvalid:
		return "invalid"
	case outcomeInternal:
		return "internal"
	default:
		return "error"
	}
}

// outcomeOf classes an answer by its error; a nil error is ok. "error" is
// everything else, mostly upstream answers forwarded as sent (reverts...).
func outcomeOf(e *Error) outcome {
	if e == nil {
		return outcomeOK
	}
	switch e.Code {
	case CodeTimeout:
		return outcomeTimeout
	case CodeNoRemote:
		return outcomeNoRemote
	case CodeLimitExceeded, CodeRateLimited:
		return outcomeLimited
	case CodeParseError, CodeInvalidRequest, CodeMethodNotFound, CodeInvalidParams, CodeUnauthorized:
		return outcomeInvalid
	case CodeInternal:
		return outcomeInternal
	default:
		return outcomeError
	}
}

// limit names a limit in venn_limit_rejections_total, by its config name.
type limit uint8

const (
	limitBody limit = iota
	limitBatch
	limitWSMessage
	limitConnections
	limitHTTPInFlight
	limitHTTPReadTimeout
	limitHTTPWriteTimeout
	numLimits
)

func (l limit) String() string {
	switch l {
	case limitBody:
		return "max_body_bytes"
	case limitBatch:
		return "max_batch_items"
	case limitWSMessage:
		return "max_ws_message_bytes"
	case limitHTTPInFlight:
		return "max_http_in_flight"
	case limitHTTPReadTimeout:
		return "http_read_timeout"
	case limitHTTPWriteTimeout:
		return "http_write_timeout"
	default:
		return "max_connections"
	}
}

// metrics are the Server's collectors. A nil *metrics (no Registerer) records
// nothing.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	wsConns  prometheus.Gauge
	limits   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	return &metrics{
		requests: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "venn",
			Name:      "requests_total",
			Help:      "JSON-RPC calls answered, by chain, method and outcome.",
		}, []string{"chain", "method", "outcome"})),
		duration: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "venn",
			Name:      "request_duration_seconds",
			Help:      "Time to answer one JSON-RPC call, by chain and method.",
			Buckets:   []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"chain", "method"})),
		wsConns: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "venn",
			Name:      "ws_connections",
			Help:      "Open WebSocket connections.",
		})),
		limits: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "venn",
			Name:      "limit_rejections_total",
			Help:      "Requests refused for breaking a limit, by chain and limit.",
		}, []string{"chain", "limit"})),
	}
}

// register registers c, or returns the collector already registered in its
// place (a Server rebuilt on the same registry). Any other failure is a
// programming error, as with MustRegister.
func register[T prometheus.Collector](reg prometheus.Registerer, c T) T {
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
	panic(fmt.Sprintf("jrpc: register metrics: %v", err))
}

func (m *metrics) wsConnOpened() {
	if m != nil {
		m.wsConns.Inc()
	}
}

func (m *metrics) wsConnClosed() {
	if m != nil {
		m.wsConns.Dec()
	}
}

// chainMetrics caches one chain's label children, so a call costs a map
// lookup under a read lock instead of hashing label values.
type chainMetrics struct {
	m      *metrics
	chain  string
	limits [numLimits]prometheus.Counter

	mu       sync.RWMutex
	byMethod map[string]*methodMetrics // by method label, a bounded set
	// dropped: the chain was removed and its series deleted (drop). A
	// call still in flight then counts a method it had not yet into
	// series of its own, never exported: a series asked of the vector
	// would be the removed chain's again, for good.
	dropped bool
}

type methodMetrics struct {
	outcomes [numOutcomes]prometheus.Counter
	duration prometheus.Observer
}

// drop deletes the chain's series, once Remove stopped serving it.
func (c *chainMetrics) drop() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropped = true
	l := prometheus.Labels{"chain": c.chain}
	c.m.requests.DeletePartialMatch(l)
	c.m.duration.DeletePartialMatch(l)
	c.m.limits.DeletePartialMatch(l)
}

// forChain returns the chain's cache; nil when metrics are off.
func (m *metrics) forChain(chain string) *chainMetrics {
	if m == nil {
		return nil
	}
	c := &chainMetrics{m: m, chain: chain, byMethod: make(map[string]*methodMetrics)}
	for l := range numLimits {
		c.limits[l] = m.limits.WithLabelValues(chain, l.String())
	}
	return c
}

func (c *chainMetrics) method(label string) *methodMetrics {
	c.mu.RLock()
	mm := c.byMethod[label]
	c.mu.RUnlock()
	if mm != nil {
		return mm
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if mm = c.byMethod[label]; mm != nil {
		return mm
	}
	if c.dropped {
		mm = &methodMetrics{duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "dropped"})}
		for o := range numOutcomes {
			mm.outcomes[o] = prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"})
		}
		c.byMethod[label] = mm
		return mm
	}
	mm = &methodMetrics{duration: c.m.duration.WithLabelValues(c.chain, label)}
	for o := range numOutcomes {
		mm.outcomes[o] = c.m.requests.WithLabelValues(c.chain, label, o.String())
	}
	c.byMethod[label] = mm
	return mm
}

// observe records one answered call.
func (c *chainMetrics) observe(label string, o outcome, d time.Duration) {
	if c == nil {
		return
	}
	mm := c.method(label)
	mm.outcomes[o].Inc()
	mm.duration.Observe(d.Seconds())
}

// count records one answer that never reached a handler (invalid, refused):
// no duration, which would only skew the histogram toward zero.
func (c *chainMetrics) count(label string, o outcome) {
	if c == nil {
		return
	}
	c.method(label).outcomes[o].Inc()
}

// rejected records a request refused for breaking l. It also counts as one
// request of method "other" (its calls were never read) with outcome limited.
func (c *chainMetrics) rejected(l limit) {
	if c == nil {
		return
	}
	c.limits[l].Inc()
	c.count(otherMethod, outcomeLimited)
}
