package edge

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"strings"
	"time"
)

// Config is the edge's part of venn's configuration file, and its YAML
// schema: the top-level sections auth, methods, rate_limits,
// trusted_proxies and cors. Key values never appear in a message: keys
// are named.
type Config struct {
	Auth    AuthConfig   `yaml:"auth"`
	Methods MethodPolicy `yaml:"methods"`
	// RateLimits are shared through Redis when the process has one (see
	// NewRedisLimiter), per process otherwise.
	RateLimits RateLimits `yaml:"rate_limits"`
	// TrustedProxies are addresses or CIDRs whose X-Forwarded-For and
	// X-Real-IP name the client; any other peer is the client itself.
	TrustedProxies []string `yaml:"trusted_proxies"`
	CORS           CORS     `yaml:"cors"`
	// Tenants are the teams or customers venn serves, each with its
	// scopes and budgets (tenants.go); keys and JWTs name them.
	Tenants []Tenant `yaml:"tenants"`
	// Credits price calls against the tenants' budgets (credits.go).
	Credits CreditsConfig `yaml:"credits"`
}

// Defaults of the edge's sections.
const (
	// DefaultKeyHeader carries an API key unless auth.header names another.
	DefaultKeyHeader = "X-Api-Key"
	// DefaultOnRedisError serves the calls a Redis limiter cannot decide.
	DefaultOnRedisError = RedisErrorOpen
	// DefaultCORSMaxAge is how long a browser may reuse a preflight answer.
	DefaultCORSMaxAge = 10 * time.Minute
	// minKeyLength keeps guessable keys out: a key is all that stands
	// between the internet and the providers venn pays for.
	minKeyLength = 16
)

// AuthConfig is the auth section: API keys. Without keys venn is open.
type AuthConfig struct {
	// Header carries a key (default X-Api-Key); with "Authorization" the
	// key follows "Bearer ". A key may instead be the path's second
	// segment: /CHAIN/KEY.
	Header string `yaml:"header"`
	// Keys, when there are any, are required: a request without a valid
	// one gets HTTP 401 and CodeUnauthorized.
	Keys []APIKey `yaml:"keys"`
	// JWT authenticates bearer tokens whose claim names a tenant (jwt.go).
	JWT JWTConfig `yaml:"jwt"`
	// Redis adds the tenants and keys an operator keeps in Redis
	// (stored.go) to those of the file, on every replica.
	Redis StoredScopes `yaml:"redis"`
}

// APIKey is one client's key. Key is a secret: give it as ${ENV}.
type APIKey struct {
	// Name stands for the key in logs and rate-limit state; the key itself
	// is never shown, logged or stored.
	Name string `yaml:"name"`
	Key  string `yaml:"key"`
	// KeySHA256 may stand for Key: the key's SHA-256 in hex, so that the
	// secret itself is kept nowhere venn reads (keys kept in Redis are
	// always stored so).
	KeySHA256 string `yaml:"key_sha256"`
	// Chains the key may use; empty: all.
	Chains []string `yaml:"chains"`
	// Methods the key may call; empty: any the blocklist lets through.
	// Entries ending in "_" or "*" are prefixes.
	Methods []string `yaml:"methods"`
	// Enable lets the key call these blocked methods (same prefix rule);
	// methods.block still wins.
	Enable []string `yaml:"enable"`
	// RateLimit limits the key's calls across every chain and address;
	// zero: rate_limits.key.
	RateLimit Rate `yaml:"rate_limit"`
	// IPExempt: the key's calls are not limited per address (a back end
	// behind one address).
	IPExempt bool `yaml:"ip_exempt"`
	// Tenant names the tenant the key belongs to: its calls are checked
	// against the tenant's scopes too, and counted against its budgets
	// and usage.
	Tenant string `yaml:"tenant"`
	// Block refuses these methods to the key (same prefix rule).
	Block []string `yaml:"block"`
	// Contracts, CIDRs and CORS scope the key as a tenant's are scoped
	// (Tenant).
	Contracts []string `yaml:"contracts"`
	CIDRs     []string `yaml:"cidrs"`
	CORS      []string `yaml:"cors"`
}

// MethodPolicy is the methods section: it adjusts the blocklist every
// caller gets (DefaultBlockedMethods). Entries ending in "_" or "*" are
// prefixes ("debug_trace*"); others are exact.
type MethodPolicy struct {
	// Enable lets everyone call these otherwise blocked methods.
	Enable []string `yaml:"enable"`
	// Block refuses these methods to everyone, whatever Enable or a key's
	// Enable say.
	Block []string `yaml:"block"`
}

// RateLimits is the rate_limits section.
type RateLimits struct {
	// IP limits the calls from each client address (IPv6: each /64).
	IP Rate `yaml:"ip"`
	// Key limits the calls of each key that has no rate_limit of its own.
	Key Rate `yaml:"key"`
	// OnRedisError is what happens to the calls a Redis limiter cannot
	// decide (Redis down): open serves them, closed refuses them with
	// CodeRateLimited and HTTP 503.
	OnRedisError RedisErrorPolicy `yaml:"on_redis_error"`
	// RedisTimeout bounds one decision.
	RedisTimeout time.Duration `yaml:"redis_timeout"`
}

// RedisErrorPolicy is rate_limits.on_redis_error: what happens to the
// calls a Redis limiter cannot decide.
type RedisErrorPolicy string

const (
	RedisErrorOpen   RedisErrorPolicy = "open"   // served, unlimited
	RedisErrorClosed RedisErrorPolicy = "closed" // refused, HTTP 503
)

// UnmarshalText accepts open and closed; "" takes the default.
func (r *RedisErrorPolicy) UnmarshalText(b []byte) error {
	switch v := RedisErrorPolicy(b); v {
	case "", RedisErrorOpen, RedisErrorClosed:
		*r = v
		return nil
	}
	return fmt.Errorf("must be open or closed, not %q", b)
}

// CORS is the cors section. It lets browser pages on other origins call
// venn. venn authenticates by API key, never by cookie, so it never allows
// credentials; what CORS guards against here is a page a user visits
// reading from a venn the user can reach (on localhost or an internal
// network) and the page cannot. So the default allows no origin, as geth
// does.
type CORS struct {
	// AllowedOrigins may call from a browser: "*" (any),
	// "https://app.example.com", or "https://*.example.com" for that
	// domain's subdomains. Empty: browsers get no CORS headers, and a
	// WebSocket upgrade with an Origin header is refused.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// AllowedHeaders may be sent besides Content-Type and the key header.
	AllowedHeaders []string `yaml:"allowed_headers"`
	// MaxAge is how long a preflight answer may be cached.
	MaxAge time.Duration `yaml:"max_age"`
}

// WithDefaults returns c with every zero field at its documented default.
// It is the only place the edge's defaults are decided.
func (c Config) WithDefaults() Config {
	if c.Auth.Header == "" {
		c.Auth.Header = DefaultKeyHeader
	}
	keys := make([]APIKey, len(c.Auth.Keys))
	for i, k := range c.Auth.Keys {
		k.RateLimit = k.RateLimit.withBurst()
		keys[i] = k
	}
	if c.Auth.Keys != nil {
		c.Auth.Keys = keys
	}
	c.RateLimits.IP = c.RateLimits.IP.withBurst()
	c.RateLimits.Key = c.RateLimits.Key.withBurst()
	if c.RateLimits.OnRedisError == "" {
		c.RateLimits.OnRedisError = DefaultOnRedisError
	}
	if c.RateLimits.RedisTimeout == 0 {
		c.RateLimits.RedisTimeout = DefaultRedisLimitTimeout
	}
	if c.CORS.MaxAge == 0 {
		c.CORS.MaxAge = DefaultCORSMaxAge
	}
	c.Auth.JWT = c.Auth.JWT.withDefaults()
	c.Auth.Redis = c.Auth.Redis.withDefaults()
	c.Credits = c.Credits.withDefaults()
	if c.Tenants != nil {
		ts := make([]Tenant, len(c.Tenants))
		for i, t := range c.Tenants {
			t.RateLimit = t.RateLimit.withBurst()
			ts[i] = t
		}
		c.Tenants = ts
	}
	return c
}

// withBurst gives a rate without a burst max(1, ceil(rps)).
func (r Rate) withBurst() Rate {
	if r.RPS > 0 && r.Burst == 0 {
		r.Burst = r.burst()
	}
	return r
}

// RateLimited reports whether any rate limit is configured: only then is
// a Limiter needed.
func (c Config) RateLimited() bool {
	if c.RateLimits.IP.Limited() || c.RateLimits.Key.Limited() {
		return true
	}
	for _, k := range c.Auth.Keys {
		if k.RateLimit.Limited() {
			return true
		}
	}
	for _, t := range c.Tenants {
		if t.RateLimit.Limited() {
			return true
		}
	}
	return false
}

var (
	keyNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
	// originRE is scheme://host[:port], host possibly "*.domain".
	originRE     = regexp.MustCompile(`^[a-z][a-z0-9+.-]*://(\*\.)?[^/*?#\s@]+$`)
	headerNameRE = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// Validate reports every problem of an already defaulted c, each naming
// its field path as the file spells it (auth.keys[0].name). chains are the
// configured chain names, which a key's chains must be among. Key values
// are never quoted.
func (c Config) Validate(chains []string) error {
	var p problems
	if !headerNameRE.MatchString(c.Auth.Header) {
		p.add("auth.header", "%q is not a valid header name", c.Auth.Header)
	}
	known := make(map[string]bool, len(chains))
	for _, ch := range chains {
		known[ch] = true
	}
	c.validateKeys(&p, known)
	c.validateTenants(&p, known)
	c.Auth.JWT.validate(&p, len(c.Tenants) > 0 || c.Auth.Redis.Enabled)
	c.Auth.Redis.validate(&p)
	c.Credits.validate(&p)
	checkMethodList(&p, "methods.enable", c.Methods.Enable)
	checkMethodList(&p, "methods.block", c.Methods.Block)
	c.RateLimits.validate(&p)
	for i, s := range c.TrustedProxies {
		if _, err := parsePrefix(s); err != nil {
			p.add(fmt.Sprintf("trusted_proxies[%d]", i), "must be an address or a CIDR (10.0.0.0/8), not %q", s)
		}
	}
	c.CORS.validate(&p)
	return errors.Join(p...)
}

func (c Config) validateKeys(p *problems, chains map[string]bool) {
	names := make(map[string]int, len(c.Auth.Keys))
	secrets := make(map[[sha256.Size]byte]int, len(c.Auth.Keys))
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
		checkSecret(p, path, k, secrets, i)
		for j, ch := range k.Chains {
			if !chains[ch] {
				p.add(fmt.Sprintf("%s.chains[%d]", path, j), "%q is not a configured chain", ch)
			}
		}
		checkMethodList(p, path+".methods", k.Methods)
		checkMethodList(p, path+".enable", k.Enable)
		k.RateLimit.validate(p, path+".rate_limit")
		checkMethodList(p, path+".block", k.Block)
		checkContracts(p, path+".contracts", k.Contracts)
		checkCIDRs(p, path+".cidrs", k.CIDRs)
		checkOrigins(p, path+".cors", k.CORS)
		if k.Tenant != "" && !c.hasTenant(k.Tenant) {
			p.add(path+".tenant", "%q is not among tenants", k.Tenant)
		}
	}
}

// checkSecret checks key i's key or key_sha256, and that no key before
// it (in secrets, by hash) is the same.
func checkSecret(p *problems, path string, k APIKey, secrets map[[sha256.Size]byte]int, i int) {
	switch {
	case k.Key == "" && k.KeySHA256 == "":
		p.add(path+".key", "required")
		return
	case k.Key != "" && k.KeySHA256 != "":
		p.add(path+".key_sha256", "give key or key_sha256, not both")
		return
	case k.KeySHA256 != "":
		if _, ok := keyHash(k); !ok {
			p.add(path+".key_sha256", "must be 64 hex digits (the key's SHA-256)")
			return
		}
	case len(k.Key) < minKeyLength:
		p.add(path+".key", "must be at least %d characters", minKeyLength)
		return
	case strings.ContainsFunc(k.Key, func(r rune) bool { return r <= ' ' || r >= 0x7f || strings.ContainsRune("/?#%", r) }):
		p.add(path+".key", "must be printable ASCII without spaces, /, ?, # or %% (keys also travel in the path)")
		return
	}
	h, _ := keyHash(k)
	if first, dup := secrets[h]; dup {
		p.add(path+".key", "is the same key as auth.keys[%d]", first)
		return
	}
	secrets[h] = i
}

// keyHash is the SHA-256 a request's key must hash to to be k.
func keyHash(k APIKey) ([sha256.Size]byte, bool) {
	var h [sha256.Size]byte
	if k.KeySHA256 == "" {
		return sha256.Sum256([]byte(k.Key)), k.Key != ""
	}
	if len(k.KeySHA256) != 2*sha256.Size {
		return h, false
	}
	_, err := hex.Decode(h[:], []byte(k.KeySHA256))
	return h, err == nil
}

func (r RateLimits) validate(p *problems) {
	r.IP.validate(p, "rate_limits.ip")
	r.Key.validate(p, "rate_limits.key")
	// Parse has checked what it decoded; a Config built in code has not.
	if err := new(RedisErrorPolicy).UnmarshalText([]byte(r.OnRedisError)); err != nil || r.OnRedisError == "" {
		p.add("rate_limits.on_redis_error", "must be open or closed, not %q", r.OnRedisError)
	}
	if r.RedisTimeout < 0 {
		p.add("rate_limits.redis_timeout", "must be positive")
	}
}

func (c CORS) validate(p *problems) {
	checkOrigins(p, "cors.allowed_origins", c.AllowedOrigins)
	for i, h := range c.AllowedHeaders {
		if !headerNameRE.MatchString(h) {
			p.add(fmt.Sprintf("cors.allowed_headers[%d]", i), "%q is not a valid header name", h)
		}
	}
	if c.MaxAge < 0 {
		p.add("cors.max_age", "must be positive")
	}
}

func checkOrigins(p *problems, path string, list []string) {
	for i, o := range list {
		if o != "*" && !originRE.MatchString(strings.ToLower(strings.TrimSuffix(o, "/"))) {
			p.add(fmt.Sprintf("%s[%d]", path, i),
				"must be *, an origin (https://app.example.com) or https://*.example.com, not %q", o)
		}
	}
}

func checkMethodList(p *problems, path string, list []string) {
	for i, m := range list {
		if strings.TrimSpace(m) == "" || strings.ContainsAny(m, " \t\r\n") {
			p.add(fmt.Sprintf("%s[%d]", path, i), "must be a method name or prefix, not %q", m)
		}
	}
}

func (r Rate) validate(p *problems, path string) {
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
