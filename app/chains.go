package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/venn-gateway/venn/chain"
	vnats "github.com/venn-gateway/venn/nats"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/tracing"
	"go.uber.org/fx"
	"golang.org/x/sync/errgroup"
)

// chains are the chains served, in config order. A reload adds and
// removes chains (reload_chains.go): the list is swapped whole, so
// readers (readyz) load it without a lock. Each chain's lifecycle is
// package chain's; this is the process's list of them.
type chains struct {
	list atomic.Pointer[[]*chain.Chain]
	// changed is closed when the list is next swapped (publish), for the
	// gRPC streams (grpc.go); changedMu orders the swaps.
	changedMu sync.Mutex
	changed   chan struct{}
	rdb       redis.UniversalClient // nil without Redis
	parts     *chain.Parts          // what every chain is built with
	log       *slog.Logger
	retired   sync.WaitGroup // removed chains stopping (reload_chains.go)
	stopping  chan struct{}  // closed by stop: removed chains stop waiting
	stopOnce  sync.Once
	// draining turns /readyz 503: a drain (admin API) or the shutdown.
	draining atomic.Bool
}

// all is the chains served now, in config order.
func (cs *chains) all() []*chain.Chain {
	if l := cs.list.Load(); l != nil {
		return *l
	}
	return nil
}

// publish serves list from now on, and tells those waiting on
// listChanged.
func (cs *chains) publish(list []*chain.Chain) {
	cs.changedMu.Lock()
	defer cs.changedMu.Unlock()
	cs.list.Store(&list)
	close(cs.changed)
	cs.changed = make(chan struct{})
}

// listChanged is closed when the list is next swapped: a reload applied
// its chains (added, removed, or reconfigured in place).
func (cs *chains) listChanged() <-chan struct{} {
	cs.changedMu.Lock()
	defer cs.changedMu.Unlock()
	return cs.changed
}

type chainsParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    *Config
	Log       *slog.Logger
	Registry  *prometheus.Registry
	Remotes   *remotes.Metrics
	History   *history
	Tracer    *tracing.Tracer // nil: off
	NATS      *vnats.Conn     // nil: no NATS
}

func newChains(p chainsParams) (*chains, error) {
	cfg, log := p.Config, p.Log
	out := &chains{log: log, stopping: make(chan struct{}), changed: make(chan struct{})}
	if cfg.Redis.Enabled() {
		rdb, err := cfg.Redis.newRedisClient(redisTuning{})
		if err != nil {
			return nil, err
		}
		out.rdb = rdb
	}
	out.parts = &chain.Parts{Redis: out.rdb, ReplicaID: cfg.replicaID(), LeaseTTL: cfg.Redis.LeaseTTL,
		NATS: p.NATS, NATSPrefix: cfg.NATS.WithDefaults().Prefix, Limits: cfg.Limits.Subscriptions,
		Metrics: chain.NewMetrics(p.Registry), Remotes: p.Remotes,
		Replies: remotes.NewReplyBudget(cfg.Limits.MaxReplyBytesInFlight, p.Remotes), // one for the process
		History: p.History.store, Tiers: chain.NewCacheTiers(p.History.store, cfg.Postgres.URL),
		Tracer: p.Tracer, Logger: log}
	list := make([]*chain.Chain, 0, len(cfg.Chains))
	for _, cc := range cfg.Chains {
		c, err := chain.New(cc, out.parts)
		if err != nil {
			out.parts.Tiers.Close()
			return nil, err
		}
		list = append(list, c)
	}
	out.publish(list)
	p.Lifecycle.Append(fx.Hook{OnStart: out.start, OnStop: out.stop})
	return out, nil
}

// start starts every chain at once: each pool may wait a few seconds for
// a first ready remote, and that must not add up across chains.
func (cs *chains) start(ctx context.Context) error {
	var g errgroup.Group
	for _, c := range cs.all() {
		g.Go(func() error { return c.Start(ctx, true) })
	}
	if err := g.Wait(); err != nil {
		// fx stops only hooks that started: undo the chains that did.
		return errors.Join(err, cs.stop(ctx))
	}
	return nil
}

// stop stops every chain, and the removed ones still stopping.
func (cs *chains) stop(ctx context.Context) error {
	list := cs.all()
	errs := make([]error, len(list))
	var wg sync.WaitGroup
	for i, c := range list {
		wg.Go(func() { errs[i] = c.Stop(ctx) })
	}
	wg.Wait()
	errs = append(errs, cs.waitRetired(ctx))
	cs.parts.Tiers.Close() // every prune has ended
	if cs.rdb != nil {
		errs = append(errs, cs.rdb.Close())
	}
	return errors.Join(errs...)
}

// waitRetired cuts the removed chains' waits short and waits for them.
func (cs *chains) waitRetired(ctx context.Context) error {
	cs.stopOnce.Do(func() { close(cs.stopping) })
	done := make(chan struct{})
	go func() { cs.retired.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("removed chains: stop: %w", ctx.Err())
	}
}
