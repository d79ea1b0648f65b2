package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/migrations"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/stalker"
)

// Migration retries while Postgres is unreachable at start.
const (
	migrateBackoffMin = time.Second
	migrateBackoffMax = 30 * time.Second
	// migrateAttemptTimeout bounds one attempt, so that a Postgres that
	// stops answering mid-way is tried again rather than waited on for
	// ever. It is past the migrations' own wait for another replica's
	// lock (five minutes).
	migrateAttemptTimeout = 10 * time.Minute
)

// States of the history store, as /readyz shows them.
const (
	historyUp        = "up"        // migrated, and Postgres answers
	historyDown      = "down"      // Postgres refuses or does not answer in time
	historyMigrating = "migrating" // Postgres answers; the schema is not in place yet
)

// history is the process's history store (postgres.url). The pool opens
// lazily and the schema is migrated at start, in the background and again
// with backoff until Postgres answers: venn starts and serves without it,
// and each chain's store refuses (stores nothing, answers nothing) until
// the schema is in place. Without postgres.url pg is nil.
type history struct {
	url      string
	required bool // postgres.required: /readyz 503 while not up
	pg       *blockstore.Postgres
	log      *slog.Logger
	ready    atomic.Bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type historyParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    *Config
	Log       *slog.Logger
	Registry  *prometheus.Registry
}

func newHistory(p historyParams) (*history, error) {
	pc := p.Config.Postgres
	h := &history{url: pc.URL, required: pc.Required, log: p.Log}
	if h.url == "" {
		return h, nil
	}
	pg, err := blockstore.Open(context.Background(), h.url, blockstore.Options{Logger: p.Log, Registerer: p.Registry,
		ReadTimeout: pc.ReadTimeout, WriteTimeout: pc.WriteTimeout})
	if err != nil {
		// The error may quote the URL (password masked, the rest not).
		return nil, errors.New("postgres.url: cannot be used (check its host and options)")
	}
	h.pg = pg
	p.Lifecycle.Append(fx.Hook{OnStart: h.start, OnStop: h.stop})
	return h, nil
}

func (h *history) start(context.Context) error {
	bg, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.wg.Go(func() { h.migrate(bg) })
	return nil
}

// migrate applies the migrations, retrying with backoff until they succeed
// or ctx ends, then opens the stores.
func (h *history) migrate(ctx context.Context) {
	backoff := migrateBackoffMin
	for {
		applied, err := h.migrateOnce(ctx)
		if err == nil {
			h.ready.Store(true)
			h.log.Info("history store ready", "migrations_applied", len(applied))
			return
		}
		if ctx.Err() != nil {
			return
		}
		h.log.Warn("history store unavailable: serving without it until migrations succeed",
			"err", err, "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, migrateBackoffMax)
	}
}

// migrateOnce is one attempt: only against a Postgres that answers (the
// store's ping is bounded; the migrations' connection is not), and bounded
// itself.
func (h *history) migrateOnce(ctx context.Context) ([]int64, error) {
	if err := h.pg.Ping(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, migrateAttemptTimeout)
	defer cancel()
	return migrations.Up(ctx, h.url, h.log)
}

// readiness is the store's state for /readyz; nil without postgres.url.
func (h *history) readiness() *historyReadiness {
	if h.pg == nil {
		return nil
	}
	r := &historyReadiness{State: historyUp, Required: h.required}
	switch {
	case !h.pg.Up():
		r.State = historyDown
	case !h.ready.Load():
		r.State = historyMigrating
	}
	return r
}

// stop ends the migration retries and closes the pool. It runs after the
// chains stopped (their hooks were appended later), so no archiver is
// writing any more.
func (h *history) stop(ctx context.Context) error {
	if h.cancel != nil {
		h.cancel()
	}
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("history: stop: %w", ctx.Err())
	}
	// Closing the pool waits for its connections to close, each up to 15 s
	// on a Postgres that stopped answering: the stop's deadline comes
	// first, and the process exits without waiting for the rest.
	closed := make(chan struct{})
	go func() { h.pg.Close(); close(closed) }()
	select {
	case <-closed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("history: close: %w", ctx.Err())
	}
}

// chain returns one chain's history store, nil without postgres.url.
func (h *history) chain(cc ChainConfig) *historyChain {
	if h.pg == nil {
		return nil
	}
	return &historyChain{h: h, c: h.pg.Chain(cc.ChainID, cc.Name)}
}

// errHistoryPending: the schema is not migrated yet.
var errHistoryPending = errors.New("history store not ready: migrations have not run yet (is Postgres up?)")

// historyChain is one chain's history store as the stalker and the router
// use it: the blockstore's, once the schema is migrated; before that it
// stores nothing and answers nothing, so callers fall through.
type historyChain struct {
	h *history
	c *blockstore.Chain
}

var _ stalker.Archive = (*historyChain)(nil)

// Put stores settled blocks.
func (g *historyChain) Put(ctx context.Context, blocks []*evm.Block) error {
	if !g.h.ready.Load() {
		return errHistoryPending
	}
	return g.c.Put(ctx, blocks)
}

// Covered returns the stored sub-ranges of [from, to]; none before the
// schema is migrated.
func (g *historyChain) Covered(ctx context.Context, from, to uint64) ([]blockstore.Range, error) {
	if !g.h.ready.Load() {
		return nil, nil
	}
	return g.c.Covered(ctx, from, to)
}

// Highest returns the highest stored block number.
func (g *historyChain) Highest(ctx context.Context) (uint64, bool, error) {
	if !g.h.ready.Load() {
		return 0, false, errHistoryPending
	}
	return g.c.Highest(ctx)
}

// Links reports whether a block links by hash to its stored neighbours;
// nothing links before the schema is migrated.
func (g *historyChain) Links(ctx context.Context, n uint64, hash, parent string) (bool, error) {
	if !g.h.ready.Load() {
		return false, nil
	}
	return g.c.Links(ctx, n, hash, parent)
}

// Answer answers a call from stored data; ok is false before the schema
// is migrated.
func (g *historyChain) Answer(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, bool, error) {
	if !g.h.ready.Load() {
		return nil, false, nil
	}
	return g.c.Answer(ctx, method, params)
}

// Logs returns the stored logs in [from, to] matching filter.
func (g *historyChain) Logs(ctx context.Context, filter json.RawMessage, from, to uint64) (json.RawMessage, error) {
	if !g.h.ready.Load() {
		return nil, errHistoryPending
	}
	return g.c.Logs(ctx, filter, from, to)
}

// Chain returns the chain configured under name.
func (c *Config) Chain(name string) (ChainConfig, bool) {
	for _, cc := range c.Chains {
		if cc.Name == name {
			return cc, true
		}
	}
	return ChainConfig{}, false
}

// NewPool builds the chain's remotes pool as serve does. It does no I/O:
// Start the pool before calling through it. replies is the process's reply
// budget, shared by every chain's pool (nil: the pool gets its own).
func (c ChainConfig) NewPool(log *slog.Logger, m *remotes.Metrics, replies *remotes.ReplyBudget) (*remotes.Pool, error) {
	rs := make([]remotes.Config, 0, len(c.Remotes))
	for _, r := range c.Remotes {
		rc, err := r.RemoteConfig()
		if err != nil {
			return nil, fmt.Errorf("chain %s: %w", c.Name, err)
		}
		rs = append(rs, rc)
	}
	pc := c.PoolConfig()
	pc.Replies = replies
	pool, err := remotes.NewPool(pc, rs, log, m)
	if err != nil {
		return nil, fmt.Errorf("chain %s: %w", c.Name, err)
	}
	return pool, nil
}

// settledLine is the chain's settled line as this replica's head window
// sees it: the same rule the leader archives by.
func (c ChainConfig) settledLine(w *headstore.Window) func() (uint64, bool) {
	return func() (uint64, bool) {
		tags, ok := w.Tags()
		if !ok {
			return 0, false
		}
		return stalker.Settled(tags.Latest, tags.Finalized, c.History.Confirmations)
	}
}

// StalkerConfig is the chain's stalker settings; archive is where settled
// blocks go (nil: not archived).
func (c ChainConfig) StalkerConfig(archive stalker.Archive, m *stalker.ArchiveMetrics) stalker.Config {
	sc := stalker.Config{Chain: c.Name, Backfill: c.Head.Backfill,
		FinalityInterval: c.Head.FinalityInterval, Window: c.Head.Window, Integrity: c.Integrity.StalkerOn()}
	if archive != nil {
		sc.Archive = stalker.ArchiveConfig{Store: archive, Confirmations: c.History.Confirmations,
			Batch: c.History.Batch, Metrics: m}
	}
	return sc
}
