// Package app owns venn's configuration (load, ${ENV}, defaults,
// validation) and its fx wiring, nothing else: it turns a *Config into
// chains (package chain, which owns each chain's lifecycle), the JSON-RPC
// server and the metrics server, orders their start and stop, and applies
// reloads and drains to the list of chains. Behaviour lives in the
// packages it wires.
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
	"github.com/venn-gateway/venn/chain"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jrpc"
	vnats "github.com/venn-gateway/venn/nats"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/reqlog"
	"github.com/venn-gateway/venn/retry"
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

// chains are the chains served, in config order. A reload adds and
// removes chains (reload_chains.go): the list is swapped whole, so
// readers (readyz) load it without a lock. Each chain's lifecycle is
// package chain's; this is the process's list of them.
type chains struct {
	list     atomic.Pointer[[]*chain.Chain]
	rdb      redis.UniversalClient // nil without Redis
	parts    *chain.Parts          // what every chain is built with
	log      *slog.Logger
	retired  sync.WaitGroup // removed chains stopping (reload_chains.go)
	stopping chan struct{}  // closed by stop: removed chains stop waiting
	stopOnce sync.Once
	// draining turns /readyz 503: a drain (admin API) or the shutdown.
	draining atomic.Bool
}

// all is the chains served now, in config order.
func (cs *chains) all() []*chain.Chain {
	if l := cs.list.Load(); l != nil {
		return *l
	}
	return nil
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
	out.parts = &chain.Parts{Redis: out.rdb, ReplicaID: cfg.replicaID(), LeaseTTL: cfg.Redis.LeaseTTL,
		NATS: p.NATS, NATSPrefix: cfg.NATS.WithDefaults().Prefix, Limits: cfg.Limits.Subscriptions,
		Metrics: chain.NewMetrics(p.Registry), Remotes: p.Remotes,
		Replies: remotes.NewReplyBudget(cfg.Limits.MaxReplyBytesInFlight, p.Remotes), // one for the process
		History: p.History.store, Tiers: chain.NewCacheTiers(p.History.store, cfg.Postgres.URL),
		Tracer: p.Tracer, Logger: log}
	list := make([]*chain.Chain, 0, len(cfg.Chains))
	for _, cc := range cfg.Chains {
		c, err := chain.New(cc, out.parts)
		if err != nil {
			out.parts.Tiers.Close()
			return nil, err
		}
		list = append(list, c)
	}
	out.list.Store(&list)
	p.Lifecycle.Append(fx.Hook{OnStart: out.start, OnStop: out.stop})
	return out, nil
}

// start starts every chain at once: each pool may wait a few seconds for
// a first ready remote, and that must not add up across chains.
func (cs *chains) start(ctx context.Context) error {
	var g errgroup.Group
	for _, c := range cs.all() {
		g.Go(func() error { return c.Start(ctx, true) })
	}
	if err := g.Wait(); err != nil {
		// fx stops only hooks that started: undo the chains that did.
		return errors.Join(err, cs.stop(ctx))
	}
	return nil
}

// stop stops every chain, and the removed ones still stopping.
func (cs *chains) stop(ctx context.Context) error {
	list := cs.all()
	errs := make([]error, len(list))
	var wg sync.WaitGroup
	for i, c := range list {
		wg.Go(func() { errs[i] = c.Stop(ctx) })
	}
	wg.Wait()
	errs = append(errs, cs.waitRetired(ctx))
	cs.parts.Tiers.Close() // every prune has ended
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
		srv.Handle(c.Name(), c.Router())
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
