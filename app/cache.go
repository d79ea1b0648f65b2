package app

import (
	"context"
	"log/slog"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/cache"
)

// cachePoolConns bounds the connections of the Postgres tiers' pool, one
// for every chain's: a tier is asked only on a miss of memory and Redis,
// for the expensive methods.
const cachePoolConns = 8

// cacheTiers are the stores the chains' shared cache tiers live in: the
// cluster's Redis, and the history database, on a pool of their own
// opened for the first chain that keeps answers there.
type cacheTiers struct {
	rdb  *redis.Client       // nil without redis.url
	hist *blockstore.History // nil without postgres.url; it migrates cache_entries too
	url  string              // postgres.url
	pool *pgxpool.Pool       // nil until a chain has cache.postgres
	pg   []*cache.Postgres   // their prunes run from start
}

// newCache builds a chain's response cache, nil when its cache is off:
// memory, then Redis (redis.url and cache.redis), then Postgres
// (postgres.url and cache.postgres), asked in that order.
func (cs *chains) newCache(cc ChainConfig, log *slog.Logger, m *cache.Metrics) (*cache.Cache, error) {
	if !cc.Cache.On() {
		return nil, nil
	}
	var lower []cache.Layer
	t := &cs.tiers
	if t.rdb != nil && cc.Cache.Redis != nil && *cc.Cache.Redis {
		r := cache.NewRedis(t.rdb, cc.Name, cache.RedisOptions{MaxEntryBytes: cc.Cache.MaxEntryBytes,
			MaxTTL: cc.Cache.SettledTTL})
		lower = append(lower, cc.Cache.RedisLayer(r))
	}
	if t.hist != nil && cc.Cache.Postgres {
		if t.pool == nil {
			pool, err := cache.OpenPool(t.url, cachePoolConns)
			if err != nil {
				return nil, err
			}
			t.pool = pool
		}
		p := cache.NewPostgres(t.pool, cc.ChainID, cache.PostgresOptions{MaxEntryBytes: cc.Cache.MaxEntryBytes,
			MaxAge: cc.Cache.PostgresRetention, Ready: t.hist.Migrated, Logger: log.With("chain", cc.Name)})
		t.pg = append(t.pg, p)
		lower = append(lower, cc.Cache.PostgresLayer(p))
	}
	return cache.New(cc.Cache, cache.Options{Chain: cc.Name, Lower: lower, Logger: log, Metrics: m}), nil
}

// run starts the Postgres tiers' prunes, until ctx ends.
func (t *cacheTiers) run(ctx context.Context, wg *sync.WaitGroup) {
	for _, p := range t.pg {
		wg.Go(func() { _ = p.Run(ctx) })
	}
}

// close closes the Postgres tiers' pool, once their prunes have ended.
func (t *cacheTiers) close() {
	if t.pool != nil {
		t.pool.Close()
		t.pool = nil
	}
}
