package nats

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Defaults of the nats section.
const (
	// DefaultPrefix is the first token of every subject venn uses:
	// venn.CHAIN.rpc.
	DefaultPrefix = "venn"
	// DefaultConnectTimeout bounds one dial and handshake with a server.
	DefaultConnectTimeout = 2 * time.Second
	// DefaultReconnectWait is the pause between two rounds over the
	// servers when none answers; nats.go adds jitter.
	DefaultReconnectWait = 2 * time.Second
	// DefaultReconnectJitter is the most added to each wait, so that a
	// cluster's replicas do not reconnect in step after a NATS restart.
	DefaultReconnectJitter = 500 * time.Millisecond
	// DefaultPingInterval is how often an idle connection is pinged: a
	// partition is noticed within about two of them (nats.go's own
	// default, 2 minutes, would leave requests unanswered that long).
	DefaultPingInterval = 10 * time.Second
	// DefaultReconnectBufBytes bounds what is published while
	// disconnected, kept to send on reconnect (replies to requests whose
	// requester has most likely timed out by then: small).
	DefaultReconnectBufBytes = 8 << 20
	// DefaultMaxInFlight bounds the requests one replica serves at once;
	// past it a request is answered at once with CodeLimitExceeded, and
	// the requester retries (another replica of the queue group, likely).
	DefaultMaxInFlight = 1024
)

// Config is the nats section. With URL set, the process keeps one
// connection to NATS and serves JSON-RPC over request/reply on it.
// URL, Password and Token may carry secrets: no message prints them.
type Config struct {
	// URL is the NATS server, or several separated by commas
	// (nats://a:4222,nats://b:4222); nats:// or tls:// (ws:// and wss://
	// for a server's websocket port). A URL may carry user:password@ or
	// token@. "" (the default): no NATS.
	URL string `yaml:"url"`
	// Prefix is the first token (or tokens, dotted) of every subject:
	// PREFIX.CHAIN.rpc. It is also the requests' queue group.
	Prefix string `yaml:"prefix"`
	// Name is the connection's name as the server lists it (nats server
	// report connections); default "venn REPLICA".
	Name string `yaml:"name"`
	// User and Password, or Token, or CredentialsFile (a .creds file with
	// a user JWT and its NKey seed): one way to authenticate, if any.
	User            string `yaml:"user"`
	Password        string `yaml:"password"`
	Token           string `yaml:"token"`
	CredentialsFile string `yaml:"credentials_file"`
	// NKeyFile is a file holding a user NKey seed (SU...), for a server
	// that authorizes by NKey without JWTs.
	NKeyFile string `yaml:"nkey_file"`
	// TLS to the servers: any file set requires TLS.
	TLS TLSConfig `yaml:"tls"`
	// ConnectTimeout, ReconnectWait, ReconnectJitter and PingInterval
	// tune the connection (their defaults above). venn reconnects
	// forever: NATS being away never stops the process.
	ConnectTimeout  time.Duration `yaml:"connect_timeout"`
	ReconnectWait   time.Duration `yaml:"reconnect_wait"`
	ReconnectJitter time.Duration `yaml:"reconnect_jitter"`
	PingInterval    time.Duration `yaml:"ping_interval"`
	// ReconnectBufBytes bounds what is published while disconnected.
	ReconnectBufBytes int `yaml:"reconnect_buf_bytes"`
	// RPC is the request/reply service.
	RPC RPCConfig `yaml:"rpc"`
}

// TLSConfig is TLS to the NATS servers. The files are read when venn
// connects, not by check-config.
type TLSConfig struct {
	// CAFile verifies the servers (default: the system's roots).
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are venn's client certificate, for servers
	// that verify clients.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// Enabled reports whether any file is set: then TLS is required.
func (t TLSConfig) Enabled() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// RPCConfig is JSON-RPC over request/reply.
type RPCConfig struct {
	// Enabled serves PREFIX.CHAIN.rpc for every chain; default on with a
	// url. Off, the connection serves only the JetStream feed.
	Enabled *bool `yaml:"enabled"`
	// MaxInFlight bounds the requests served at once by this replica.
	MaxInFlight int `yaml:"max_in_flight"`
}

// On reports whether the request/reply service runs.
func (r RPCConfig) On() bool { return r.Enabled == nil || *r.Enabled }

// Enabled reports whether NATS is configured at all.
func (c Config) Enabled() bool { return c.URL != "" }

// WithDefaults returns c with its zero fields at their defaults; without
// a URL there is nothing to default. It is the only place the section's
// defaults are decided.
func (c Config) WithDefaults() Config {
	if c.URL == "" {
		return c
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.ReconnectWait == 0 {
		c.ReconnectWait = DefaultReconnectWait
	}
	if c.ReconnectJitter == 0 {
		c.ReconnectJitter = DefaultReconnectJitter
	}
	if c.PingInterval == 0 {
		c.PingInterval = DefaultPingInterval
	}
	if c.ReconnectBufBytes == 0 {
		c.ReconnectBufBytes = DefaultReconnectBufBytes
	}
	if c.RPC.MaxInFlight == 0 {
		c.RPC.MaxInFlight = DefaultMaxInFlight
	}
	return c
}

// Validate reports every problem of a defaulted c, each naming its field
// under the section (url, prefix). Neither a URL nor a secret is quoted.
// Files are not read.
func (c Config) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.URL == "" {
		// A prefix alone is harmless (an example file names the
		// default); credentials without a server are a mistake.
		set := c.User != "" || c.Password != "" || c.Token != "" || c.CredentialsFile != "" ||
			c.NKeyFile != "" || c.TLS.Enabled()
		if set {
			add("url", "required when any other nats field is set")
		}
		return errors.Join(errs...)
	}
	for i, u := range strings.Split(c.URL, ",") {
		if why := checkServerURL(strings.TrimSpace(u)); why != "" {
			add("url", "server %d of the list: %s", i+1, why)
		}
	}
	if why := checkSubject(c.Prefix); why != "" {
		add("prefix", "%s", why)
	}
	ways := 0
	for _, set := range []bool{c.User != "" || c.Password != "", c.Token != "", c.CredentialsFile != "", c.NKeyFile != ""} {
		if set {
			ways++
		}
	}
	if ways > 1 {
		add("user", "set one of user and password, token, credentials_file or nkey_file")
	}
	if c.Password != "" && c.User == "" {
		add("user", "required with password")
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		add("tls", "cert_file and key_file go together")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"connect_timeout", c.ConnectTimeout}, {"reconnect_wait", c.ReconnectWait}, {"ping_interval", c.PingInterval},
	} {
		if d.v <= 0 {
			add(d.name, "must be positive")
		}
	}
	if c.ReconnectJitter < 0 {
		add("reconnect_jitter", "must not be negative")
	}
	if c.ReconnectBufBytes < 0 {
		add("reconnect_buf_bytes", "must not be negative")
	}
	if c.RPC.MaxInFlight < 1 {
		add("rpc.max_in_flight", "must be at least 1")
	}
	return errors.Join(errs...)
}

// checkServerURL says what is wrong with one server of the url list, ""
// for nothing. host:port alone is nats://host:port, as nats.go takes it.
func checkServerURL(s string) string {
	if s == "" {
		return "empty"
	}
	if !strings.Contains(s, "://") {
		s = "nats://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "not a valid URL" // url's error quotes the text, which may hold a secret
	}
	switch u.Scheme {
	case "nats", "tls", "ws", "wss":
	default:
		return fmt.Sprintf("scheme must be nats, tls, ws or wss, not %q", u.Scheme)
	}
	if u.Hostname() == "" {
		return "no host"
	}
	return ""
}

// checkSubject says what is wrong with a subject (or prefix of one), ""
// for nothing: dotted tokens, none empty, no wildcard, no white space.
func checkSubject(s string) string {
	if s == "" {
		return "empty"
	}
	for _, tok := range strings.Split(s, ".") {
		if tok == "" {
			return fmt.Sprintf("%q has an empty token (two dots, or one at an end)", s)
		}
		if strings.ContainsAny(tok, "*> \t\r\n") {
			return fmt.Sprintf("%q holds a wildcard (* or >) or white space", s)
		}
	}
	return ""
}

// RPCSubject is the subject a chain's JSON-RPC requests go to:
// PREFIX.CHAIN.rpc. chain is the chain's name as in its URL path.
func (c Config) RPCSubject(chain string) string { return c.Prefix + "." + chain + ".rpc" }

// QueueGroup is the queue group every replica's request subscriptions
// join, so that each request is served by one of them.
func (c Config) QueueGroup() string { return c.Prefix }
