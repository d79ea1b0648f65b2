package blockstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/migrations"
)

// Migration retries while Postgres is unreachable at start: the first
// after migrateBackoffMin, each later one twice as long after the last, up
// to MaxMigrateBackoff.
const (
	migrateBackoffMin = time.Second
	MaxMigrateBackoff = 30 * time.Second
	// migrateAttemptTimeout bounds one attempt, so that a Postgres that
	// stops answering mid-way is tried again rather than waited on for
	// ever. It is past the migrations' own wait for another replica's
	// lock (five minutes).
	migrateAttemptTimeout = 10 * time.Minute
)

// ErrNotMigrated is returned by a History's chains before the schema is
// in place.
var ErrNotMigrated = errors.New("history store not ready: migrations have not run yet (is Postgres up?)")

// History is the history store as a process serves it: a Postgres store
// whose schema (package migrations) is applied in the background from
// Start, and again with backoff until Postgres answers, so that the
// process starts and serves without it. Until the schema is in place each
// chain's store (Chain) stores nothing and answers nothing, so callers
// fall through to the remotes.
type History struct {
	pg       *Postgres
	url      string
	required bool
	log      *slog.Logger
	ready    atomic.Bool      // migrated
	migrated chan struct{}    // closed once ready
	now      func() time.Time // times retention's backoff; a test's clock

	mu     sync.Mutex
	chains map[int64]string // the chains served, by id: their names label the size metrics

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// OpenHistory opens the store cfg names (see Config.Open) for a process;
// cfg.Required makes its outage one of the process's (Readiness). It does
// no I/O.
func OpenHistory(ctx context.Context, cfg Config, opts Options) (*History, error) {
	pg, err := cfg.Open(ctx, opts)
	if err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &History{pg: pg, url: cfg.URL, required: cfg.Required, log: log, now: time.Now,
		migrated: make(chan struct{})}, nil
}

// Start migrates in the background until the schema is in place or Stop.
func (h *History) Start(context.Context) error {
	bg, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.wg.Go(func() {
		if h.migrate(bg) {
			h.report(bg)
		}
	})
	return nil
}

// statsInterval is how often the size metrics are refreshed: the sizes
// move slowly, and each refresh reads the catalog of every partition.
const statsInterval = time.Minute

// report refreshes the size metrics of the chains served from Stats,
// every statsInterval until ctx ends. A failed refresh leaves the last
// figures; Postgres's outage is the store's to report.
func (h *History) report(ctx context.Context) {
	t := time.NewTicker(statsInterval)
	defer t.Stop()
	for {
		if stats, err := h.pg.Stats(ctx); err == nil {
			h.setSizes(stats)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// setSizes sets the size metrics of the chains served; one with nothing
// stored yet shows 0, not an absent series.
func (h *History) setSizes(stats []ChainStats) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, name := range h.chains {
		if slices.ContainsFunc(stats, func(s ChainStats) bool { return int64(s.ChainID) == id }) {
			continue
		}
		for _, t := range historyTables {
			h.pg.m.rows.WithLabelValues(name, t).Set(0)
			h.pg.m.bytes.WithLabelValues(name, t).Set(0)
		}
	}
	for _, s := range stats {
		name, ok := h.chains[int64(s.ChainID)]
		if !ok {
			continue // another deployment's chain, or one no longer configured
		}
		for _, t := range s.Tables {
			h.pg.m.rows.WithLabelValues(name, t.Table).Set(float64(t.Rows))
			h.pg.m.bytes.WithLabelValues(name, t.Table).Set(float64(t.Bytes))
		}
	}
}

// migrate applies the migrations, retrying with backoff until they succeed
// (true) or ctx ends.
func (h *History) migrate(ctx context.Context) bool {
	backoff := migrateBackoffMin
	for {
		applied, err := h.migrateOnce(ctx)
		if err == nil {
			h.ready.Store(true)
			close(h.migrated)
			h.log.Info("history store ready", "migrations_applied", len(applied))
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		h.log.Warn("history store unavailable: serving without it until migrations succeed",
			"err", err, "retry_in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		backoff = min(2*backoff, MaxMigrateBackoff)
	}
}

// migrateOnce is one attempt: only against a Postgres that answers (the
// store's ping is bounded; the migrations' connection is not), and bounded
// itself.
func (h *History) migrateOnce(ctx context.Context) ([]int64, error) {
	if err := h.pg.Ping(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, migrateAttemptTimeout)
	defer cancel()
	return migrations.Up(ctx, h.url, h.log)
}

// Stop ends the migration retries and closes the pool; call it once no
// chain writes any more. Closing the pool waits for its connections to
// close, each up to 15 s on a Postgres that stopped answering: ctx's
// deadline comes first, and the rest close on their own.
func (h *History) Stop(ctx context.Context) error {
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
	closed := make(chan struct{})
	go func() { h.pg.Close(); close(closed) }()
	select {
	case <-closed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("history: close: %w", ctx.Err())
	}
}

// States of the history store, as /readyz shows them.
const (
	StateUp        = "up"        // migrated, and Postgres answers
	StateDown      = "down"      // Postgres refuses or does not answer in time
	StateMigrating = "migrating" // Postgres answers; the schema is not in place yet
)

// Readiness is the history store's part of /readyz.
type Readiness struct {
	State    string `json:"state"` // StateUp, StateDown or StateMigrating
	Required bool   `json:"required"`
}

// Ready reports whether the store lets the process be ready: it is up, or
// not required. The replicas of a cluster share it, so by default its
// outage is no reason to take them all out of a load balancer at once.
func (r Readiness) Ready() bool { return r.State == StateUp || !r.Required }

// Degraded reports whether the process serves without the store.
func (r Readiness) Degraded() bool { return r.State != StateUp }

// Readiness is the store's state now.
func (h *History) Readiness() Readiness {
	r := Readiness{State: StateUp, Required: h.required}
	switch {
	case !h.pg.Up():
		r.State = StateDown
	case !h.ready.Load():
		r.State = StateMigrating
	}
	return r
}

// Migrated reports whether the schema is in place: the cache's Postgres
// tier, whose table the same migrations create, waits for it too.
func (h *History) Migrated() bool { return h.ready.Load() }

// Chain returns one chain's store, kept by pol and gated on the schema.
func (h *History) Chain(chainID uint64, name string, pol Policy) *HistoryChain {
	h.mu.Lock()
	if h.chains == nil {
		h.chains = map[int64]string{}
	}
	h.chains[int64(chainID)] = name
	h.mu.Unlock()
	g := &HistoryChain{h: h, c: h.pg.ChainWith(chainID, name, pol)}
	g.retained.Store(-1)
	return g
}

// SchemaReady is closed once the schema is in place: the leader's archive
// waits for it rather than fail (and say so) until then.
func (g *HistoryChain) SchemaReady() <-chan struct{} { return g.h.migrated }

// HistoryChain is one chain's store as the stalker and the router use it:
// the Chain's, once the schema is migrated; before that it stores nothing
// and answers nothing, so callers fall through.
type HistoryChain struct {
	h *History
	c *Chain
	// retained is the partition span of the highest block stored when
	// retention last ran; -1 before it ran and after it failed.
	retained atomic.Int64
	// retryAt (Unix nanoseconds) holds retention back after a failure
	// until then; see retentionRetryDelay.
	retryAt atomic.Int64
}

// retentionRetryDelay is how long retention waits after a failure before
// it runs again. A failure is mostly a lock timeout: a DROP TABLE of a
// partition queues for an ACCESS EXCLUSIVE lock of the parent tables,
// and every read of every chain queues behind it until lock_timeout
// (retentionLockTimeout). Retried at once, with the next Put, a store
// under steady read load would stall its reads that long on every block
// written; retried a minute later, that stall is at most one a minute,
// while partitions past the kept range wait a minute longer to go.
//
// Detaching first (DETACH PARTITION ... CONCURRENTLY, which does not
// take the parent's ACCESS EXCLUSIVE lock) was not chosen: it cannot
// run in a transaction, so moving the coverage and removing the rows
// would no longer be one, and a detach cut short leaves the partition
// pending, to be finalized by hand or by a later run, under the advisory
// locks that keep Puts out, which are then held across transactions.
const retentionRetryDelay = time.Minute

// Put stores settled blocks (Chain.Put). With Policy.KeepBlocks, once a
// block of a new partition span is stored, the partitions that fell out of
// the kept range are dropped (Chain.Retain); a failure there is logged,
// not returned, and retention runs again with the first Put
// retentionRetryDelay later.
func (g *HistoryChain) Put(ctx context.Context, blocks []*evm.Block) error {
	if !g.h.ready.Load() {
		return ErrNotMigrated
	}
	if err := g.c.Put(ctx, blocks); err != nil {
		return err
	}
	if g.c.keep == 0 || len(blocks) == 0 {
		return nil
	}
	var top uint64
	for _, b := range blocks {
		top = max(top, b.Number)
	}
	span := int64(top / g.c.span)
	prev := g.retained.Load()
	if span <= prev || g.h.now().UnixNano() < g.retryAt.Load() || !g.retained.CompareAndSwap(prev, span) {
		return nil
	}
	dropped, err := g.c.Retain(ctx)
	if err != nil {
		g.retryAt.Store(g.h.now().Add(retentionRetryDelay).UnixNano())
		g.retained.Store(-1)
		g.h.log.Warn("history retention failed; retrying with a write after the delay", "chain", g.c.name, "delay", retentionRetryDelay, "err", err)
		return nil
	}
	for _, r := range dropped {
		g.h.log.Info("history retention dropped a partition", "chain", g.c.name, "from", r.From, "to", r.To)
	}
	return nil
}

// Covered returns the stored sub-ranges of [from, to]; none before the
// schema is migrated.
func (g *HistoryChain) Covered(ctx context.Context, from, to uint64) ([]Range, error) {
	if !g.h.ready.Load() {
		return nil, nil
	}
	return g.c.Covered(ctx, from, to)
}

// Highest returns the highest stored block number.
func (g *HistoryChain) Highest(ctx context.Context) (uint64, bool, error) {
	if !g.h.ready.Load() {
		return 0, false, ErrNotMigrated
	}
	return g.c.Highest(ctx)
}

// Links reports whether a block links by hash to its stored neighbours;
// nothing links before the schema is migrated.
func (g *HistoryChain) Links(ctx context.Context, n uint64, hash, parent string) (bool, error) {
	if !g.h.ready.Load() {
		return false, nil
	}
	return g.c.Links(ctx, n, hash, parent)
}

// Answer answers a call from stored data; ok is false before the schema
// is migrated.
func (g *HistoryChain) Answer(ctx context.Context, c evm.Call) (json.RawMessage, bool, error) {
	if !g.h.ready.Load() {
		return nil, false, nil
	}
	return g.c.Answer(ctx, c)
}

// Logs returns the stored logs in [from, to] matching filter.
func (g *HistoryChain) Logs(ctx context.Context, filter *evm.LogFilter, from, to uint64) (json.RawMessage, error) {
	if !g.h.ready.Load() {
		return nil, ErrNotMigrated
	}
	return g.c.Logs(ctx, filter, from, to)
}
