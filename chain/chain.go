package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/forger"
	"github.com/venn-gateway/venn/headstore"
	headredis "github.com/venn-gateway/venn/headstore/redisstore"
	vnats "github.com/venn-gateway/venn/nats"
	"github.com/venn-gateway/venn/natsfeed"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/remotes/budget"
	"github.com/venn-gateway/venn/remotes/redisstore"
	"github.com/venn-gateway/venn/remotes/wire"
	"github.com/venn-gateway/venn/router"
	"github.com/venn-gateway/venn/stalker"
	"github.com/venn-gateway/venn/subcenter"
	subredis "github.com/venn-gateway/venn/subcenter/redisstore"
	"github.com/venn-gateway/venn/tracing"
)

// Parts are what every chain is built with: the process's own pieces,
// shared by its chains and kept for the chains a reload adds.
type Parts struct {
	// Redis is the cluster's (nil: none): leases, the head window's
	// store, filters, budgets and availability probes are shared on it;
	// without it each process keeps its own in memory and leads alone.
	Redis      redis.UniversalClient
	ReplicaID  string        // this process in leases and probe shares
	LeaseTTL   time.Duration // a leadership's lease
	NATS       *vnats.Conn   // nil: no NATS
	NATSPrefix string        // the JetStream feed's subject prefix
	// Limits are the subscription limits a chain built now starts with;
	// a reload sets them before building the chains it adds.
	Limits  subcenter.Limits
	Metrics *Metrics
	Remotes *remotes.Metrics
	Replies *wire.ReplyBudget   // the process's reply budget, one for every pool
	History *blockstore.History // nil without postgres.url
	Tiers   *CacheTiers         // the Postgres cache tiers' pool
	Tracer  *tracing.Tracer     // nil: off
	Logger  *slog.Logger
}

// Chain is one configured chain's running parts: its pool, head feed
// (the follower, the campaign whose leader runs the stalker, the JetStream
// feed), subscriptions, filters, cache and router, and the background work
// that follows its head. New builds it, Start starts it, Stop stops it;
// Reconfigure applies a reload in place.
type Chain struct {
	name   string
	built  Config // what it was built with (reconfigure.go)
	cfg    Config // as last applied
	pool   *remotes.Pool
	head   *headFeed
	router *router.Router

	cancel  context.CancelFunc
	wg      sync.WaitGroup
	settled func() (uint64, bool) // the settled line the leader archives by
	// cache is the chain's response cache (nil: off); a reload may
	// replace it (applyCache).
	cache atomic.Pointer[chainCache]
	parts *Parts // what built it, for what a reload rebuilds
}

// headFeed is a chain's head window on this replica: the follower that
// keeps it, and the campaign whose leader runs the stalker.
type headFeed struct {
	window   *headstore.Window
	follower *headstore.Follower
	elector  stalker.Elector
	stalker  *stalker.Stalker
	heads    *stalker.HeadShare // the remotes' heads shared; nil without Redis
	subs     *subcenter.Center
	filters  *subcenter.Filters
	feed     *natsfeed.Publisher // the JetStream feed; nil: off

	leading atomic.Bool // the stalker runs: this replica leads
	// stopCampaign ends the campaign alone (a drain), campaignDone is
	// closed when it has, the lease released; set by start.
	stopCampaign context.CancelFunc
	campaignDone chan struct{}
}

// lead runs the stalker for one leadership, and publishes the remotes'
// heads and the JetStream feed while it runs.
func (h *headFeed) lead(ctx context.Context, epoch uint64) {
	h.leading.Store(true)
	defer h.leading.Store(false)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	if h.heads != nil {
		wg.Go(func() { h.heads.Lead(ctx, epoch) })
	}
	if h.feed != nil {
		wg.Go(func() { h.feed.Lead(ctx, epoch) })
	}
	h.stalker.Lead(ctx, epoch)
	cancel()
	wg.Wait()
}

// New builds one chain: its pool, head feed, subscriptions and router.
// It does no I/O. The chain holds its series (metrics.go) until Forget.
func New(cc Config, p *Parts) (*Chain, error) {
	p.Metrics.hold(cc.Name) // before its parts resolve them
	c, err := build(cc, p)
	if err != nil {
		p.Metrics.release(cc.Name)
	}
	return c, err
}

func build(cc Config, p *Parts) (*Chain, error) {
	m, log := p.Metrics, p.Logger
	var budgets budget.Store     // without Redis each process counts its own
	var share remotes.AvailShare // without Redis each process probes alone
	if p.Redis != nil {
		budgets = redisstore.NewBudgets(p.Redis)
		share = redisstore.NewShare(p.Redis, p.ReplicaID)
	}
	c := &Chain{name: cc.Name, built: cc, cfg: cc, parts: p}
	// A remote found on another chain or misbehaving: its cached answers
	// since its last good check are dropped, by the cache of the moment.
	distrusted := func(d remotes.Distrust) { c.cache.Load().distrusted(d) }
	pool, err := cc.newPool(log, p.Remotes, p.Replies, p.Tracer, budgets, share, distrusted)
	if err != nil {
		return nil, err
	}
	var (
		archive stalker.Archive // nil without postgres.url
		hist    router.History
	)
	if hc := historyOf(p.History, cc); hc != nil {
		archive, hist = hc, hc
	}
	sc := cc.StalkerConfig(archive, m.archive)
	sc.Tracer = p.Tracer
	h := newHeadFeed(cc, sc, pool, p)
	var calls forger.Calls = pool
	if cc.Integrity.ClientCalls {
		calls = remotes.NewVerifiedClient(pool, h.window) // blocks and receipts checked, failing ones refetched
	}
	// newPendingTransactions from a remote's own subscription, or a
	// pending-transaction filter polled where no WebSocket remote can.
	var relay subcenter.Relay
	if rl := pool.Relays(); rl != nil {
		relay = rl
	}
	h.subs = subcenter.New(cc.Name, h.window, relay, subcenter.LimitOptions(p.Limits), log, m.subs)
	h.filters = newFilters(cc, h.window, relay, p)
	settled := cc.settledLine(h.window)
	rc := router.Config{Chain: cc.Name, ChainID: cc.ChainID, MaxLag: cc.Pool.MaxLag,
		Subscriptions: h.subs, Filters: h.filters, History: hist, Settled: settled, Confirm: pool.Heads().ConfirmHash, LogLimits: cc.GetLogsLimits,
		Static: cc.StaticAnswers,
		Logger: log, Tracer: p.Tracer}
	ccache, err := newCache(cc, p)
	if err != nil {
		pool.DropSeries()
		return nil, fmt.Errorf("chain %s: cache: %w", cc.Name, err)
	}
	if ccache != nil {
		rc.Cache = ccache.c // a nil *cache.Cache would be a non-nil interface
	}
	rt := router.New(rc, h.window, router.UpstreamOf(calls, pool.Heads()), m.router)
	c.pool, c.head, c.router, c.settled = pool, h, rt, settled
	c.cache.Store(ccache)
	return c, nil
}

// historyOf is the chain's history store in h, nil without postgres.url
// (h nil) or with the chain's history off.
func historyOf(h *blockstore.History, cc Config) *blockstore.HistoryChain {
	if h == nil || cc.History.Off {
		return nil
	}
	return h.Chain(cc.ChainID, cc.Name, cc.History.Policy())
}

var (
	_ stalker.Archive = (*blockstore.HistoryChain)(nil)
	_ router.History  = (*blockstore.HistoryChain)(nil)
)

// newFilters builds a chain's polled filters: on the cluster's Redis when
// there is one, so that every replica serves them, in memory when not.
func newFilters(cc Config, w *headstore.Window, relay subcenter.Relay, p *Parts) *subcenter.Filters {
	var (
		store   subcenter.FilterStore = subcenter.NewMemoryFilters()
		pending                       = subcenter.NewMemoryPending()
	)
	if p.Redis != nil {
		store, pending = subredis.NewFilters(p.Redis, cc.Name), subredis.NewPending(p.Redis, cc.Name)
	}
	return subcenter.NewFilters(cc.Name, w, store, pending, relay, cc.Filters, p.Logger)
}

// newHeadFeed builds a chain's head feed: on the cluster's Redis when
// there is one, in memory (this process leads) when not.
func newHeadFeed(cc Config, sc stalker.Config, pool *remotes.Pool, p *Parts) *headFeed {
	m, log := p.Metrics, p.Logger
	ec := stalker.ElectionConfig{Chain: cc.Name, ReplicaID: p.ReplicaID,
		TTL: p.LeaseTTL, Logger: log, Metrics: m.election}
	var (
		store   headstore.Store
		elector stalker.Elector
	)
	if p.Redis != nil {
		store = headredis.New(p.Redis, cc.Name, cc.Head.Window)
		elector = stalker.NewRedisElector(p.Redis, ec)
	} else {
		store = headstore.NewMemory(cc.Head.Window)
		elector = stalker.NewMemoryElector(ec)
	}
	w := headstore.NewWindow(cc.Head.Window)
	h := &headFeed{
		window:   w,
		follower: headstore.NewFollower(cc.Name, store, w, log, m.head),
		elector:  elector,
		stalker:  stalker.New(sc, pool, pool.Heads(), store, log, m.stalker),
	}
	if p.Redis != nil {
		h.heads = stalker.NewHeadShare(p.Redis, cc.Name, pool.Heads(), log, m.heads)
	}
	if cc.NATS.Stream && p.NATS != nil {
		h.feed = natsfeed.New(natsfeed.Options{Chain: cc.Name, Prefix: p.NATSPrefix, Config: cc.NATS,
			Conn: p.NATS.NATS, Store: store, Window: w, Fetch: fetchHeader(pool), Logger: log, Metrics: m.feed})
	}
	return h
}

// fetchHeader finds a block by hash through the chain's remotes, header
// only: the JetStream feed's catch-up walks an orphaned branch by number,
// hash and parent, and names its blocks in a reorg event.
func fetchHeader(pool *remotes.Pool) headstore.FetchBlock {
	return func(ctx context.Context, hash string) (*evm.Parts, error) {
		res, err := pool.Call(ctx, "eth_getBlockByHash", json.RawMessage(`[`+strconv.Quote(hash)+`,false]`))
		if err != nil {
			return nil, err
		}
		if string(res) == "null" {
			return nil, nil
		}
		var h struct {
			Number string `json:"number"`
			Hash   string `json:"hash"`
			Parent string `json:"parentHash"`
		}
		if err := json.Unmarshal(res, &h); err != nil {
			return nil, fmt.Errorf("block %s: %w", hash, err)
		}
		n, err := evm.ParseQuantity(h.Number)
		if err != nil {
			return nil, fmt.Errorf("block %s: number %q: %w", hash, h.Number, err)
		}
		return &evm.Parts{Block: &evm.Block{Number: n, Hash: h.Hash, Parent: h.Parent}}, nil
	}
}

// Start starts the chain's pool, which may wait a few seconds for a first
// ready remote, then its follower, subscriptions, campaign for the
// leadership (unless not campaign: a drained replica hands leaderships
// over) and history write-through. A chain whose pool fails to start is
// not running: Stop it, to undo what the pool opened.
func (c *Chain) Start(ctx context.Context, campaign bool) error {
	if err := c.pool.Start(ctx); err != nil {
		return err
	}
	c.run(campaign)
	return nil
}

// run starts the chain's background work under a context of its own: a
// reload may stop one chain.
func (c *Chain) run(campaign bool) {
	bg, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Go(func() { c.head.follower.Run(bg) })
	c.wg.Go(func() { c.head.subs.Run(bg) })
	c.wg.Go(func() { <-bg.Done(); c.head.filters.Stop() })
	if c.head.heads != nil {
		c.wg.Go(func() { c.head.heads.Run(bg) })
	}
	if h := c.head; campaign {
		camp, stop := context.WithCancel(bg)
		h.stopCampaign, h.campaignDone = stop, make(chan struct{})
		c.wg.Go(func() { defer close(h.campaignDone); h.elector.Run(camp, h.lead) })
	}
	c.wg.Go(func() { c.router.Run(bg) }) // the history write-through
	c.cache.Load().run(c)
}

// Stop ends the chain's campaign (a leader releases its lease, so another
// replica takes over at once) and its follower, waits for them, then
// stops the pool they call.
func (c *Chain) Stop(ctx context.Context) error {
	return errors.Join(c.halt(ctx), c.pool.Stop(ctx))
}

// halt ends the chain's background work and waits for it.
func (c *Chain) halt(ctx context.Context) error {
	if c.cancel == nil {
		c.cache.Load().stop()
		return nil
	}
	c.cancel()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
		c.cache.Load().stop()
		return nil
	case <-ctx.Done():
		return fmt.Errorf("chain %s: head feed: stop: %w", c.name, ctx.Err())
	}
}

// Forget lets go of the chain's series, once it has stopped for good: its
// remotes' (and its chain's there) and its parts'.
func (c *Chain) Forget() {
	c.pool.DropSeries()
	c.parts.Metrics.release(c.name)
}
