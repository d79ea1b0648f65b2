// Package settings is the YAML schema of one upstream remote, as a chain's
// remotes list writes it: its tier, limits, methods, headers and
// forwarding, budget, and whether it is a shadow or a group's member; its
// defaults (WithDefaults) and its checks (Validate, each problem naming
// its field, no URL or header value quoted). It knows no Pool or Remote:
// remotes runs what it describes, and keeps the chain's own settings
// (PoolConfig).
package settings

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/venn-gateway/venn/remotes/budget"
	"github.com/venn-gateway/venn/remotes/fielderr"
	"github.com/venn-gateway/venn/remotes/wire"
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

// Defaults for one remote.
const (
	DefaultRemoteTimeout     = 10 * time.Second
	DefaultMaxInFlight       = 256
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
	// Archive states that the remote serves every block of every kind of
	// data (remotes, avail.go): it is never probed, and its answers never narrow it.
	Archive bool `yaml:"archive"`
	// MaxBlockLookback states that the remote serves the last this many
	// blocks below its head, of every kind of data; 0: not stated (probed
	// and learnt from answers).
	MaxBlockLookback uint64 `yaml:"max_block_lookback"`
	// Weight multiplies the remote's share of its tier's calls (1 when
	// absent): a cheap provider can take most of the load while a dear
	// one of the same tier stays warm. Scores still decide who is in the
	// tier's preferred set (remotes, score.go); weight splits the calls among them.
	Weight *float64 `yaml:"weight"`
	// Budget caps what the remote is sent per period (remotes/budget): near it
	// the remote's share falls, past it the remote takes calls only when
	// no other can.
	Budget budget.Config `yaml:"budget"`
	// ForwardHeaders are client headers copied onto the HTTP requests a
	// client's call makes here, with the chain's (remotes, passthrough.go).
	ForwardHeaders []string `yaml:"forward_headers"`
	// ForwardClientIP sends the client's address as X-Forwarded-For.
	ForwardClientIP bool `yaml:"forward_client_ip"`
	// Shadow makes the remote a shadow (remotes, side.go): it gets a sampled copy
	// of the chain's reads, compared with the answers served and never
	// served itself; it is no member of the pool.
	Shadow bool `yaml:"shadow"`
	// ShadowSample is the share of reads a shadow gets (default 0.1).
	ShadowSample float64 `yaml:"shadow_sample"`
	// Group puts the remote in a named group that serves only the chain's
	// transaction_routes naming it (remotes, side.go); it is no member of the pool.
	Group string `yaml:"group"`
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
	c.RateLimit = c.RateLimit.WithDefaults()
	return c
}

// WithDefaults fills an unset burst: ceil(RPS), at least 1.
func (r RateLimit) WithDefaults() RateLimit {
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
	var p fielderr.List
	if !remoteNameRE.MatchString(c.Name) {
		p.Add("name", "must match [A-Za-z0-9_.-]+, not %q", c.Name)
	}
	if c.URL == "" {
		p.Add("url", "required")
	} else if ok, msg := checkURL(c.URL, "http", "https", "ws", "wss"); !ok {
		p.Add("url", "must be http(s):// or ws(s)://%s", msg)
	}
	if c.WSURL != "" {
		if ok, msg := checkURL(c.WSURL, "ws", "wss"); !ok {
			p.Add("ws_url", "must be ws(s)://%s", msg)
		}
	}
	if c.Tier > TierFallback {
		p.Add("tier", "unknown tier %d", c.Tier)
	}
	p.Negative("timeout", c.Timeout < 0)
	p.Negative("max_in_flight", c.MaxInFlight < 0)
	p.Negative("max_response_bytes", c.MaxResponseBytes < 0)
	if r := c.RateLimit.RPS; r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		p.Add("rate_limit.rps", "must be a finite number >= 0")
	}
	if c.Archive && c.MaxBlockLookback > 0 {
		p.Add("max_block_lookback", "must not be set with archive: true (an archive serves every block)")
	}
	p.Under("", budget.ValidateWeight(c.Weight))
	p.Under("", c.Budget.Validate())
	ValidateForward(&p, c.ForwardHeaders)
	c.validateSide(&p)
	if c.RateLimit.Burst < 0 {
		p.Add("rate_limit.burst", "must be >= 0")
	}
	for _, l := range []struct {
		name    string
		methods []string
	}{{"allow", c.Methods.Allow}, {"deny", c.Methods.Deny}} {
		for k, m := range l.methods {
			if strings.TrimSpace(m) == "" || strings.ContainsAny(m, " \t\r\n") {
				p.Add(fmt.Sprintf("methods.%s[%d]", l.name, k), "must be a method name or prefix, not %q", m)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Headers)) {
		switch {
		case !headerNameRE.MatchString(name):
			p.Add("headers", "%q is not a valid header name", name)
		case wire.ReplayHeader(name):
			// It would make net/http send a write twice.
			p.Add("headers", "%q is set by venn (on reads only)", name)
		}
		if strings.ContainsAny(c.Headers[name], "\r\n\x00") {
			// The value itself is likely a secret: name the header only.
			p.Add("headers."+name, "value must not contain CR, LF or NUL")
		}
	}
	return p.Err()
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

// Side reports whether rc is a remote beside the pool (a shadow or a
// group's member).
func (c Config) Side() bool { return c.Shadow || c.Group != "" }

// validateSide checks a remote's shadow and group settings.
func (c Config) validateSide(p *fielderr.List) {
	if c.Shadow && c.Group != "" {
		p.Add("shadow", "a remote is a shadow or in a group, not both")
	}
	if c.Group != "" && !remoteNameRE.MatchString(c.Group) {
		p.Add("group", "must match [A-Za-z0-9_.-]+, not %q", c.Group)
	}
	if s := c.ShadowSample; s < 0 || s > 1 || s != s {
		p.Add("shadow_sample", "must be in [0, 1]")
	}
	if c.ShadowSample != 0 && !c.Shadow {
		p.Add("shadow_sample", "needs shadow: true")
	}
	if c.Side() && c.URL != "" {
		if ok, _ := checkURL(c.URL, "http", "https"); !ok {
			p.Add("url", "must be http(s):// for a shadow or a group's remote")
		}
	}
}

// ValidateForward checks the client headers a remote's or a chain's
// forward_headers names (wire.NeverForwarded are refused).
func ValidateForward(p *fielderr.List, names []string) {
	for _, h := range names {
		switch {
		case !headerNameRE.MatchString(h):
			p.Add("forward_headers", "%q is not a valid header name", h)
		case wire.NeverForwarded(h):
			p.Add("forward_headers", "%q is never forwarded (credentials, the connection's own, or set by venn)", h)
		default:
			continue
		}
	}
}
