package remotes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/remotes/avail"
	"github.com/venn-gateway/venn/remotes/breaker"
	"github.com/venn-gateway/venn/remotes/budget"
	"github.com/venn-gateway/venn/remotes/heads"
	"github.com/venn-gateway/venn/remotes/health"
	"github.com/venn-gateway/venn/remotes/score"
	"github.com/venn-gateway/venn/remotes/verdict"
	"github.com/venn-gateway/venn/remotes/wire"
)

// errLocalLimit is returned when venn's own limits for a remote (rate limit,
// max in-flight) keep a call from being sent; the pool tries another remote.
var errLocalLimit = errors.New("remote at its configured limit")

// errOwnRateLimit is the local limit worth waiting for: a token comes back
// within 1/rps, while a full or broken remote may stay so.
var errOwnRateLimit = fmt.Errorf("rate limit: %w", errLocalLimit)

// Remote is one upstream endpoint: fixed settings plus atomic runtime state
// (head, health, breaker, latency and error averages). It is safe for
// concurrent use.
type Remote struct {
	cfg   Config
	chain string
	t     wire.Transport
	log   *slog.Logger
	m     *remoteMetrics
	lim   *rate.Limiter // nil: unlimited
	brk   *breaker.Breaker
	now   func() time.Time

	allow, deny []string

	weight float64       // Config.Weight, 1 when absent
	bud    *budget.Meter // remotes/budget; nil: no budget

	// slot is the remote's bit in a call's mask of remotes tried: unique
	// in its pool while it serves or finishes calls (reconfig.go).
	slot int
	// unfollow stops the trackers (health.go), which trackers counts.
	unfollow context.CancelFunc
	trackers sync.WaitGroup

	// goodAt is the unix nanos of the last good check (distrust.go); 0:
	// none yet. distrust reports a finding against the remote to its
	// pool (nil for a remote built outside one).
	goodAt   atomic.Int64
	distrust func(cause string)
	// claim is the latest head the remote reported; head is the number of
	// its highest report the pool found corroborated (chainhead.go), which
	// routing and lag go by.
	claim        atomic.Pointer[heads.Report]
	head         atomic.Uint64
	ht           heads.Judgement // guarded by Pool.heads.t
	wsHeadAt     atomic.Int64    // unix nanos of the last head seen over newHeads
	reportedAt   atomic.Int64    // unix nanos of the last head reported, news or not
	heardAt      atomic.Int64    // reportedAt once the pool judged that report (Heads.HeardWithin)
	inFlight     atomic.Int64
	throttledTil atomic.Int64  // unix nanos: backed off after a 429 until then
	throttles    atomic.Int32  // consecutive throttles, for the backoff
	latencyEWMA  atomic.Uint64 // float64 bits, seconds
	errorEWMA    atomic.Uint64 // float64 bits, 0..1

	// learnedSpan: the eth_getLogs span cap the remote named in a range error.
	learnedSpan atomic.Pointer[learnedSpan]
	av          avail.Windows // avail.go: the oldest blocks it serves, by kind

	mb     misbehaviourState            // misbehave.go: cordon and strikes
	manual atomic.Pointer[manualCordon] // cordon.go: an operator's cordon; nil: none
	red    *wire.Redactor               // redact.go: for what status shows
	last   atomic.Pointer[lastError]    // status.go: the last fault, redacted
	lat    score.Latency                // recent latency quantiles (remotes/score)
	sc     scoreState                   // score.go: score and preferred set
	cc     health.Check                 // chaincheck.go: chain id re-checks
	feed   remoteFeed                   // feed.go: heads from the cluster's feed

	mu           sync.Mutex
	unsupported  map[string]unsupportedEntry // methods the remote said it lacks
	nUnsupported atomic.Int32                // len(unsupported), read without mu
}

func newRemote(chain string, cfg Config, t wire.Transport, log *slog.Logger, m *remoteMetrics, brk *breaker.Breaker) *Remote {
	r := &Remote{
		cfg: cfg, chain: chain, t: t, m: m, brk: brk, now: time.Now,
		log:         log.With("remote", cfg.Name),
		unsupported: make(map[string]unsupportedEntry),
	}
	if rl := cfg.RateLimit; rl.RPS > 0 {
		rl.Burst = max(rl.Burst, 0) // Validate refuses less; unset takes the default
		rl = rl.WithDefaults()
		r.lim = rate.NewLimiter(rate.Limit(rl.RPS), rl.Burst)
	}
	r.allow, r.deny = cfg.Methods.Allow, cfg.Methods.Deny
	r.weight = budget.Weight(cfg.Weight)
	r.bud = budget.New(cfg.Budget, cfg.Name, m.m.bm.Used(chain, cfg.Name), r.log)
	r.initChainCheck(m)
	r.latencyEWMA.Store(math.Float64bits(0.05)) // a neutral prior until measured
	return r
}

// Name is the remote's configured name: the only way it is ever shown.
func (r *Remote) Name() string { return r.cfg.Name }

// Tier is the remote's configured tier.
func (r *Remote) Tier() Tier { return r.cfg.Tier }

// Head is the highest block number the remote reported that the pool
// found corroborated (0 before the first).
func (r *Remote) Head() uint64 { return r.head.Load() }

func (r *Remote) chainVerified() bool { return r.cc.Verified() }

// supports reports whether method may be sent to this remote: config allow
// and deny lists, then what the remote itself said it lacks.
func (r *Remote) supports(method string) bool {
	return r.configuredFor(method) && r.lacks(method) == nil
}

// configuredFor applies the config's allow and deny lists.
func (r *Remote) configuredFor(method string) bool {
	if len(r.allow) > 0 && !evm.MatchMethod(r.allow, method) {
		return false
	}
	return !evm.MatchMethod(r.deny, method)
}

// unsupportedTTL: a remote that said it lacks a method is asked again after
// this long (providers enable methods, load balancers route differently).
const (
	unsupportedTTL      = 10 * time.Minute
	maxUnsupportedKnown = 1024 // bounded: method names come from clients
)

type unsupportedEntry struct {
	err   error // the remote's own answer, replayed while no remote has the method
	until time.Time
}

// lacks returns the remote's "method not found" answer while it is
// remembered, else nil.
func (r *Remote) lacks(method string) error {
	if r.nUnsupported.Load() == 0 {
		return nil // the common case, without the lock
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.unsupported[method]
	if !ok {
		return nil
	}
	if r.now().After(e.until) {
		delete(r.unsupported, method)
		r.nUnsupported.Store(int32(len(r.unsupported)))
		return nil
	}
	return e.err
}

// markUnsupported remembers that the remote lacks method. The table is
// bounded (method names come from clients): when it is full, expired
// entries go, then the one closest to expiry.
func (r *Remote) markUnsupported(method string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if _, ok := r.unsupported[method]; !ok && len(r.unsupported) >= maxUnsupportedKnown {
		var oldest string
		for m, e := range r.unsupported {
			if now.After(e.until) {
				delete(r.unsupported, m)
			} else if oldest == "" || e.until.Before(r.unsupported[oldest].until) {
				oldest = m
			}
		}
		if len(r.unsupported) >= maxUnsupportedKnown {
			delete(r.unsupported, oldest)
		}
	}
	r.unsupported[method] = unsupportedEntry{err: clientError(err), until: now.Add(unsupportedTTL)}
	r.nUnsupported.Store(int32(len(r.unsupported)))
}

// healthy: on the right chain and the breaker lets calls through; the
// first of available's reasons, and all head tracking asks.
func (r *Remote) healthy(now time.Time) bool {
	return r.chainVerified() && r.brk.Ready(now)
}

// ewma folds x into the average at *a with weight alpha.
func ewma(a *atomic.Uint64, x, alpha float64) {
	for {
		old := a.Load()
		next := math.Float64bits(math.Float64frombits(old)*(1-alpha) + x*alpha)
		if a.CompareAndSwap(old, next) {
			return
		}
	}
}

// call sends one call to this remote within its own limits and per-attempt
// timeout, and records the outcome in its health state.
func (r *Remote) call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	res, _, err := r.send(ctx, method, params, false)
	return res, err
}

// send is call, also for a caller that already took a rate-limit token
// (haveToken: waitForToken), that returns the reply's HTTP status too
// (wire.Transport.Call), for the attempt's span.
func (r *Remote) send(ctx context.Context, method string, params json.RawMessage, haveToken bool) (json.RawMessage, int, error) {
	now := r.now()
	ok, probe := r.brk.Allow(now)
	if !ok {
		return nil, 0, fmt.Errorf("remote %s: breaker open: %w", r.cfg.Name, errLocalLimit)
	}
	if probe {
		r.m.breaker.Set(float64(breaker.HalfOpen))
	}
	if r.lim != nil && !haveToken && !r.lim.AllowN(now, 1) {
		r.m.throttled.Inc()
		r.releaseProbe(probe)
		return nil, 0, fmt.Errorf("remote %s: %w", r.cfg.Name, errOwnRateLimit)
	}
	if n := r.inFlight.Add(1); r.cfg.MaxInFlight > 0 && n > int64(r.cfg.MaxInFlight) {
		r.inFlight.Add(-1)
		r.releaseProbe(probe)
		return nil, 0, fmt.Errorf("remote %s: max in-flight: %w", r.cfg.Name, errLocalLimit)
	}
	r.m.inFlight.Inc()
	r.bill(method)
	caller := ctx
	if r.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.cfg.Timeout)
		defer cancel()
	}
	res, status, err := r.t.Call(ctx, method, params)
	took := r.now().Sub(now)
	r.inFlight.Add(-1)
	r.m.inFlight.Dec()
	if err != nil && caller.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		// The caller's own deadline or departure cut the attempt, not the
		// remote: a split eth_getLogs running out of call_deadline, or a
		// client hanging up, must not open breakers of healthy remotes. The
		// slowness still counts in the score; the remote's own timeout
		// (shorter than call_deadline by default) catches a hung remote.
		r.m.failed(verdict.Verdict{Class: verdict.ClassCaller, Reason: verdict.ReasonCanceled}, 0, 0)
		r.m.latency.Observe(took.Seconds())
		r.lat.Observe(took) // a lower bound, but dropping it would hide the tail
		ewma(&r.latencyEWMA, took.Seconds(), 0.1)
		r.releaseProbe(probe)
		return nil, status, err
	}
	r.observe(method, took, err, probe)
	res, err = r.dropForeign(res, err)
	return res, status, err
}

// waitForToken takes a token of the remote's own rate limit, waiting for
// it at most max and never past ctx's deadline. It reports whether it got
// one; the caller then sends with haveToken.
func (r *Remote) waitForToken(ctx context.Context, max time.Duration) bool {
	if r.lim == nil {
		return false
	}
	now := r.now()
	res := r.lim.ReserveN(now, 1)
	if !res.OK() {
		return false
	}
	d := res.DelayFrom(now)
	if dl, ok := ctx.Deadline(); d > max || ok && now.Add(d).After(dl) {
		res.CancelAt(now)
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		res.Cancel()
		return false
	}
}

// releaseProbe gives back the breaker's probe when this call carried it and
// did not finish (a local limit stopped it, or its caller left).
func (r *Remote) releaseProbe(probe bool) {
	if probe {
		r.brk.Release()
		r.m.breaker.Set(float64(breaker.Open))
	}
}

// observe feeds one outcome into latency, error rate, breaker, throttle
// backoff and metrics.
func (r *Remote) observe(method string, took time.Duration, err error, probe bool) {
	r.m.latency.Observe(took.Seconds()) // every outcome: timeouts belong in the tail
	r.lat.Observe(took)
	if err == nil {
		r.m.ok.Inc()
		ewma(&r.latencyEWMA, took.Seconds(), 0.1)
		ewma(&r.errorEWMA, 0, 0.05)
		r.throttles.Store(0)
		r.noteThrottle(false)
		if r.brk.Success() {
			r.log.Info("remote back in rotation")
			r.m.breaker.Set(float64(breaker.Closed))
		}
		return
	}
	v := verdict.Classify(method, err)
	code, status := errorCodes(err)
	r.m.failed(v, code, status)
	if v.Fault || v.Class == verdict.ClassThrottled {
		r.noteError(err)
	}
	switch {
	case v.Class == verdict.ClassThrottled:
		r.noteThrottle(true)
		r.backoff()
	case v.Reason == verdict.ReasonMethodUnsupported:
		r.markUnsupported(method, err)
	}
	if !v.Fault {
		// Caller errors and missing data still prove the remote is alive.
		if v.Reason == verdict.ReasonCanceled {
			r.releaseProbe(probe)
		} else if r.brk.Success() {
			r.m.breaker.Set(float64(breaker.Closed))
		}
		return
	}
	ewma(&r.latencyEWMA, took.Seconds(), 0.1)
	r.fault(v)
}

// rejected records a result the pool could not use (an eth_getLogs part
// that is not an array) as the remote's fault: the call it answered was
// already counted a success.
func (r *Remote) rejected(method string, err error) {
	v := verdict.Classify(method, err)
	r.m.failed(v, 0, 0)
	r.noteError(err)
	r.fault(v)
}

func (r *Remote) fault(v verdict.Verdict) {
	ewma(&r.errorEWMA, 1, 0.05)
	if r.brk.Fault(r.now()) {
		r.log.Warn("remote out of rotation: breaker open",
			"reason", string(v.Reason), "cooldown", r.brk.Cooldown())
		r.chainUnsure("breaker opened") // what comes back may be another endpoint
	}
	r.m.breaker.Set(float64(r.brk.State()))
}

// backoff keeps the remote out of rotation after it rate-limited us:
// 1 s, doubling per consecutive throttle, at most 30 s.
func (r *Remote) backoff() {
	n := r.throttles.Add(1)
	d := time.Second << min(n-1, 5)
	d = min(d, 30*time.Second)
	r.throttledTil.Store(r.now().Add(d).UnixNano())
	r.m.throttled.Inc()
}

func errorCodes(err error) (code, status int) {
	var ue *wire.UpstreamError
	if errors.As(err, &ue) {
		return ue.Err.Code, ue.HTTPStatus
	}
	var he *wire.HTTPStatusError
	if errors.As(err, &he) {
		return 0, he.Status
	}
	return 0, 0
}

// noteHead records a head the remote reported and reports whether it is
// news: a new number, or a new hash at the same number (a reorg). A small
// step back is ignored and a large one followed (heads.MaxStepBack).
func (r *Remote) noteHead(h *heads.Report) bool {
	r.reportedAt.Store(r.now().UnixNano())
	for {
		old := r.claim.Load()
		if old != nil {
			switch {
			case h.Number == old.Number && h.Hash == old.Hash:
				return false
			case h.Number < old.Number && old.Number-h.Number <= heads.MaxStepBack:
				return false
			}
		}
		h.Seen = r.now()
		if r.claim.CompareAndSwap(old, h) {
			r.m.head.Set(float64(h.Number))
			return true
		}
	}
}

// maxLogsSpan is the largest eth_getLogs block span to send here: the
// configured cap, or the cap the remote named in a range error while that is
// fresh, whichever is lower. 0 means no known cap.
func (r *Remote) maxLogsSpan() uint64 {
	c, l := r.cfg.MaxLogsRange, uint64(0)
	if ls := r.learnedSpan.Load(); ls != nil && r.now().Before(ls.until) {
		l = ls.span
	}
	switch {
	case c == 0:
		return l
	case l == 0:
		return c
	}
	return min(c, l)
}

// learnedSpan is an eth_getLogs span cap a remote named in a range error.
type learnedSpan struct {
	span  uint64
	until time.Time
}

// A learned span cap expires, because providers change plans and limits and
// one misread message must not shrink a remote's parts for good; and it has
// a floor, because parts of a few blocks would multiply upstream calls. A
// remote whose real cap is below the floor still gets correct answers: its
// range errors split the part further.
const (
	learnedSpanTTL = time.Hour
	minLearnedSpan = 10
)

// learnSpan records the span cap a remote named in a range error
// (verdict.ReasonRangeTooLarge only: a "too many results" hint depends on how dense
// the logs of one query are, not on a cap). A tighter cap replaces a wider
// one; the same cap again renews it.
func (r *Remote) learnSpan(span uint64) {
	span = max(span, minLearnedSpan)
	now := r.now()
	next := &learnedSpan{span: span, until: now.Add(learnedSpanTTL)}
	for {
		old := r.learnedSpan.Load()
		live := old != nil && now.Before(old.until)
		if live && old.span < span {
			return
		}
		if r.learnedSpan.CompareAndSwap(old, next) {
			if !live || old.span != span {
				r.log.Info("remote caps eth_getLogs span", "blocks", span, "for", learnedSpanTTL)
			}
			return
		}
	}
}

func headerOf(m map[string]string) http.Header {
	h := make(http.Header, len(m))
	for k, v := range m {
		h.Set(k, v)
	}
	return h
}
