package app

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/venn-gateway/venn/admin"
	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/chain"
	"github.com/venn-gateway/venn/edge"
	"github.com/venn-gateway/venn/emerald"
	"github.com/venn-gateway/venn/jrpc"
	vnats "github.com/venn-gateway/venn/nats"
	"github.com/venn-gateway/venn/reqlog"
	"github.com/venn-gateway/venn/subcenter"
	"github.com/venn-gateway/venn/tracing"
	"github.com/venn-gateway/venn/usage"
)

// defaultYAML is the configuration used when no file is given: Ethereum
// mainnet in front of a few public endpoints, everything in memory.
//
//go:embed default.yaml
var defaultYAML []byte

// Defaults of the process itself; those of chains and remotes live in
// package remotes, those of the wire in package jrpc.
const (
	DefaultListen          = "127.0.0.1:8545"
	DefaultMetricsListen   = "127.0.0.1:9545"
	DefaultLogLevel        = "info"
	DefaultLogFormat       = "text"
	DefaultShutdownTimeout = 15 * time.Second
)

// Config is the whole of venn's configuration file.
type Config struct {
	// Listen serves JSON-RPC over HTTP POST and WebSocket at /CHAIN.
	Listen string `yaml:"listen"`
	// MetricsListen serves /metrics, /healthz and /readyz. It is a pointer
	// because "" (disabled) differs from absent (the default address).
	MetricsListen   *string       `yaml:"metrics_listen"`
	Log             LogConfig     `yaml:"log"`
	Limits          Limits        `yaml:"limits"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	ShutdownDelay   time.Duration `yaml:"shutdown_delay"` // /readyz 503, calls served, then drain
	// DiagnosticHeaders puts X-Venn-Source, -Remote, -Attempts, -Cache and
	// -Duration-Ms on HTTP answers; default on. A pointer: absent (on)
	// differs from false.
	DiagnosticHeaders *bool `yaml:"diagnostic_headers"`
	// Compression is gzip and zstd on HTTP answers and requests, and
	// WebSocket permessage-deflate (package jrpc).
	Compression jrpc.Compression `yaml:"compression"`
	// RequestLog is the optional log of every client call (package reqlog).
	RequestLog reqlog.Config `yaml:"request_log"`
	// Redis joins this process to a cluster: the replicas sharing one Redis
	// elect a leader per chain and share its head feed. Without it, the
	// process leads every chain and keeps the head window in memory.
	Redis RedisConfig `yaml:"redis"`
	// Postgres is the history store: settled blocks, receipts and logs the
	// replicas share. Without it venn keeps no history.
	Postgres blockstore.Config `yaml:"postgres"`
	Chains   []ChainConfig     `yaml:"chains"`

	// Edge is who may call what, and how often: the top-level sections
	// auth, methods, rate_limits, trusted_proxies and cors (package edge).
	Edge edge.Config `yaml:",inline"`
	TLS  TLSConfig   `yaml:"tls"` // on listen (http.go)
	// Tracing exports OpenTelemetry traces over OTLP (package tracing);
	// off by default.
	Tracing tracing.Config `yaml:"tracing"`
	// NATS connects the process to NATS (package nats): JSON-RPC over
	// request/reply on PREFIX.CHAIN.rpc; off without nats.url.
	NATS vnats.Config `yaml:"nats"`
	// GRPCListen serves Dshackle's gRPC API, emerald.Blockchain (package
	// emerald), with the tls section's TLS; "" (the default) does not.
	// Dshackle's own port is 2449.
	GRPCListen string         `yaml:"grpc_listen"`
	GRPC       emerald.Config `yaml:"grpc"`

	// Usage is how tenants' usage is written to Postgres (package usage).
	Usage usage.Config `yaml:"usage"`

	// AdminListen serves the admin API (package admin) on its own
	// listener; "" (the default) does not, unless admin.on_metrics_listen
	// serves it on metrics_listen.
	AdminListen string       `yaml:"admin_listen"`
	Admin       admin.Config `yaml:"admin"`

	// File is the file the config was loaded from, "" the built-in
	// default; set by Load.
	File string `yaml:"-"`
}

// RedisConfig is the cluster's shared Redis: one server, a Sentinel set or
// a Redis Cluster (redis.go). URL, Password and Sentinel.Password may
// carry a secret: no message prints them.
type RedisConfig struct {
	// URL is redis://host:6379/0 (rediss:// for TLS), or
	// redis+sentinel://host:26379,host:26379/0?master=NAME, or
	// redis+cluster://host:6379,host:6379; "" with no Sentinel or Cluster
	// runs alone.
	URL string `yaml:"url"`
	// Sentinel and Cluster spell the other two deployments in YAML, with
	// Username, Password (the data servers') and TLS; a URL carries its
	// own credentials and says rediss:// for TLS.
	Sentinel RedisSentinelConfig `yaml:"sentinel"`
	Cluster  []string            `yaml:"cluster"` // seed nodes, host:port
	Username string              `yaml:"username"`
	Password string              `yaml:"password"`
	TLS      bool                `yaml:"tls"` // to every server and sentinel
	// LeaseTTL is a chain leader's lease: a dead leader is replaced within
	// about this long.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// ReplicaID names this replica in leases and logs (default: host name
	// and process id).
	ReplicaID string `yaml:"replica_id"`
}

// RedisSentinelConfig names the master a Sentinel set watches and the
// sentinels to ask for it.
type RedisSentinelConfig struct {
	Master string   `yaml:"master"`
	Addrs  []string `yaml:"addrs"` // host:port of each sentinel
	// Password is the sentinels' own, which often have none; the
	// servers' is redis.password.
	Password string `yaml:"password"`
}

// LogConfig selects the slog handler.
type LogConfig struct {
	Level  LogLevel  `yaml:"level"`
	Format LogFormat `yaml:"format"`
}

// LogLevel is debug, info, warn or error.
type LogLevel string

// UnmarshalText accepts the four levels; "" takes the default.
func (l *LogLevel) UnmarshalText(b []byte) error {
	switch v := LogLevel(b); v {
	case "", "debug", "info", "warn", "error":
		*l = v
		return nil
	}
	return fmt.Errorf("must be debug, info, warn or error, not %q", b)
}

// LogFormat is text or json.
type LogFormat string

// UnmarshalText accepts the two formats; "" takes the default.
func (f *LogFormat) UnmarshalText(b []byte) error {
	switch v := LogFormat(b); v {
	case "", "text", "json":
		*f = v
		return nil
	}
	return fmt.Errorf("must be text or json, not %q", b)
}

// ChainConfig is one chain, served at /Name (package chain's Config: app
// reads, defaults and validates it; chain builds from it).
type ChainConfig = chain.Config

// IntegrityConfig says which fetches are checked (package integrity).
type IntegrityConfig = chain.IntegrityConfig

// Load reads, expands, parses, defaults and validates the file at path; ""
// loads the embedded default.
func Load(path string) (*Config, error) {
	if path == "" {
		return Parse(defaultYAML)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, err
	}
	c.File = path
	return c, nil
}

// Parse expands ${ENV} references in data, decodes it strictly (an unknown
// field is an error), applies defaults and validates. Every problem found
// is returned, joined, one per line, each naming its field and its line in
// data.
//
// ${ENV} is expanded in scalar values after the YAML is parsed, never in
// the text: a secret holding a newline, a quote, a # or a leading * stays
// one value and cannot change the document's shape; comments are not
// expanded at all. A variable that is not set is one problem among the
// others: the rest of the file is still checked.
func Parse(data []byte) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, syntaxError(data, err)
	}
	// bad holds the paths already reported, whose value venn does not
	// have: a validation problem that follows from one is not repeated.
	bad := map[string]bool{}
	expanded, errs := expandTree(&root, bad)
	// Keys no field has, and enum values, first: the decoder would ignore
	// the one and stop at the first of the other.
	unknownKeys(&root, configType, "", &errs, bad)
	checkText(&root, configType, "", &errs, bad)
	var c Config
	if root.Kind != 0 {
		terrs, err := decodeTree(&root, &c, expanded, bad)
		if err != nil {
			return nil, err
		}
		errs = append(errs, terrs...)
	}
	// Then what validation finds in the rest: every problem at once.
	c.applyDefaults()
	for _, e := range unwrapJoined(c.Validate()) {
		path, _, _ := strings.Cut(e.Error(), ": ")
		if !coveredBy(path, bad) {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &c, nil
}

var (
	configType = reflect.TypeFor[Config]()
	// configWords words the decoder's messages (schema.go).
	configWords = typeWords(configType)
)

// syntaxError words a document that does not parse. The parser's line is
// the file's. Inside { } or [ ] a plain ${X} is cut at its "}", and the
// parser's own line is often the one before: that line is named too.
func syntaxError(data []byte, err error) error {
	if n := flowEnvLine(data); n > 0 {
		return fmt.Errorf("config: %w (line %d: quote values that use ${...} inside { } or [ ], like {X-Key: \"${KEY}\"})", err, n)
	}
	return fmt.Errorf("config: %w", err)
}

// expandTree expands ${ENV} in every scalar under root. It returns the
// values taken from the environment (never to be quoted back) and a
// problem for each reference that did not expand, whose path goes to bad.
func expandTree(root *yaml.Node, bad map[string]bool) (expanded []string, errs []error) {
	walkYAML(root, "", func(path string, key, val *yaml.Node) {
		if val.Kind != yaml.ScalarNode {
			return
		}
		v, verrs := expandEnv(val.Value, os.LookupEnv)
		for _, e := range verrs {
			errs = append(errs, fmt.Errorf("%s (line %d): %w", path, val.Line, e))
			bad[path] = true
		}
		if v != val.Value {
			val.Value = v
			expanded = append(expanded, v)
			if val.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
				val.Tag = "" // a plain value's type follows what it expanded to
			}
		}
	})
	return expanded, errs
}

// decodeTree decodes the expanded tree itself, whose nodes keep their
// lines in the file (a re-encoded document would number its own lines,
// and put a whole flow collection on one). Type errors come back as
// problems naming their field and line (their paths added to bad); any
// other error ends the parse. Unknown keys are unknownKeys' to report.
func decodeTree(root *yaml.Node, c *Config, expanded []string, bad map[string]bool) ([]error, error) {
	err := root.Decode(c)
	var te *yaml.TypeError
	switch {
	case err == nil:
		return nil, nil
	case !errors.As(err, &te):
		return nil, fmt.Errorf("config: %w", err)
	}
	at := fieldsByLine(root)
	var errs []error
	for _, msg := range te.Errors {
		f, rest := typeErrorField(msg, at)
		rest = hideEnvValue(rest, expanded)
		if f.path == "" && f.line == 0 {
			errs = append(errs, errors.New("config: "+configWords.Replace(hideEnvValue(msg, expanded))))
			continue
		}
		bad[f.path] = true
		if strings.HasPrefix(rest, "mapping key ") {
			// The decoder leaves a mapping with a key twice undecoded:
			// what validation finds missing in it follows from this.
			bad[f.parent] = true
		}
		errs = append(errs, fmt.Errorf("%s (line %d): %s", f.path, f.line, configWords.Replace(rest)))
	}
	return errs, nil
}

// lineField is one field of the file: its path, its line, its parent's
// path and its value.
type lineField struct {
	path, parent string
	line         int
	key, val     *yaml.Node
}

// fieldsByLine lists the fields on each line of the file, outermost first.
func fieldsByLine(root *yaml.Node) map[int][]lineField {
	at := map[int][]lineField{}
	walkYAML(root, "", func(path string, key, val *yaml.Node) {
		line := nodeLine(key, val)
		at[line] = append(at[line], lineField{path: path, parent: parentPath(path), line: line, key: key, val: val})
	})
	return at
}

// parentPath is the path of the mapping or list a field is in: "" for a
// top-level key.
func parentPath(path string) string {
	return path[:max(strings.LastIndexAny(path, ".["), 0)]
}

// typeErrorField finds the field a decoder message ("line 7: cannot
// unmarshal !!str `x` into ...") is about, and the message without its
// line. Several fields share a line in a flow collection ({a: 1, b: x}):
// the one whose key or value the message quotes wins, else the innermost.
func typeErrorField(msg string, at map[int][]lineField) (lineField, string) {
	var line int
	if _, err := fmt.Sscanf(msg, "line %d:", &line); err != nil {
		return lineField{}, msg
	}
	_, rest, _ := strings.Cut(msg, ": ")
	fs := at[line]
	if len(fs) == 0 {
		return lineField{line: line}, rest
	}
	for i := len(fs) - 1; i >= 0; i-- {
		if quotes(rest, fs[i]) {
			return fs[i], rest
		}
	}
	return fs[len(fs)-1], rest
}

// quotes reports whether a decoder message names f: its key ("mapping key
// \"x\"") or its scalar value ("`x`", cut to "x..." when long).
func quotes(msg string, f lineField) bool {
	if f.key != nil && strings.Contains(msg, fmt.Sprintf("mapping key %q", f.key.Value)) {
		return true
	}
	if f.val.Kind != yaml.ScalarNode || strings.HasPrefix(msg, "mapping key ") {
		return false
	}
	_, v, ok := strings.Cut(msg, " `")
	if v, _, ok = strings.Cut(v, "`"); !ok {
		return false
	}
	if short, cut := strings.CutSuffix(v, "..."); cut {
		return strings.HasPrefix(f.val.Value, short)
	}
	return f.val.Value == v
}

// coveredBy reports whether a validation problem at path follows from a
// problem already reported there, inside it (a list whose only item did
// not decode is "empty") or around it (a mapping left undecoded).
func coveredBy(path string, bad map[string]bool) bool {
	for b := range bad {
		if b == "" || b == path || within(b, path) || within(path, b) {
			return true
		}
	}
	return false
}

// within reports whether path is inside the field at outer.
func within(path, outer string) bool {
	return strings.HasPrefix(path, outer+".") || strings.HasPrefix(path, outer+"[")
}

// AdminAddr is where the admin API serves and the field that says so:
// admin_listen, or metrics_listen with admin.on_metrics_listen; "" off.
func (c *Config) AdminAddr() (addr, field string) {
	if c.Admin.OnMetricsListen {
		return c.MetricsAddr(), "metrics_listen"
	}
	return c.AdminListen, "admin_listen"
}

// MetricsAddr is the address of the metrics server, "" when disabled.
func (c *Config) MetricsAddr() string {
	if c.MetricsListen == nil {
		return ""
	}
	return *c.MetricsListen
}

// RemoteCount is the number of remotes across all chains.
func (c *Config) RemoteCount() int {
	n := 0
	for _, ch := range c.Chains {
		n += len(ch.Remotes)
	}
	return n
}

// DiagnosticsOn reports whether answers carry the diagnostic headers.
func (c *Config) DiagnosticsOn() bool { return c.DiagnosticHeaders == nil || *c.DiagnosticHeaders }

// JRPCLimits is the transport's part of the limits section, for
// jrpc.NewServer.
func (c Config) JRPCLimits() jrpc.Limits { return c.Limits.Limits }

// Limits is the limits section: one YAML map that holds the limits of
// the transport (jrpc.Limits, with MaxReplyBytesInFlight, which the
// remotes enforce) and of subscriptions and filters (subcenter.Limits),
// each package owning its own.
type Limits struct {
	jrpc.Limits   `yaml:",inline"`
	Subscriptions subcenter.Limits `yaml:",inline"`
}

// WithZeroDefaults fills the zero (unset) limits with their defaults.
func (l Limits) WithZeroDefaults() Limits {
	l.Limits, l.Subscriptions = l.Limits.WithZeroDefaults(), l.Subscriptions.WithZeroDefaults()
	return l
}

// Validate reports every limit that is not usable, by its config name.
func (l Limits) Validate() error {
	var errs []error
	for _, err := range []error{l.Limits.Validate(), l.Subscriptions.Validate()} {
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			errs = append(errs, j.Unwrap()...) // one problem a line, each under limits
		} else if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
