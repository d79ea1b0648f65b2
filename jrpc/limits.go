package jrpc

import (
	"errors"
	"time"
)

// Defaults for Limits. Each bounds what one client can make venn hold in
// memory or in flight; config overrides them.
const (
	// DefaultMaxBodyBytes bounds an HTTP request body. eth_sendRawTransaction
	// with a blob sidecar is the largest honest call, well under this.
	DefaultMaxBodyBytes int64 = 5 << 20
	// DefaultMaxBatchItems bounds the calls in one batch.
	DefaultMaxBatchItems = 1000
	// DefaultBatchConcurrency bounds how many items of one batch run at once,
	// so one batch cannot take every upstream connection.
	DefaultBatchConcurrency = 16
	// DefaultMaxWSMessageBytes bounds one WebSocket message.
	DefaultMaxWSMessageBytes int64 = 15 << 20
	// DefaultMaxConnections bounds concurrent WebSocket connections.
	DefaultMaxConnections = 10000
	// DefaultMaxConnectionsPerIP bounds one client address's share of them
	// (its /64 for IPv6). Behind a load balancer, list it in
	// trusted_proxies, or every client shares its address.
	DefaultMaxConnectionsPerIP = 1000
	// DefaultMaxHTTPInFlight bounds HTTP requests being read or served at
	// once, across chains; with MaxBodyBytes it bounds the memory bodies
	// can pin.
	DefaultMaxHTTPInFlight = 4096
	// DefaultHTTPReadTimeout bounds reading one HTTP request body, so a
	// client cannot hold a slot by trickling it.
	DefaultHTTPReadTimeout = 30 * time.Second
	// DefaultHTTPWriteTimeout bounds writing one HTTP answer, so a client
	// that does not read cannot hold a slot and the answer's buffer.
	DefaultHTTPWriteTimeout = 30 * time.Second
	// DefaultWSInFlight bounds concurrent calls on one WebSocket connection;
	// past it venn stops reading, which pushes back on the client over TCP.
	DefaultWSInFlight = 64
	// DefaultWSPingInterval is how often an idle peer is pinged; a peer that
	// does not answer within the interval is closed.
	DefaultWSPingInterval = 30 * time.Second
	// DefaultWSWriteTimeout bounds one write to a WebSocket peer; a peer that
	// does not read is closed rather than left to pile up answers.
	DefaultWSWriteTimeout = 10 * time.Second
)

// wsDiscardFactor caps how much of an oversize WebSocket message is read and
// thrown away (as a multiple of MaxWSMessageBytes) before the connection is
// closed instead: answering with an error needs the rest of the message off
// the wire, but a peer must not make venn read without end.
const wsDiscardFactor = 4

// Limits bounds what clients can make venn hold. Zero fields passed to
// NewServer take their defaults; Validate rejects them in config.
type Limits struct {
	MaxBodyBytes      int64         `yaml:"max_body_bytes"`
	MaxBatchItems     int           `yaml:"max_batch_items"`
	BatchConcurrency  int           `yaml:"batch_concurrency"`
	MaxWSMessageBytes int64         `yaml:"max_ws_message_bytes"`
	MaxConnections    int           `yaml:"max_connections"`
	MaxConnsPerIP     int           `yaml:"max_connections_per_ip"`
	MaxHTTPInFlight   int           `yaml:"max_http_in_flight"`
	HTTPReadTimeout   time.Duration `yaml:"http_read_timeout"`
	HTTPWriteTimeout  time.Duration `yaml:"http_write_timeout"`
	WSInFlight        int           `yaml:"ws_in_flight"`
	WSPingInterval    time.Duration `yaml:"ws_ping_interval"`
	WSWriteTimeout    time.Duration `yaml:"ws_write_timeout"`
	// MaxReplyBytesInFlight bounds the remotes' replies being read at once,
	// all chains together (enforced by the remotes, not here). Its default
	// is a quarter of the process's memory limit (memlimit.go).
	MaxReplyBytesInFlight int64 `yaml:"max_reply_bytes_in_flight"`
}

// DefaultLimits returns every limit at its default.
func DefaultLimits() Limits {
	return Limits{
		MaxBodyBytes:      DefaultMaxBodyBytes,
		MaxBatchItems:     DefaultMaxBatchItems,
		BatchConcurrency:  DefaultBatchConcurrency,
		MaxWSMessageBytes: DefaultMaxWSMessageBytes,
		MaxConnections:    DefaultMaxConnections,
		MaxConnsPerIP:     DefaultMaxConnectionsPerIP,
		MaxHTTPInFlight:   DefaultMaxHTTPInFlight,
		HTTPReadTimeout:   DefaultHTTPReadTimeout,
		HTTPWriteTimeout:  DefaultHTTPWriteTimeout,
		WSInFlight:        DefaultWSInFlight,
		WSPingInterval:    DefaultWSPingInterval,
		WSWriteTimeout:    DefaultWSWriteTimeout,

		MaxReplyBytesInFlight: DefaultReplyBytesInFlight(),
	}
}

// limitField is one limit as the table below sees it, whatever its type.
type limitField struct {
	name        string // its config name
	unset       func() bool
	nonPositive func() bool
	setDefault  func()
}

func field[T int | int64 | time.Duration](name string, v *T, def T) limitField {
	return limitField{
		name:        name,
		unset:       func() bool { return *v == 0 },
		nonPositive: func() bool { return *v <= 0 },
		setDefault:  func() { *v = def },
	}
}

// fields is the one list of limits: defaults and validation derive from it.
func (l *Limits) fields() []limitField {
	d := DefaultLimits()
	return []limitField{
		field("max_body_bytes", &l.MaxBodyBytes, d.MaxBodyBytes),
		field("max_batch_items", &l.MaxBatchItems, d.MaxBatchItems),
		field("batch_concurrency", &l.BatchConcurrency, d.BatchConcurrency),
		field("max_ws_message_bytes", &l.MaxWSMessageBytes, d.MaxWSMessageBytes),
		field("max_connections", &l.MaxConnections, d.MaxConnections),
		field("max_connections_per_ip", &l.MaxConnsPerIP, d.MaxConnsPerIP),
		field("max_http_in_flight", &l.MaxHTTPInFlight, d.MaxHTTPInFlight),
		field("http_read_timeout", &l.HTTPReadTimeout, d.HTTPReadTimeout),
		field("http_write_timeout", &l.HTTPWriteTimeout, d.HTTPWriteTimeout),
		field("ws_in_flight", &l.WSInFlight, d.WSInFlight),
		field("ws_ping_interval", &l.WSPingInterval, d.WSPingInterval),
		field("ws_write_timeout", &l.WSWriteTimeout, d.WSWriteTimeout),
		field("max_reply_bytes_in_flight", &l.MaxReplyBytesInFlight, d.MaxReplyBytesInFlight),
	}
}

// Validate reports every limit that is not usable, each as
// "NAME: must be positive" with NAME its config name.
func (l Limits) Validate() error {
	var errs []error
	for _, f := range l.fields() {
		if f.nonPositive() {
			errs = append(errs, errors.New(f.name+": must be positive"))
		}
	}
	return errors.Join(errs...)
}

// WithZeroDefaults fills the zero (unset) fields with their defaults and
// leaves the rest, so that a negative one is still there to be reported.
func (l Limits) WithZeroDefaults() Limits {
	for _, f := range l.fields() {
		if f.unset() {
			f.setDefault()
		}
	}
	return l
}

// withDefaults fills zero (or negative) fields with their defaults, so a
// partly filled Limits, or none at all, still bounds everything.
func (l Limits) withDefaults() Limits {
	for _, f := range l.fields() {
		if f.nonPositive() {
			f.setDefault()
		}
	}
	return l
}
