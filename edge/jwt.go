package edge

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// JWTConfig is auth.jwt: bearer tokens signed by an issuer, verified with
// its keys from a JWKS URL (fetched, refreshed, rotations honoured) or with
// static public keys, and naming a tenant in a claim. The token comes as
// "Authorization: Bearer <jwt>", over HTTP and on the WebSocket upgrade.
type JWTConfig struct {
	// JWKSURL is the issuer's key set; with it and Keys both, a token may
	// be signed by either. A change takes effect on restart.
	JWKSURL string `yaml:"jwks_url"`
	// Keys are PEM files of static public keys (RSA, ECDSA, Ed25519).
	Keys []string `yaml:"keys"`
	// Algorithms are the signing algorithms accepted (default: every
	// asymmetric one, RS*, PS*, ES*, EdDSA). HMAC and none are never.
	Algorithms []string `yaml:"algorithms"`
	// Audience, when set, must be among the token's aud.
	Audience string `yaml:"audience"`
	// Issuer, when set, must be the token's iss.
	Issuer string `yaml:"issuer"`
	// TenantClaim names the claim that names the tenant (default
	// "tenant"); the tenant must be one of tenants.
	TenantClaim string `yaml:"tenant_claim"`
	// ScopeClaim names an optional claim, an object with chains, methods
	// and contracts, that narrows the tenant's scopes for this token
	// (default "venn"); it never widens them.
	ScopeClaim string `yaml:"scope_claim"`
	// Leeway allows for clocks that disagree, on exp and nbf (default 30s).
	Leeway time.Duration `yaml:"leeway"`
	// JWKSRefresh and JWKSMinRefresh: JWKSOptions.
	JWKSRefresh    time.Duration `yaml:"jwks_refresh"`
	JWKSMinRefresh time.Duration `yaml:"jwks_min_refresh"`
}

// Enabled reports whether bearer tokens are accepted.
func (c JWTConfig) Enabled() bool { return c.JWKSURL != "" || len(c.Keys) > 0 }

// Defaults of auth.jwt.
const (
	DefaultTenantClaim = "tenant"
	DefaultScopeClaim  = "venn"
	DefaultJWTLeeway   = 30 * time.Second
)

// asymmetricAlgorithms are the algorithms auth.jwt.algorithms may list.
var asymmetricAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

func (c JWTConfig) withDefaults() JWTConfig {
	if !c.Enabled() {
		return c
	}
	if len(c.Algorithms) == 0 {
		c.Algorithms = slices.Clone(asymmetricAlgorithms)
	}
	if c.TenantClaim == "" {
		c.TenantClaim = DefaultTenantClaim
	}
	if c.ScopeClaim == "" {
		c.ScopeClaim = DefaultScopeClaim
	}
	if c.Leeway == 0 {
		c.Leeway = DefaultJWTLeeway
	}
	if c.JWKSRefresh == 0 {
		c.JWKSRefresh = DefaultJWKSRefresh
	}
	if c.JWKSMinRefresh == 0 {
		c.JWKSMinRefresh = DefaultJWKSMinRefresh
	}
	return c
}

func (c JWTConfig) validate(p *problems, haveTenants bool) {
	if !c.Enabled() {
		for _, f := range []struct{ name, v string }{{"audience", c.Audience}, {"issuer", c.Issuer}} {
			if f.v != "" {
				p.add("auth.jwt."+f.name, "needs auth.jwt.jwks_url or auth.jwt.keys")
			}
		}
		return
	}
	if u := c.JWKSURL; u != "" && !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") {
		p.add("auth.jwt.jwks_url", "must be an http:// or https:// URL")
	}
	for i, a := range c.Algorithms {
		if !slices.Contains(asymmetricAlgorithms, a) {
			p.add(fmt.Sprintf("auth.jwt.algorithms[%d]", i), "must be one of %s, not %q", strings.Join(asymmetricAlgorithms, ", "), a)
		}
	}
	for i, f := range c.Keys {
		if _, err := readPublicKeys(f); err != nil {
			p.add(fmt.Sprintf("auth.jwt.keys[%d]", i), "%v", err)
		}
	}
	if !haveTenants {
		p.add("auth.jwt", "needs tenants: a token's %q claim names one", c.TenantClaim)
	}
	if c.Leeway < 0 || c.JWKSRefresh < 0 || c.JWKSMinRefresh < 0 {
		p.add("auth.jwt", "leeway, jwks_refresh and jwks_min_refresh must be positive")
	}
}

// readPublicKeys reads every public key (PUBLIC KEY, or a certificate's)
// of a PEM file.
func readPublicKeys(file string) ([]crypto.PublicKey, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read: %w", errors.Unwrap(err))
	}
	var keys []crypto.PublicKey
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		switch b.Type {
		case "PUBLIC KEY":
			k, err := x509.ParsePKIXPublicKey(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("parse public key: %w", err)
			}
			keys = append(keys, k)
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("parse certificate: %w", err)
			}
			keys = append(keys, c.PublicKey)
		case "RSA PUBLIC KEY":
			k, err := x509.ParsePKCS1PublicKey(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("parse RSA public key: %w", err)
			}
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("no PEM public key or certificate in it")
	}
	return keys, nil
}

// tokenReason is why a token was refused: a fixed set, for the refusal's
// message and venn_auth_rejections_total. Never the token.
type tokenReason uint8

const (
	tokenOK tokenReason = iota
	tokenMalformed
	tokenAlgorithm
	tokenSignature
	tokenUnknownKey
	tokenExpired
	tokenNotYetValid
	tokenAudience
	tokenIssuer
	tokenNoTenant
	tokenUnknownTenant
	tokenBadScope
)

func (r tokenReason) message() string {
	switch r {
	case tokenMalformed:
		return "the bearer token is not a well-formed JWT"
	case tokenAlgorithm:
		return "the token's signing algorithm is not allowed (auth.jwt.algorithms)"
	case tokenSignature:
		return "the token's signature does not verify"
	case tokenUnknownKey:
		return "the token's key is not among the issuer's keys"
	case tokenExpired:
		return "the token has expired"
	case tokenNotYetValid:
		return "the token is not valid yet (nbf)"
	case tokenAudience:
		return "the token's audience is not this gateway"
	case tokenIssuer:
		return "the token's issuer is not trusted"
	case tokenNoTenant:
		return "the token names no tenant"
	case tokenUnknownTenant:
		return "the token's tenant is not configured"
	case tokenBadScope:
		return "the token's scope claim is not an object of chains, methods and contracts"
	}
	return "invalid token"
}

// verifiedToken is a token that verified, cached until it expires or the
// key set changes.
type verifiedToken struct {
	tok     string
	tenant  *tenant
	scope   *scope // the token's own narrowing; nil: none
	exp     time.Time
	gen     uint64
	callers callers // its clients, once admitted
}

// maxVerifiedTokens bounds the cache of verified tokens; when full it is
// emptied (clients reuse a token for many calls, so it fills again with
// the ones in use).
const maxVerifiedTokens = 8192

// jwtVerifier checks bearer tokens: signature, algorithm, exp, nbf, aud,
// iss, then maps the tenant claim to a tenant. A verified token is cached,
// so a client's requests pay one map lookup and a comparison, not a
// signature check each.
type jwtVerifier struct {
	parser      *jwt.Parser
	algs        []string
	static      []crypto.PublicKey
	jwks        *JWKS // nil: static keys only
	tenantClaim string
	scopeClaim  string
	tenants     map[string]*tenant
	now         func() time.Time

	mu    sync.Mutex
	cache map[tokenKey]*verifiedToken
}

func newJWTVerifier(c JWTConfig, jwks *JWKS, tenants map[string]*tenant, now func() time.Time) *jwtVerifier {
	if now == nil {
		now = time.Now
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(c.Algorithms),
		jwt.WithLeeway(c.Leeway),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(now),
	}
	if c.Audience != "" {
		opts = append(opts, jwt.WithAudience(c.Audience))
	}
	if c.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(c.Issuer))
	}
	v := &jwtVerifier{
		parser:      jwt.NewParser(opts...),
		algs:        c.Algorithms,
		jwks:        jwks,
		tenantClaim: c.TenantClaim,
		scopeClaim:  c.ScopeClaim,
		tenants:     tenants,
		now:         now,
		cache:       make(map[tokenKey]*verifiedToken),
	}
	for _, f := range c.Keys {
		keys, _ := readPublicKeys(f) // Validate has read them
		v.static = append(v.static, keys...)
	}
	return v
}

// verify checks tok and returns its tenant and its own scope.
func (v *jwtVerifier) verify(ctx context.Context, tok string) (*verifiedToken, tokenReason) {
	now := v.now()
	gen := uint64(0)
	if v.jwks != nil {
		gen = v.jwks.Generation()
	}
	key := keyOf(tok)
	v.mu.Lock()
	vt := v.cache[key]
	v.mu.Unlock()
	if vt != nil && vt.tok == tok && vt.gen == gen && now.Before(vt.exp) {
		return vt, tokenOK
	}
	claims := jwt.MapClaims{}
	t, err := v.parser.ParseWithClaims(tok, claims, func(t *jwt.Token) (any, error) { return v.keys(ctx, t) })
	if err != nil {
		return nil, v.reason(t, err)
	}
	name, _ := claims[v.tenantClaim].(string)
	if name == "" {
		return nil, tokenNoTenant
	}
	tn := v.tenants[name]
	if tn == nil {
		return nil, tokenUnknownTenant
	}
	vt = &verifiedToken{tok: tok, tenant: tn, gen: gen}
	if raw, ok := claims[v.scopeClaim]; ok && raw != nil {
		sc, err := tokenScope(raw)
		if err != nil {
			return nil, tokenBadScope
		}
		vt.scope = sc
	}
	exp, _ := claims.GetExpirationTime() // required: the parser checked it
	vt.exp = exp.Time
	if v.jwks != nil && v.jwks.Generation() != gen {
		vt.gen = ^uint64(0) // the set changed while verifying: never reuse it
	}
	v.mu.Lock()
	if len(v.cache) >= maxVerifiedTokens {
		clear(v.cache)
	}
	v.cache[key] = vt
	v.mu.Unlock()
	return vt, tokenOK
}

// tokenKey keys the cache of verified tokens: a token's last bytes, the
// end of its signature, which no two tokens an issuer signed share. The
// entry holds the whole token, and a lookup compares it: a token that only
// ends alike is verified, and on success takes the entry's place. Hashing
// these few bytes rather than the whole token (hundreds of bytes) is most
// of what a client's cached token costs.
type tokenKey [16]byte

func keyOf(tok string) tokenKey {
	var k tokenKey
	copy(k[:], tok[max(len(tok)-len(k), 0):])
	return k
}

// keys are those t may be signed with: the key set's with t's kid, and
// the static keys.
func (v *jwtVerifier) keys(ctx context.Context, t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	var set jwt.VerificationKeySet
	for _, k := range v.static {
		set.Keys = append(set.Keys, k)
	}
	if v.jwks != nil {
		ks, err := v.jwks.lookup(ctx, kid)
		if err != nil && len(set.Keys) == 0 {
			return nil, err
		}
		for _, k := range ks {
			if k.Algorithm == "" || k.Algorithm == t.Method.Alg() {
				set.Keys = append(set.Keys, publicKey(k))
			}
		}
	}
	if len(set.Keys) == 0 {
		return nil, errUnknownKey
	}
	return set, nil
}

func (v *jwtVerifier) reason(t *jwt.Token, err error) tokenReason {
	switch {
	case t != nil && t.Method != nil && !slices.Contains(v.algs, t.Method.Alg()):
		return tokenAlgorithm
	case errors.Is(err, errUnknownKey):
		return tokenUnknownKey
	case errors.Is(err, jwt.ErrTokenMalformed):
		return tokenMalformed
	case errors.Is(err, jwt.ErrTokenExpired):
		return tokenExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return tokenNotYetValid
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return tokenAudience
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return tokenIssuer
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return tokenExpired // exp is the one required claim
	}
	return tokenSignature
}

// tokenScope reads a scope claim: {"chains": [...], "methods": [...],
// "contracts": [...]}, each optional.
func tokenScope(raw any) (*scope, error) {
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var c struct {
		Chains    []string `json:"chains"`
		Methods   []string `json:"methods"`
		Contracts []string `json:"contracts"`
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, err
	}
	sc := &scope{kind: scopeToken, allow: c.Methods}
	sc.setChains(c.Chains)
	if err := sc.setContracts(c.Contracts); err != nil {
		return nil, err
	}
	return sc, nil
}
