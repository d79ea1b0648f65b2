package remotes

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Tier orders remotes: primary first, then secondary; fallback only when
// nothing else can serve.
type Tier uint8

const (
	TierPrimary Tier = iota
	TierSecondary
	TierFallback
)

func (t Tier) String() string {
	switch t {
	case TierPrimary:
		return "primary"
	case TierSecondary:
		return "secondary"
	case TierFallback:
		return "fallback"
	}
	return "unknown"
}

// ParseTier reads a tier name as written in config; "" is primary.
func ParseTier(s string) (Tier, error) {
	switch s {
	case "", "primary":
		return TierPrimary, nil
	case "secondary":
		return TierSecondary, nil
	case "fallback":
		return TierFallback, nil
	}
	return 0, fmt.Errorf("unknown tier %q (want primary, secondary or fallback)", s)
}

// MarshalText writes the tier as config names it.
func (t Tier) MarshalText() ([]byte, error) {
	if t > TierFallback {
		return nil, fmt.Errorf("unknown tier %d", t)
	}
	return []byte(t.String()), nil
}

// UnmarshalText reads a tier as config names it (ParseTier).
func (t *Tier) UnmarshalText(b []byte) error {
	v, err := ParseTier(string(b))
	if err == nil {
		*t = v
	}
	return err
}

// MarshalText writes the policy as config names it.
func (d DisputePolicy) MarshalText() ([]byte, error) {
	if d > DisputePreferTier {
		return nil, fmt.Errorf("unknown dispute policy %d", d)
	}
	return []byte(d.String()), nil
}

// UnmarshalText reads a policy as config names it (ParseDisputePolicy).
func (d *DisputePolicy) UnmarshalText(b []byte) error {
	v, err := ParseDisputePolicy(string(b))
	if err == nil {
		*d = v
	}
	return err
}

// Defaults for one remote.
const (
	DefaultRemoteTimeout     = 10 * time.Second
	DefaultMaxInFlight       = 256
	DefaultBreakerFailures   = 5
	DefaultBreakerCooldown   = 10 * time.Second
	DefaultMaxLogsRangeSplit = 0 // no cap until a remote says so
)

// Config is one upstream endpoint, as config.yaml's chains[].remotes[]
// writes it. URL, WSURL and Headers may carry API keys: they are used to
// dial and nowhere else, and no message of Validate quotes them.
type Config struct {
	Name string `yaml:"name"`
	URL  string `yaml:"url"` // http(s):// or ws(s)://
	// WSURL is an optional ws(s):// URL newHeads are followed over (and
	// subscriptions relayed); without it a ws(s) URL serves for both.
	WSURL string `yaml:"ws_url"`
	Tier  Tier   `yaml:"tier"`

	Timeout     time.Duration `yaml:"timeout"`       // per attempt
	MaxInFlight int           `yaml:"max_in_flight"` // concurrent calls; over it the remote is Full
	RateLimit   RateLimit     `yaml:"rate_limit"`
	// Methods, when Allow is set, is the only methods sent to this remote;
	// Deny is never sent.
	Methods MethodFilter      `yaml:"methods"`
	Headers map[string]string `yaml:"headers"`
	// MaxLogsRange caps the block span of one eth_getLogs sent here; larger
	// requests are split. 0 = no cap configured.
	MaxLogsRange uint64 `yaml:"max_logs_range"`
	// MaxResponseBytes caps one reply from the remote, on the wire and
	// inflated (0: DefaultMaxResponseBytes, or the reply budget if less).
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
}

// RateLimit paces the calls sent to a remote: RPS requests per second
// with bursts of Burst; RPS 0 is unlimited.
type RateLimit struct {
	RPS   float64 `yaml:"rps"`
	Burst int     `yaml:"burst"` // 0: ceil(RPS), at least 1
}

// MethodFilter: entries ending in "_" or "*" match a prefix (e.g. "debug_").
type MethodFilter struct {
	Allow []string `yaml:"allow"`
	Deny  []string `yaml:"deny"`
}

// WithDefaults fills the zero fields of a remote of a chain whose calls
// end after callDeadline (0: unknown).
func (c Config) WithDefaults(callDeadline time.Duration) Config {
	if c.Timeout == 0 {
		// At most half the call deadline, so that a failover attempt
		// still fits and the timeout can fire at all.
		c.Timeout = DefaultRemoteTimeout
		if callDeadline > 0 {
			c.Timeout = min(c.Timeout, callDeadline/2)
		}
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	c.RateLimit = c.RateLimit.withDefaults()
	return c
}

// withDefaults fills an unset burst: ceil(RPS), at least 1.
func (r RateLimit) withDefaults() RateLimit {
	if r.RPS > 0 && r.Burst == 0 {
		r.Burst = max(1, int(math.Ceil(r.RPS)))
	}
	return r
}

var (
	remoteNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
	headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// Validate reports every problem of a defaulted remote, each naming its
// field (url, rate_limit.rps). No message quotes a URL or header value.
func (c Config) Validate() error {
	var p problems
	if !remoteNameRE.MatchString(c.Name) {
		p.add("name", "must match [A-Za-z0-9_.-]+, not %q", c.Name)
	}
	if c.URL == "" {
		p.add("url", "required")
	} else if ok, msg := checkURL(c.URL, "http", "https", "ws", "wss"); !ok {
		p.add("url", "must be http(s):// or ws(s)://%s", msg)
	}
	if c.WSURL != "" {
		if ok, msg := checkURL(c.WSURL, "ws", "wss"); !ok {
			p.add("ws_url", "must be ws(s)://%s", msg)
		}
	}
	if c.Tier > TierFallback {
		p.add("tier", "unknown tier %d", c.Tier)
	}
	p.negative("timeout", c.Timeout < 0)
	p.negative("max_in_flight", c.MaxInFlight < 0)
	p.negative("max_response_bytes", c.MaxResponseBytes < 0)
	if r := c.RateLimit.RPS; r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		p.add("rate_limit.rps", "must be a finite number >= 0")
	}
	if c.RateLimit.Burst < 0 {
		p.add("rate_limit.burst", "must be >= 0")
	}
	for _, l := range []struct {
		name    string
		methods []string
	}{{"allow", c.Methods.Allow}, {"deny", c.Methods.Deny}} {
		for k, m := range l.methods {
			if strings.TrimSpace(m) == "" || strings.ContainsAny(m, " \t\r\n") {
				p.add(fmt.Sprintf("methods.%s[%d]", l.name, k), "must be a method name or prefix, not %q", m)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Headers)) {
		if !headerNameRE.MatchString(name) {
			p.add("headers", "%q is not a valid header name", name)
		}
		if strings.ContainsAny(c.Headers[name], "\r\n\x00") {
			// The value itself is likely a secret: name the header only.
			p.add("headers."+name, "value must not contain CR, LF or NUL")
		}
	}
	return p.err()
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

// problems collects validation errors, each prefixed with its field.
type problems []error

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
}

func (p *problems) negative(field string, bad bool) {
	if bad {
		p.add(field, "must be positive")
	}
}

func (p problems) err() error { return errors.Join(p...) }

// Defaults for one chain's pool.
const (
	// DefaultBlockTime is the block time assumed until the chain's block
	// timestamps have told it (PoolConfig.BlockTime 0).
	DefaultBlockTime          = 12 * time.Second
	DefaultMaxLag             = 5
	DefaultCallDeadline       = 30 * time.Second
	DefaultMaxAttempts        = 4
	DefaultGetLogsConcurrency = 4
	DefaultGetLogsMaxParts    = 1000
	DefaultBroadcastFanout    = 3
)

// PoolConfig is one chain's pool.
type PoolConfig struct {
	Chain   string
	ChainID uint64
	// BlockTime sets the head polling cadence; 0 learns it from the block
	// timestamps (chainhead.go). Remotes with a ws url are polled only
	// while their newHeads are silent.
	BlockTime time.Duration
	// ChainRecheck is how often each remote's chain id is asked again
	// (chaincheck.go); 0: DefaultChainRecheck.
	ChainRecheck time.Duration
	// MaxLag: a remote more than this many blocks behind the best head leaves
	// rotation until it catches up.
	MaxLag uint64
	// CallDeadline bounds one client call across every failover attempt.
	CallDeadline time.Duration
	// MaxAttempts bounds the remotes tried for one call.
	MaxAttempts int
	// GetLogsConcurrency bounds the parts of a split eth_getLogs in flight.
	GetLogsConcurrency int
	// GetLogsMaxParts bounds the upstream calls one split eth_getLogs may
	// make (nested splits included); a range that needs more is refused
	// with -32052 before any call is sent.
	GetLogsMaxParts int
	// BroadcastFanout: eth_sendRawTransaction goes to this many remotes at once.
	BroadcastFanout int
	// BreakerFailures consecutive faults open a remote's breaker for
	// BreakerCooldown, after which one probe call is let through.
	BreakerFailures int
	BreakerCooldown time.Duration
	// Hedge sends slow reads of the listed methods to a second remote
	// (hedge.go); no groups, no hedging.
	Hedge HedgeConfig
	// Scoring orders the remotes of a tier (score.go); zero fields take
	// the defaults.
	Scoring ScoringConfig
	// Consensus puts the listed methods to a vote among several remotes
	// (consensus.go); no method is voted on unless configured.
	Consensus []ConsensusRule
	// CordonStrikes misbehaviours within CordonWithin take a remote out of
	// rotation for CordonPeriod (misbehave.go); 0 takes the defaults.
	CordonStrikes int
	CordonWithin  time.Duration
	CordonPeriod  time.Duration
	// MisbehaviourLog, when set, is a file each misbehaviour is appended to
	// as one JSON line.
	MisbehaviourLog string
	// PendingPollInterval is how often the pending-transaction filter that
	// serves newPendingTransactions without a WebSocket remote is polled
	// (relay_poll.go); 0 takes DefaultPendingPollInterval.
	PendingPollInterval time.Duration
	// Replies bounds the bytes of replies being read (replies.go). The app
	// gives every chain's pool the same one; nil: the pool has its own of
	// DefaultReplyBytesInFlight.
	Replies *ReplyBudget
}

// ConsensusDefaults returns rules with their zero fields filled for a
// chain of nRemotes: Remotes min(DefaultConsensusRemotes, nRemotes), Agree
// a majority of them. rules is not changed.
func ConsensusDefaults(rules []ConsensusRule, nRemotes int) []ConsensusRule {
	out := slices.Clone(rules)
	for i := range out {
		r := &out[i]
		if r.Remotes == 0 {
			r.Remotes = min(DefaultConsensusRemotes, nRemotes)
		}
		if r.Agree == 0 {
			r.Agree = r.Remotes/2 + 1
		}
	}
	return out
}

// ValidateConsensus reports every problem of a chain's defaulted vote
// rules, each naming its field (consensus[1].agree).
func ValidateConsensus(rules []ConsensusRule, nRemotes int) error {
	var p problems
	voted := map[string]int{}
	for k, r := range rules {
		path := fmt.Sprintf("consensus[%d]", k)
		if len(r.Methods) == 0 {
			p.add(path+".methods", "at least one method is required")
		}
		for m, name := range r.Methods {
			mpath := fmt.Sprintf("%s.methods[%d]", path, m)
			if err := Votable(name); err != nil {
				p.add(mpath, "%v", err)
			} else if first, dup := voted[name]; dup {
				p.add(mpath, "%s is already voted on by consensus[%d]", name, first)
			} else {
				voted[name] = k
			}
		}
		switch {
		case r.Remotes < 2:
			p.add(path+".remotes", "must be at least 2")
		case r.Remotes > nRemotes:
			p.add(path+".remotes", "is %d, but the chain has %d remote(s)", r.Remotes, nRemotes)
		}
		if r.Agree <= r.Remotes/2 || r.Agree > r.Remotes {
			p.add(path+".agree", "must be a majority of remotes (%d): %d to %d", r.Remotes, r.Remotes/2+1, max(r.Remotes, 1))
		}
		for f, field := range r.IgnoreFields {
			if slices.Contains(strings.Split(field, "."), "") || strings.ContainsAny(field, " \t\r\n") {
				p.add(fmt.Sprintf("%s.ignore_fields[%d]", path, f), "must be a field name or a dotted path, not %q", field)
			}
		}
		if r.OnDispute > DisputePreferTier {
			p.add(path+".on_dispute", "unknown dispute policy %d", r.OnDispute)
		}
		if r.TrustedTier > TierFallback {
			p.add(path+".trusted_tier", "unknown tier %d", r.TrustedTier)
		}
	}
	return p.err()
}
