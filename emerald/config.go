package emerald

import (
	"fmt"
	"time"
)

// Defaults of Config.
const (
	// DefaultMaxRecvBytes bounds one request message (NativeCallRequest
	// with every item's payload).
	DefaultMaxRecvBytes = 16 << 20
	// DefaultMaxSendBytes bounds one reply message; a larger result needs
	// chunk_size.
	DefaultMaxSendBytes = 64 << 20
	// DefaultConcurrency is how many items of one NativeCall run at once.
	DefaultConcurrency = 16
	// DefaultStopTimeout bounds GracefulStop before the listener is cut.
	DefaultStopTimeout = 10 * time.Second
	// DefaultHeartbeat is the tick at which a NativeSubscribe stream with
	// nothing sent since the last one gets a heartbeat item.
	DefaultHeartbeat = 15 * time.Second
	// DefaultStatusRecheck is how often the status streams read the
	// remotes' status again when no head came.
	DefaultStatusRecheck = 5 * time.Second
	// minInterval bounds heartbeat and status_recheck from below: each
	// tick costs every open stream a wake-up (and a heartbeat a message).
	minInterval = 100 * time.Millisecond
	// Keepalive defaults: grpc-go's own, named.
	DefaultKeepaliveTime    = 2 * time.Hour
	DefaultKeepaliveTimeout = 20 * time.Second
	DefaultKeepaliveMinTime = 5 * time.Minute
)

// Config is the grpc section; the listener itself is the top-level
// grpc_listen (off when empty) and TLS is the HTTP edge's tls section.
type Config struct {
	// MaxRecvBytes and MaxSendBytes bound one message each way; a message
	// over them ends the call with RESOURCE_EXHAUSTED.
	MaxRecvBytes int `yaml:"max_recv_bytes"`
	MaxSendBytes int `yaml:"max_send_bytes"`
	// Concurrency is how many items of one NativeCall are served at once.
	Concurrency int `yaml:"concurrency"`
	// Reflection serves grpc.reflection (grpcurl's describe and list);
	// default on. A pointer: absent (on) differs from false.
	Reflection *bool `yaml:"reflection"`
	// StopTimeout bounds the graceful stop (streams end, calls finish);
	// then the connections are closed.
	StopTimeout time.Duration `yaml:"stop_timeout"`
	// Heartbeat is the tick at which a NativeSubscribe stream gets a
	// heartbeat item when nothing else went out since the last tick.
	Heartbeat time.Duration `yaml:"heartbeat"`
	// StatusRecheck is how often SubscribeStatus, SubscribeChainStatus
	// and SubscribeNodeStatus read the remotes' status again between
	// heads (a remote leaving rotation, a lower bound learnt).
	StatusRecheck time.Duration `yaml:"status_recheck"`
	Keepalive     Keepalive     `yaml:"keepalive"`
}

// Keepalive is the server's keepalive: its own pings (Time, Timeout), the
// age and idleness it closes connections at (0: never), and the
// enforcement of clients' pings (MinTime, PermitWithoutStream): a client
// pinging more often is sent GOAWAY.
type Keepalive struct {
	Time                time.Duration `yaml:"time"`
	Timeout             time.Duration `yaml:"timeout"`
	MaxConnectionIdle   time.Duration `yaml:"max_connection_idle"`
	MaxConnectionAge    time.Duration `yaml:"max_connection_age"`
	MinTime             time.Duration `yaml:"min_time"`
	PermitWithoutStream bool          `yaml:"permit_without_stream"`
}

// WithDefaults fills what is unset.
func (c Config) WithDefaults() Config {
	if c.MaxRecvBytes == 0 {
		c.MaxRecvBytes = DefaultMaxRecvBytes
	}
	if c.MaxSendBytes == 0 {
		c.MaxSendBytes = DefaultMaxSendBytes
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.StatusRecheck == 0 {
		c.StatusRecheck = DefaultStatusRecheck
	}
	k := &c.Keepalive
	if k.Time == 0 {
		k.Time = DefaultKeepaliveTime
	}
	if k.Timeout == 0 {
		k.Timeout = DefaultKeepaliveTimeout
	}
	if k.MinTime == 0 {
		k.MinTime = DefaultKeepaliveMinTime
	}
	return c
}

// ReflectionOn reports whether server reflection is served.
func (c Config) ReflectionOn() bool { return c.Reflection == nil || *c.Reflection }

// Validate reports the first setting out of range, naming it.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"grpc.max_recv_bytes", int64(c.MaxRecvBytes)}, {"grpc.max_send_bytes", int64(c.MaxSendBytes)},
		{"grpc.concurrency", int64(c.Concurrency)}, {"grpc.stop_timeout", int64(c.StopTimeout)},
		{"grpc.heartbeat", int64(c.Heartbeat)}, {"grpc.status_recheck", int64(c.StatusRecheck)},
		{"grpc.keepalive.time", int64(c.Keepalive.Time)}, {"grpc.keepalive.timeout", int64(c.Keepalive.Timeout)},
		{"grpc.keepalive.max_connection_idle", int64(c.Keepalive.MaxConnectionIdle)},
		{"grpc.keepalive.max_connection_age", int64(c.Keepalive.MaxConnectionAge)},
		{"grpc.keepalive.min_time", int64(c.Keepalive.MinTime)},
	} {
		if f.v < 0 {
			return fmt.Errorf("%s: must not be negative", f.name)
		}
	}
	for _, f := range []struct {
		name string
		v    time.Duration
	}{{"grpc.heartbeat", c.Heartbeat}, {"grpc.status_recheck", c.StatusRecheck}} {
		if f.v != 0 && f.v < minInterval {
			return fmt.Errorf("%s: %s is under %s (0: the default)", f.name, f.v, minInterval)
		}
	}
	return nil
}
