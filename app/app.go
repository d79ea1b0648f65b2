// Package app owns venn's configuration and its fx wiring, nothing else: it
// turns a *Config into pools, routers, the JSON-RPC server and the metrics
// server, and orders their start and stop. Behaviour lives in the packages
// it wires.
package app

import (
	"context"
	"crypto/tls"
	"encoding/json"
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

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/edge"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/router"
	"github.com/venn-gateway/venn/stalker"
	"github.com/venn-gateway/venn/subcenter"
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
		newLogger,
		newRegistry,
		newHistory,
		newChains,
		newRPCOptions,
		newRateLimiter,
		newEdge,
		newServers,
	),
	// Every chain's router is served by the JSON-RPC server; servers are
	// wanted for their lifecycle hooks, nothing consumes them.
	fx.Invoke(handleChains, func(*servers) {}),
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
	Output io.Writer `name:"app_log_output" optional:"true"`
}

func newLogger(p loggerParams) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(p.Config.Log.Level)); err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	w := p.Output
	if w == nil {
		w = os.Stderr
	}
	opts := &slog.HandlerOptions{Level: level}
	if p.Config.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return slog.New(slog.NewTextHandler(w, opts)), nil
}

// newRegistry is the one registry every component registers on; it is
// passed in, never global.
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return reg
}

// chain is one configured chain's pool, head feed and router.
type chain struct {
	name   string
	pool   *remotes.Pool
	head   *headFeed
	router *router.Router
	cache  *cache.Cache // nil: the chain's cache is off
	// settled is the chain's settled line as this replica sees it.
	settled func() (uint64, bool)
}

// headFeed is a chain's head window on this replica: the follower that
// keeps it, and the campaign whose leader runs the stalker.
type headFeed struct {
	window   *headstore.Window
	follower *headstore.Follower
	elector  stalker.Elector
	stalker  *stalker.Stalker
	subs     *subcenter.Center
}

// chains are in config order. Their background work (followers and
// campaigns) runs under one context that stop cancels and waits for.
type chains struct {
	list   []chain
	rdb    *redis.Client // nil without redis.url
	tiers  cacheTiers    // the stores of the chains' shared cache tiers
	log    *slog.Logger
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// chainMetrics are the series every chain's parts register under.
type chainMetrics struct {
	head     *headstore.Metrics
	stalker  *stalker.Metrics
	election *stalker.ElectionMetrics
	archive  *stalker.ArchiveMetrics
	router   *router.Metrics
	subs     *subcenter.Metrics
	cache    *cache.Metrics
}

func newChainMetrics(reg prometheus.Registerer) chainMetrics {
	return chainMetrics{
		head:     headstore.NewMetrics(reg),
		stalker:  stalker.NewMetrics(reg),
		election: stalker.NewElectionMetrics(reg),
		archive:  stalker.NewArchiveMetrics(reg),
		router:   router.NewMetrics(reg),
		subs:     subcenter.NewMetrics(reg),
		cache:    cache.NewMetrics(reg),
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
}

func newChains(p chainsParams) (*chains, error) {
	cfg, log := p.Config, p.Log
	out := &chains{list: make([]chain, 0, len(cfg.Chains)), log: log}
	if cfg.Redis.URL != "" {
		opts, err := redis.ParseURL(cfg.Redis.URL)
		if err != nil {
			return nil, errors.New("redis.url: invalid")
		}
		// Every call is bounded by its context: a leader's renew must not
		// outlive its lease waiting on a dead connection.
		opts.ContextTimeoutEnabled = true
		out.rdb = redis.NewClient(opts)
	}
	out.tiers = cacheTiers{rdb: out.rdb, hist: p.History.store, url: cfg.Postgres.URL}
	m := newChainMetrics(p.Registry)
	replies := remotes.NewReplyBudget(cfg.Limits.MaxReplyBytesInFlight, p.Remotes) // one for the process
	for _, cc := range cfg.Chains {
		pool, err := cc.NewPool(log, p.Remotes, replies)
		if err != nil {
			out.tiers.close()
			return nil, err
		}
		var (
			archive stalker.Archive // nil without postgres.url
			hist    router.History
		)
		if hc := p.History.chain(cc); hc != nil {
			archive, hist = hc, hc
		}
		h := out.newHeadFeed(cfg, cc, cc.StalkerConfig(archive, m.archive), pool, m)
		var up jrpc.Handler = pool
		if cc.Integrity.ClientCalls {
			up = remotes.NewVerifiedClient(pool, h.window) // blocks and receipts checked, failing ones refetched
		}
		// newPendingTransactions from a remote's own subscription, or a
		// pending-transaction filter polled where no WebSocket remote can.
		var relay subcenter.Relay
		if pool.CanRelay() {
			relay = pool
		}
		h.subs = subcenter.New(cc.Name, h.window, relay, subcenter.LimitOptions(cfg.Limits), log, m.subs)
		rc := router.Config{Chain: cc.Name, ChainID: cc.ChainID, MaxLag: cc.Pool.MaxLag,
			Subscriptions: h.subs, History: hist, Settled: cc.settledLine(h.window), Confirm: pool.ConfirmHash,
			Logger: log}
		rcache, err := out.newCache(cc, log, m.cache)
		if err != nil {
			out.tiers.close()
			return nil, fmt.Errorf("chain %s: cache: %w", cc.Name, err)
		}
		if rcache != nil {
			rc.Cache = rcache
		}
		rt := router.New(rc, h.window, up, m.router)
		out.list = append(out.list, chain{name: cc.Name, pool: pool, head: h, router: rt, cache: rcache,
			settled: rc.Settled})
	}
	p.Lifecycle.Append(fx.Hook{OnStart: out.start, OnStop: out.stop})
	return out, nil
}

// newHeadFeed builds a chain's head feed: on the cluster's Redis when
// there is one, in memory (this process leads) when not.
func (cs *chains) newHeadFeed(cfg *Config, cc ChainConfig, sc stalker.Config, pool *remotes.Pool, m chainMetrics) *headFeed {
	ec := stalker.ElectionConfig{Chain: cc.Name, ReplicaID: cfg.Redis.ReplicaID,
		TTL: cfg.Redis.LeaseTTL, Logger: cs.log, Metrics: m.election}
	var (
		store   headstore.Store
		elector stalker.Elector
	)
	if cs.rdb != nil {
		store = headstore.NewRedis(cs.rdb, cc.Name, cc.Head.Window)
		elector = stalker.NewRedisElector(cs.rdb, ec)
	} else {
		store = headstore.NewMemory(cc.Head.Window)
		elector = stalker.NewMemoryElector(ec)
	}
	w := headstore.NewWindow(cc.Head.Window)
	return &headFeed{
		window:   w,
		follower: headstore.NewFollower(cc.Name, store, w, cs.log, m.head),
		elector:  elector,
		stalker:  stalker.New(sc, pool, store, cs.log, m.stalker),
	}
}

// start starts every pool at once: each may wait a few seconds for a first
// ready remote, and that must not add up across chains. Then each chain's
// follower and campaign start.
func (cs *chains) start(ctx context.Context) error {
	var g errgroup.Group
	for _, c := range cs.list {
		g.Go(func() error { return c.pool.Start(ctx) })
	}
	if err := g.Wait(); err != nil {
		// fx stops only hooks that started: undo the pools that did.
		return errors.Join(err, cs.stop(ctx))
	}
	bg, cancel := context.WithCancel(context.Background())
	cs.cancel = cancel
	for _, c := range cs.list {
		cs.wg.Go(func() { c.head.follower.Run(bg) })
		cs.wg.Go(func() { c.head.subs.Run(bg) })
		cs.wg.Go(func() { c.head.elector.Run(bg, c.head.stalker.Lead) })
		cs.wg.Go(func() { c.router.Run(bg) }) // the history write-through
		if c.cache != nil {
			// Near-head entries of orphaned blocks leave at each reorg.
			cs.wg.Go(func() { c.cache.Run(bg, c.head.window, c.settled) })
		}
	}
	cs.tiers.run(bg, &cs.wg) // the Postgres tiers' retention
	return nil
}

// stop ends the campaigns (a leader releases its lease, so another replica
// takes over at once) and the followers, then the pools they call.
func (cs *chains) stop(ctx context.Context) error {
	var errs []error
	if cs.cancel != nil {
		cs.cancel()
		done := make(chan struct{})
		go func() { cs.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("head feeds: stop: %w", ctx.Err()))
		}
	}
	for _, c := range cs.list {
		if c.cache != nil {
			c.cache.Close()
		}
	}
	cs.tiers.close()
	perPool := make([]error, len(cs.list))
	var wg sync.WaitGroup
	for i, c := range cs.list {
		wg.Go(func() { perPool[i] = c.pool.Stop(ctx) })
	}
	wg.Wait()
	errs = append(errs, perPool...)
	if cs.rdb != nil {
		errs = append(errs, cs.rdb.Close())
	}
	return errors.Join(errs...)
}

func newRPCOptions(cfg *Config, log *slog.Logger, reg *prometheus.Registry, e *edge.Edge) jrpc.Options {
	return jrpc.Options{
		Limits:      cfg.JRPCLimits(),
		Logger:      log,
		Registerer:  reg,
		MethodLabel: evm.MethodLabel,
		Gate:        e,
	}
}

// handleChains serves each chain at /NAME.
func handleChains(srv *jrpc.Server, cs *chains) {
	for _, c := range cs.list {
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
	Edge       *edge.Edge
	Chains     *chains
	History    *history
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
	var draining atomic.Bool

	if addr := p.Config.MetricsAddr(); addr != "" {
		h := &healthHandler{chains: p.Chains, history: p.History.readiness, draining: &draining}
		s.metrics = &httpService{name: "metrics", addr: addr, log: p.Log, srv: &http.Server{
			Handler:           http.TimeoutHandler(metricsRouter(p.Registry, h), metricsTimeout, "timeout"),
			ReadHeaderTimeout: readHeaderTimeout,
			IdleTimeout:       idleTimeout,
		}}
		p.Lifecycle.Append(fx.Hook{
			OnStart: func(ctx context.Context) error { return s.metrics.start(ctx, fail) },
			OnStop:  s.metrics.stop,
		})
	}

	s.rpc = &httpService{name: "rpc", addr: p.Config.Listen, log: p.Log, tls: p.Config.TLS, srv: &http.Server{
		Handler:           p.Edge.Wrap(p.RPC.Handler()), // CORS in front
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
				wait(ctx, d)
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

// wait returns after d, or sooner when ctx ends.
func wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
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

func metricsRouter(reg *prometheus.Registry, h *healthHandler) http.Handler {
	r := chi.NewRouter()
	r.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok\n")
	})
	r.Get("/readyz", h.ready)
	return r
}

// healthHandler answers /readyz: ready when every chain has a remote in
// rotation and the process is not draining. The history store does not
// count unless postgres.required: the replicas of a cluster share it, so
// making its outage a 503 would take every replica out of the load
// balancer at once, while the remotes can answer every call (history
// reads fail fast and fall through). The body says how it is all the
// same, and "degraded" while the process serves without it.
type healthHandler struct {
	chains   *chains
	history  func() *blockstore.Readiness // nil result without postgres.url
	draining *atomic.Bool
}

// readiness is /readyz's body. Remotes are listed by name only: their URLs
// carry API keys.
type readiness struct {
	Ready    bool                  `json:"ready"`
	Draining bool                  `json:"draining,omitempty"`
	Degraded bool                  `json:"degraded,omitempty"` // serving without the history store
	History  *blockstore.Readiness `json:"history,omitempty"`  // nil without postgres.url
	Chains   []chainReadiness      `json:"chains"`
}

// chainReadiness is one chain's part: whether it can serve, its head and
// how fresh it is, and how heads are followed. Durations are in seconds.
type chainReadiness struct {
	Chain    string `json:"chain"`
	Ready    bool   `json:"ready"`
	Head     uint64 `json:"head"`
	HeadHash string `json:"head_hash,omitempty"`
	// HeadAgeSeconds is the time since the head block's timestamp: on a
	// chain of 2 s blocks an age of 30 s says the head is stale.
	HeadAgeSeconds float64 `json:"head_age_seconds"`
	// WindowHead is this replica's head window's head (0: empty): below
	// Head by more than max_lag, calls go to the remotes.
	WindowHead       uint64  `json:"window_head"`
	BlockTimeSeconds float64 `json:"block_time_seconds"`
	// BlockTimeSource: config (block_time), learned (block timestamps) or
	// default (not learned yet).
	BlockTimeSource     string   `json:"block_time_source"`
	PollIntervalSeconds float64  `json:"poll_interval_seconds"`
	Remotes             []string `json:"remotes"`
}

func (h *healthHandler) ready(w http.ResponseWriter, _ *http.Request) {
	body := readiness{Ready: !h.draining.Load(), Draining: h.draining.Load()}
	now := time.Now()
	for _, c := range h.chains.list {
		hs := c.pool.HeadStatus()
		cr := chainReadiness{Chain: c.name, Ready: c.pool.Ready(), Head: c.pool.Head(), HeadHash: hs.Hash,
			BlockTimeSeconds: seconds(hs.BlockTime), BlockTimeSource: hs.BlockTimeSource,
			PollIntervalSeconds: seconds(hs.PollInterval), Remotes: c.pool.Remotes()}
		if !hs.Time.IsZero() {
			cr.HeadAgeSeconds = seconds(max(now.Sub(hs.Time), 0))
		}
		if n, _, ok := c.head.window.Head(); ok {
			cr.WindowHead = n
		}
		body.Ready = body.Ready && cr.Ready
		body.Chains = append(body.Chains, cr)
	}
	if hr := h.history(); hr != nil {
		body.History = hr
		body.Degraded = hr.Degraded()
		body.Ready = body.Ready && hr.Ready()
	}
	w.Header().Set("Content-Type", "application/json")
	if !body.Ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(body)
}
