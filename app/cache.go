package app

import (
	"log/slog"

	"github.com/venn-gateway/venn/cache"
)

// newCache builds a chain's response cache, nil when its cache is off:
// memory, then the tiers below it in the order they are asked.
func (cs *chains) newCache(cc ChainConfig, log *slog.Logger, m *cache.Metrics) *cache.Cache {
	if !cc.Cache.On() {
		return nil
	}
	var lower []cache.Layer
	// The shared tiers are appended here, in order: Redis
	// (cc.Cache.RedisLayer) when cc.Cache.Redis, then Postgres
	// (cc.Cache.PostgresLayer) when cc.Cache.Postgres.
	return cache.New(cc.Cache, cache.Options{Chain: cc.Name, Lower: lower, Logger: log, Metrics: m})
}
