package app

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/remotes"
)

// cachePoolConns bounds the connections of the Postgres tiers' pool, one
// for every chain's: a tier is asked only on a miss of memory and Redis,
// for the expensive methods.
const cachePoolConns = 8

// cacheTiers are the Postgres tiers of the chains' caches (the Redis
// tiers are on chains.rdb): in the history database, on a pool of their
// own opened for the first chain that keeps answers there.
type cacheTiers struct {
	hist *blockstore.History // nil without postgres.url; it migrates cache_entries too
	url  string              // postgres.url
	pool *pgxpool.Pool       // nil until a chain has cache.postgres
}

// newCache builds a chain's response cache, nil when its cache is off:
// memory, then Redis (redis.url and cache.redis), then Postgres
// (postgres.url and cache.postgres), asked in that order; pg is the
// Postgres tier, whose retention the chain runs (nil: none).
func (cs *chains) newCache(cc ChainConfig, log *slog.Logger, m *cache.Metrics) (c *cache.Cache, pg *cache.Postgres, err error) {
	if !cc.Cache.On() {
		return nil, nil, nil
	}
	var lower []cache.Layer
	t := &cs.tiers
	if cs.rdb != nil && cc.Cache.Redis != nil && *cc.Cache.Redis {
		r := cache.NewRedis(cs.rdb, cc.Name, cache.RedisOptions{MaxEntryBytes: cc.Cache.MaxEntryBytes,
			MaxTTL: cc.Cache.SettledTTL})
		lower = append(lower, cc.Cache.RedisLayer(r))
	}
	if t.hist != nil && cc.Cache.Postgres {
		if t.pool == nil {
			pool, err := cache.OpenPool(t.url, cachePoolConns)
			if err != nil {
				return nil, nil, err
			}
			t.pool = pool
		}
		pg = cache.NewPostgres(t.pool, cc.ChainID, cache.PostgresOptions{MaxEntryBytes: cc.Cache.MaxEntryBytes,
			MaxAge: cc.Cache.PostgresRetention, MaxRows: cc.Cache.PostgresMaxRows, Ready: t.hist.Migrated, Logger: log.With("chain", cc.Name)})
		lower = append(lower, cc.Cache.PostgresLayer(pg))
	}
	c = cache.New(cc.Cache, cache.Options{Chain: cc.Name, Lower: lower, Logger: log, Metrics: m, IsRevert: isRevert})
	return c, pg, nil
}

// close closes the Postgres tiers' pool, once their prunes have ended.
func (t *cacheTiers) close() {
	if t.pool != nil {
		t.pool.Close()
		t.pool = nil
	}
}

// isRevert is the remotes' verdict that err is a revert: only those of
// the caller's errors are fixed by the call's block.
func isRevert(method string, err error) bool {
	return remotes.Classify(method, err).Reason == remotes.ReasonRevert
}
