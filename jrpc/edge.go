package jrpc

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

	"github.com/go-chi/chi/v5"
)

// The edge decides who may call what, and how often, before a call reaches
// a chain's Handler: API keys (auth), the method blocklist and per-key
// allowlists (allowlist.go), rate limits per key and per client address
// (ratelimit.go), the client's address behind trusted proxies
// (clientip.go) and CORS (cors.go). With none of it configured a request
// pays one nil check and the method blocklist.

// DefaultKeyHeader carries an API key unless Edge.KeyHeader names another.
const DefaultKeyHeader = "X-Api-Key"

// Edge configures who may call what, and how often. The zero Edge is open:
// no keys, no rate limits, the client is the TCP peer, and only
// DefaultBlockedMethods are refused.
type Edge struct {
	// KeyHeader carries an API key (default X-Api-Key); with
	// "Authorization" the key follows "Bearer ". A key may instead be the
	// path's second segment: /CHAIN/KEY.
	KeyHeader string
	// Keys, when there are any, are required: a request without a valid
	// one gets HTTP 401 and CodeUnauthorized.
	Keys []APIKey
	// Methods adjusts the method blocklist for every caller.
	Methods MethodPolicy
	// IPRate limits the calls from each client address (IPv6: each /64);
	// zero: none.
	IPRate Rate
	// KeyRate limits the calls of each key that has no Rate of its own;
	// zero: none.
	KeyRate Rate
	// Limiter keeps the rate-limit buckets; nil keeps them in this process.
	Limiter Limiter
	// FailClosed refuses the calls the Limiter cannot decide (Redis down)
	// with CodeRateLimited and HTTP 503. By default they are served.
	FailClosed bool
	// TrustedProxies are the peers whose X-Forwarded-For and X-Real-IP
	// name the client; any other peer is the client itself.
	TrustedProxies []netip.Prefix
}

// APIKey is one client's key.
type APIKey struct {
	// Name stands for the key in logs and rate-limit state; the key itself
	// is never shown, logged or stored.
	Name   string
	Secret string
	// Chains the key may use; empty: all.
	Chains []string
	// Methods the key may call; empty: any the blocklist lets through.
	// Entries ending in "_" or "*" are prefixes.
	Methods []string
	// Enable lets the key call these blocked methods (same prefix rule);
	// MethodPolicy.Block still wins.
	Enable []string
	// Rate limits the key's calls across every chain and address; zero:
	// Edge.KeyRate.
	Rate Rate
	// IPExempt: the key's calls are not limited per address (a back end
	// behind one address).
	IPExempt bool
}

// edge is an Edge ready to use; nil when it would do nothing but the
// method blocklist, which the Server keeps apart.
type edge struct {
	keyHeader  string
	bearer     bool                          // keyHeader is Authorization
	keys       map[[sha256.Size]byte]*apiKey // by the key's hash; nil: open
	ipRate     Rate
	limiter    Limiter
	failClosed bool
	trusted    []netip.Prefix
	needIP     bool // the client's address is worked out (rate limits, proxies)

	limiterLog everyLog
}

// apiKey is an APIKey ready to check.
type apiKey struct {
	name     string
	chains   map[string]bool // nil: all
	allow    []string        // nil: all
	enable   []string
	rate     Rate // its own, or Edge.KeyRate
	ipExempt bool
	bucket   string // its rate-limit bucket: "key:NAME"
}

// newEdge compiles e; nil when it asks for nothing.
func newEdge(e Edge) *edge {
	out := &edge{
		keyHeader:  e.KeyHeader,
		ipRate:     e.IPRate,
		limiter:    e.Limiter,
		failClosed: e.FailClosed,
		trusted:    e.TrustedProxies,
	}
	if out.keyHeader == "" {
		out.keyHeader = DefaultKeyHeader
	}
	out.keyHeader = http.CanonicalHeaderKey(out.keyHeader)
	out.bearer = out.keyHeader == "Authorization"
	limits := e.IPRate.Limited()
	for _, k := range e.Keys {
		if k.Secret == "" {
			continue // never matched by a request without a key
		}
		ak := &apiKey{
			name:     k.Name,
			allow:    k.Methods,
			enable:   k.Enable,
			rate:     k.Rate,
			ipExempt: k.IPExempt,
			bucket:   "key:" + k.Name,
		}
		if !ak.rate.Limited() {
			ak.rate = e.KeyRate
		}
		limits = limits || ak.rate.Limited()
		if len(k.Chains) > 0 {
			ak.chains = make(map[string]bool, len(k.Chains))
			for _, c := range k.Chains {
				ak.chains[c] = true
			}
		}
		if out.keys == nil {
			out.keys = make(map[[sha256.Size]byte]*apiKey, len(e.Keys))
		}
		out.keys[sha256.Sum256([]byte(k.Secret))] = ak
	}
	if !limits {
		out.limiter = nil
	} else if out.limiter == nil {
		out.limiter = NewMemoryLimiter(nil)
	}
	out.needIP = e.IPRate.Limited() || len(e.TrustedProxies) > 0
	if out.keys == nil && out.limiter == nil && !out.needIP {
		return nil
	}
	return out
}

// client is who sends a request, as the edge sees it; worked out once per
// HTTP request or WebSocket connection.
type client struct {
	key *apiKey    // nil without keys
	ip  netip.Addr // invalid unless edge.needIP
}

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

// admit works out the client of r on ch, or answers r itself (HTTP 401 or
// 403) and returns false. It reads no body.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, ch *chainEntry) (*client, bool) {
	e := s.edge
	cl := &client{}
	if e.needIP {
		cl.ip = e.clientIP(r)
	}
	if e.keys == nil {
		return cl, true
	}
	k, reason := e.authenticate(r)
	if k != nil && k.chains != nil && !k.chains[ch.name] {
		reason = authChain
	}
	if reason == authChain || k == nil {
		ch.metrics.authRejected(reason)
		ch.metrics.count(otherMethod, outcomeInvalid)
		if s.log.Enabled(r.Context(), slog.LevelDebug) {
			attrs := []slog.Attr{slog.String("chain", ch.name), slog.String("reason", reason.String()),
				slog.String("remote_addr", r.RemoteAddr)}
			if k != nil {
				attrs = append(attrs, slog.String("key", k.name))
			}
			s.log.LogAttrs(r.Context(), slog.LevelDebug, "request refused", attrs...)
		}
		status := http.StatusUnauthorized
		if reason == authChain {
			status = http.StatusForbidden
		}
		writeHTTPError(w, status, errUnauthorized(reason, ch.name, e.keyHeader))
		return nil, false
	}
	cl.key = k
	return cl, true
}

// authenticate finds the key r carries, in the path (/CHAIN/KEY) or the
// key header. A request carrying two different keys is refused. Keys are
// looked up by their SHA-256, so the time a lookup takes says nothing about
// how much of a guess matched.
func (e *edge) authenticate(r *http.Request) (*apiKey, authReason) {
	secret := chi.URLParam(r, "key")
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

// peer builds the Peer a call's handler finds in its context.
func (cl *client) peer(transport string, r *http.Request) *Peer {
	p := &Peer{Transport: transport, RemoteAddr: r.RemoteAddr, Header: r.Header}
	if cl != nil {
		p.ClientIP = cl.ip
		if cl.key != nil {
			p.Key = cl.key.name
		}
	}
	return p
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

// refusal is the answer to a message the rate limits refused as a whole.
type refusal struct {
	status     int    // HTTP status
	retryAfter string // Retry-After, "" for none
	err        *Error // every call's answer
}

// limiterLogEvery bounds how often a failing limiter is logged.
const limiterLogEvery = 10 * time.Second

// limit takes n calls of cl from its buckets, or says why not. A limiter
// that cannot decide (Redis down) lets the calls through, or refuses them
// when the edge fails closed.
func (s *Server) limit(ctx context.Context, ch *chainEntry, cl *client, n int) *refusal {
	e := s.edge
	var (
		buf    [2]Bucket
		scopes [2]scope
	)
	bs := buf[:0]
	if k := cl.key; k != nil && k.rate.Limited() {
		scopes[len(bs)] = scopeKey
		bs = append(bs, Bucket{ID: k.bucket, Rate: k.rate})
	}
	if e.ipRate.Limited() && (cl.key == nil || !cl.key.ipExempt) {
		scopes[len(bs)] = scopeIP
		bs = append(bs, Bucket{ID: ipBucket(cl.ip), Rate: e.ipRate})
	}
	if len(bs) == 0 {
		return nil
	}
	v, err := e.limiter.Take(ctx, n, bs)
	if err != nil {
		if ctx.Err() != nil {
			return nil // the client left; nothing will be answered
		}
		s.metrics.limiterFailed()
		if ok, suppressed := e.limiterLog.allow(time.Now(), limiterLogEvery); ok {
			action := "serving calls unlimited"
			if e.failClosed {
				action = "refusing calls"
			}
			s.log.LogAttrs(ctx, slog.LevelWarn, "rate limiter unavailable: "+action,
				slog.Any("err", err), slog.Int64("since_last_log", suppressed))
		}
		if e.failClosed {
			return &refusal{status: http.StatusServiceUnavailable, retryAfter: "1", err: errRateLimitUnavailable()}
		}
		return nil
	}
	if v.OK {
		return nil
	}
	ch.metrics.rateLimited(scopes[v.Refused])
	if v.RetryAfter == Never {
		return &refusal{status: http.StatusTooManyRequests, err: errOverBurst(n, bs[v.Refused].Rate.burst())}
	}
	secs := int64((v.RetryAfter + time.Second - 1) / time.Second) // round up: sooner would be refused
	return &refusal{status: http.StatusTooManyRequests, retryAfter: strconv.FormatInt(max(secs, 1), 10),
		err: errRateLimited(v.RetryAfter)}
}

// ipBucket is the rate-limit bucket of a client address. An IPv6 client
// usually holds a whole /64, so that is what is limited.
func ipBucket(ip netip.Addr) string {
	switch {
	case !ip.IsValid():
		return "ip:unknown"
	case ip.Is4():
		return "ip:" + ip.String()
	default:
		p, _ := ip.WithZone("").Prefix(64)
		return "ip:" + p.String()
	}
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
