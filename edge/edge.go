// Package edge decides who may call what, and how often, before a call
// reaches a chain: API keys (auth), the method blocklist and per-key
// allowlists (methods.go), rate limits per key and per client address in
// memory or Redis (ratelimit.go, redis.go), the client's address behind
// trusted proxies (clientip.go) and CORS (cors.go). An *Edge is the
// jrpc.Gate of venn's JSON-RPC server, and Wrap puts CORS around the
// server's handler. It knows the wire only through jrpc's Gate; it knows
// no chain, router or upstream.
//
// With nothing configured a request pays one map lookup and each call the
// method blocklist.
package edge

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/jrpc"
)

// Options are what an Edge needs besides its Config.
type Options struct {
	// Limiter keeps the rate-limit buckets; nil keeps them in this
	// process.
	Limiter Limiter
	// JWKS holds the keys of auth.jwt.jwks_url; its owner starts and
	// stops it. nil with a jwks_url: the edge makes one that fetches on
	// demand (a token with an unknown key ID), never periodically.
	JWKS *JWKS
	// Clock times tokens; nil: time.Now.
	Clock func() time.Time
	// Budgets count tenants' credits; nil: counted in this process.
	Budgets *Budgets
	// Usage keeps what tenants' calls cost; nil: none kept.
	Usage UsageSink
	// Logger gets refusals (debug) and limiter failures; nil discards.
	Logger *slog.Logger
	// Registerer gets venn_auth_rejections_total,
	// venn_ratelimit_rejections_total and
	// venn_ratelimit_redis_errors_total; nil records none.
	Registerer prometheus.Registerer
}

// Edge is a Config ready to use: the jrpc.Gate of the JSON-RPC server.
type Edge struct {
	keyHeader     string
	bearer        bool                          // keyHeader is Authorization
	keys          map[[sha256.Size]byte]*apiKey // by the key's hash; nil: none
	tenants       map[string]*tenant            // by name
	jwt           *jwtVerifier                  // nil: no bearer tokens
	jwks          *JWKS                         // the verifier's, kept across reloads
	clock         func() time.Time              // times tokens; nil: time.Now
	budgets       *Budgets                      // never nil
	usage         UsageSink                     // nil: none kept
	pricing       *pricing
	creditMetrics *creditMetrics
	authed        bool  // keys or tokens are required
	stored        bool  // keys and tenants are kept in Redis too (auth.redis)
	scopedCORS    bool  // some key or tenant has origins of its own
	baseCORS      *cors // the cors section's alone
	methods       MethodPolicy
	ipRate        Rate
	limiter       Limiter // nil: no rate limit
	store         Limiter // the Options' Limiter; nil: memory
	failClosed    bool
	trusted       []netip.Prefix
	needIP        bool  // the client's address is worked out (rate limits, proxies)
	cors          *cors // nil: no origin allowed

	log        *slog.Logger
	metrics    *metrics
	chains     chains
	limiterLog everyLog
}

var _ jrpc.Gate = (*Edge)(nil)

// apiKey is an APIKey ready to check.
type apiKey struct {
	scope    // its rate is its own, or rate_limits.key; its bucket "key:NAME"
	name     string
	ipExempt bool
	tenant   *tenant // nil: none
	callers  callers
	meter    meterSlots // without a tenant
}

// New compiles c, which Validate has passed, with its defaults applied
// here. It does no I/O.
func New(c Config, opts Options) *Edge {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := newMetrics(opts.Registerer)
	if m != nil {
		m.credit = newCreditMetrics(opts.Registerer)
	}
	budgets := opts.Budgets
	if budgets == nil {
		budgets = NewBudgets(BudgetsOptions{Clock: opts.Clock})
	}
	return compile(c, compileDeps{store: opts.Limiter, jwks: opts.JWKS, clock: opts.Clock, budgets: budgets, usage: opts.Usage}, log, m)
}

// compileDeps are what an Edge shares with the one it replaces on reload.
type compileDeps struct {
	store   Limiter
	jwks    *JWKS
	clock   func() time.Time
	budgets *Budgets
	usage   UsageSink
}

// compile builds the Edge of c over a rate-limit store (nil: memory).
func compile(c Config, d compileDeps, log *slog.Logger, m *metrics) *Edge {
	c = c.WithDefaults()
	store, jwks, clock := d.store, d.jwks, d.clock
	e := &Edge{
		keyHeader:  http.CanonicalHeaderKey(c.Auth.Header),
		methods:    c.Methods,
		ipRate:     c.RateLimits.IP,
		store:      store,
		limiter:    store,
		failClosed: c.RateLimits.OnRedisError == RedisErrorClosed,
		clock:      clock,
		budgets:    d.budgets,
		usage:      d.usage,
		pricing:    newPricing(c.Credits),
		log:        log,
		metrics:    m,
	}
	e.bearer = e.keyHeader == "Authorization"
	for _, s := range c.TrustedProxies {
		if p, err := parsePrefix(s); err == nil { // Validate reported the rest
			e.trusted = append(e.trusted, p)
		}
	}
	if m != nil {
		e.creditMetrics = m.credit
	}
	e.compileTenants(c)
	e.compileKeys(c)
	if j := c.Auth.JWT; j.Enabled() {
		if j.JWKSURL != "" && (jwks == nil || jwks.URL() != j.JWKSURL) {
			jwks = NewJWKS(j.JWKSURL, JWKSOptions{Refresh: j.JWKSRefresh, MinRefresh: j.JWKSMinRefresh, Logger: log})
		}
		if j.JWKSURL == "" {
			jwks = nil
		}
		e.jwks = jwks
		e.jwt = newJWTVerifier(j, jwks, e.tenants, clock)
	}
	e.stored = c.Auth.Redis.Enabled
	e.authed = e.keys != nil || e.jwt != nil || e.stored
	if !c.RateLimited() {
		e.limiter = nil
	} else if e.limiter == nil {
		e.limiter = NewMemoryLimiter(nil)
	}
	e.needIP = c.RateLimits.IP.Limited() || len(e.trusted) > 0 || scopesNeedIP(c)
	e.baseCORS = newCORS(c.CORS, e.keyHeader)
	e.cors = e.baseCORS
	if all := scopedOrigins(c); len(all) > 0 {
		e.scopedCORS = true
		union := c.CORS
		union.AllowedOrigins = append(append([]string(nil), c.CORS.AllowedOrigins...), all...)
		e.cors = newCORS(union, e.keyHeader)
	}
	return e
}

// compileKeys indexes c's keys by their hash.
func (e *Edge) compileKeys(c Config) {
	for _, k := range c.Auth.Keys {
		h, ok := keyHash(k)
		if !ok {
			continue // never matched by a request without a key
		}
		ak := &apiKey{
			scope: scope{kind: scopeOfKey, allow: allowList(k.Methods), block: k.Block, enable: k.Enable,
				rate: k.RateLimit, bucket: "key:" + k.Name},
			name:     k.Name,
			ipExempt: k.IPExempt,
			tenant:   e.tenants[k.Tenant],
		}
		ak.meter.account = k.Name
		if !ak.rate.Limited() {
			ak.rate = c.RateLimits.Key
		}
		ak.setChains(k.Chains)
		_ = ak.setContracts(k.Contracts) // Validate reported bad ones
		ak.setCIDRs(k.CIDRs)
		ak.setOrigins(k.CORS, e.keyHeader)
		if e.keys == nil {
			e.keys = make(map[[sha256.Size]byte]*apiKey, len(c.Auth.Keys))
		}
		e.keys[h] = ak
	}
}

// Wrap puts CORS around next, the JSON-RPC server's handler: preflights
// are answered here, and answers to allowed origins marked.
func (e *Edge) Wrap(next http.Handler) http.Handler { return e.cors.wrap(next) }

// KeysInPath implements jrpc.Gate: with keys (or keys kept in Redis), a
// key may be the path's second segment (never a token).
func (e *Edge) KeysInPath() bool { return e.keys != nil || e.stored }

// client is who sends a request, as the edge sees it; worked out once per
// HTTP request or WebSocket connection.
type client struct {
	e      *Edge
	ch     *chainEdge
	key    *apiKey    // nil without keys, or with a token
	tenant *tenant    // the key's or the token's; nil: none
	ip     netip.Addr // invalid unless Edge.needIP
	scopes []*scope   // every scope the caller is held to: key, tenant, token
	scBuf  [3]*scope
	// admitted is set once a request without an Origin passed
	// admitScoped: a shared client's (callers) chain, scopes and address
	// never change, so the next such request passes too.
	admitted atomic.Bool
}

var _ jrpc.Caller = (*client)(nil)

// authReason labels venn_auth_rejections_total.
type authReason uint8

const (
	authMissingKey authReason = iota
	authInvalidKey
	authChain   // the key may not use the chain
	authMethod  // the method is not on the key's allowlist
	authBlocked // the method is on the blocklist
	authOrigin  // a WebSocket upgrade from a browser origin CORS does not allow
	authToken   // a bearer token that does not verify
	authTenant  // a token naming no configured tenant
	authAddress // a client address outside the scope's cidrs
	authContract
	numAuthReasons
)

func (r authReason) String() string {
	switch r {
	case authMissingKey:
		return "missing_key"
	case authInvalidKey:
		return "invalid_key"
	case authChain:
		return "chain_not_allowed"
	case authMethod:
		return "method_not_allowed"
	case authBlocked:
		return "method_blocked"
	case authToken:
		return "invalid_token"
	case authTenant:
		return "unknown_tenant"
	case authAddress:
		return "address_not_allowed"
	case authContract:
		return "contract_not_allowed"
	default:
		return "origin"
	}
}

// Admit implements jrpc.Gate: it works out the client of r on a.Chain, or
// refuses r (HTTP 401 or 403). It reads no body.
func (e *Edge) Admit(r *http.Request, a jrpc.Admission) (jrpc.Caller, *jrpc.Refusal) {
	ch := e.chain(a.Chain)
	// An origin decides only a WebSocket upgrade, or a request of a scope
	// with origins of its own: other requests do not look it up.
	var origin string
	if a.Transport == jrpc.TransportWS || e.scopedCORS {
		origin = headerValue(r.Header, "Origin")
	}
	if !e.authed {
		// Browsers send Origin on every upgrade, and WebSocket has no
		// preflight: the upgrade itself must be refused to an origin CORS
		// does not allow. Other clients send none.
		if a.Transport == jrpc.TransportWS && origin != "" && !e.baseCORS.allows(origin) {
			ch.authRejected(authOrigin)
			return nil, &jrpc.Refusal{Status: http.StatusForbidden, Err: errOriginNotAllowed()}
		}
		if !e.needIP {
			return &ch.open, nil
		}
		return &client{e: e, ch: ch, ip: e.clientIP(r)}, nil
	}
	// Without keys a request is a token's, or refused: the key header is
	// read only to say why.
	keyed := e.keys != nil || e.stored
	var (
		k      *apiKey
		reason authReason
	)
	if keyed {
		k, reason = e.authenticate(r, a.PathKey)
	}
	if k == nil && e.jwt != nil && a.PathKey == "" {
		if tok := bearerToken(r); tok != "" {
			vt, tr := e.jwt.verify(r.Context(), tok)
			if tr != tokenOK {
				reason = authToken
				if tr == tokenUnknownTenant || tr == tokenNoTenant {
					reason = authTenant
				}
				return nil, e.refuse(r, ch, a.Chain, reason, http.StatusUnauthorized, errToken(tr), "")
			}
			return e.admitScoped(r, a, e.tokenClient(r, ch, vt), origin)
		}
	}
	if !keyed {
		k, reason = e.authenticate(r, a.PathKey)
	}
	if k == nil {
		err := errUnauthorized(reason, a.Chain, e.keyHeader)
		if e.jwt != nil && reason == authMissingKey {
			err = errUnauthorizedJWT(e.keys != nil, e.keyHeader)
		}
		return nil, e.refuse(r, ch, a.Chain, reason, http.StatusUnauthorized, err, "")
	}
	return e.admitScoped(r, a, e.keyClient(r, ch, k), origin)
}

// keyClient is the client of key k on ch: k's own for the chain unless
// the request's address is worked out.
func (e *Edge) keyClient(r *http.Request, ch *chainEdge, k *apiKey) *client {
	if !e.needIP {
		if cl := k.callers.get(ch); cl != nil {
			return cl
		}
	}
	cl := &client{e: e, ch: ch, key: k}
	cl.addScope(&k.scope)
	if k.tenant != nil {
		cl.tenant = k.tenant
		cl.addScope(&k.tenant.scope)
	}
	if e.needIP {
		cl.ip = e.clientIP(r)
		return cl
	}
	return k.callers.add(cl)
}

// tokenClient is the client of verified token vt on ch: vt's own for
// the chain unless the request's address is worked out.
func (e *Edge) tokenClient(r *http.Request, ch *chainEdge, vt *verifiedToken) *client {
	if !e.needIP {
		if cl := vt.callers.get(ch); cl != nil {
			return cl
		}
	}
	cl := &client{e: e, ch: ch, tenant: vt.tenant}
	cl.addScope(&vt.tenant.scope)
	if vt.scope != nil {
		cl.addScope(vt.scope)
	}
	if e.needIP {
		cl.ip = e.clientIP(r)
		return cl
	}
	return vt.callers.add(cl)
}

// callers are the clients of one key or verified token, one per chain.
// When the edge works out nothing per request (no client address), a
// key's or token's client on a chain is the same for each of its
// requests, and is never changed once made: it is made on the chain's
// first request and shared, so that a request allocates none. Readers
// load the list lock-free; a new chain copies it.
type callers struct {
	mu   sync.Mutex
	list atomic.Pointer[[]*client]
}

// get returns the client on ch; nil before ch's first request.
func (cs *callers) get(ch *chainEdge) *client {
	if l := cs.list.Load(); l != nil {
		for _, cl := range *l {
			if cl.ch == ch {
				return cl
			}
		}
	}
	return nil
}

// add keeps cl as the client on its chain, unless a concurrent first
// request kept one already: the one kept.
func (cs *callers) add(cl *client) *client {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if have := cs.get(cl.ch); have != nil {
		return have
	}
	var next []*client
	if l := cs.list.Load(); l != nil {
		next = append(next, *l...)
	}
	next = append(next, cl)
	cs.list.Store(&next)
	return cl
}

func (cl *client) addScope(s *scope) {
	if cl.scopes == nil {
		cl.scopes = cl.scBuf[:0]
	}
	cl.scopes = append(cl.scopes, s)
}

// admitScoped checks an authenticated client's chain, address and origin
// against each of its scopes.
func (e *Edge) admitScoped(r *http.Request, a jrpc.Admission, cl *client, origin string) (jrpc.Caller, *jrpc.Refusal) {
	if origin == "" && cl.admitted.Load() {
		return cl, nil
	}
	var base bool // the cors section decides the origin
	if origin != "" {
		base = true
	}
	for _, s := range cl.scopes {
		if s.chains != nil && !s.chains[a.Chain] {
			if s.kind == scopeOfKey {
				return nil, e.refuse(r, cl.ch, a.Chain, authChain, http.StatusForbidden,
					errUnauthorized(authChain, a.Chain, e.keyHeader), cl.keyName())
			}
			return nil, e.refuse(r, cl.ch, a.Chain, authChain, http.StatusForbidden, errScopeChain(s, a.Chain), cl.keyName())
		}
		if !s.allowsAddr(cl.ip) {
			return nil, e.refuse(r, cl.ch, a.Chain, authAddress, http.StatusForbidden, errScopeAddr(s), cl.keyName())
		}
		if origin != "" && s.origins != nil {
			base = false
			if !s.origins.allows(origin) {
				return nil, e.refuse(r, cl.ch, a.Chain, authOrigin, http.StatusForbidden, errScopeOrigin(s), cl.keyName())
			}
		}
	}
	// Browsers send Origin on every upgrade, and WebSocket has no
	// preflight: the upgrade itself must be refused to an origin CORS does
	// not allow. Over HTTP the browser enforces CORS, except where a
	// scope's origins widened the headers every answer gets.
	if base && (a.Transport == jrpc.TransportWS || e.scopedCORS) && !e.baseCORS.allows(origin) {
		return nil, e.refuse(r, cl.ch, a.Chain, authOrigin, http.StatusForbidden, errOriginNotAllowed(), cl.keyName())
	}
	if origin == "" && !e.needIP {
		cl.admitted.Store(true)
	}
	return cl, nil
}

// refuse counts and (at debug) logs a refused request, and answers it; a
// quiet admission (Permitted) is neither counted nor logged.
func (e *Edge) refuse(r *http.Request, ch *chainEdge, chain string, reason authReason, status int, err *jrpc.Error, key string) *jrpc.Refusal {
	if r.Context().Value(quietAdmission{}) != nil {
		return &jrpc.Refusal{Status: status, Err: err}
	}
	ch.authRejected(reason)
	if e.log.Enabled(r.Context(), slog.LevelDebug) {
		attrs := []slog.Attr{slog.String("chain", chain), slog.String("reason", reason.String()),
			slog.String("remote_addr", r.RemoteAddr)}
		if key != "" {
			attrs = append(attrs, slog.String("key", key))
		}
		e.log.LogAttrs(r.Context(), slog.LevelDebug, "request refused", attrs...)
	}
	return &jrpc.Refusal{Status: status, Err: err}
}

func (cl *client) keyName() string {
	if cl.key != nil {
		return cl.key.name
	}
	return ""
}

// headerValue is h.Get(k) for k already in canonical form (a constant, or
// the key header, canonicalized once): the same answer, since net/http
// (and nats's headers) store keys canonical, without canonicalizing k
// again on every request.
func headerValue(h http.Header, k string) string {
	if v := h[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// bearerToken is the token of an Authorization: Bearer header; "" without.
func bearerToken(r *http.Request) string {
	h := headerValue(r.Header, "Authorization")
	if len(h) > 7 && isBearer(h[:7]) {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

// isBearer reports whether p is "bearer " in any case: the usual spelling
// is compared first, since EqualFold walks it rune by rune.
func isBearer(p string) bool { return p == "Bearer " || strings.EqualFold(p, "bearer ") }

// Tenant names the caller's tenant; "" without one.
func (cl *client) Tenant() string {
	if cl.tenant == nil {
		return ""
	}
	return cl.tenant.name
}

// Key implements jrpc.Caller.
func (cl *client) Key() string {
	if cl.key == nil {
		return ""
	}
	return cl.key.name
}

// ClientIP implements jrpc.Caller.
func (cl *client) ClientIP() netip.Addr { return cl.ip }

// Check implements jrpc.Caller: a method the caller may not call is
// answered as geth answers one it does not expose.
func (cl *client) Check(method string, params json.RawMessage) *jrpc.Error {
	if cl.scopes == nil {
		if reason, ok := cl.e.methods.checkScoped(method, nil); !ok {
			cl.ch.authRejected(reason)
			return errNoMethod(method)
		}
		return nil
	}
	if reason, ok := cl.e.methods.checkScoped(method, cl.scopes); !ok {
		cl.ch.authRejected(reason)
		return errNoMethod(method)
	}
	for _, s := range cl.scopes {
		if err := s.checkContracts(method, params); err != nil {
			cl.ch.authRejected(authContract)
			return err
		}
	}
	return nil
}

// authenticate finds the key r carries, in the path (/CHAIN/KEY, secret)
// or the key header. A request carrying two different keys is refused. Keys are
// looked up by their SHA-256, so the time a lookup takes says nothing about
// how much of a guess matched.
func (e *Edge) authenticate(r *http.Request, secret string) (*apiKey, authReason) {
	h := headerValue(r.Header, e.keyHeader)
	if e.bearer {
		if len(h) > 7 && isBearer(h[:7]) {
			h = strings.TrimSpace(h[7:])
		} else {
			h = ""
		}
	}
	switch {
	case secret == "" && h == "":
		return nil, authMissingKey
	case secret == "":
		secret = h
	case h != "" && h != secret:
		return nil, authInvalidKey
	}
	k := e.keys[sha256.Sum256([]byte(secret))]
	if k == nil {
		return nil, authInvalidKey
	}
	return k, 0
}

// limitScope labels venn_ratelimit_rejections_total: which bucket refused.
type limitScope uint8

const (
	limitKey limitScope = iota
	limitIP
	limitTenant
	numLimitScopes
)

func (s limitScope) String() string {
	switch s {
	case limitKey:
		return "key"
	case limitTenant:
		return "tenant"
	}
	return "ip"
}

// limiterLogEvery bounds how often a failing limiter is logged.
const limiterLogEvery = 10 * time.Second

// Take implements jrpc.Caller: it takes n calls of cl from its buckets,
// or says why not. A limiter that cannot decide (Redis down) lets the
// calls through, or refuses them when the edge fails closed.
func (cl *client) Take(ctx context.Context, n int) *jrpc.Refusal {
	e := cl.e
	if r := cl.overBudget(); r != nil {
		return r
	}
	if e.limiter == nil {
		return nil
	}
	var (
		buf    [3]Bucket
		scopes [3]limitScope
	)
	bs := buf[:0]
	if k := cl.key; k != nil && k.rate.Limited() {
		scopes[len(bs)] = limitKey
		bs = append(bs, Bucket{ID: k.bucket, Rate: k.rate})
	}
	if t := cl.tenant; t != nil && t.rate.Limited() {
		scopes[len(bs)] = limitTenant
		bs = append(bs, Bucket{ID: t.bucket, Rate: t.rate})
	}
	// A client whose address the transport cannot know (NATS: the
	// server's accounts decide who may publish) is limited by its key
	// alone, rather than every such client sharing one address bucket.
	if e.ipRate.Limited() && cl.ip.IsValid() && (cl.key == nil || !cl.key.ipExempt) {
		scopes[len(bs)] = limitIP
		bs = append(bs, Bucket{ID: jrpc.AddrBucket(cl.ip), Rate: e.ipRate})
	}
	if len(bs) == 0 {
		return nil
	}
	v, err := e.limiter.Take(ctx, n, bs)
	if err != nil {
		if ctx.Err() != nil {
			return nil // the client left; nothing will be answered
		}
		e.metrics.limiterFailed()
		if ok, suppressed := e.limiterLog.allow(time.Now(), limiterLogEvery); ok {
			action := "serving calls unlimited"
			if e.failClosed {
				action = "refusing calls"
			}
			e.log.LogAttrs(ctx, slog.LevelWarn, "rate limiter unavailable: "+action,
				slog.Any("err", err), slog.Int64("since_last_log", suppressed))
		}
		if e.failClosed {
			return &jrpc.Refusal{Status: http.StatusServiceUnavailable, RetryAfter: "1", Err: errRateLimitUnavailable()}
		}
		return nil
	}
	if v.OK {
		return nil
	}
	cl.ch.rateLimited(scopes[v.Refused])
	if v.RetryAfter == Never {
		return &jrpc.Refusal{Status: http.StatusTooManyRequests, Err: errOverBurst(n, bs[v.Refused].Rate.burst())}
	}
	secs := int64((v.RetryAfter + time.Second - 1) / time.Second) // round up: sooner would be refused
	return &jrpc.Refusal{Status: http.StatusTooManyRequests, RetryAfter: strconv.FormatInt(max(secs, 1), 10),
		Err: errRateLimited(v.RetryAfter)}
}

// everyLog lets one log line through per period and counts the others.
type everyLog struct {
	next       atomic.Int64 // unix ns
	suppressed atomic.Int64
}

// allow reports whether to log now, and how many were held back since the
// last line.
func (l *everyLog) allow(now time.Time, every time.Duration) (bool, int64) {
	next := l.next.Load()
	if now.UnixNano() < next || !l.next.CompareAndSwap(next, now.Add(every).UnixNano()) {
		l.suppressed.Add(1)
		return false, 0
	}
	return true, l.suppressed.Swap(0)
}
