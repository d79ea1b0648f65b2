package app

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/venn-gateway/venn/admin"
	"github.com/venn-gateway/venn/usage"
)

// usageStore is where tenants' usage goes: the Recorder the edge adds to,
// and, with postgres.url, the pool its Writer drains it into (which the
// admin API reads back); nil without Postgres.
type usageStore struct {
	rec  *usage.Recorder
	pool *pgxpool.Pool
}

// newUsage keeps usage in Postgres when postgres.url is set (the usage
// table is migrated with the history's), written every
// usage.flush_interval and once more at stop; without Postgres only the
// metrics are kept.
func newUsage(lc fx.Lifecycle, cfg *Config, log *slog.Logger, reg *prometheus.Registry) (*usageStore, error) {
	uc := cfg.Usage.WithDefaults()
	if cfg.Postgres.URL == "" {
		return &usageStore{rec: usage.NewRecorder(usage.RecorderOptions{MetricsOnly: true, Registerer: reg})}, nil
	}
	// A parse error may quote the URL, and so its password: not repeated.
	pc, err := pgxpool.ParseConfig(cfg.Postgres.URL)
	if err != nil {
		return nil, errors.New("usage: postgres.url cannot be parsed")
	}
	pc.MaxConns = 2
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pc) // connects on first use
	if err != nil {
		return nil, errors.New("usage: postgres.url cannot be used")
	}
	rec := usage.NewRecorder(usage.RecorderOptions{MaxRows: uc.MaxRows, Registerer: reg})
	w := usage.NewWriter(pool, rec, usage.WriterOptions{FlushInterval: uc.FlushInterval, Logger: log})
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error { w.Start(); return nil },
		OnStop: func(ctx context.Context) error {
			if err := w.Stop(ctx); err != nil {
				log.Warn("usage: last write before stopping", "err", err)
			}
			pool.Close()
			return nil
		},
	})
	return &usageStore{rec: rec, pool: pool}, nil
}

// reader reads usage rows for the admin API; nil without Postgres.
func (u *usageStore) reader() admin.UsageReader {
	if u.pool == nil {
		return nil
	}
	return func(ctx context.Context, tenant string, from, to time.Time) ([]usage.Row, error) {
		return usage.Query(ctx, u.pool, tenant, from, to)
	}
}
