package app

import (
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"strings"
	"time"

	"github.com/venn-gateway/venn/jrpc"
)

// The edge's configuration: API keys (auth), the method blocklist
// (methods), rate limits per key and per client address (rate_limits),
// trusted proxies, CORS and TLS on the listener. Behaviour lives in jrpc
// (and TLS in the listener, app.go); this file only reads, defaults and
// checks the sections. Key values never appear in a message: keys are
// named.

// Defaults of the edge's sections.
const (
	DefaultRateLimitsOnRedisError = "open"
	// minKeyLength keeps guessable keys out: a key is all that stands
	// between the internet and the providers venn pays for.
	minKeyLength = 16
)

// AuthConfig is the auth section: API keys. Without keys venn is open.
type AuthConfig struct {
	// Header carries a key (default X-Api-Key); keys may also be sent as
	// the path's second segment, /CHAIN/KEY.
	Header string         `yaml:"header"`
	Keys   []APIKeyConfig `yaml:"keys"`
}

// APIKeyConfig is one client's key. Key is a secret: give it as ${ENV}.
type APIKeyConfig struct {
	Name      string          `yaml:"name"`
	Key       string          `yaml:"key"`
	Chains    []string        `yaml:"chains"`  // empty: all
	Methods   []string        `yaml:"methods"` // allowlist; empty: all not blocked
	Enable    []string        `yaml:"enable"`  // blocked methods this key may call
	RateLimit RateLimitConfig `yaml:"rate_limit"`
	IPExempt  bool            `yaml:"ip_exempt"` // not limited per address
}

// MethodPolicyConfig is the top-level methods section: the blocklist every
// caller gets (admin_, clique_, debug_, engine_, miner_, personal_ unless
// enabled).
type MethodPolicyConfig struct {
	Enable []string `yaml:"enable"`
	Block  []string `yaml:"block"`
}

// RateLimitsConfig is the rate_limits section. Rates are shared through
// redis.url when set, per process otherwise.
type RateLimitsConfig struct {
	IP           RateLimitConfig `yaml:"ip"`             // per client address (IPv6 /64)
	Key          RateLimitConfig `yaml:"key"`            // per key without its own
	OnRedisError string          `yaml:"on_redis_error"` // open | closed
	RedisTimeout time.Duration   `yaml:"redis_timeout"`  // one decision
}

// CORSConfig is the cors section; no origin is allowed by default.
type CORSConfig struct {
	AllowedOrigins []string      `yaml:"allowed_origins"`
	AllowedHeaders []string      `yaml:"allowed_headers"`
	MaxAge         time.Duration `yaml:"max_age"`
}

// TLSConfig is the tls section: TLS on listen, with client certificates
// required when ClientCAFile is set.
type TLSConfig struct {
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
}

// Enabled reports whether listen serves TLS.
func (t TLSConfig) Enabled() bool { return t.CertFile != "" }

// applyEdgeDefaults is applyDefaults for the edge's sections.
func (c *Config) applyEdgeDefaults() {
	setDefault(&c.Auth.Header, jrpc.DefaultKeyHeader)
	for i := range c.Auth.Keys {
		setBurst(&c.Auth.Keys[i].RateLimit)
	}
	setBurst(&c.RateLimits.IP)
	setBurst(&c.RateLimits.Key)
	setDefault(&c.RateLimits.OnRedisError, DefaultRateLimitsOnRedisError)
	setDefault(&c.RateLimits.RedisTimeout, jrpc.DefaultRedisLimitTimeout)
	setDefault(&c.CORS.MaxAge, jrpc.DefaultCORSMaxAge)
}

// setBurst gives a rate without a burst max(1, ceil(rps)), as for remotes.
func setBurst(r *RateLimitConfig) {
	if r.RPS > 0 && r.Burst == 0 {
		r.Burst = max(1, int(math.Ceil(r.RPS)))
	}
}

var (
	keyNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
	// originRE is scheme://host[:port], host possibly "*.domain".
	originRE = regexp.MustCompile(`^[a-z][a-z0-9+.-]*://(\*\.)?[^/*?#\s@]+$`)
)

// validateEdge checks the edge's sections. Key values are never quoted.
func (c *Config) validateEdge(p *problems) {
	if !headerNameRE.MatchString(c.Auth.Header) {
		p.add("auth.header", "%q is not a valid header name", c.Auth.Header)
	}
	chains := make(map[string]bool, len(c.Chains))
	for _, ch := range c.Chains {
		chains[ch.Name] = true
	}
	names := make(map[string]int, len(c.Auth.Keys))
	secrets := make(map[string]int, len(c.Auth.Keys))
	for i, k := range c.Auth.Keys {
		path := fmt.Sprintf("auth.keys[%d]", i)
		switch first, dup := names[k.Name]; {
		case !keyNameRE.MatchString(k.Name):
			p.add(path+".name", "must match [A-Za-z0-9_.-]+, not %q", k.Name)
		case dup:
			p.add(path+".name", "%q is already used by auth.keys[%d]", k.Name, first)
		default:
			names[k.Name] = i
		}
		switch first, dup := secrets[k.Key]; {
		case k.Key == "":
			p.add(path+".key", "required")
		case len(k.Key) < minKeyLength:
			p.add(path+".key", "must be at least %d characters", minKeyLength)
		case strings.ContainsFunc(k.Key, func(r rune) bool { return r <= ' ' || r >= 0x7f || strings.ContainsRune("/?#%", r) }):
			p.add(path+".key", "must be printable ASCII without spaces, /, ?, # or %% (keys also travel in the path)")
		case dup:
			p.add(path+".key", "is the same key as auth.keys[%d]", first)
		default:
			secrets[k.Key] = i
		}
		for j, ch := range k.Chains {
			if !chains[ch] {
				p.add(fmt.Sprintf("%s.chains[%d]", path, j), "%q is not a configured chain", ch)
			}
		}
		checkMethodList(p, path+".methods", k.Methods)
		checkMethodList(p, path+".enable", k.Enable)
		checkRate(p, path+".rate_limit", k.RateLimit)
	}

	checkMethodList(p, "methods.enable", c.Methods.Enable)
	checkMethodList(p, "methods.block", c.Methods.Block)

	checkRate(p, "rate_limits.ip", c.RateLimits.IP)
	checkRate(p, "rate_limits.key", c.RateLimits.Key)
	switch c.RateLimits.OnRedisError {
	case "open", "closed":
	default:
		p.add("rate_limits.on_redis_error", "must be open or closed, not %q", c.RateLimits.OnRedisError)
	}
	if c.RateLimits.RedisTimeout < 0 {
		p.add("rate_limits.redis_timeout", "must be positive")
	}

	for i, s := range c.TrustedProxies {
		if _, err := parsePrefix(s); err != nil {
			p.add(fmt.Sprintf("trusted_proxies[%d]", i), "must be an address or a CIDR (10.0.0.0/8), not %q", s)
		}
	}

	for i, o := range c.CORS.AllowedOrigins {
		if o != "*" && !originRE.MatchString(strings.ToLower(strings.TrimSuffix(o, "/"))) {
			p.add(fmt.Sprintf("cors.allowed_origins[%d]", i),
				"must be *, an origin (https://app.example.com) or https://*.example.com, not %q", o)
		}
	}
	for i, h := range c.CORS.AllowedHeaders {
		if !headerNameRE.MatchString(h) {
			p.add(fmt.Sprintf("cors.allowed_headers[%d]", i), "%q is not a valid header name", h)
		}
	}
	if c.CORS.MaxAge < 0 {
		p.add("cors.max_age", "must be positive")
	}

	switch t := c.TLS; {
	case t.CertFile == "" && t.KeyFile != "":
		p.add("tls.cert_file", "required with tls.key_file")
	case t.CertFile != "" && t.KeyFile == "":
		p.add("tls.key_file", "required with tls.cert_file")
	case t.CertFile == "" && t.ClientCAFile != "":
		p.add("tls.client_ca_file", "needs tls.cert_file and tls.key_file: client certificates are checked over TLS")
	}
}

func checkMethodList(p *problems, path string, list []string) {
	for i, m := range list {
		if strings.TrimSpace(m) == "" || strings.ContainsAny(m, " \t\r\n") {
			p.add(fmt.Sprintf("%s[%d]", path, i), "must be a method name or prefix, not %q", m)
		}
	}
}

func checkRate(p *problems, path string, r RateLimitConfig) {
	if r.RPS < 0 || math.IsNaN(r.RPS) || math.IsInf(r.RPS, 0) {
		p.add(path+".rps", "must be a finite number >= 0")
	}
	if r.Burst < 0 {
		p.add(path+".burst", "must be >= 0")
	}
}

// parsePrefix reads a CIDR, or one address as a prefix of its own.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// JRPCEdge is the edge's configuration for jrpc.NewServer, with limiter
// keeping the rate-limit state (nil: in this process).
func (c *Config) JRPCEdge(limiter jrpc.Limiter) jrpc.Edge {
	e := jrpc.Edge{
		KeyHeader:  c.Auth.Header,
		Methods:    jrpc.MethodPolicy{Enable: c.Methods.Enable, Block: c.Methods.Block},
		IPRate:     c.RateLimits.IP.rate(),
		KeyRate:    c.RateLimits.Key.rate(),
		Limiter:    limiter,
		FailClosed: c.RateLimits.OnRedisError == "closed",
	}
	for _, k := range c.Auth.Keys {
		e.Keys = append(e.Keys, jrpc.APIKey{
			Name:     k.Name,
			Secret:   k.Key,
			Chains:   k.Chains,
			Methods:  k.Methods,
			Enable:   k.Enable,
			Rate:     k.RateLimit.rate(),
			IPExempt: k.IPExempt,
		})
	}
	for _, s := range c.TrustedProxies {
		if p, err := parsePrefix(s); err == nil { // Validate reported the rest
			e.TrustedProxies = append(e.TrustedProxies, p)
		}
	}
	return e
}

// JRPCCORS is the cors section for jrpc.NewServer.
func (c *Config) JRPCCORS() jrpc.CORS {
	return jrpc.CORS{AllowedOrigins: c.CORS.AllowedOrigins, AllowedHeaders: c.CORS.AllowedHeaders, MaxAge: c.CORS.MaxAge}
}

// rateLimited reports whether any rate limit is configured.
func (c *Config) rateLimited() bool {
	if c.RateLimits.IP.RPS > 0 || c.RateLimits.Key.RPS > 0 {
		return true
	}
	for _, k := range c.Auth.Keys {
		if k.RateLimit.RPS > 0 {
			return true
		}
	}
	return false
}

func (r RateLimitConfig) rate() jrpc.Rate { return jrpc.Rate{PerSecond: r.RPS, Burst: r.Burst} }
