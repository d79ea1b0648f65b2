package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"

	natsgo "github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// Conn is the process's one connection to NATS. Start connects without
// waiting for a server: while none answers, nats.go retries forever with
// reconnect_wait plus jitter, subscriptions made meanwhile are sent once
// it connects, and nothing else in venn waits for it. Stop drains it:
// subscriptions end, what was published is flushed, then it closes.
//
// The request/reply service (RPC) and the JetStream feed share it; each
// owns its own subscriptions and stops them before Stop.
type Conn struct {
	cfg     Config
	name    string
	log     *slog.Logger
	metrics *connMetrics

	mu     sync.Mutex
	nc     *natsgo.Conn  // nil until Start
	closed chan struct{} // closed by nats.go's closed handler
	// lastErr is the last connection error, for the status ("" none); it
	// never holds a URL's credentials (nats.go's errors name host:port).
	lastErr atomic.Pointer[string]
}

// New returns a Conn for cfg (defaulted, validated, with a URL); name is
// the connection's name when cfg gives none. It does no I/O. reg may be
// nil.
func New(cfg Config, name string, log *slog.Logger, reg prometheus.Registerer) *Conn {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Name != "" {
		name = cfg.Name
	}
	return &Conn{cfg: cfg, name: name, log: log, metrics: newConnMetrics(reg)}
}

// Config is the section the connection was built with.
func (c *Conn) Config() Config { return c.cfg }

// Start connects. It fails only on options nats.go rejects before any
// dial (an unreadable credentials or TLS file); a server that does not
// answer is retried in the background.
func (c *Conn) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nc != nil {
		return errors.New("nats: already started")
	}
	closed := make(chan struct{})
	opts, err := c.options(closed)
	if err != nil {
		return err
	}
	c.closed = closed
	nc, err := natsgo.Connect(c.cfg.URL, opts...)
	if err != nil {
		return fmt.Errorf("nats: connect: %w", err)
	}
	c.nc = nc
	c.metrics.connected.Set(boolGauge(nc.IsConnected()))
	if nc.IsConnected() {
		c.log.Info("nats connected", "server", serverName(nc))
	} else {
		c.log.Warn("nats not reachable; retrying in the background", "err", c.LastError())
	}
	return nil
}

// options are the nats.go options for the section.
func (c *Conn) options(closed chan struct{}) ([]natsgo.Option, error) {
	cfg := c.cfg
	opts := []natsgo.Option{
		natsgo.Name(c.name),
		natsgo.RetryOnFailedConnect(true),
		natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(cfg.ReconnectWait),
		natsgo.ReconnectJitter(cfg.ReconnectJitter, cfg.ReconnectJitter),
		natsgo.Timeout(cfg.ConnectTimeout),
		natsgo.PingInterval(cfg.PingInterval),
		natsgo.ReconnectBufSize(cfg.ReconnectBufBytes),
		natsgo.ConnectHandler(func(nc *natsgo.Conn) {
			c.metrics.connected.Set(1)
			c.log.Info("nats connected", "server", serverName(nc))
		}),
		natsgo.DisconnectErrHandler(func(_ *natsgo.Conn, err error) {
			c.metrics.connected.Set(0)
			c.metrics.disconnects.Inc()
			if err != nil {
				c.setLastError(err)
			}
			c.log.Warn("nats disconnected; reconnecting", "err", err)
		}),
		natsgo.ReconnectHandler(func(nc *natsgo.Conn) {
			c.metrics.connected.Set(1)
			c.metrics.reconnects.Inc()
			c.log.Info("nats reconnected", "server", serverName(nc))
		}),
		natsgo.ReconnectErrHandler(func(_ *natsgo.Conn, err error) {
			c.setLastError(err)
			c.log.Debug("nats reconnect attempt failed", "err", err)
		}),
		natsgo.ClosedHandler(func(*natsgo.Conn) {
			c.metrics.connected.Set(0)
			close(closed)
		}),
		natsgo.ErrorHandler(func(_ *natsgo.Conn, sub *natsgo.Subscription, err error) {
			c.setLastError(err)
			c.metrics.asyncErrors.WithLabelValues(errorKind(err)).Inc()
			attrs := []any{"err", err}
			if sub != nil {
				attrs = append(attrs, "subject", sub.Subject)
			}
			c.log.Warn("nats error", attrs...)
		}),
	}
	switch {
	case cfg.User != "":
		opts = append(opts, natsgo.UserInfo(cfg.User, cfg.Password))
	case cfg.Token != "":
		opts = append(opts, natsgo.Token(cfg.Token))
	case cfg.CredentialsFile != "":
		opts = append(opts, natsgo.UserCredentials(cfg.CredentialsFile))
	case cfg.NKeyFile != "":
		o, err := natsgo.NkeyOptionFromSeed(cfg.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("nats: nkey_file: %w", err)
		}
		opts = append(opts, o)
	}
	if t := cfg.TLS; t.Enabled() {
		if t.CAFile != "" {
			opts = append(opts, natsgo.RootCAs(t.CAFile))
		}
		if t.CertFile != "" {
			opts = append(opts, natsgo.ClientCert(t.CertFile, t.KeyFile))
		}
		opts = append(opts, natsgo.Secure())
	}
	return opts, nil
}

// NATS is the nats.go connection, nil before Start. Its users keep to
// their own subscriptions; none closes it.
func (c *Conn) NATS() *natsgo.Conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nc
}

// Stop drains the connection: every subscription still on it stops
// taking messages and finishes those it has, publishes are flushed, and
// the connection closes. It returns when it has, or when ctx ends (the
// connection is then closed at once).
func (c *Conn) Stop(ctx context.Context) error {
	c.mu.Lock()
	nc, closed := c.nc, c.closed
	c.mu.Unlock()
	if nc == nil {
		return nil
	}
	if err := nc.Drain(); err != nil && !errors.Is(err, natsgo.ErrConnectionClosed) {
		nc.Close() // draining fails on a connection that never connected
	}
	select {
	case <-closed:
		return nil
	case <-ctx.Done():
		nc.Close()
		<-closed
		return fmt.Errorf("nats: drain: %w", ctx.Err())
	}
}

// Status is the connection as /readyz shows it.
type Status struct {
	// State is connected, reconnecting (or connecting: none answered
	// yet), draining or closed.
	State string `json:"state"`
	// Server is the server connected to, credentials removed; "" when
	// not connected.
	Server string `json:"server,omitempty"`
	// Reconnects counts reconnections since start.
	Reconnects uint64 `json:"reconnects"`
	// LastError is the last connection error, "" for none.
	LastError string `json:"last_error,omitempty"`
}

// Status reports the connection's state.
func (c *Conn) Status() Status {
	nc := c.NATS()
	if nc == nil {
		return Status{State: "closed", LastError: c.LastError()}
	}
	st := Status{State: stateName(nc.Status()), Reconnects: nc.Stats().Reconnects, LastError: c.LastError()}
	if nc.IsConnected() {
		st.Server = serverName(nc)
	}
	return st
}

// Connected reports whether the connection is up now.
func (c *Conn) Connected() bool {
	nc := c.NATS()
	return nc != nil && nc.IsConnected()
}

// LastError is the last connection error, "" for none.
func (c *Conn) LastError() string {
	if p := c.lastErr.Load(); p != nil {
		return *p
	}
	return ""
}

func (c *Conn) setLastError(err error) {
	s := err.Error()
	c.lastErr.Store(&s)
}

func stateName(s natsgo.Status) string {
	switch s {
	case natsgo.CONNECTED:
		return "connected"
	case natsgo.RECONNECTING, natsgo.DISCONNECTED:
		return "reconnecting"
	case natsgo.CONNECTING:
		return "connecting"
	case natsgo.DRAINING_SUBS, natsgo.DRAINING_PUBS:
		return "draining"
	default:
		return "closed"
	}
}

// errorKind bounds an asynchronous error's label.
func errorKind(err error) string {
	switch {
	case errors.Is(err, natsgo.ErrSlowConsumer):
		return "slow_consumer"
	case errors.Is(err, natsgo.ErrPermissionViolation):
		return "permission"
	case errors.Is(err, natsgo.ErrAuthorization), errors.Is(err, natsgo.ErrAuthExpired), errors.Is(err, natsgo.ErrAuthRevoked):
		return "authorization"
	default:
		return "other"
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// serverName is the server nc is connected to with no credentials: a
// token travels as a URL's user name, which url.Redacted keeps.
func serverName(nc *natsgo.Conn) string {
	u, err := url.Parse(nc.ConnectedUrl())
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
