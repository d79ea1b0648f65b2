package app

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/venn-gateway/venn/admin"
	"github.com/venn-gateway/venn/stalker"
)

// adminTimeout bounds one admin API request: reads touch Redis, a drain
// waits for leases to be released.
const adminTimeout = 30 * time.Second

// BuildInfo is what the binary knows of itself; cmd/venn supplies it
// (WithBuild), tests may not.
type BuildInfo struct {
	Version string
}

// WithBuild supplies the binary's version to the app: logged at start,
// shown by the admin API and written in this replica's heartbeat.
func WithBuild(b BuildInfo) fx.Option { return fx.Supply(b) }

type adminParams struct {
	fx.In
	Lifecycle  fx.Lifecycle
	Shutdowner fx.Shutdowner
	Config     *Config
	Log        *slog.Logger
	Registry   *prometheus.Registry
	Chains     *chains
	History    *history
	Build      BuildInfo      `optional:"true"`
	Reload     admin.Reloader `optional:"true"` // hot reload, where it is built
	Usage      *usageStore
}

// adminServer is the admin API's own listener; svc is nil unless
// admin_listen is set.
type adminServer struct {
	svc *httpService
}

// newAdmin builds the admin API over the chains. It always exists (its
// cordon sync applies cordons set on other replicas); it is served on
// admin_listen, on metrics_listen with admin.on_metrics_listen, or not at
// all.
func newAdmin(p adminParams) (*admin.Admin, *adminServer) {
	cfg, cs := p.Config, p.Chains
	list := cs.adminChains(p.History)
	a := admin.New(admin.Options{Config: cfg.Admin, Replica: cfg.replicaID(), Version: p.Build.Version,
		ConfigFile: cfg.File, Chains: list, Effective: cfg, Redis: cs.rdb, Drain: cs.drain, Draining: cs.draining.Load,
		Reload: p.Reload, Logger: p.Log, Registerer: p.Registry, Gatherer: p.Registry, Usage: p.Usage.reader()})
	p.Lifecycle.Append(fx.Hook{OnStart: a.Start, OnStop: a.Stop})

	addr, field := cfg.AdminAddr()
	switch {
	case addr == "":
		return a, &adminServer{}
	case len(cfg.Admin.Tokens) == 0:
		p.Log.Warn("admin API without admin.tokens: loopback only, every caller may act", field, addr)
	default:
		p.Log.Info("admin API", field, addr, "tokens", len(cfg.Admin.Tokens))
	}
	if cfg.AdminListen != "" {
		fail := func() { _ = p.Shutdowner.Shutdown(fx.ExitCode(1)) }
		svc := &httpService{name: "admin", addr: cfg.AdminListen, log: p.Log, srv: &http.Server{
			Handler:           http.TimeoutHandler(a.Handler(), adminTimeout, "timeout"),
			ReadHeaderTimeout: readHeaderTimeout,
			IdleTimeout:       idleTimeout,
			MaxHeaderBytes:    maxHeaderBytes,
		}}
		p.Lifecycle.Append(fx.Hook{
			OnStart: func(ctx context.Context) error { return svc.start(ctx, fail) },
			OnStop:  svc.stop,
		})
		return a, &adminServer{svc: svc}
	}
	return a, &adminServer{}
}

// adminChains are the chains served now, as the admin API reads them.
func (cs *chains) adminChains(hist *history) []admin.Chain {
	all := cs.all()
	list := make([]admin.Chain, 0, len(all))
	for _, c := range all {
		ac := admin.Chain{Name: c.Name(), Path: "/" + c.Name(), Pool: c.Pool(), Heads: c.Pool().Heads(),
			State: func() admin.ChainState {
				st := c.State()
				if r := hist.readiness(); r != nil {
					st.History = r.State
				}
				return st
			}}
		if c.Cached() {
			ac.PurgeCache = c.PurgeCache
		}
		if cs.rdb != nil {
			name := c.Name()
			ac.Leader = func(ctx context.Context) (stalker.Leader, bool, error) {
				return stalker.ReadLeader(ctx, cs.rdb, name)
			}
		}
		list = append(list, ac)
	}
	return list
}

// adminReloader is the admin API's POST /admin/reload.
func adminReloader(r *Reloader) admin.Reloader { return r.Reload }

// tellAdminOfReloads has every applied reload give the admin API its
// tokens, the chains served now and the running config.
func tellAdminOfReloads(r *Reloader, a *admin.Admin, cs *chains, hist *history) {
	r.onApplied = func(ctx context.Context, next *Config) {
		a.SetTokens(next.Admin.Tokens) // refused to or from none: restart_required says so
		a.Reloaded(ctx, cs.adminChains(hist), next)
	}
}

// drain hands this replica's leaderships over and turns /readyz 503; it
// keeps serving calls from the head window the followers keep. Without
// Redis there is nobody to hand over to: it keeps leading.
func (cs *chains) drain(ctx context.Context) admin.DrainReport {
	cs.draining.Store(true)
	rep := admin.DrainReport{Draining: true, Released: []string{}}
	if cs.rdb == nil {
		for _, c := range cs.all() {
			rep.Kept = append(rep.Kept, c.Name())
		}
		rep.Note = "no redis.url: no other replica to hand the chains to; this one keeps leading them"
		return rep
	}
	for _, c := range cs.all() {
		released, err := c.Drain(ctx)
		switch {
		case err != nil:
			rep.Kept = append(rep.Kept, c.Name())
			rep.Note = "the lease of the chains kept is released when their stalker stops, or expires"
		case released:
			rep.Released = append(rep.Released, c.Name())
		}
	}
	return rep // the admin API logs it, with who asked
}
