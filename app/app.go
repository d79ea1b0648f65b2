// Package app owns venn's configuration and its fx wiring, nothing else: it
// turns a *Config into pools, routers, the JSON-RPC server and the metrics
// server, and orders their start and stop. Behaviour lives in the packages
// it wires.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"
	"golang.org/x/sync/errgroup"

	"github.com/venn-gateway/venn/admin"
	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/forger"
	"github.com/venn-gateway/venn/headstore"
	headredis "github.com/venn-gateway/venn/headstore/redisstore"
	"github.com/venn-gateway/venn/jrpc"
	vnats "github.com/venn-gateway/venn/nats"
	"github.com/venn-gateway/venn/natsfeed"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/remotes/budget"
	"github.com/venn-gateway/venn/remotes/redisstore"
	"github.com/venn-gateway/venn/remotes/wire"
	"github.com/venn-gateway/venn/reqlog"
	"github.com/venn-gateway/venn/retry"
	"github.com/venn-gateway/venn/router"
	"github.com/venn-gateway/venn/stalker"
	"github.com/venn-gateway/venn/subcenter"
	subredis "github.com/venn-gateway/venn/subcenter/redisstore"
	"github.com/venn-gateway/venn/tracing"
)

// HTTP server timeouts. Only headers and idle keep-alives are bounded by
// http.Server on the JSON-RPC server: WebSocket connections and long
// eth_getLogs calls outlive any whole-request read or write timeout, so jrpc
// bounds bodies (limits.http_read_timeout, max_body_bytes), answers
// (limits.http_write_timeout), requests in flight (limits.max_http_in_flight)
// and calls itself.
const (
	readHeaderTimeout = 10 * time.Second
	// maxHeaderBytes bounds a JSON-RPC request's headers: clients send a
	// handful; Go's default (1 MiB) lets each connection pin far more.
	maxHeaderBytes = 64 << 10
	// idleTimeout outlasts the usual load balancer idle timeout (60 s), so
	// the balancer, not venn, closes idle keep-alives and never sends a
	// request on a connection venn is closing.
	idleTimeout = 120 * time.Second
	// metricsTimeout bounds a whole scrape or probe.
	metricsTimeout = 30 * time.Second
)

// logOutputName names the optional io.Writer logs go to (LogOutput).
const logOutputName = "app_log_output"

// Module builds venn from a supplied *Config. New is the usual way in.
var Module = fx.Module("app",
	remotes.Module,
	jrpc.Module,
	fx.Provide(
		newLogLevel,
		newLogger,
		newRegistry,
		newTracer,
		newNATS,
		newHistory,
		newChains,
		newRPCOptions,
		newRequestLog,
		newRateLimiter,
		newBudgets,
		newUsage,
		newStoredScopes,
		newEdge,
		newGate,
		newAdmin,
		newServers,
		newReloader,
		adminReloader,
	),
	// Every chain's router is served by the JSON-RPC server; the servers
	// are wanted for their lifecycle hooks, nothing consumes them.
	fx.Invoke(logStart, handleChains, func(*servers, *adminServer) {}, watchReloadSignals, tellAdminOfReloads, serveNATS, watchStoredScopes),
)

// New builds the fx app for cfg, which must have come from Load or Parse.
// fx's own events are logged at debug level.
func New(cfg *Config, opts ...fx.Option) *fx.App {
	base := []fx.Option{
		fx.Supply(cfg),
		Module,
		fx.WithLogger(func(log *slog.Logger) fxevent.Logger {
			l := &fxevent.SlogLogger{Logger: log}
			l.UseLogLevel(slog.LevelDebug)
			return l
		}),
	}
	return fx.New(append(base, opts...)...)
}

// LogOutput sends the app's logs to w instead of os.Stderr.
func LogOutput(w io.Writer) fx.Option {
	return fx.Provide(fx.Annotate(
		func() io.Writer { return w },
		fx.ResultTags(`name:"`+logOutputName+`"`),
	))
}

type loggerParams struct {
	fx.In
	Config *Config
	Level  *slog.LevelVar // a reload sets it
	Output io.Writer      `name:"app_log_output" optional:"true"`
}

func newLogger(p loggerParams) (*slog.Logger, error) {
	w := p.Output
	if w == nil {
		w = os.Stderr
	}
	opts := &slog.HandlerOptions{Level: p.Level}
	if p.Config.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// newRegistry is the one registry every component registers on; it is
// passed in, never global. venn_replica_info names this process as the
// logs, the leases and the admin API do.
func newRegistry(cfg *Config, b buildInfoIn) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Name: "replica_info",
		Help: "Always 1: this process's replica id (redis.replica_id, or host-pid) and version."}, []string{"replica", "version"})
	info.WithLabelValues(cfg.replicaID(), b.Build.versionOrUnknown()).Set(1)
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		info,
	)
	return reg
}

// chain is one configured chain's pool, head feed and router, and the
// background work that follows its head (run, halt).
type chain struct {
	name   string
	built  ChainConfig // what it was built with (reload_chains.go)
	cfg    ChainConfig // as last applied
	pool   *remotes.Pool
	head   *headFeed
	router *router.Router

	cancel  context.CancelFunc
	wg      sync.WaitGroup
	settled func() (uint64, bool) // the settled line the leader archives by
	// cache is the chain's response cache (nil: off); a reload may
	// replace it (applyCache).
	cache atomic.Pointer[chainCache]
	owner *chains // what built it, for what a reload rebuilds
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

// chains are in config order. A reload adds and removes chains (reload.go):
// the list is swapped whole, so readers (readyz) load it without a lock.
type chains struct {
	list     atomic.Pointer[[]*chain]
	rdb      redis.UniversalClient // nil without Redis
	tiers    cacheTiers            // the Postgres cache tiers' pool
	log      *slog.Logger
	parts    chainParts
	retired  sync.WaitGroup // removed chains stopping (reload_chains.go)
	stopping chan struct{}  // closed by stop: removed chains stop waiting
	stopOnce sync.Once
	// draining turns /readyz 503: a drain (admin API) or the shutdown.
	draining atomic.Bool
	// series deletes a removed chain's series (series.go).
	series chainSeries
}

// chainParts is what every chain is built with: the process's own
// pieces, kept for the chains a reload adds.
type chainParts struct {
	cfg     *Config          // the process settings chains read: redis
	limits  subcenter.Limits // as last applied
	metrics chainMetrics
	remotes *remotes.Metrics
	replies *wire.ReplyBudget
	history *history
	tracer  *tracing.Tracer // nil: off
	nats    *vnats.Conn     // nil: no NATS
}

// all is the chains served now, in config order.
func (cs *chains) all() []*chain {
	if l := cs.list.Load(); l != nil {
		return *l
	}
	return nil
}

// chainMetrics are the series every chain's parts register under.
type chainMetrics struct {
	head     *headstore.Metrics
	stalker  *stalker.Metrics
	election *stalker.ElectionMetrics
	heads    *stalker.HeadShareMetrics
	archive  *stalker.ArchiveMetrics
	router   *router.Metrics
	subs     *subcenter.Metrics
	cache    *cache.Metrics
	feed     *natsfeed.Metrics
}

func newChainMetrics(reg prometheus.Registerer) chainMetrics {
	return chainMetrics{
		head:     headstore.NewMetrics(reg),
		stalker:  stalker.NewMetrics(reg),
		election: stalker.NewElectionMetrics(reg),
		heads:    stalker.NewHeadShareMetrics(reg),
		archive:  stalker.NewArchiveMetrics(reg),
		router:   router.NewMetrics(reg),
		subs:     subcenter.NewMetrics(reg),
		cache:    cache.NewMetrics(reg),
		feed:     natsfeed.NewMetrics(reg),
	}
}

type chainsParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    *Config
	Log       *slog.Logger
	Registry  *prometheus.Registry
	Remotes   *remotes.Metrics
	History   *history
	Tracer    *tracing.Tracer // nil: off
	NATS      *vnats.Conn     // nil: no NATS
}

func newChains(p chainsParams) (*chains, error) {
	cfg, log := p.Config, p.Log
	out := &chains{log: log, stopping: make(chan struct{})}
	if cfg.Redis.Enabled() {
		rdb, err := cfg.Redis.newRedisClient(redisTuning{})
		if err != nil {
			return nil, err
		}
		out.rdb = rdb
	}
	out.tiers = cacheTiers{hist: p.History.store, url: cfg.Postgres.URL}
	out.parts = chainParts{cfg: cfg, limits: cfg.Limits.Subscriptions, metrics: newChainMetrics(p.Registry), remotes: p.Remotes,
		replies: remotes.NewReplyBudget(cfg.Limits.MaxReplyBytesInFlight, p.Remotes), // one for the process
		history: p.History, tracer: p.Tracer, nats: p.NATS}
	out.series.onDrop(out.parts.metrics.drop)
	list := make([]*chain, 0, len(cfg.Chains))
	for _, cc := range cfg.Chains {
		c, err := out.build(cc)
		if err != nil {
			out.tiers.close()
			return nil, err
		}
		list = append(list, c)
	}
	out.list.Store(&list)
	p.Lifecycle.Append(fx.Hook{OnStart: out.start, OnStop: out.stop})
	return out, nil
}

// build builds one chain: its pool, head feed, subscriptions and router.
// It does no I/O. The chain holds its series (series.go) until forget.
func (cs *chains) build(cc ChainConfig) (*chain, error) {
	cs.series.hold(cc.Name) // before its parts resolve them
	c, err := cs.buildHeld(cc)
	if err != nil {
		cs.series.release(cc.Name)
	}
	return c, err
}

func (cs *chains) buildHeld(cc ChainConfig) (*chain, error) {
	cfg, m, log := cs.parts.cfg, cs.parts.metrics, cs.log
	var budgets budget.Store     // without Redis each process counts its own
	var share remotes.AvailShare // without Redis each process probes alone
	if cs.rdb != nil {
		budgets = redisstore.NewBudgets(cs.rdb)
		share = redisstore.NewShare(cs.rdb, cfg.replicaID())
	}
	c := &chain{name: cc.Name, built: cc, cfg: cc, owner: cs}
	// A remote found on another chain or misbehaving: its cached answers
	// since its last good check are dropped, by the cache of the moment.
	distrusted := func(d remotes.Distrust) { c.cache.Load().distrusted(d) }
	pool, err := cc.newPool(log, cs.parts.remotes, cs.parts.replies, cs.parts.tracer, budgets, share, distrusted)
	if err != nil {
		return nil, err
	}
	var (
		archive stalker.Archive // nil without postgres.url
		hist    router.History
	)
	if hc := cs.parts.history.chain(cc); hc != nil {
		archive, hist = hc, hc
	}
	sc := cc.StalkerConfig(archive, m.archive)
	sc.Tracer = cs.parts.tracer
	h := cs.newHeadFeed(cfg, cc, sc, pool, m)
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
	h.subs = subcenter.New(cc.Name, h.window, relay, subcenter.LimitOptions(cs.parts.limits), log, m.subs)
	h.filters = cs.newFilters(cc, h.window, relay)
	settled := cc.settledLine(h.window)
	rc := router.Config{Chain: cc.Name, ChainID: cc.ChainID, MaxLag: cc.Pool.MaxLag,
		Subscriptions: h.subs, Filters: h.filters, History: hist, Settled: settled, Confirm: pool.Heads().ConfirmHash, LogLimits: cc.GetLogsLimits,
		Static: cc.StaticAnswers,
		Logger: log, Tracer: cs.parts.tracer}
	ccache, err := cs.newCache(cc, log, m.cache)
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

// newFilters builds a chain's polled filters: on the cluster's Redis when
// there is one, so that every replica serves them, in memory when not.
func (cs *chains) newFilters(cc ChainConfig, w *headstore.Window, relay subcenter.Relay) *subcenter.Filters {
	var (
		store   subcenter.FilterStore = subcenter.NewMemoryFilters()
		pending                       = subcenter.NewMemoryPending()
	)
	if cs.rdb != nil {
		store, pending = subredis.NewFilters(cs.rdb, cc.Name), subredis.NewPending(cs.rdb, cc.Name)
	}
	return subcenter.NewFilters(cc.Name, w, store, pending, relay, cc.Filters, cs.log)
}

// newHeadFeed builds a chain's head feed: on the cluster's Redis when
// there is one, in memory (this process leads) when not.
func (cs *chains) newHeadFeed(cfg *Config, cc ChainConfig, sc stalker.Config, pool *remotes.Pool, m chainMetrics) *headFeed {
	ec := stalker.ElectionConfig{Chain: cc.Name, ReplicaID: cfg.replicaID(),
		TTL: cfg.Redis.LeaseTTL, Logger: cs.log, Metrics: m.election}
	var (
		store   headstore.Store
		elector stalker.Elector
	)
	if cs.rdb != nil {
		store = headredis.New(cs.rdb, cc.Name, cc.Head.Window)
		elector = stalker.NewRedisElector(cs.rdb, ec)
	} else {
		store = headstore.NewMemory(cc.Head.Window)
		elector = stalker.NewMemoryElector(ec)
	}
	w := headstore.NewWindow(cc.Head.Window)
	h := &headFeed{
		window:   w,
		follower: headstore.NewFollower(cc.Name, store, w, cs.log, m.head),
		elector:  elector,
		stalker:  stalker.New(sc, pool, pool.Heads(), store, cs.log, m.stalker),
	}
	if cs.rdb != nil {
		h.heads = stalker.NewHeadShare(cs.rdb, cc.Name, pool.Heads(), cs.log, m.heads)
	}
	if cc.NATS.Stream && cs.parts.nats != nil {
		h.feed = natsfeed.New(natsfeed.Options{Chain: cc.Name, Prefix: cfg.NATS.WithDefaults().Prefix, Config: cc.NATS,
			Conn: cs.parts.nats.NATS, Store: store, Window: w, Fetch: fetchHeader(pool), Logger: cs.log, Metrics: m.feed})
	}
	return h
}

// start starts every pool at once: each may wait a few seconds for a first
// ready remote, and that must not add up across chains. Then each chain's
// follower and campaign start.
func (cs *chains) start(ctx context.Context) error {
	var g errgroup.Group
	for _, c := range cs.all() {
		g.Go(func() error { return c.pool.Start(ctx) })
	}
	if err := g.Wait(); err != nil {
		// fx stops only hooks that started: undo the pools that did.
		return errors.Join(err, cs.stop(ctx))
	}
	for _, c := range cs.all() {
		c.run(true)
	}
	return nil
}

// run starts the chain's follower, subscriptions, campaign (unless not
// campaign: campaigns) and history write-through, under a context of its own: a reload may stop one chain.
func (c *chain) run(campaign bool) {
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

// halt ends the chain's campaign (a leader releases its lease, so another
// replica takes over at once) and its follower, and waits for them.
func (c *chain) halt(ctx context.Context) error {
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

// stop ends the campaigns and the followers, then the pools they call.
func (cs *chains) stop(ctx context.Context) error {
	list := cs.all()
	errs := make([]error, 2*len(list))
	var wg sync.WaitGroup
	for i, c := range list {
		wg.Go(func() { errs[i] = c.halt(ctx) })
	}
	wg.Wait()
	for i, c := range list {
		wg.Go(func() { errs[len(list)+i] = c.pool.Stop(ctx) })
	}
	wg.Wait()
	errs = append(errs, cs.waitRetired(ctx))
	cs.tiers.close() // every prune has ended
	if cs.rdb != nil {
		errs = append(errs, cs.rdb.Close())
	}
	return errors.Join(errs...)
}

func newRPCOptions(cfg *Config, log *slog.Logger, reg *prometheus.Registry, g *gate, tr *tracing.Tracer, rl *reqlog.Log) jrpc.Options {
	return jrpc.Options{
		Limits:            cfg.JRPCLimits(),
		Logger:            log,
		Registerer:        reg,
		MethodLabel:       evm.MethodLabel,
		Gate:              g,
		Hook:              tr.CallHook(), // nil when off
		DiagnosticHeaders: cfg.DiagnosticsOn(),
		OnCall:            onCall(rl),
		Compression:       cfg.Compression,
	}
}

// handleChains serves each chain at /NAME.
func handleChains(srv *jrpc.Server, cs *chains) {
	for _, c := range cs.all() {
		srv.Handle(c.name, c.router)
	}
}

// servers are the process's HTTP listeners.
type servers struct {
	rpc     *httpService
	metrics *httpService // nil when metrics_listen is ""
}

type serversParams struct {
	fx.In
	Lifecycle  fx.Lifecycle
	Shutdowner fx.Shutdowner
	Config     *Config
	Log        *slog.Logger
	Registry   *prometheus.Registry
	RPC        *jrpc.Server
	Gate       *gate
	Chains     *chains
	History    *history
	Admin      *admin.Admin
	NATS       *vnats.Conn // nil: no NATS
}

// newServers registers the listeners' hooks. The metrics server is
// appended first so that it stops last: /readyz keeps answering 503 while
// the JSON-RPC server drains.
//
// Stopping goes: /readyz turns 503; for shutdown_delay calls are still
// served, so that load balancers see the 503 and move traffic away first;
// then jrpc drains (new calls get HTTP 503 and -32054, calls in flight
// finish, WebSockets get a close frame) and the listener shuts down.
func newServers(p serversParams) *servers {
	// A listener that dies after start takes the whole process down rather
	// than leaving it half alive.
	fail := func() { _ = p.Shutdowner.Shutdown(fx.ExitCode(1)) }
	s := &servers{}
	draining := &p.Chains.draining

	if addr := p.Config.MetricsAddr(); addr != "" {
		h := &healthHandler{chains: p.Chains, history: p.History.readiness, draining: draining, nats: natsStatus(p.NATS)}
		var adm http.Handler
		if p.Config.Admin.OnMetricsListen {
			adm = p.Admin.Handler()
		}
		s.metrics = &httpService{name: "metrics", addr: addr, log: p.Log, srv: &http.Server{
			Handler:           http.TimeoutHandler(metricsRouter(p.Registry, h, adm), metricsTimeout, "timeout"),
			ReadHeaderTimeout: readHeaderTimeout,
			IdleTimeout:       idleTimeout,
		}}
		p.Lifecycle.Append(fx.Hook{
			OnStart: func(ctx context.Context) error { return s.metrics.start(ctx, fail) },
			OnStop:  s.metrics.stop,
		})
	}

	s.rpc = &httpService{name: "rpc", addr: p.Config.Listen, log: p.Log, tls: p.Config.TLS, srv: &http.Server{
		Handler:           p.Gate.wrap(p.RPC.Handler()), // CORS in front
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
	}}
	p.Lifecycle.Append(fx.Hook{
		OnStart: func(ctx context.Context) error { return s.rpc.start(ctx, fail) },
		OnStop: func(ctx context.Context) error {
			draining.Store(true)
			if d := p.Config.ShutdownDelay; d > 0 {
				p.Log.Info("not ready, still serving", "server", "rpc", "shutdown_delay", d)
				retry.Sleep(ctx, d)
			}
			p.Log.Info("draining", "server", "rpc")
			// jrpc first: it refuses new calls, lets in-flight ones finish
			// and closes WebSockets with a close frame, none of which
			// http.Server.Shutdown does for hijacked connections.
			err := p.RPC.Shutdown(ctx)
			return errors.Join(err, s.rpc.stop(ctx))
		},
	})
	return s
}

// seconds is d in seconds, to the millisecond.
func seconds(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond)) / float64(time.Second)
}

// httpService is one http.Server on a listener bound at start.
type httpService struct {
	name string
	addr string
	log  *slog.Logger
	srv  *http.Server

	tls   TLSConfig     // zero: plain TCP
	bound net.Addr      // set by start; what addr resolved to (port 0)
	done  chan struct{} // closed when Serve returns
}

// start binds synchronously, so a taken port fails the app's start, then
// serves in a goroutine that stop waits for.
func (h *httpService) start(ctx context.Context, fail func()) error {
	var lc net.ListenConfig
	var tc *tls.Config
	if h.tls.Enabled() {
		// Read at start, not in Validate: check-config does no file I/O,
		// and certificates are often mounted only where venn runs.
		var err error
		if tc, err = h.tls.tlsConfig(); err != nil {
			return fmt.Errorf("%s server: %w", h.name, err)
		}
	}
	ln, err := lc.Listen(ctx, "tcp", h.addr)
	if err != nil {
		return fmt.Errorf("%s server: %w", h.name, err)
	}
	h.bound = ln.Addr()
	if tc != nil {
		ln = tls.NewListener(ln, tc)
	}
	h.done = make(chan struct{})
	go func() {
		defer close(h.done)
		if err := h.srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			h.log.Error("server stopped", "server", h.name, "err", err)
			fail()
		}
	}()
	h.log.Info("listening", "server", h.name, "addr", h.bound.String(), "tls", tc != nil)
	return nil
}

func (h *httpService) stop(ctx context.Context) error {
	err := h.srv.Shutdown(ctx)
	<-h.done // Serve returns as soon as Shutdown closes the listener
	if err != nil {
		return fmt.Errorf("%s server: %w", h.name, err)
	}
	return nil
}

// metricsRouter serves /metrics, /healthz, /readyz and, when adm is not
// nil, the admin API under /admin/ and its status page under /status.
func metricsRouter(reg *prometheus.Registry, h *healthHandler, adm http.Handler) http.Handler {
	r := chi.NewRouter()
	if adm != nil {
		r.Handle("/admin/*", adm)
		r.Handle("/status", adm)
		r.Handle("/status/*", adm)
	}
	r.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	r.Get("/readyz", h.ready)
	return r
}
