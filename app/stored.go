package app

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/venn-gateway/venn/edge"
)

// Tenants and keys kept in Redis (auth.redis, edge/stored.go): read
// before the edge is built, then looked for every auth.redis.refresh; a
// change is merged with the file's tenants and keys and put in force as
// a reload puts the edge (open WebSocket connections no longer admitted
// are closed). A reload of the file merges them again.

// storedLoadTimeout bounds one read of the stored scopes.
const storedLoadTimeout = 2 * time.Second

// storedScopes is the stored tenants and keys as this replica last read
// them; nil without auth.redis.
type storedScopes struct {
	rdb     redis.UniversalClient
	store   *edge.ScopeStore
	refresh time.Duration
	log     *slog.Logger

	mu   sync.Mutex
	cur  edge.Stored
	read bool // cur has been read
}

func newStoredScopes(lc fx.Lifecycle, cfg *Config, log *slog.Logger) (*storedScopes, error) {
	sc := cfg.Edge.WithDefaults().Auth.Redis
	if !sc.Enabled {
		return nil, nil
	}
	rdb, err := cfg.Redis.newRedisClient(redisTuning{maxRetries: -1, dialerRetries: 1})
	if err != nil {
		return nil, err
	}
	lc.Append(fx.Hook{OnStop: func(context.Context) error { return rdb.Close() }})
	return &storedScopes{rdb: rdb, store: edge.NewScopeStore(rdb, sc.Tag), refresh: sc.Refresh, log: log}, nil
}

// current is what was last read.
func (s *storedScopes) current() edge.Stored {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// initial reads the stored scopes once, best effort, and returns cfg's
// edge with them: without Redis the file's alone, until the watcher
// reads them.
func (s *storedScopes) initial(cfg *Config) edge.Config {
	ctx, cancel := context.WithTimeout(context.Background(), storedLoadTimeout)
	defer cancel()
	if _, err := s.load(ctx); err != nil {
		s.log.Warn("stored tenants and keys: not read at start; looking again every auth.redis.refresh", "err", err)
	}
	return s.merge(cfg)
}

// load reads the stored scopes when their version moved; changed says
// whether it had.
func (s *storedScopes) load(ctx context.Context) (changed bool, err error) {
	v, err := s.store.Version(ctx)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	same := s.read && v == s.cur.Version
	s.mu.Unlock()
	if same {
		return false, nil
	}
	st, bad, err := s.store.Load(ctx)
	if err != nil {
		return false, err
	}
	for _, b := range bad {
		s.log.Warn("stored tenants and keys: entry left out", "err", b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	changed = !reflect.DeepEqual(st, s.cur)
	s.cur, s.read = st, true
	return changed, nil
}

// merge is cfg's edge with the stored tenants and keys that check;
// those that do not are logged, never quoted.
func (s *storedScopes) merge(cfg *Config) edge.Config {
	chains := make([]string, len(cfg.Chains))
	for i, ch := range cfg.Chains {
		chains[i] = ch.Name
	}
	merged, probs := edge.Merge(cfg.Edge, s.current(), chains)
	for _, p := range probs {
		s.log.Warn("stored tenants and keys: entry left out", "err", p)
	}
	return merged
}

// watchStoredScopes looks for a change every auth.redis.refresh until
// stop, and puts each in force through the reloader.
func watchStoredScopes(lc fx.Lifecycle, s *storedScopes, r *Reloader) {
	if s == nil {
		return
	}
	r.mu.Lock()
	r.stored = s
	r.appliedEdge = r.edgeOf(r.applied) // as newEdge built it
	r.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	lc.Append(fx.Hook{
		OnStart: func(context.Context) error {
			go s.watch(ctx, r, done)
			return nil
		},
		OnStop: func(context.Context) error {
			cancel()
			<-done
			return nil
		},
	})
}

func (s *storedScopes) watch(ctx context.Context, r *Reloader, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(s.refresh)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		lctx, cancel := context.WithTimeout(ctx, storedLoadTimeout)
		changed, err := s.load(lctx)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				s.log.Warn("stored tenants and keys: redis not answering; the last read stay in force", "err", err)
			}
			failing = true
			continue
		case err != nil:
			return
		case failing:
			s.log.Info("stored tenants and keys: redis answers again")
			failing = false
		}
		if changed {
			r.applyStored()
		}
	}
}

// edgeOf is the edge c's file gives, with the stored tenants and keys;
// auth.redis stays as the process started (a restart changes it).
func (r *Reloader) edgeOf(c *Config) edge.Config {
	if r.stored == nil {
		return c.Edge
	}
	cc := *c
	cc.Edge.Auth.Redis = r.started.Edge.Auth.Redis
	return r.stored.merge(&cc)
}

// applyStored puts the stored tenants and keys last read in force, with
// the file last applied.
func (r *Reloader) applyStored() {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := r.edgeOf(r.applied)
	if reflect.DeepEqual(next, r.appliedEdge) {
		return
	}
	r.gate.set(r.gate.load().Reconfigured(next))
	r.appliedEdge = next
	closed := r.rpc.Readmit()
	st := r.stored.current()
	r.log.Info("stored tenants and keys applied", "version", st.Version, "tenants", len(st.Tenants),
		"keys", len(st.Keys), "websockets_closed", closed)
}

// ScopeStore opens the store of the tenants and keys cfg keeps in Redis
// (auth.redis), for `venn tenants`; close closes its client. The chains
// are cfg's, for CheckStored.
func (c *Config) ScopeStore() (store *edge.ScopeStore, chains []string, close func() error, err error) {
	if !c.Redis.Enabled() {
		return nil, nil, nil, errNoRedis
	}
	rdb, err := c.Redis.newRedisClient(redisTuning{})
	if err != nil {
		return nil, nil, nil, err
	}
	for _, ch := range c.Chains {
		chains = append(chains, ch.Name)
	}
	return edge.NewScopeStore(rdb, c.Edge.WithDefaults().Auth.Redis.Tag), chains, rdb.Close, nil
}

var errNoRedis = errors.New("redis.url, redis.sentinel or redis.cluster is not set: stored tenants and keys are kept in Redis")
