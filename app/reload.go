package app

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"

	"github.com/venn-gateway/venn/edge"
	"github.com/venn-gateway/venn/jrpc"
	vnats "github.com/venn-gateway/venn/nats"
	"github.com/venn-gateway/venn/subcenter"
)

// Hot reload: SIGHUP (reload_signal.go) and the admin API's POST
// /admin/reload re-read the file given with --config, validate it as
// start and check-config do, and apply what may change live. An invalid
// file changes nothing. What only a restart can change is named in the
// report's restart_required, and the rest applies.
//
// Each part is compared with what was last applied, or, for what only a
// restart changes, with what the process started with: a setting that
// waits for a restart is named on every reload until then.

// ReloadReport is a reload's answer, as the admin API returns it.
type ReloadReport struct {
	// Applied: the file was valid and every step of it applied. A valid
	// file whose step failed (a chain that would not start) applies the
	// rest: Partial, with the failures in Problems; a later reload tries
	// the failed steps again.
	Applied bool `json:"applied"`
	Partial bool `json:"partial,omitempty"`
	// Changes says what the reload changed, one line each.
	Changes []string `json:"changes"`
	// Problems are the file's problems, each naming its field (as
	// check-config prints them), and nothing was applied; or, with
	// Partial, the steps that failed.
	Problems []string `json:"problems"`
	// RestartRequired names the fields that differ from the running
	// process's and take effect only at its next start.
	RestartRequired []string `json:"restart_required"`
}

func (r *ReloadReport) change(format string, args ...any) {
	r.Changes = append(r.Changes, fmt.Sprintf(format, args...))
}

func (r *ReloadReport) restart(field string) { r.RestartRequired = append(r.RestartRequired, field) }

// Reloader applies the config file again to the running process.
type Reloader struct {
	path   string
	rpc    *jrpc.Server
	gate   *gate
	chains *chains
	level  *slog.LevelVar
	log    *slog.Logger

	mu      sync.Mutex // one reload at a time
	started *Config    // what only a restart changes is compared with this
	applied *Config    // the rest with this
	// nats serves the chains over NATS request/reply (app/nats.go); nil:
	// no NATS.
	nats *vnats.RPC
	// stored are the tenants and keys kept in Redis (stored.go); nil
	// without auth.redis. appliedEdge is the edge in force: the applied
	// file's, with them.
	stored      *storedScopes
	appliedEdge edge.Config
	// onApplied is told of each reload applied (the admin API's chains
	// and running config); nil: nobody.
	onApplied func(ctx context.Context, next *Config)
}

func newReloader(cfg *Config, rpc *jrpc.Server, g *gate, cs *chains, level *slog.LevelVar, log *slog.Logger) *Reloader {
	// The edge's series of a chain go with its parts': the edge in force
	// then deletes them from the series every edge shares.
	cs.parts.Metrics.OnDrop(func(chain string) { g.load().DropChain(chain) })
	return &Reloader{path: cfg.File, rpc: rpc, gate: g, chains: cs, level: level, log: log,
		started: cfg, applied: cfg, appliedEdge: cfg.Edge}
}

// Reload re-reads the config file and applies it; report is a
// *ReloadReport. It is the admin API's Reloader.
func (r *Reloader) Reload(ctx context.Context) (report any, applied bool) {
	rep := r.reload(ctx)
	return rep, rep.Applied
}

func (r *Reloader) reload(ctx context.Context) *ReloadReport {
	rep := &ReloadReport{Changes: []string{}, Problems: []string{}, RestartRequired: []string{}}
	if r.path == "" {
		rep.Problems = append(rep.Problems, "no config file to re-read: venn was started without --config (the built-in default)")
		r.log.Warn("config reload refused", "problems", rep.Problems)
		return rep
	}
	next, err := Load(r.path)
	if err != nil {
		rep.Problems = strings.Split(err.Error(), "\n")
		r.log.Warn("config reload refused: nothing changed", "file", r.path, "problems", rep.Problems)
		return rep
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.restartOnly(next, rep)
	r.applyProcess(next, rep)
	r.applyChains(ctx, next, rep)
	r.applied = next
	rep.Applied = len(rep.Problems) == 0
	rep.Partial = !rep.Applied
	if r.onApplied != nil {
		r.onApplied(ctx, next)
	}
	r.log.Info("config reloaded", "file", r.path, "changes", rep.Changes,
		"restart_required", rep.RestartRequired, "problems", rep.Problems)
	return rep
}

// restartOnly names the process settings that differ from those it
// started with and are read only at start: listeners and TLS files are
// bound, the stores connected, the log handler built.
func (r *Reloader) restartOnly(next *Config, rep *ReloadReport) {
	s := r.started
	for _, f := range []struct {
		name string
		a, b any
	}{
		{"listen", s.Listen, next.Listen},
		{"metrics_listen", s.MetricsAddr(), next.MetricsAddr()},
		{"tls", s.TLS, next.TLS},
		{"log.format", s.Log.Format, next.Log.Format},
		{"redis", s.Redis, next.Redis},
		{"postgres", s.Postgres, next.Postgres},
		{"shutdown_timeout", s.ShutdownTimeout, next.ShutdownTimeout},
		{"shutdown_delay", s.ShutdownDelay, next.ShutdownDelay},
		{"limits.max_reply_bytes_in_flight", s.Limits.MaxReplyBytesInFlight, next.Limits.MaxReplyBytesInFlight},
		{"diagnostic_headers", s.DiagnosticsOn(), next.DiagnosticsOn()},
		{"request_log", s.RequestLog, next.RequestLog},
		{"compression", s.Compression, next.Compression},
		{"admin_listen", s.AdminListen, next.AdminListen},
		{"admin.on_metrics_listen", s.Admin.OnMetricsListen, next.Admin.OnMetricsListen},
		{"admin.cordon_resync", s.Admin.CordonResync, next.Admin.CordonResync},
		{"admin.heartbeat", s.Admin.Heartbeat, next.Admin.Heartbeat},
		{"admin.chart_step", s.Admin.ChartStep, next.Admin.ChartStep},
		// Tokens to none or back: loopback-only is decided at bind
		// (admin.SetTokens); a changed list applies at once.
		{"admin.tokens (to or from none)", len(s.Admin.Tokens) == 0, len(next.Admin.Tokens) == 0},
		{"tracing", s.Tracing, next.Tracing},
		{"nats", s.NATS, next.NATS},
		{"grpc_listen", s.GRPCListen, next.GRPCListen},
		{"grpc", s.GRPC, next.GRPC},
		{"auth.redis", s.Edge.Auth.Redis, next.Edge.Auth.Redis},
	} {
		if !reflect.DeepEqual(f.a, f.b) {
			rep.restart(f.name)
		}
	}
	if len(s.Edge.Auth.Keys) == 0 && len(next.Edge.Auth.Keys) > 0 {
		// The /CHAIN/KEY route exists only when keys did at start;
		// keys in a header work at once.
		rep.restart("auth.keys (as /CHAIN/KEY paths)")
	}
	if s.Redis.Enabled() && !s.Edge.RateLimited() && next.Edge.RateLimited() {
		rep.restart("rate_limits (kept in Redis; in this process until then)")
	}
}

// applyProcess applies the log level, the wire's limits and the edge.
func (r *Reloader) applyProcess(next *Config, rep *ReloadReport) {
	cur := r.applied
	if next.Log.Level != cur.Log.Level {
		lv, _ := newLogLevel(next) // validated
		r.level.Set(lv.Level())
		rep.change("log.level: %s → %s", cur.Log.Level, next.Log.Level)
	}
	if !reflect.DeepEqual(cur.Limits, next.Limits) {
		r.rpc.SetLimits(next.JRPCLimits())
		rep.change("limits: applied to new requests and connections")
		if subs := subcenter.LimitOptions(next.Limits.Subscriptions); subs != subcenter.LimitOptions(cur.Limits.Subscriptions) {
			for _, c := range r.chains.all() {
				c.SetSubscriptionLimits(next.Limits.Subscriptions)
			}
			rep.change("limits: subscription limits applied to new subscriptions and to the notifications queued from now on")
		}
	}
	if nextEdge := r.edgeOf(next); !reflect.DeepEqual(r.appliedEdge, nextEdge) {
		r.gate.set(r.gate.load().Reconfigured(nextEdge))
		r.appliedEdge = nextEdge
		closed := r.rpc.Readmit()
		rep.change("auth, methods, rate_limits, trusted_proxies, cors: applied to new requests and to open WebSocket connections (%d no longer admitted: closed)", closed)
	}
}
