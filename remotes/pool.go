package remotes

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/avail"
	"github.com/venn-gateway/venn/remotes/budget"
	"github.com/venn-gateway/venn/remotes/pin"
	"github.com/venn-gateway/venn/remotes/relay"
	"github.com/venn-gateway/venn/remotes/side"
	"github.com/venn-gateway/venn/remotes/verified"
)

// maxRemotes bounds a chain's remotes: the failover loop tracks the ones
// it tried in a 64-bit mask.
const maxRemotes = 64

// Pool is one chain's load balancer over its remotes. It keeps the
// membership (the remotes, by tier), the chain's head and each remote's
// lag, starts and stops the trackers, and is the entry point of every call:
// Call picks the call's strategy (broadcast, pinned, split, or send's
// single, hedged and voted), which asks selection (select.go) for remotes
// and the judge (judge.go) what their replies mean. Identical concurrent
// reads share one call (dedup.go). It implements jrpc.Handler.
type Pool struct {
	// state is what a reload may change (reconfig.go): the settings, the
	// remotes by tier then config order, selection over them (select.go)
	// and what is compiled from the settings, swapped whole.
	state atomic.Pointer[poolState]
	// side is the remotes beside the pool (shadows, transaction groups)
	// and the routes to them; nil: none (remotes/side).
	side    atomic.Pointer[side.Side]
	log     *slog.Logger
	m       *Metrics
	now     func() time.Time
	flights flights
	filters *pin.Table[*Remote]

	// heads is the chain's head tracking (chainhead.go): the tip, the
	// block time, the poll plan, the feed; Heads() hands it out.
	heads Heads

	splits   prometheus.Counter
	shared   prometheus.Counter
	attempts prometheus.Observer

	cons consensusState // consensus.go, misbehave.go: vote rules, cordons, misbehaviour log

	integ *verified.Chain // integrity.go: local checks of answers

	relays *relay.Relays // relays.go: subscriptions relayed upstream

	wanted      *avail.Wanted // avail_probe.go: closed by the first call for old data
	budgetLogAt atomic.Int64  // budget.go: unix nanos of the last flush failure logged

	mu     sync.Mutex
	bg     context.Context // the trackers' context, set by Start; nil before
	cancel context.CancelFunc
	slots  uint64         // remote slots taken, by members and by retired remotes still draining
	wg     sync.WaitGroup // trackers, background broadcasts and retiring remotes

	// reconfMu orders reloads (Reconfigure) and the swaps of pending
	// replacements (rotate.go); swaps and swapGen are under it.
	reconfMu sync.Mutex
	swaps    []swap
	swapGen  uint64

	release sync.Once // DropSeries lets go of the series once
}

// NewPool builds a chain's pool. It does no I/O: Start dials.
func NewPool(cfg PoolConfig, rs []Config, log *slog.Logger, m *Metrics) (*Pool, error) {
	rs, sideRs := splitSide(rs)
	cfg = cfg.WithDefaults(len(rs))
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
		cfg.Replies = NewReplyBudget(0, m)
	}
	log = log.With("chain", cfg.Chain)
	m.holdChain(cfg.Chain) // before its series are resolved (series.go)
	p := &Pool{
		log: log, m: m, now: time.Now, filters: pin.New[*Remote](), wanted: avail.NewWanted(),
		splits:   m.splits.WithLabelValues(cfg.Chain),
		shared:   m.shared.WithLabelValues(cfg.Chain),
		attempts: m.attempts.WithLabelValues(cfg.Chain),
	}
	p.heads.init(p, m, cfg.Chain)
	p.relays = relay.New(relayHost{p})
	var members []*Remote
	for _, rc := range rs {
		r, err := p.newRemote(cfg, rc)
		if err != nil {
			p.discard(members)
			m.releaseChain(cfg.Chain)
			return nil, err
		}
		members = append(members, r)
	}
	st, err := p.compile(cfg, members, nil)
	if err != nil {
		p.discard(members)
		m.releaseChain(cfg.Chain)
		return nil, fmt.Errorf("chain %s: %w", cfg.Chain, err)
	}
	sd, err := p.buildSide(cfg, sideRs)
	if err != nil {
		p.discard(members)
		m.releaseChain(cfg.Chain)
		return nil, err
	}
	p.side.Store(sd)
	p.state.Store(st)
	p.initConsensus(m)
	p.integ = verified.NewChain(cfg.Chain, log, m.ig)
	p.heads.blockTimeG.Set(p.heads.BlockTime().Seconds())
	return p, nil
}

// Start begins following every remote's chain id and head. It waits, at
// most until ctx ends or a few seconds pass, for one remote to be ready so
// the first client calls find somewhere to go; a chain with no reachable
// remote still starts.
func (p *Pool) Start(ctx context.Context) error {
	if err := p.cons.Start(); err != nil {
		return fmt.Errorf("chain %s: %w", p.conf().Chain, err)
	}
	bg, cancel := context.WithCancel(context.Background())
	p.mu.Lock()
	p.cancel = cancel
	p.bg = bg
	for _, r := range p.members() {
		p.follow(r)
	}
	p.mu.Unlock()
	p.wg.Go(func() { p.scoreLoop(bg) })
	p.wg.Go(func() { budget.Run(bg, p.now, p.flushBudgets) })
	p.wg.Go(func() { p.heads.learnBlockTime(bg) }) // block_time sets the cadence; heads are judged by what the chain says
	p.wg.Go(func() { p.heads.stall.Run(bg, p.log, p.heads.repoll) })
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
	go func() {
		p.wg.Wait() // retiring remotes and pending swaps included
		p.reconfMu.Lock()
		p.endSwaps()
		p.reconfMu.Unlock()
		for _, r := range p.members() {
			r.trackers.Wait()
		}
		p.side.Load().Close()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("chain %s: stop: %w", p.conf().Chain, ctx.Err())
	}
	if lerr := p.cons.Stop(ctx); lerr != nil && err == nil {
		err = fmt.Errorf("chain %s: stop: %w", p.conf().Chain, lerr)
	}
	for _, r := range p.members() {
		r.t.Close()
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
	for _, r := range p.members() {
		if r.healthy(now) && !p.lagging(r, best) {
			return true
		}
	}
	return false
}

// Heads is the chain's head tracking: its tip, block time, poll plan and
// feed, and the remotes' chain checks (chainhead.go).
func (p *Pool) Heads() *Heads { return &p.heads }

// healthyBest is the highest head among remotes in rotation; a dead
// remote's last head must not make every live one look lagging.
func (p *Pool) healthyBest(now time.Time) uint64 {
	var best uint64
	for _, r := range p.members() {
		if h := r.Head(); h > best && r.healthy(now) {
			best = h
		}
	}
	return best
}

func (p *Pool) lagging(r *Remote, best uint64) bool {
	v := view{best: best, maxLag: p.conf().MaxLag}
	return v.lagging(r)
}

// view is the pool's membership now, as selection reads it.
func (p *Pool) view() view {
	now := p.now()
	return view{now: now, best: p.healthyBest(now), maxLag: p.conf().MaxLag}
}

// pick is selection's next remote for a call on route rt that has not
// tried the remotes in tried (select.go), or nil.
func (p *Pool) pick(method string, rt route, tried uint64) (*Remote, int) {
	v := p.view()
	return p.selection().pick(&v, method, &rt, tried)
}

// Call sends method to the remotes within the chain's call deadline, by
// the strategy its kind of call takes: broadcast for raw transactions,
// pinned for filters, single for other writes; reads are shared with
// identical ones in flight.
func (p *Pool) Call(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	c := evm.ParseCall(method, params)
	return p.call(ctx, &c)
}

// call routes a parsed call: raw transactions to broadcast, filters to
// their pinned remote, other writes to single, reads through dedup.
func (p *Pool) call(ctx context.Context, c *evm.Call) (json.RawMessage, error) {
	sd := p.side.Load() // remotes/side
	if sd == nil {
		return p.callPool(ctx, c)
	}
	if rt := sd.Route(ctx, c.Method); rt != nil {
		if res, public, err := sd.Send(ctx, rt, c); !public {
			return res, err
		}
		return p.callPool(ctx, c) // the route falls back to the public remotes
	}
	res, err := p.callPool(ctx, c)
	if err == nil && c.Class == evm.ClassRead {
		sd.Shadow(ctx, c, res)
	}
	return res, err
}

// callPool is call through the pool's own remotes.
func (p *Pool) callPool(ctx context.Context, c *evm.Call) (json.RawMessage, error) {
	method, params := c.Method, c.Params
	switch c.Class {
	case evm.ClassBroadcast:
		ctx, cancel := context.WithTimeout(ctx, p.conf().CallDeadline)
		defer cancel()
		return p.broadcast(ctx, params)
	case evm.ClassStateful:
		ctx, cancel := context.WithTimeout(ctx, p.conf().CallDeadline)
		defer cancel()
		return p.pinned(ctx, method, params)
	case evm.ClassWrite:
		ctx, cancel := context.WithTimeout(ctx, p.conf().CallDeadline)
		defer cancel()
		return p.send(ctx, method, params, route{once: true})
	}
	cv := viewOf(c)
	// Identical concurrent reads share one upstream call (see flights).
	key := method + "\x00" + string(params)
	if f := jrpc.MinHeadOf(ctx).Number; f > 0 {
		// Not shared with calls any remote may answer.
		key += "\x00" + strconv.FormatUint(f, 10)
	}
	res, shared, err := p.flights.do(ctx, key, func(ctx context.Context) (json.RawMessage, error) {
		ctx, cancel := context.WithTimeout(ctx, p.conf().CallDeadline)
		defer cancel()
		return p.read(ctx, method, params, cv)
	})
	if shared {
		p.shared.Inc()
	}
	return res, err
}

// read serves a read: eth_getLogs by the split strategy (getlogs.go),
// anything else as its route allows.
func (p *Pool) read(ctx context.Context, method string, params json.RawMessage, cv callView) (json.RawMessage, error) {
	if method == "eth_getLogs" {
		return p.getLogs(ctx, params, cv)
	}
	return p.send(ctx, method, params, p.readRoute(method, cv))
}

// send sends a call on route rt by the one strategy that fits it, chosen
// here and only here: voted when a consensus rule puts it to a vote
// (vote.go), hedged when a hedge group takes it (hedge.go), else single
// (single.go). Each decides what to send from the judge's meaning of every
// reply (judge.go).
func (p *Pool) send(ctx context.Context, method string, params json.RawMessage, rt route) (json.RawMessage, error) {
	if f := jrpc.MinHeadOf(ctx).Number; f > 0 && rt.only == nil {
		if best := p.healthyBest(p.now()); best < f {
			return nil, &floorError{chain: p.conf().Chain, floor: f, best: best}
		}
		rt.floor = f
	}
	rt.histRoute(method, params)
	if rt.hist != KindNone {
		p.wanted.Note(rt.histAt, p.heads.Head())
		rt.unsure = false
		if err := p.unavailable(method, &rt); err != nil {
			return nil, err
		}
	}
	if rule := p.voteRule(method, params, &rt); rule != nil {
		v := p.newVote(method, params, rt, rule)
		defer v.observe(ctx)
		return v.run(ctx)
	}
	a := p.newAttempt(method, params, rt)
	defer a.observe(ctx)
	if g := p.hedgeGroup(method, rt); g != nil {
		return a.hedged(ctx, g)
	}
	return a.single(ctx)
}
