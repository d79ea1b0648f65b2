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
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
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
	// Logger gets refusals (debug) and limiter failures; nil discards.
	Logger *slog.Logger
	// Registerer gets venn_auth_rejections_total,
	// venn_ratelimit_rejections_total and
	// venn_ratelimit_redis_errors_total; nil records none.
	Registerer prometheus.Registerer
}

// Edge is a Config ready to use: the jrpc.Gate of the JSON-RPC server.
type Edge struct {
	keyHeader  string
	bearer     bool                          // keyHeader is Authorization
	keys       map[[sha256.Size]byte]*apiKey // by the key's hash; nil: open
	methods    MethodPolicy
	ipRate     Rate
	limiter    Limiter // nil: no rate limit
	store      Limiter // the Options' Limiter; nil: memory
	failClosed bool
	trusted    []netip.Prefix
	needIP     bool  // the client's address is worked out (rate limits, proxies)
	cors       *cors // nil: no origin allowed

	log        *slog.Logger
	metrics    *metrics
	chains     chains
	limiterLog everyLog
}

var _ jrpc.Gate = (*Edge)(nil)

// apiKey is an APIKey ready to check.
type apiKey struct {
	name     string
	chains   map[string]bool // nil: all
	allow    []string        // nil: all
	enable   []string
	rate     Rate // its own, or rate_limits.key
	ipExempt bool
	bucket   string // its rate-limit bucket: "key:NAME"
}

// New compiles c, which Validate has passed, with its defaults applied
// here. It does no I/O.
func New(c Config, opts Options) *Edge {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return compile(c, opts.Limiter, log, newMetrics(opts.Registerer))
}

// compile builds the Edge of c over a rate-limit store (nil: memory).
func compile(c Config, store Limiter, log *slog.Logger, m *metrics) *Edge {
	c = c.WithDefaults()
	e := &Edge{
		keyHeader:  http.CanonicalHeaderKey(c.Auth.Header),
		methods:    c.Methods,
		ipRate:     c.RateLimits.IP,
		store:      store,
		limiter:    store,
		failClosed: c.RateLimits.OnRedisError == RedisErrorClosed,
		log:        log,
		metrics:    m,
	}
	e.bearer = e.keyHeader == "Authorization"
	for _, s := range c.TrustedProxies {
		if p, err := parsePrefix(s); err == nil { // Validate reported the rest
			e.trusted = append(e.trusted, p)
		}
	}
	e.compileKeys(c)
	if !c.RateLimited() {
		e.limiter = nil
	} else if e.limiter == nil {
		e.limiter = NewMemoryLimiter(nil)
	}
	e.needIP = c.RateLimits.IP.Limited() || len(e.trusted) > 0
	e.cors = newCORS(c.CORS, e.keyHeader)
	return e
}

// compileKeys indexes c's keys by their hash.
func (e *Edge) compileKeys(c Config) {
	for _, k := range c.Auth.Keys {
		if k.Key == "" {
			continue // never matched by a request without a key
		}
		ak := &apiKey{
			name:     k.Name,
			allow:    k.Methods,
			enable:   k.Enable,
			rate:     k.RateLimit,
			ipExempt: k.IPExempt,
			bucket:   "key:" + k.Name,
		}
		if !ak.rate.Limited() {
			ak.rate = c.RateLimits.Key
		}
		if len(k.Chains) > 0 {
			ak.chains = make(map[string]bool, len(k.Chains))
			for _, ch := range k.Chains {
				ak.chains[ch] = true
			}
		}
		if e.keys == nil {
			e.keys = make(map[[sha256.Size]byte]*apiKey, len(c.Auth.Keys))
		}
		e.keys[sha256.Sum256([]byte(k.Key))] = ak
	}
}

// Wrap puts CORS around next, the JSON-RPC server's handler: preflights
// are answered here, and answers to allowed origins marked.
func (e *Edge) Wrap(next http.Handler) http.Handler { return e.cors.wrap(next) }

// KeysInPath implements jrpc.Gate: with keys, a key may be the path's
// second segment.
func (e *Edge) KeysInPath() bool { return e.keys != nil }

// client is who sends a request, as the edge sees it; worked out once per
// HTTP request or WebSocket connection.
type client struct {
	e   *Edge
	ch  *chainEdge
	key *apiKey    // nil without keys
	ip  netip.Addr // invalid unless Edge.needIP
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
	default:
		return "origin"
	}
}

// Admit implements jrpc.Gate: it works out the client of r on a.Chain, or
// refuses r (HTTP 401 or 403). It reads no body.
func (e *Edge) Admit(r *http.Request, a jrpc.Admission) (jrpc.Caller, *jrpc.Refusal) {
	ch := e.chain(a.Chain)
	// Browsers send Origin on every upgrade, and WebSocket has no
	// preflight: the upgrade itself must be refused to an origin CORS does
	// not allow. Other clients send none.
	if a.Transport == jrpc.TransportWS {
		if origin := r.Header.Get("Origin"); origin != "" && !e.cors.allows(origin) {
			ch.authRejected(authOrigin)
			return nil, &jrpc.Refusal{Status: http.StatusForbidden, Err: errOriginNotAllowed()}
		}
	}
	if e.keys == nil && !e.needIP {
		return &ch.open, nil
	}
	cl := &client{e: e, ch: ch}
	if e.needIP {
		cl.ip = e.clientIP(r)
	}
	if e.keys == nil {
		return cl, nil
	}
	k, reason := e.authenticate(r, a.PathKey)
	if k != nil && k.chains != nil && !k.chains[a.Chain] {
		reason = authChain
	}
	if reason == authChain || k == nil {
		ch.authRejected(reason)
		if e.log.Enabled(r.Context(), slog.LevelDebug) {
			attrs := []slog.Attr{slog.String("chain", a.Chain), slog.String("reason", reason.String()),
				slog.String("remote_addr", r.RemoteAddr)}
			if k != nil {
				attrs = append(attrs, slog.String("key", k.name))
			}
			e.log.LogAttrs(r.Context(), slog.LevelDebug, "request refused", attrs...)
		}
		status := http.StatusUnauthorized
		if reason == authChain {
			status = http.StatusForbidden
		}
		return nil, &jrpc.Refusal{Status: status, Err: errUnauthorized(reason, a.Chain, e.keyHeader)}
	}
	cl.key = k
	return cl, nil
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
func (cl *client) Check(method string) *jrpc.Error {
	if reason, ok := cl.e.methods.check(method, cl.key); !ok {
		cl.ch.authRejected(reason)
		return errNoMethod(method)
	}
	return nil
}

// authenticate finds the key r carries, in the path (/CHAIN/KEY, secret)
// or the key header. A request carrying two different keys is refused. Keys are
// looked up by their SHA-256, so the time a lookup takes says nothing about
// how much of a guess matched.
func (e *Edge) authenticate(r *http.Request, secret string) (*apiKey, authReason) {
	h := r.Header.Get(e.keyHeader)
	if e.bearer {
		if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
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

// scope labels venn_ratelimit_rejections_total: which bucket refused.
type scope uint8

const (
	scopeKey scope = iota
	scopeIP
	numScopes
)

func (s scope) String() string {
	if s == scopeKey {
		return "key"
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
	if e.limiter == nil {
		return nil
	}
	var (
		buf    [2]Bucket
		scopes [2]scope
	)
	bs := buf[:0]
	if k := cl.key; k != nil && k.rate.Limited() {
		scopes[len(bs)] = scopeKey
		bs = append(bs, Bucket{ID: k.bucket, Rate: k.rate})
	}
	// A client whose address the transport cannot know (NATS: the
	// server's accounts decide who may publish) is limited by its key
	// alone, rather than every such client sharing one address bucket.
	if e.ipRate.Limited() && cl.ip.IsValid() && (cl.key == nil || !cl.key.ipExempt) {
		scopes[len(bs)] = scopeIP
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
