package chain

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/remotes/verdict"
)

// cachePoolConns bounds the connections of the Postgres tiers' pool, one
// for every chain's: a tier is asked only on a miss of memory and Redis,
// for the expensive methods.
const cachePoolConns = 8

// CacheTiers are the Postgres tiers of the chains' caches (the Redis
// tiers are on Parts.Redis): in the history database, on a pool of their
// own opened for the first chain that keeps answers there. One for the
// process; Close it once every chain has stopped.
type CacheTiers struct {
	hist *blockstore.History // nil without postgres.url; it migrates cache_entries too
	url  string              // postgres.url
	pool *pgxpool.Pool       // nil until a chain has cache.postgres
}

// NewCacheTiers is the tiers in hist (nil: none, without postgres.url),
// whose database is at url.
func NewCacheTiers(hist *blockstore.History, url string) *CacheTiers {
	return &CacheTiers{hist: hist, url: url}
}

// chainCache is a chain's response cache and the work that keeps it,
// under a context of its own so that a reload can replace it: reorg
// eviction, and the Postgres tier's retention.
type chainCache struct {
	c  *cache.Cache
	pg *cache.Postgres // nil: no Postgres tier
	// distrust queues the remotes the pool found untrustworthy, whose
	// answers since their last good check the cache drops (run).
	distrust chan remotes.Distrust
	log      *slog.Logger
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// distrustQueue bounds the findings waiting for their purge: one per
// remote found out, rare, each purge a few Redis scans.
const distrustQueue = 64

// distrusted queues d for run's purge; it never blocks (the pool calls it
// from a check).
func (k *chainCache) distrusted(d remotes.Distrust) {
	if k == nil {
		return
	}
	select {
	case k.distrust <- d:
	default:
		k.log.Error("a distrusted remote's cached answers are not dropped: too many findings at once",
			"remote", d.Remote, "cause", d.Cause, "since", d.Since)
	}
}

// purgeDistrusted drops the answers of each remote found untrustworthy
// since its last good check, on every tier and replica, until ctx ends.
func (k *chainCache) purgeDistrusted(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-k.distrust:
			_, _ = k.c.PurgeDistrusted(ctx, d.Remote, d.Since, d.Cause) // logged there
		}
	}
}

// run starts the cache's work for chain c; nil: no cache.
func (k *chainCache) run(c *Chain) {
	if k == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	k.cancel = cancel
	// Near-head entries of orphaned blocks leave at each reorg.
	k.wg.Go(func() { k.c.Run(ctx, c.head.window, c.settled) })
	// Purges another replica made drop the entries from this one's memory.
	k.wg.Go(func() { k.c.FollowPurges(ctx) })
	// A remote found on another chain or misbehaving: its answers since
	// its last good check leave every tier.
	k.wg.Go(func() { k.purgeDistrusted(ctx) })
	if k.pg != nil {
		k.wg.Go(func() { _ = k.pg.Run(ctx) })
	}
}

// stop ends the cache's work, waits for it, and closes the memory tier;
// calls still on it finish (a closed tier keeps answering).
func (k *chainCache) stop() {
	if k == nil {
		return
	}
	if k.cancel != nil {
		k.cancel()
		k.wg.Wait()
	}
	k.c.Close()
}

// applyCache replaces a running chain's response cache with one built to
// the reloaded settings. Its memory starts empty; the Redis and Postgres
// tiers keep their entries. Calls in flight finish on the old one.
func applyCache(c *Chain, cc Config) ([]string, error) {
	next, err := newCache(cc, c.parts)
	if err != nil {
		return nil, fmt.Errorf("chain %s: cache: %w", c.name, err)
	}
	if c.cancel != nil { // running
		next.run(c)
	}
	if next != nil {
		c.router.SetCache(next.c)
	} else {
		c.router.SetCache(nil)
	}
	c.cache.Swap(next).stop()
	if next == nil {
		return []string{fmt.Sprintf("chain %s: cache off", c.name)}, nil
	}
	return []string{fmt.Sprintf("chain %s: cache settings applied (its memory tier starts empty)", c.name)}, nil
}

// newCache builds a chain's response cache, nil when its cache is off:
// memory, then Redis (redis.url and cache.redis), then Postgres
// (postgres.url and cache.postgres), asked in that order.
func newCache(cc Config, p *Parts) (*chainCache, error) {
	if !cc.Cache.On() {
		return nil, nil
	}
	var pg *cache.Postgres
	var lower []cache.Layer
	t, log := p.Tiers, p.Logger
	if p.Redis != nil && cc.Cache.Redis != nil && *cc.Cache.Redis {
		r := cache.NewRedis(p.Redis, cc.Name, cache.RedisOptions{MaxEntryBytes: cc.Cache.MaxEntryBytes,
			MaxTTL: cc.Cache.SettledTTL, Timeout: cc.Cache.TierTimeout})
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
		pg = cache.NewPostgres(t.pool, cc.ChainID, cache.PostgresOptions{MaxEntryBytes: cc.Cache.MaxEntryBytes,
			ReadTimeout: cc.Cache.TierTimeout,
			MaxAge:      cc.Cache.PostgresRetention, MaxRows: cc.Cache.PostgresMaxRows, Ready: t.hist.Migrated, Logger: log.With("chain", cc.Name)})
		lower = append(lower, cc.Cache.PostgresLayer(pg))
	}
	c := cache.New(cc.Cache, cache.Options{Chain: cc.Name, Lower: lower, Logger: log, Metrics: p.Metrics.cache,
		IsRevert: isRevert, LacksBlock: lacksBlock})
	return &chainCache{c: c, pg: pg, distrust: make(chan remotes.Distrust, distrustQueue), log: log.With("chain", cc.Name)}, nil
}

// Close closes the Postgres tiers' pool, once their prunes have ended.
func (t *CacheTiers) Close() {
	if t.pool != nil {
		t.pool.Close()
		t.pool = nil
	}
}

// isRevert is the remotes' verdict that err is a revert: only those of
// the caller's errors are fixed by the call's block.
func isRevert(method string, err error) bool {
	return verdict.Classify(method, err).Reason == verdict.ReasonRevert
}

// lacksBlock is the remotes' verdict that err says the remote lacks the
// call's block.
func lacksBlock(method string, err error) bool {
	return verdict.Classify(method, err).LacksBlock()
}
