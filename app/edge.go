package app

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/venn-gateway/venn/edge"
)

// The edge's configuration is package edge's (edge.Config, inline at the
// top level of the file); app adds what spans sections (a key's chains
// must be configured) and TLS on listen, which the listener serves.

// newEdge builds the JSON-RPC server's gate from the edge's sections.
// With auth.jwt.jwks_url its key set is fetched at start and refreshed
// until stop; a reload keeps it (a changed jwks_url is fetched on demand
// only, until a restart).
// With auth.redis the tenants and keys kept in Redis are read first
// (stored.go), so that they are honoured from the first request.
func newEdge(lc fx.Lifecycle, cfg *Config, log *slog.Logger, reg *prometheus.Registry, rl *rateLimiter, b *edge.Budgets, u *usageStore, ss *storedScopes) *edge.Edge {
	var jwks *edge.JWKS
	if j := cfg.Edge.WithDefaults().Auth.JWT; j.JWKSURL != "" {
		jwks = edge.NewJWKS(j.JWKSURL, edge.JWKSOptions{Refresh: j.JWKSRefresh, MinRefresh: j.JWKSMinRefresh, Logger: log})
		lc.Append(fx.Hook{
			OnStart: func(ctx context.Context) error { jwks.Start(ctx); return nil },
			OnStop:  func(context.Context) error { jwks.Stop(); return nil },
		})
	}
	ec := cfg.Edge
	if ss != nil {
		ec = ss.initial(cfg)
	}
	return edge.New(ec, edge.Options{Limiter: rl.limiter, Logger: log, Registerer: reg, JWKS: jwks, Budgets: b, Usage: u.rec})
}

// newBudgets counts tenants' credits: in the cluster's Redis when
// redis.url is set and tenants are configured, so that every replica
// spends from one count; otherwise in this process. The count is flushed
// every credits.flush_interval, and once more at stop.
func newBudgets(lc fx.Lifecycle, cfg *Config, log *slog.Logger) (*edge.Budgets, error) {
	ec := cfg.Edge.WithDefaults()
	opts := edge.BudgetsOptions{FlushInterval: ec.Credits.FlushInterval, Logger: log}
	if !cfg.Redis.Enabled() || (len(ec.Tenants) == 0 && !ec.Auth.Redis.Enabled) {
		return edge.NewBudgets(opts), nil
	}
	rdb, err := cfg.Redis.newRedisClient(redisTuning{maxRetries: -1, dialerRetries: 1})
	if err != nil {
		return nil, err
	}
	opts.Redis = rdb
	b := edge.NewBudgets(opts)
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error { b.Start(); return nil },
		OnStop: func(ctx context.Context) error {
			b.Stop(ctx)
			return rdb.Close()
		},
	})
	return b, nil
}

// rateLimiter is where the edge keeps rate-limit state: the cluster's
// Redis when redis.url is set and a rate limit is configured, so that
// limits hold across replicas; otherwise nil, and the edge keeps it in
// memory.
type rateLimiter struct {
	limiter edge.Limiter // nil: in memory
}

// newRateLimiter gives the limiter its own Redis client: its calls are on
// every request's path and must fail within rate_limits.redis_timeout,
// without the retries the head feed's client makes. The client is closed
// after the JSON-RPC server has drained (its hook is appended first).
func newRateLimiter(lc fx.Lifecycle, cfg *Config, log *slog.Logger) (*rateLimiter, error) {
	if !cfg.Redis.Enabled() || (!cfg.Edge.RateLimited() && !cfg.Edge.Auth.Redis.Enabled) {
		return &rateLimiter{}, nil
	}
	// A failed decision fails open or closed at once.
	rdb, err := cfg.Redis.newRedisClient(redisTuning{maxRetries: -1, dialerRetries: 1})
	if err != nil {
		return nil, err
	}
	l := edge.NewRedisLimiter(rdb, edge.RedisLimiterOptions{Timeout: cfg.Edge.RateLimits.RedisTimeout})
	lc.Append(fx.Hook{
		OnStart: func(ctx context.Context) error {
			// Best effort: with Redis down venn still starts, and its calls
			// fail open or closed as configured.
			if err := l.Warm(ctx); err != nil {
				log.Warn("rate limiter: redis not reachable at start", "err", err)
			}
			return nil
		},
		OnStop: func(context.Context) error { return rdb.Close() },
	})
	return &rateLimiter{limiter: l}, nil
}
