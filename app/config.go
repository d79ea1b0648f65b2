package app

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/stalker"
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
	Limits          jrpc.Limits   `yaml:"limits"`
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	ShutdownDelay   time.Duration `yaml:"shutdown_delay"` // /readyz 503, calls served, then drain
	// Redis joins this process to a cluster: the replicas sharing one Redis
	// elect a leader per chain and share its head feed. Without it, the
	// process leads every chain and keeps the head window in memory.
	Redis RedisConfig `yaml:"redis"`
	// Postgres is the history store: settled blocks, receipts and logs the
	// replicas share. Without it venn keeps no history.
	Postgres PostgresConfig `yaml:"postgres"`
	Chains   []ChainConfig  `yaml:"chains"`

	// The edge (edge_config.go): who may call what, and how often, and
	// TLS on listen.
	Auth       AuthConfig         `yaml:"auth"`
	Methods    MethodPolicyConfig `yaml:"methods"`
	RateLimits RateLimitsConfig   `yaml:"rate_limits"`
	// TrustedProxies are addresses or CIDRs whose X-Forwarded-For and
	// X-Real-IP name the client.
	TrustedProxies []string   `yaml:"trusted_proxies"`
	CORS           CORSConfig `yaml:"cors"`
	TLS            TLSConfig  `yaml:"tls"`
}

// RedisConfig is the cluster's shared Redis. URL may carry a password: no
// message prints it.
type RedisConfig struct {
	URL string `yaml:"url"` // redis://host:6379/0; "" runs alone
	// LeaseTTL is a chain leader's lease: a dead leader is replaced within
	// about this long.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
	// ReplicaID names this replica in leases and logs (default: host name
	// and process id).
	ReplicaID string `yaml:"replica_id"`
}

// PostgresConfig is the history store. URL may carry a password: no
// message prints it.
type PostgresConfig struct {
	URL string `yaml:"url"` // postgres://user[:password]@host:5432/db?sslmode=disable; "" no history
	// ReadTimeout bounds one history read (connection included): a read
	// Postgres does not answer in time fails, the call goes on to the
	// remotes, and the store counts as down until a ping answers.
	ReadTimeout time.Duration `yaml:"read_timeout"`
	// WriteTimeout bounds one write (a batch of archived blocks).
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// Required makes /readyz 503 while the history store is not up. By
	// default it is optional: the replicas share it, so a 503 would take
	// every replica out at once while the remotes could serve.
	Required bool `yaml:"required"`
}

// HistoryConfig is how a chain's leader archives settled blocks in the
// history store (postgres.url).
type HistoryConfig struct {
	// Confirmations: a block this far below the head is settled, unless
	// the chain's finalized block is lower; only settled blocks are
	// stored. Below head.window: the leader archives from its window.
	Confirmations uint64 `yaml:"confirmations"`
	// Batch is how many blocks one write stores.
	Batch int `yaml:"batch"`
}

// HeadConfig is a chain's head feed.
type HeadConfig struct {
	// Window is how many blocks below and including the head every replica
	// keeps and serves from memory.
	Window int `yaml:"window"`
	// Backfill bounds how many blocks a leader fetches to fill a gap in the
	// feed (after a restart, a failover or lag); deeper gaps start a fresh
	// window.
	Backfill int `yaml:"backfill"`
	// FinalityInterval is how often the leader reads safe and finalized.
	FinalityInterval time.Duration `yaml:"finality_interval"`
}

// LogConfig selects the slog handler.
type LogConfig struct {
	Level  string `yaml:"level"`  // debug | info | warn | error
	Format string `yaml:"format"` // text | json
}

// ChainConfig is one chain, served at /Name.
type ChainConfig struct {
	Name    string `yaml:"name"`
	ChainID uint64 `yaml:"chain_id"`
	// BlockTime sets the head polling cadence; 0 (the default) learns it
	// from block timestamps.
	BlockTime          time.Duration `yaml:"block_time"`
	ChainRecheck       time.Duration `yaml:"chain_recheck"`
	MaxLag             uint64        `yaml:"max_lag"`
	CallDeadline       time.Duration `yaml:"call_deadline"`
	MaxAttempts        int           `yaml:"max_attempts"`
	GetLogsConcurrency int           `yaml:"getlogs_concurrency"`
	GetLogsMaxParts    int           `yaml:"getlogs_max_parts"`
	BroadcastFanout    int           `yaml:"broadcast_fanout"`
	// PendingPollInterval: how often the pending-transaction filter that
	// serves newPendingTransactions without a WebSocket remote is polled.
	PendingPollInterval time.Duration  `yaml:"pending_poll_interval"`
	Breaker             BreakerConfig  `yaml:"breaker"`
	Head                HeadConfig     `yaml:"head"`
	History             HistoryConfig  `yaml:"history"`
	Remotes             []RemoteConfig `yaml:"remotes"`

	// Consensus puts methods to a vote among remotes; none by default.
	Consensus []ConsensusConfig `yaml:"consensus"`
	// Cordon takes a remote that keeps misbehaving out of rotation.
	Cordon CordonConfig `yaml:"cordon"`
	// MisbehaviourLog appends each misbehaviour as one JSON line; "" off.
	MisbehaviourLog string `yaml:"misbehaviour_log"`
	// Integrity checks blocks and receipts remotes send against their
	// hashes and roots, and refetches what fails from another remote.
	Integrity IntegrityConfig `yaml:"integrity"`
	// Hedge sends slow reads to a second remote; Scoring orders the
	// remotes of a tier (hedge_config.go).
	Hedge   HedgeConfig   `yaml:"hedge"`
	Scoring ScoringConfig `yaml:"scoring"`
}

// IntegrityConfig says which fetches are checked (package integrity).
// Stalker is a pointer because absent (on) differs from false.
type IntegrityConfig struct {
	// Stalker checks every block the leader fetches, and its receipts;
	// default on. Off only for a chain whose blocks venn can't hash at all
	// (its checks then count as skipped anyway) or a fake node.
	Stalker *bool `yaml:"stalker"`
	// ClientCalls checks clients' eth_getBlockByNumber/ByHash,
	// eth_getBlockReceipts and eth_getTransactionReceipt answered by the
	// remotes; default off (it costs CPU per call, and those calls lose
	// hedging, votes and sharing with unchecked calls).
	ClientCalls bool `yaml:"client_calls"`
}

// StalkerOn reports whether the stalker's fetches are checked.
func (i IntegrityConfig) StalkerOn() bool { return i.Stalker == nil || *i.Stalker }

// BreakerConfig opens a remote's breaker after Failures consecutive faults,
// for Cooldown.
type BreakerConfig struct {
	Failures int           `yaml:"failures"`
	Cooldown time.Duration `yaml:"cooldown"`
}

// ConsensusConfig puts Methods to a vote: Remotes are asked at once and
// Agree of them must give the same answer (see remotes.ConsensusRule).
type ConsensusConfig struct {
	Methods      []string `yaml:"methods"`
	Remotes      int      `yaml:"remotes"`
	Agree        int      `yaml:"agree"`
	IgnoreFields []string `yaml:"ignore_fields"`
	OnDispute    string   `yaml:"on_dispute"`   // error | most_common | prefer_tier
	TrustedTier  string   `yaml:"trusted_tier"` // prefer_tier trusts this tier and better
}

// CordonConfig takes a remote out of rotation for Period after Strikes
// misbehaviours within Within.
type CordonConfig struct {
	Strikes int           `yaml:"strikes"`
	Within  time.Duration `yaml:"within"`
	Period  time.Duration `yaml:"period"`
}

// RemoteConfig is one upstream. URL, WSURL and Headers may carry secrets:
// no message of this package prints them.
type RemoteConfig struct {
	Name         string            `yaml:"name"`
	URL          string            `yaml:"url"`
	WSURL        string            `yaml:"ws_url"`
	Tier         string            `yaml:"tier"`
	Timeout      time.Duration     `yaml:"timeout"`
	MaxInFlight  int               `yaml:"max_in_flight"`
	RateLimit    RateLimitConfig   `yaml:"rate_limit"`
	Methods      MethodsConfig     `yaml:"methods"`
	Headers      map[string]string `yaml:"headers"`
	MaxLogsRange uint64            `yaml:"max_logs_range"`
	// MaxResponseBytes caps one reply from the remote, on the wire and
	// inflated (0: 256 MiB, or limits.max_reply_bytes_in_flight if less).
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
}

// RateLimitConfig: RPS 0 is unlimited.
type RateLimitConfig struct {
	RPS   float64 `yaml:"rps"`
	Burst int     `yaml:"burst"`
}

// MethodsConfig: entries ending in "_" or "*" are prefixes.
type MethodsConfig struct {
	Allow []string `yaml:"allow"`
	Deny  []string `yaml:"deny"`
}

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
	return Parse(data)
}

// Parse expands ${ENV} references in data, decodes it strictly (an unknown
// field is an error), applies defaults and validates. Every problem found
// is returned, joined, one per line, each naming its field.
//
// ${ENV} is expanded in scalar values after the YAML is parsed, never in
// the text: a secret holding a newline, a quote, a # or a leading * stays
// one value and cannot change the document's shape; comments are not
// expanded at all.
func Parse(data []byte) (*Config, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		if bytes.Contains(data, []byte("${")) {
			// Inside { } or [ ] a plain ${X} is cut at its "}"; the
			// parser's own line is often the one before.
			where := ""
			if n := flowEnvLine(data); n > 0 {
				where = fmt.Sprintf("line %d: ", n)
			}
			return nil, fmt.Errorf("config: %w (%squote values that use ${...} inside { } or [ ], like {X-Key: \"${KEY}\"})", err, where)
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	origLine := map[string]int{}
	var (
		errs     []error
		expanded []string // values taken from the environment, never to be quoted back
	)
	walkYAML(&root, "", func(path string, key, val *yaml.Node) {
		origLine[path] = nodeLine(key, val)
		if val.Kind != yaml.ScalarNode {
			return
		}
		v, verrs := expandEnv(val.Value, os.LookupEnv)
		for _, e := range verrs {
			errs = append(errs, fmt.Errorf("%s (line %d): %w", path, val.Line, e))
		}
		if v != val.Value {
			val.Value = v
			expanded = append(expanded, v)
			if val.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) == 0 {
				val.Tag = "" // a plain value's type follows what it expanded to
			}
		}
	})
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	var c Config
	if root.Kind != 0 {
		doc, err := yaml.Marshal(&root)
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		// Decoding the re-encoded document keeps the decoder's strict mode;
		// its line numbers are mapped back to field paths.
		var again yaml.Node
		if err := yaml.Unmarshal(doc, &again); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		pathAt := map[int]string{}
		walkYAML(&again, "", func(path string, key, val *yaml.Node) {
			// A list item is visited before the keys inside it, so on a
			// shared line the innermost field wins.
			pathAt[nodeLine(key, val)] = path
		})
		dec := yaml.NewDecoder(bytes.NewReader(doc))
		dec.KnownFields(true)
		if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
			var te *yaml.TypeError
			if !errors.As(err, &te) {
				return nil, fmt.Errorf("config: %w", err)
			}
			// Report the type errors, then what validation finds in the
			// rest: every problem at once.
			bad := map[string]bool{}
			for _, msg := range te.Errors {
				msg = hideEnvValue(msg, expanded)
				path, rest := typeErrorPath(msg, pathAt)
				bad[path] = true
				if path != "" {
					errs = append(errs, fmt.Errorf("%s (line %d): %s", path, origLine[path], yamlTypeNames.Replace(rest)))
				} else {
					errs = append(errs, errors.New("config: "+yamlTypeNames.Replace(msg)))
				}
			}
			c.applyDefaults()
			for _, e := range unwrapJoined(c.Validate()) {
				path, _, _ := strings.Cut(e.Error(), ": ")
				if !coveredBy(path, bad) {
					errs = append(errs, e)
				}
			}
			return nil, errors.Join(errs...)
		}
	}
	c.applyDefaults()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// coveredBy reports whether a validation problem at path follows from a
// type error already reported there or inside it (a list whose only item
// did not decode is "empty").
func coveredBy(path string, bad map[string]bool) bool {
	if bad[path] {
		return true
	}
	for b := range bad {
		if strings.HasPrefix(b, path+"[") || strings.HasPrefix(b, path+".") {
			return true
		}
	}
	return false
}

// nodeLine is where a field starts: its key's line, or a list item's own.
func nodeLine(key, val *yaml.Node) int {
	if key != nil {
		return key.Line
	}
	return val.Line
}

// walkYAML calls fn for every mapping value and sequence item under n with
// its field path (chains[0].remotes[1].url, methods.allow[0]); key is the
// mapping key, nil for a sequence item.
func walkYAML(n *yaml.Node, path string, fn func(path string, key, val *yaml.Node)) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			walkYAML(c, path, fn)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, val := n.Content[i], n.Content[i+1]
			p := key.Value
			if path != "" {
				p = path + "." + key.Value
			}
			fn(p, key, val)
			walkYAML(val, p, fn)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			fn(p, nil, c)
			walkYAML(c, p, fn)
		}
	}
}

// flowEnvLine returns the first line (from 1) where an unquoted ${ sits
// inside a flow collection, or 0. It only words a syntax error, so a rough
// scan will do: a quote, { or [ counts only where a value starts.
func flowEnvLine(data []byte) int {
	depth := 0
	for i, line := range strings.Split(string(data), "\n") {
		var quote byte
		valueStart := true // only blanks so far, or after ": ", "- ", ",", "{", "["
		for j := 0; j < len(line); j++ {
			c := line[j]
			if quote != 0 {
				if c == '\\' && quote == '"' {
					j++
				} else if c == quote {
					quote = 0
				}
				continue
			}
			switch {
			case c == ' ' || c == '\t':
				continue // keeps valueStart
			case c == '#' && (j == 0 || line[j-1] == ' ' || line[j-1] == '\t'):
				j = len(line) // a comment
				continue
			case strings.HasPrefix(line[j:], "${"):
				if depth > 0 {
					return i + 1
				}
				if k := strings.IndexByte(line[j:], '}'); k > 0 {
					j += k
				}
			case valueStart && (c == '"' || c == '\''):
				quote = c
			case valueStart && (c == '{' || c == '['):
				depth++
			case depth > 0 && (c == '}' || c == ']'):
				depth--
			}
			valueStart = c == '{' || c == '[' || c == ',' ||
				((c == ':' || c == '-') && (j+1 == len(line) || line[j+1] == ' '))
		}
	}
	return 0
}

// hideEnvValue drops the value a decoder message quotes (all of it up to
// 10 bytes, else the first 7 and "...") when it came from the environment:
// it may be a secret, and the file already names the variable.
func hideEnvValue(msg string, expanded []string) string {
	for _, v := range expanded {
		if len(v) > 10 {
			v = v[:7] + "..."
		}
		msg = strings.ReplaceAll(msg, " `"+v+"`", " (a value from the environment)")
	}
	return msg
}

// typeErrorPath finds the field a decoder message ("line 7: cannot
// unmarshal ...") is about, and the message without its line.
func typeErrorPath(msg string, pathAt map[int]string) (string, string) {
	var line int
	if _, err := fmt.Sscanf(msg, "line %d:", &line); err != nil {
		return "", msg
	}
	_, rest, _ := strings.Cut(msg, ": ")
	return pathAt[line], rest
}

func unwrapJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err != nil {
		return []error{err}
	}
	return nil
}

// yamlTypeNames turns the Go types in decoder messages into the file's words.
var yamlTypeNames = strings.NewReplacer(
	"[]app.ChainConfig", "a list of chains",
	"[]app.RemoteConfig", "a list of remotes",
	"time.Duration", "a duration (like 10s)",
	"type app.Config", "the top level",
	"type app.LogConfig", "log",
	"type jrpc.Limits", "limits",
	"type app.ChainConfig", "a chain",
	"type app.BreakerConfig", "breaker",
	"type app.RemoteConfig", "a remote",
	"type app.RateLimitConfig", "rate_limit",
	"type app.MethodsConfig", "methods",
	"[]app.APIKeyConfig", "a list of keys",
	"type app.AuthConfig", "auth",
	"type app.APIKeyConfig", "a key",
	"type app.MethodPolicyConfig", "methods",
	"type app.RateLimitsConfig", "rate_limits",
	"type app.CORSConfig", "cors",
	"type app.TLSConfig", "tls",
	"[]app.ConsensusConfig", "a list of consensus rules",
	"type app.ConsensusConfig", "a consensus rule",
	"type app.CordonConfig", "cordon",
	"type app.HedgeConfig", "hedge",
	"[]app.HedgeGroupConfig", "a list of hedge groups",
	"type app.HedgeGroupConfig", "a hedge group",
	"type app.ScoringConfig", "scoring",
	"type app.PostgresConfig", "postgres",
	"type app.HistoryConfig", "history",
	"app.Config", "the top level",
	"app.LogConfig", "log",
	"jrpc.Limits", "limits",
	"app.ChainConfig", "a chain",
	"app.BreakerConfig", "breaker",
	"app.RemoteConfig", "a remote",
	"app.RateLimitConfig", "rate_limit",
	"app.MethodsConfig", "methods",
	"app.AuthConfig", "auth",
	"app.APIKeyConfig", "a key",
	"app.MethodPolicyConfig", "methods",
	"app.RateLimitsConfig", "rate_limits",
	"app.CORSConfig", "cors",
	"app.TLSConfig", "tls",
	"app.ConsensusConfig", "a consensus rule",
	"app.CordonConfig", "cordon",
	"app.HedgeConfig", "hedge",
	"app.HedgeGroupConfig", "a hedge group",
	"app.ScoringConfig", "scoring",
	"app.PostgresConfig", "postgres",
	"app.HistoryConfig", "history",
)

// envName is what ${...} may name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// expandEnv replaces ${NAME} and ${NAME:-default} in one config value.
// Unlike os.Expand it leaves a bare $ alone (secrets and regexps contain
// them); "$${" writes a literal "${". A default applies when NAME is unset
// or empty, as in the shell. Every unset name without a default is
// reported.
func expandEnv(s string, lookup func(string) (string, bool)) (string, []error) {
	var (
		out  strings.Builder
		errs []error
	)
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			out.WriteString(s)
			break
		}
		if i > 0 && s[i-1] == '$' {
			out.WriteString(s[:i-1])
			out.WriteString("${")
			s = s[i+2:]
			continue
		}
		out.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			errs = append(errs, errors.New("unclosed ${"))
			out.WriteString(s[i:])
			break
		}
		ref := s[i+2 : i+end]
		s = s[i+end+1:]
		name, def, hasDef := strings.Cut(ref, ":-")
		if !envName.MatchString(name) {
			errs = append(errs, fmt.Errorf("bad variable name %q", name))
			continue
		}
		v, ok := lookup(name)
		switch {
		case hasDef && v == "":
			v = def
		case !ok:
			errs = append(errs, fmt.Errorf("environment variable %s is not set", name))
		}
		out.WriteString(v)
	}
	return out.String(), errs
}

// applyDefaults fills every zero field with its documented default. It is
// the only place defaults are decided.
func (c *Config) applyDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.MetricsListen == nil {
		addr := DefaultMetricsListen
		c.MetricsListen = &addr
	}
	if c.Log.Level == "" {
		c.Log.Level = DefaultLogLevel
	}
	if c.Log.Format == "" {
		c.Log.Format = DefaultLogFormat
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}

	c.Limits = c.Limits.WithZeroDefaults()
	c.applyEdgeDefaults()
	if c.Redis.URL != "" {
		setDefault(&c.Redis.LeaseTTL, stalker.DefaultLeaseTTL)
		if c.Redis.ReplicaID == "" {
			host, _ := os.Hostname()
			c.Redis.ReplicaID = fmt.Sprintf("%s-%d", host, os.Getpid())
		}
	}

	for i := range c.Chains {
		ch := &c.Chains[i]
		// block_time stays 0 unless set: the pool learns it from block
		// timestamps (remotes.DefaultBlockTime until they have told it).
		setDefault(&ch.ChainRecheck, remotes.DefaultChainRecheck)
		setDefault(&ch.MaxLag, remotes.DefaultMaxLag)
		setDefault(&ch.CallDeadline, remotes.DefaultCallDeadline)
		setDefault(&ch.MaxAttempts, remotes.DefaultMaxAttempts)
		setDefault(&ch.GetLogsConcurrency, remotes.DefaultGetLogsConcurrency)
		setDefault(&ch.GetLogsMaxParts, remotes.DefaultGetLogsMaxParts)
		setDefault(&ch.BroadcastFanout, remotes.DefaultBroadcastFanout)
		setDefault(&ch.PendingPollInterval, remotes.DefaultPendingPollInterval)
		setDefault(&ch.Breaker.Failures, remotes.DefaultBreakerFailures)
		setDefault(&ch.Breaker.Cooldown, remotes.DefaultBreakerCooldown)
		setDefault(&ch.Cordon.Strikes, remotes.DefaultCordonStrikes)
		setDefault(&ch.Cordon.Within, remotes.DefaultCordonWithin)
		setDefault(&ch.Cordon.Period, remotes.DefaultCordonPeriod)
		for k := range ch.Consensus {
			cr := &ch.Consensus[k]
			setDefault(&cr.Remotes, min(remotes.DefaultConsensusRemotes, len(ch.Remotes)))
			setDefault(&cr.Agree, cr.Remotes/2+1)
			setDefault(&cr.OnDispute, remotes.DisputeError.String())
			setDefault(&cr.TrustedTier, remotes.TierPrimary.String())
		}
		setDefault(&ch.Head.Window, headstore.DefaultWindow)
		setDefault(&ch.Head.Backfill, 4*ch.Head.Window)
		if ch.BlockTime > 0 {
			// Without block_time the stalker takes 8 learned block times.
			setDefault(&ch.Head.FinalityInterval, max(8*ch.BlockTime, 10*time.Second))
		}
		// The leader archives from its window: the default stays well
		// inside a small one.
		setDefault(&ch.History.Confirmations, min(stalker.DefaultConfirmations, uint64(ch.Head.Window)/2))
		setDefault(&ch.History.Batch, stalker.DefaultArchiveBatch)
		ch.applyHedgeScoringDefaults()
		if ch.Integrity.Stalker == nil {
			on := true
			ch.Integrity.Stalker = &on
		}
		for j := range ch.Remotes {
			r := &ch.Remotes[j]
			setDefault(&r.Tier, remotes.TierPrimary.String())
			if r.Timeout == 0 {
				// At most half the call deadline, so that a failover
				// attempt still fits and the timeout can fire at all.
				r.Timeout = remotes.DefaultRemoteTimeout
				if ch.CallDeadline > 0 {
					r.Timeout = min(r.Timeout, ch.CallDeadline/2)
				}
			}
			setDefault(&r.MaxInFlight, remotes.DefaultMaxInFlight)
			if r.RateLimit.RPS > 0 && r.RateLimit.Burst == 0 {
				r.RateLimit.Burst = max(1, int(math.Ceil(r.RateLimit.RPS)))
			}
		}
	}
	c.applyPostgresDefaults()
}

// applyPostgresDefaults runs after the chains' defaults: the read timeout
// fits inside every chain's call deadline, as a remote's timeout does.
func (c *Config) applyPostgresDefaults() {
	if c.Postgres.URL == "" {
		return
	}
	if c.Postgres.ReadTimeout == 0 {
		c.Postgres.ReadTimeout = blockstore.DefaultReadTimeout
		for _, ch := range c.Chains {
			if ch.CallDeadline > 0 {
				c.Postgres.ReadTimeout = min(c.Postgres.ReadTimeout, ch.CallDeadline/2)
			}
		}
	}
	setDefault(&c.Postgres.WriteTimeout, blockstore.DefaultWriteTimeout)
}

func setDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

// maxGetLogsParts bounds getlogs_max_parts: one split call keeps a slot per
// part, so the setting is also a memory bound.
const maxGetLogsParts = 100_000

// minChainRecheck bounds chain_recheck from below: each check is a call
// to every remote of the chain, and providers bill them.
const minChainRecheck = 100 * time.Millisecond

// maxArchiveBatch bounds history.batch: one batch is one Postgres
// transaction held in memory whole.
const maxArchiveBatch = 10_000

// maxPendingPollInterval bounds pending_poll_interval: nodes drop a
// filter that is not polled for a while (geth after 5 minutes).
const maxPendingPollInterval = time.Minute

var (
	chainNameRE  = regexp.MustCompile(`^[a-z0-9_-]+$`)
	remoteNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
	headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// problems collects validation errors, each prefixed with its field path.
type problems []error

func (p *problems) add(path, format string, args ...any) {
	*p = append(*p, fmt.Errorf(path+": "+format, args...))
}

// Validate reports every problem of an already defaulted config, each
// naming its field path (chains[0].remotes[1].url). Messages never include
// a URL or header value: those carry API keys.
func (c *Config) Validate() error {
	var p problems
	checkAddr(&p, "listen", c.Listen, true)
	if c.MetricsListen != nil && *c.MetricsListen != "" {
		checkAddr(&p, "metrics_listen", *c.MetricsListen, false)
		if *c.MetricsListen == c.Listen && !strings.HasSuffix(c.Listen, ":0") {
			p.add("metrics_listen", "must differ from listen")
		}
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		p.add("log.level", "must be debug, info, warn or error, not %q", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		p.add("log.format", "must be text or json, not %q", c.Log.Format)
	}
	if c.ShutdownTimeout < 0 {
		p.add("shutdown_timeout", "must be positive")
	}
	if c.ShutdownDelay < 0 {
		p.add("shutdown_delay", "must not be negative")
	}
	validateLimits(&p, c.Limits)
	c.validateEdge(&p)
	if c.Redis.URL != "" {
		if _, err := redis.ParseURL(c.Redis.URL); err != nil {
			// go-redis's message can quote the URL, password included.
			p.add("redis.url", "must be redis://[:password@]host:port[/db] or rediss://...")
		}
		if c.Redis.LeaseTTL < 300*time.Millisecond {
			p.add("redis.lease_ttl", "must be at least 300ms")
		}
	}
	if c.Postgres.URL != "" {
		// Only the shape: pgx's own parse reads certificate and password
		// files, which check-config must not (they are often mounted only
		// where venn runs); the store reports the rest at start.
		// A URL without a host is fine: ?host=/run/postgresql is a socket.
		if u, err := url.Parse(c.Postgres.URL); err != nil ||
			(!strings.EqualFold(u.Scheme, "postgres") && !strings.EqualFold(u.Scheme, "postgresql")) {
			p.add("postgres.url", "must be postgres://user[:password]@host:port/db")
		}
		if c.Postgres.ReadTimeout < 0 {
			p.add("postgres.read_timeout", "must be positive")
		}
		if c.Postgres.WriteTimeout < 0 {
			p.add("postgres.write_timeout", "must be positive")
		}
		for i, ch := range c.Chains {
			if ch.CallDeadline > 0 && c.Postgres.ReadTimeout >= ch.CallDeadline {
				// History is read before the remotes are asked: a read as
				// long as the call would leave them nothing.
				p.add("postgres.read_timeout", "must be shorter than chains[%d].call_deadline (%v)", i, ch.CallDeadline)
			}
		}
	}

	if len(c.Chains) == 0 {
		p.add("chains", "at least one chain is required")
	}
	seen := make(map[string]int, len(c.Chains))
	for i := range c.Chains {
		ch := &c.Chains[i]
		path := fmt.Sprintf("chains[%d]", i)
		if first, dup := seen[ch.Name]; dup && ch.Name != "" {
			p.add(path+".name", "%q is already used by chains[%d]", ch.Name, first)
		} else {
			seen[ch.Name] = i
		}
		ch.validate(&p, path)
		for j, r := range ch.Remotes {
			// No larger reply could ever be read.
			if budget := c.Limits.MaxReplyBytesInFlight; budget > 0 && r.MaxResponseBytes > budget {
				p.add(fmt.Sprintf("%s.remotes[%d].max_response_bytes", path, j),
					"must not exceed limits.max_reply_bytes_in_flight (%d)", budget)
			}
		}
	}
	return errors.Join(p...)
}

func checkAddr(p *problems, path, addr string, required bool) {
	if addr == "" {
		if required {
			p.add(path, "required")
		}
		return
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		p.add(path, "must be host:port, not %q", addr)
	}
}

func validateLimits(p *problems, l jrpc.Limits) {
	for _, err := range unwrapJoined(l.Validate()) {
		*p = append(*p, fmt.Errorf("limits.%w", err))
	}
}

func (c *ChainConfig) validate(p *problems, path string) {
	if !chainNameRE.MatchString(c.Name) {
		p.add(path+".name", "must match [a-z0-9_-]+, not %q", c.Name)
	}
	if c.ChainID == 0 {
		p.add(path+".chain_id", "required, must be > 0")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"block_time", c.BlockTime},
		{"call_deadline", c.CallDeadline},
		{"pending_poll_interval", c.PendingPollInterval},
		{"breaker.cooldown", c.Breaker.Cooldown},
		{"head.finality_interval", c.Head.FinalityInterval},
	} {
		if d.v < 0 {
			p.add(path+"."+d.name, "must be positive")
		}
	}
	if c.PendingPollInterval > maxPendingPollInterval {
		// Nodes drop a filter nobody polls (geth after 5 minutes).
		p.add(path+".pending_poll_interval", "must be at most %v, not %v", maxPendingPollInterval, c.PendingPollInterval)
	}
	for _, n := range []struct {
		name string
		v    int
	}{
		{"max_attempts", c.MaxAttempts},
		{"getlogs_concurrency", c.GetLogsConcurrency},
		{"getlogs_max_parts", c.GetLogsMaxParts},
		{"broadcast_fanout", c.BroadcastFanout},
		{"breaker.failures", c.Breaker.Failures},
		{"head.window", c.Head.Window},
		{"head.backfill", c.Head.Backfill},
	} {
		if n.v < 0 {
			p.add(path+"."+n.name, "must be positive")
		}
	}
	if c.ChainRecheck < 0 {
		p.add(path+".chain_recheck", "must be positive")
	} else if c.ChainRecheck > 0 && c.ChainRecheck < minChainRecheck {
		p.add(path+".chain_recheck", "must be at least %v", minChainRecheck)
	}
	if c.History.Batch < 0 {
		p.add(path+".history.batch", "must be positive")
	} else if c.History.Batch > maxArchiveBatch {
		p.add(path+".history.batch", "must be at most %d", maxArchiveBatch)
	}
	if c.Head.Window > 0 && c.History.Confirmations >= uint64(c.Head.Window) {
		// The leader archives from its window: a block settled only
		// below it would never be archived.
		p.add(path+".history.confirmations", "must be below head.window (%d)", c.Head.Window)
	}
	if c.GetLogsMaxParts > maxGetLogsParts {
		p.add(path+".getlogs_max_parts", "must be at most %d", maxGetLogsParts)
	}
	c.validateConsensus(p, path)
	c.validateHedgeScoring(p, path)

	if len(c.Remotes) == 0 {
		p.add(path+".remotes", "at least one remote is required")
	}
	seen := make(map[string]int, len(c.Remotes))
	for j := range c.Remotes {
		r := &c.Remotes[j]
		rpath := fmt.Sprintf("%s.remotes[%d]", path, j)
		if first, dup := seen[r.Name]; dup && r.Name != "" {
			p.add(rpath+".name", "%q is already used by remotes[%d]", r.Name, first)
		} else {
			seen[r.Name] = j
		}
		r.validate(p, rpath)
		if r.Timeout > 0 && c.CallDeadline > 0 && r.Timeout >= c.CallDeadline {
			// Only an attempt that hits its own timeout counts against the
			// remote; one cut by call_deadline does not. A timeout that can
			// never fire would let a hung remote stay in rotation.
			p.add(rpath+".timeout", "must be shorter than the chain's call_deadline (%v)", c.CallDeadline)
		}
	}
}

func (r *RemoteConfig) validate(p *problems, path string) {
	if !remoteNameRE.MatchString(r.Name) {
		p.add(path+".name", "must match [A-Za-z0-9_.-]+, not %q", r.Name)
	}
	switch {
	case r.URL == "":
		p.add(path+".url", "required")
	default:
		if ok, msg := checkURL(r.URL, "http", "https", "ws", "wss"); !ok {
			p.add(path+".url", "must be http(s):// or ws(s)://%s", msg)
		}
	}
	if r.WSURL != "" {
		if ok, msg := checkURL(r.WSURL, "ws", "wss"); !ok {
			p.add(path+".ws_url", "must be ws(s)://%s", msg)
		}
	}
	if _, err := remotes.ParseTier(r.Tier); err != nil {
		p.add(path+".tier", "%v", err)
	}
	if r.Timeout < 0 {
		p.add(path+".timeout", "must be positive")
	}
	if r.MaxInFlight < 0 {
		p.add(path+".max_in_flight", "must be positive")
	}
	if r.MaxResponseBytes < 0 {
		p.add(path+".max_response_bytes", "must be positive")
	}
	if r.RateLimit.RPS < 0 || math.IsNaN(r.RateLimit.RPS) || math.IsInf(r.RateLimit.RPS, 0) {
		p.add(path+".rate_limit.rps", "must be a finite number >= 0")
	}
	if r.RateLimit.Burst < 0 {
		p.add(path+".rate_limit.burst", "must be >= 0")
	}
	for _, l := range []struct {
		name    string
		methods []string
	}{{"allow", r.Methods.Allow}, {"deny", r.Methods.Deny}} {
		for k, m := range l.methods {
			if strings.TrimSpace(m) == "" || strings.ContainsAny(m, " \t\r\n") {
				p.add(fmt.Sprintf("%s.methods.%s[%d]", path, l.name, k), "must be a method name or prefix, not %q", m)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Headers)) {
		value := r.Headers[name]
		if !headerNameRE.MatchString(name) {
			p.add(path+".headers", "%q is not a valid header name", name)
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			// The value itself is likely a secret: name the header only.
			p.add(path+".headers."+name, "value must not contain CR, LF or NUL")
		}
	}
}

// validateConsensus checks the chain's vote rules and cordon.
func (c *ChainConfig) validateConsensus(p *problems, path string) {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"cordon.within", c.Cordon.Within}, {"cordon.period", c.Cordon.Period}} {
		if d.v < 0 {
			p.add(path+"."+d.name, "must be positive")
		}
	}
	if c.Cordon.Strikes < 0 {
		p.add(path+".cordon.strikes", "must be positive")
	}
	voted := map[string]int{}
	for k := range c.Consensus {
		cr := &c.Consensus[k]
		cpath := fmt.Sprintf("%s.consensus[%d]", path, k)
		if len(cr.Methods) == 0 {
			p.add(cpath+".methods", "at least one method is required")
		}
		for m, name := range cr.Methods {
			mpath := fmt.Sprintf("%s.methods[%d]", cpath, m)
			if err := remotes.Votable(name); err != nil {
				p.add(mpath, "%v", err)
			} else if first, dup := voted[name]; dup {
				p.add(mpath, "%s is already voted on by consensus[%d]", name, first)
			} else {
				voted[name] = k
			}
		}
		switch {
		case cr.Remotes < 2:
			p.add(cpath+".remotes", "must be at least 2")
		case cr.Remotes > len(c.Remotes):
			p.add(cpath+".remotes", "is %d, but the chain has %d remote(s)", cr.Remotes, len(c.Remotes))
		}
		if cr.Agree <= cr.Remotes/2 || cr.Agree > cr.Remotes {
			p.add(cpath+".agree", "must be a majority of remotes (%d): %d to %d", cr.Remotes, cr.Remotes/2+1, max(cr.Remotes, 1))
		}
		for f, field := range cr.IgnoreFields {
			if slices.Contains(strings.Split(field, "."), "") || strings.ContainsAny(field, " \t\r\n") {
				p.add(fmt.Sprintf("%s.ignore_fields[%d]", cpath, f), "must be a field name or a dotted path, not %q", field)
			}
		}
		if _, err := remotes.ParseDisputePolicy(cr.OnDispute); err != nil {
			p.add(cpath+".on_dispute", "%v", err)
		}
		if _, err := remotes.ParseTier(cr.TrustedTier); err != nil {
			p.add(cpath+".trusted_tier", "%v", err)
		}
	}
}

// consensusRules converts the validated vote rules for remotes.NewPool.
func (c ChainConfig) consensusRules() []remotes.ConsensusRule {
	var out []remotes.ConsensusRule
	for _, cr := range c.Consensus {
		policy, _ := remotes.ParseDisputePolicy(cr.OnDispute)
		tier, _ := remotes.ParseTier(cr.TrustedTier)
		out = append(out, remotes.ConsensusRule{Methods: cr.Methods, Remotes: cr.Remotes, Agree: cr.Agree,
			IgnoreFields: cr.IgnoreFields, OnDispute: policy, TrustedTier: tier})
	}
	return out
}

// checkURL reports whether raw parses as an absolute URL with a host and one
// of schemes, with a short reason when not. It never quotes raw, url.Parse's
// error or even the scheme: all may hold a key when the URL is mistyped.
func checkURL(raw string, schemes ...string) (ok bool, reason string) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return false, " (it does not parse)"
	case !slices.Contains(schemes, strings.ToLower(u.Scheme)):
		return false, ""
	case u.Host == "":
		return false, " (no host)"
	}
	return true, ""
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

// JRPCLimits is the limits section, for jrpc.NewServer.
func (c Config) JRPCLimits() jrpc.Limits { return c.Limits }

// PoolConfig converts a chain for remotes.NewPool.
func (c ChainConfig) PoolConfig() remotes.PoolConfig {
	return remotes.PoolConfig{
		Chain:               c.Name,
		ChainID:             c.ChainID,
		BlockTime:           c.BlockTime,
		ChainRecheck:        c.ChainRecheck,
		MaxLag:              c.MaxLag,
		CallDeadline:        c.CallDeadline,
		MaxAttempts:         c.MaxAttempts,
		GetLogsConcurrency:  c.GetLogsConcurrency,
		GetLogsMaxParts:     c.GetLogsMaxParts,
		BroadcastFanout:     c.BroadcastFanout,
		PendingPollInterval: c.PendingPollInterval,
		BreakerFailures:     c.Breaker.Failures,
		BreakerCooldown:     c.Breaker.Cooldown,
		Consensus:           c.consensusRules(),
		CordonStrikes:       c.Cordon.Strikes,
		CordonWithin:        c.Cordon.Within,
		CordonPeriod:        c.Cordon.Period,
		MisbehaviourLog:     c.MisbehaviourLog,
		Hedge:               c.hedgeConfig(),
		Scoring:             c.scoringConfig(),
	}
}

// RemoteConfig converts a remote for remotes.NewPool.
func (r RemoteConfig) RemoteConfig() (remotes.Config, error) {
	tier, err := remotes.ParseTier(r.Tier)
	if err != nil {
		return remotes.Config{}, fmt.Errorf("remote %s: %w", r.Name, err)
	}
	return remotes.Config{
		Name:             r.Name,
		URL:              r.URL,
		WSURL:            r.WSURL,
		Tier:             tier,
		Timeout:          r.Timeout,
		MaxInFlight:      r.MaxInFlight,
		RateLimit:        r.RateLimit.RPS,
		RateBurst:        r.RateLimit.Burst,
		Allow:            r.Methods.Allow,
		Deny:             r.Methods.Deny,
		Headers:          r.Headers,
		MaxLogsRange:     r.MaxLogsRange,
		MaxResponseBytes: r.MaxResponseBytes,
	}, nil
}
