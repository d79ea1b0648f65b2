// Package app owns venn's configuration (load, ${ENV}, defaults,
// validation) and its fx wiring, nothing else: it turns a *Config into
// chains (package chain, which owns each chain's lifecycle), the JSON-RPC
// server and the metrics server, orders their start and stop, and applies
// reloads and drains to the list of chains. Behaviour lives in the
// packages it wires.
package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"github.com/venn-gateway/venn/admin"
	"github.com/venn-gateway/venn/emerald"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jrpc"
	vnats "github.com/venn-gateway/venn/nats"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/reqlog"
	"github.com/venn-gateway/venn/retry"
	"github.com/venn-gateway/venn/tracing"
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
		newGRPC,
		newReloader,
		adminReloader,
	),
	// Every chain's router is served by the JSON-RPC server; the servers
	// are wanted for their lifecycle hooks, nothing consumes them.
	fx.Invoke(logStart, handleChains, func(*servers, *adminServer, *emerald.Server) {}, watchReloadSignals, tellAdminOfReloads, serveNATS, watchStoredScopes),
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
		h := &healthHandler{chains: p.Chains, history: p.History.readiness, draining: draining, nats: natsStatus(p.NATS),
			grpc: &s.grpc}
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
