package remotes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jrpc"
)

// maxRemotes bounds a chain's remotes: the failover loop tracks the ones
// it tried in a 64-bit mask.
const maxRemotes = 64

// Pool is one chain's load balancer over its remotes: tiers, health-scored
// selection, height-aware routing, failover with error classification,
// eth_getLogs splitting, raw transaction broadcast and deduplication of
// identical concurrent reads. It implements jrpc.Handler.
type Pool struct {
	cfg     PoolConfig
	log     *slog.Logger
	remotes []*Remote // by tier, then config order
	now     func() time.Time
	flights flights
	filters *filterTable

	// chainhead.go: the chain's tip (best is its number), the block time
	// its timestamps say and the fastest pace they showed (nanoseconds; 0
	// until known).
	heads      chainHead
	best       atomic.Uint64
	tip        atomic.Pointer[headReport]
	learned    atomic.Int64
	fastest    atomic.Int64
	bootstraps atomic.Int32 // block time fetches tried

	chainHead prometheus.Gauge
	splits    prometheus.Counter
	shared    prometheus.Counter
	attempts  prometheus.Observer

	cons  consensusState // consensus.go, misbehave.go: vote rules, cordons, misbehaviour log
	hedge *hedger        // hedge.go; nil: no hedging

	integ integrity // integrity.go: local checks of answers

	relay relayState // relay.go: remotes whose subscription relay failed lately

	mu     sync.Mutex
	cancel context.CancelFunc
	wg     sync.WaitGroup // trackers and background broadcasts
}

var _ jrpc.Handler = (*Pool)(nil)

// NewPool builds a chain's pool. It does no I/O: Start dials.
func NewPool(cfg PoolConfig, rs []Config, log *slog.Logger, m *Metrics) (*Pool, error) {
	cfg.applyDefaults()
	if len(rs) == 0 {
		return nil, fmt.Errorf("chain %s: no remotes", cfg.Chain)
	}
	if len(rs) > maxRemotes {
		return nil, fmt.Errorf("chain %s: %d remotes, at most %d", cfg.Chain, len(rs), maxRemotes)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	if cfg.Replies == nil {
		cfg.Replies = NewReplyBudget(DefaultReplyBytesInFlight, m)
	}
	log = log.With("chain", cfg.Chain)
	p := &Pool{
		cfg: cfg, log: log, now: time.Now, filters: newFilterTable(), heads: chainHead{wake: make(chan struct{}), retime: make(chan struct{})},
		chainHead: m.chainHead.WithLabelValues(cfg.Chain),
		splits:    m.splits.WithLabelValues(cfg.Chain),
		shared:    m.shared.WithLabelValues(cfg.Chain),
		attempts:  m.attempts.WithLabelValues(cfg.Chain),
	}
	for tier := TierPrimary; tier <= TierFallback; tier++ {
		for _, rc := range rs {
			if rc.Tier != tier {
				continue
			}
			if rc.MaxResponseBytes <= 0 {
				rc.MaxResponseBytes = DefaultMaxResponseBytes
			}
			// No larger reply could be read.
			rc.MaxResponseBytes = min(rc.MaxResponseBytes, cfg.Replies.Size())
			var r *Remote // set before any call: the transport dials on its first
			t, err := newTransport(transportOptions{Name: rc.Name, URL: rc.URL,
				Headers: headerOf(rc.Headers), MaxIdleConns: max(rc.MaxInFlight, 64),
				MaxResponseBytes: rc.MaxResponseBytes, Budget: cfg.Replies,
				OtherURLs: []string{rc.WSURL}, Logger: log,
				OnRedial: func() { r.recheckSoon() }})
			if err != nil {
				return nil, fmt.Errorf("chain %s: %w", cfg.Chain, err)
			}
			brk := newBreaker(cfg.BreakerFailures, cfg.BreakerCooldown)
			r = newRemote(cfg.Chain, rc, t, log, m.forRemote(cfg.Chain, rc.Name), brk)
			r.cc.every = cfg.ChainRecheck
			p.remotes = append(p.remotes, r)
		}
	}
	if err := p.initConsensus(m); err != nil {
		return nil, fmt.Errorf("chain %s: %w", cfg.Chain, err)
	}
	p.hedge = newHedger(cfg.Hedge, cfg.Chain, m)
	p.initScoring(m)
	p.integ.init(cfg.Chain, m)
	return p, nil
}

func (c *PoolConfig) applyDefaults() {
	if c.CallDeadline <= 0 {
		c.CallDeadline = DefaultCallDeadline
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.GetLogsConcurrency <= 0 {
		c.GetLogsConcurrency = DefaultGetLogsConcurrency
	}
	if c.GetLogsMaxParts <= 0 {
		c.GetLogsMaxParts = DefaultGetLogsMaxParts
	}
	if c.BroadcastFanout <= 0 {
		c.BroadcastFanout = DefaultBroadcastFanout
	}
	if c.ChainRecheck <= 0 {
		c.ChainRecheck = DefaultChainRecheck
	}
	c.Hedge.applyDefaults()
	c.Scoring.applyDefaults()
}

// Start begins following every remote's chain id and head. It waits, at
// most until ctx ends or a few seconds pass, for one remote to be ready so
// the first client calls find somewhere to go; a chain with no reachable
// remote still starts.
func (p *Pool) Start(ctx context.Context) error {
	if err := p.cons.file.start(); err != nil {
		return fmt.Errorf("chain %s: %w", p.cfg.Chain, err)
	}
	bg, cancel := context.WithCancel(context.Background())
	p.mu.Lock()
	p.cancel = cancel
	p.mu.Unlock()
	for _, r := range p.remotes {
		p.wg.Go(func() { r.track(bg, p.cfg.ChainID, p.pollCadence, p.headChanged) })
		if r.relayURL() != "" {
			p.wg.Go(func() { r.watch(bg, p.headChanged) })
		}
	}
	p.wg.Go(func() { p.scoreLoop(bg) })
	p.wg.Go(func() { p.learnBlockTime(bg) }) // block_time sets the cadence; heads are judged by what the chain says
	wait, stop := context.WithTimeout(ctx, 3*time.Second)
	defer stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !p.Ready() {
		select {
		case <-wait.Done():
			p.log.Warn("no remote ready yet; serving anyway")
			return nil
		case <-tick.C:
		}
	}
	return nil
}

// Stop ends the trackers and background broadcasts and closes transports.
func (p *Pool) Stop(ctx context.Context) error {
	p.mu.Lock()
	if p.cancel != nil {
		p.cancel()
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("chain %s: stop: %w", p.cfg.Chain, ctx.Err())
	}
	if lerr := p.cons.file.stop(ctx); lerr != nil && err == nil {
		err = fmt.Errorf("chain %s: stop: %w", p.cfg.Chain, lerr)
	}
	for _, r := range p.remotes {
		r.t.close()
	}
	return err
}

// Ready reports whether some remote is in rotation: on the right chain,
// breaker not open, not lagging. A remote that is only backed off after a
// 429 or full counts: readiness must not flap with load, or every replica
// would leave the load balancer at the same moment.
func (p *Pool) Ready() bool {
	now := p.now()
	best := p.healthyBest(now)
	for _, r := range p.remotes {
		if r.healthy(now) && !p.lagging(r, best) {
			return true
		}
	}
	return false
}

// Head is the chain's head: the highest corroborated head across the
// chain's healthy remotes (chainhead.go). It moves forward, and back only
// when the remotes agree on one far below it.
func (p *Pool) Head() uint64 { return p.best.Load() }

// HealthyHead is the highest head among the remotes in rotation right now:
// a block above it cannot be served by any of them yet.
func (p *Pool) HealthyHead() uint64 { return p.healthyBest(p.now()) }

// HeadChanged returns a channel closed when the tip next changes: a new
// head, or a sibling replacing it at the same height.
func (p *Pool) HeadChanged() <-chan struct{} {
	p.heads.mu.Lock()
	defer p.heads.mu.Unlock()
	return p.heads.wake
}

// Remotes lists the remote names in routing order, for status output.
func (p *Pool) Remotes() []string {
	out := make([]string, len(p.remotes))
	for i, r := range p.remotes {
		out[i] = r.Name()
	}
	return out
}

// healthyBest is the highest head among remotes in rotation; a dead
// remote's last head must not make every live one look lagging.
func (p *Pool) healthyBest(now time.Time) uint64 {
	var best uint64
	for _, r := range p.remotes {
		if h := r.Head(); h > best && r.healthy(now) {
			best = h
		}
	}
	return best
}

func (p *Pool) lagging(r *Remote, best uint64) bool {
	return r.Head()+p.cfg.MaxLag < best
}

// ServeRPC answers one client call through the remotes.
func (p *Pool) ServeRPC(ctx context.Context, req *jrpc.Request) (json.RawMessage, error) {
	return p.Call(ctx, req.Method, req.Params)
}

// Call sends method to the remotes within the chain's call deadline.
func (p *Pool) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	c := evm.ParseCall(method, params)
	return p.call(ctx, &c)
}

func (p *Pool) call(ctx context.Context, c *evm.Call) (json.RawMessage, error) {
	method, params := c.Method, c.Params
	switch c.Class {
	case evm.ClassBroadcast:
		ctx, cancel := context.WithTimeout(ctx, p.cfg.CallDeadline)
		defer cancel()
		return p.broadcast(ctx, params)
	case evm.ClassStateful:
		ctx, cancel := context.WithTimeout(ctx, p.cfg.CallDeadline)
		defer cancel()
		return p.stateful(ctx, method, params)
	case evm.ClassWrite:
		ctx, cancel := context.WithTimeout(ctx, p.cfg.CallDeadline)
		defer cancel()
		return p.do(ctx, method, params, route{once: true})
	}
	cv := viewOf(c)
	// Identical concurrent reads share one upstream call (see flights).
	key := method + "\x00" + string(params)
	res, shared, err := p.flights.do(ctx, key, func(ctx context.Context) (json.RawMessage, error) {
		ctx, cancel := context.WithTimeout(ctx, p.cfg.CallDeadline)
		defer cancel()
		return p.read(ctx, method, params, cv)
	})
	if shared {
		p.shared.Inc()
	}
	return res, err
}

func (p *Pool) read(ctx context.Context, method string, params json.RawMessage, cv callView) (json.RawMessage, error) {
	if method == "eth_getLogs" {
		return p.getLogs(ctx, params, cv)
	}
	return p.do(ctx, method, params, p.readRoute(method, cv))
}

// readRoute is how a read may be routed: to remotes that have its block.
func (p *Pool) readRoute(method string, cv callView) route {
	rt := route{}.withView(cv)
	if cv.hasBlock && cv.blockOK && cv.block.kind == evm.RefNumber {
		rt.need = cv.block.n
		// A null block from a remote that claims to have it is a
		// lagging or inconsistent remote, not an answer. Above the
		// best head null is the answer: indexers poll head+1 until it
		// exists, and must not make every remote pay for each poll.
		rt.nullIsMissing = (method == "eth_getBlockByNumber" || method == "eth_getBlockReceipts") &&
			cv.block.n <= p.best.Load()
	}
	if method == "eth_getBlockByHash" || method == "eth_getBlockReceipts" && cv.blockOK && cv.block.kind == evm.RefHash {
		rt.nullIsMissing = true
	}
	return rt
}

// maxRateLimitWait bounds how long a call waits for venn's own rate limit
// of a remote when no other remote can serve it.
const maxRateLimitWait = time.Second

// route says how one call may be routed.
type route struct {
	need          uint64             // the remote's head must reach this block (0: any)
	accept        func(*Remote) bool // extra filter (eth_getLogs span caps)
	once          bool               // writes: no failover once a remote may have acted
	nullIsMissing bool               // a null result means "try another remote"
	only          *Remote            // stateful calls: this remote and no other
	check         resultCheck        // a result it rejects is a bad reply: fail over
	noVote        bool               // consensus.go: one remote's answer, never a vote
	parsed        bool               // cv is the call's view (call.go); else view parses
	cv            callView
	// verify (integrity.go) is like check, but its caller judges the
	// answers and blames remotes once it has seen the others': a
	// rejected answer fails over and is not charged here.
	verify func(*Remote, json.RawMessage) error
}

// do sends one call with failover: the caller's own errors return at once,
// upstream faults move to the next remote until the attempts or the
// deadline run out.
func (p *Pool) do(ctx context.Context, method string, params json.RawMessage, rt route) (json.RawMessage, error) {
	var (
		tried   uint64
		n       int
		lastErr error
		null    json.RawMessage
		limited = -1 // a remote skipped for venn's own rate limit
		waited  bool
	)
	if rule := p.voteRule(method, params, &rt); rule != nil {
		return p.consensus(ctx, method, params, rt, rule)
	}
	defer func() { p.attempts.Observe(float64(n)) }()
	hg, hedges := p.hedgeGroup(method, rt), 0 // hedge.go; nil: not hedged
	for n < p.cfg.MaxAttempts {
		r, idx := p.pick(method, rt, tried)
		if r == nil {
			// Nothing else can serve: a burst over the configured rate
			// waits briefly for a token rather than failing at once.
			if limited < 0 || waited || !p.remotes[limited].available(p.now()) || !p.remotes[limited].waitForToken(ctx, maxRateLimitWait) {
				break
			}
			waited = true
			r, idx = p.remotes[limited], limited
		}
		tried |= 1 << idx
		n++
		var (
			res json.RawMessage
			err error
		)
		switch {
		case waited && idx == limited:
			res, err = r.callWithToken(ctx, method, params)
		case hg != nil && hedges < hg.Max:
			r, idx, res, err = p.race(ctx, hg, method, params, rt, r, idx, &tried, &n, &hedges)
		default:
			res, err = r.call(ctx, method, params)
		}
		if err == nil && rt.check != nil {
			if cerr := rt.check(res); cerr != nil {
				err = fmt.Errorf("remote %s: %w", r.Name(), cerr)
				r.rejected(method, err) // it answered, but nothing usable
			}
		}
		if err == nil && rt.verify != nil {
			if verr := rt.verify(r, res); verr != nil {
				err = fmt.Errorf("remote %s: %w", r.Name(), verr)
			}
		}
		if err == nil {
			if rt.nullIsMissing && isNull(res) {
				null = res
				continue
			}
			return res, nil
		}
		if errors.Is(err, errOwnRateLimit) {
			limited = idx
		}
		if errors.Is(err, errLocalLimit) {
			n-- // nothing was sent
			continue
		}
		v := Classify(method, err)
		if p.log.Enabled(ctx, slog.LevelDebug) {
			p.log.Debug("remote call failed", "remote", r.Name(), "method", method,
				"class", v.Class.String(), "reason", string(v.Reason), "err", err)
		}
		switch v.Class {
		case ClassCaller:
			return nil, clientError(err)
		case ClassTooLarge:
			// Only these can be cured by a smaller block range; other caps
			// (addresses, request or batch size) fail over, and the last
			// remote's own error is the answer.
			if method == "eth_getLogs" && splitHelps(v.Reason) {
				if v.Reason == ReasonRangeTooLarge && v.MaxSpan > 0 {
					r.learnSpan(v.MaxSpan) // a cap; a result-count hint is not
				}
				return nil, &tooLargeError{span: v.MaxSpan, err: err}
			}
			// Over our own cap: every remote sends the same answer, so only
			// one allowed a larger reply is worth trying.
			if over, ok := errors.AsType[*ReplyTooLargeError](err); ok && !p.allowsLarger(over.Limit, tried) {
				return nil, replyTooLarge(over)
			}
		}
		lastErr = err
		if rt.once || ctx.Err() != nil {
			break
		}
	}
	if null != nil {
		return null, nil
	}
	if n == 0 {
		// Every remote said it lacks the method: that answer, not "no remote".
		configured := false
		for _, r := range p.remotes {
			if err := r.lacks(method); err != nil {
				return nil, err
			}
			configured = configured || r.configuredFor(method)
		}
		if !configured {
			return nil, &jrpc.Error{Code: jrpc.CodeMethodNotFound,
				Message: fmt.Sprintf("the method %s does not exist/is not available", method)}
		}
	}
	return nil, p.exhausted(ctx, method, n, lastErr)
}

// pick chooses the next remote for a call: the first tier with a candidate
// wins (fallback only when nothing else can serve); within a tier, choose
// (score.go): the tier's preferred remotes share the calls, the others get
// a probe share and serve when no preferred one can.
func (p *Pool) pick(method string, rt route, tried uint64) (*Remote, int) {
	now := p.now()
	best := p.healthyBest(now)
	need := rt.need
	if need > best {
		// Above every remote's head: the remotes at the best head give the
		// node's own answer (null, or an error).
		need = best
	}
	var cand [maxRemotes]int
	for tier := TierPrimary; tier <= TierFallback; tier++ {
		k := 0
		for i, r := range p.remotes {
			if r.cfg.Tier != tier || tried&(1<<i) != 0 {
				continue
			}
			if rt.only != nil && r != rt.only {
				continue
			}
			if !r.available(now) || p.lagging(r, best) || r.Head() < need || !r.supports(method) {
				continue
			}
			if rt.accept != nil && !rt.accept(r) {
				continue
			}
			cand[k] = i
			k++
		}
		switch k {
		case 0:
			continue
		case 1:
			return p.remotes[cand[0]], cand[0]
		}
		return p.choose(cand[:k]) // score.go
	}
	return nil, 0
}

// clientError is what the client sees of an upstream error: the remote's
// own JSON-RPC error, verbatim, so answers match the node's.
func clientError(err error) error {
	var ue *UpstreamError
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// exhausted builds the error for a call no remote could serve. When the last
// remote answered with a JSON-RPC error, that is the most useful answer (and
// the node's own: a future block range, say); otherwise venn says why.
func (p *Pool) exhausted(ctx context.Context, method string, tried int, lastErr error) error {
	var (
		ue   *UpstreamError
		over *ReplyTooLargeError
	)
	switch {
	case lastErr != nil && errors.As(lastErr, &ue):
		return ue.Err
	case lastErr != nil && errors.As(lastErr, &over):
		return replyTooLarge(over)
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &jrpc.Error{Code: jrpc.CodeTimeout,
			Message: fmt.Sprintf("request timed out after trying %d remote(s)", tried)}
	case tried == 0:
		return &jrpc.Error{Code: jrpc.CodeNoRemote,
			Message: fmt.Sprintf("no remote available for %s on %s", method, p.cfg.Chain)}
	}
	return &jrpc.Error{Code: jrpc.CodeNoRemote,
		Message: fmt.Sprintf("all %d remote(s) tried failed for %s on %s (last: %s)",
			tried, method, p.cfg.Chain, Classify(method, lastErr).Reason)}
}

func isNull(b json.RawMessage) bool {
	return len(b) == 4 && string(b) == "null"
}
