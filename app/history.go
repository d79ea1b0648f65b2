package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/remotes/budget"
	"github.com/venn-gateway/venn/remotes/wire"
	"github.com/venn-gateway/venn/router"
	"github.com/venn-gateway/venn/stalker"
	"github.com/venn-gateway/venn/tracing"
)

// history is the process's history store (postgres.url): package
// blockstore's, which migrates itself in the background and gates its
// chains until the schema is in place. Without postgres.url store is nil.
type history struct {
	store *blockstore.History
}

type historyParams struct {
	fx.In
	Lifecycle fx.Lifecycle
	Config    *Config
	Log       *slog.Logger
	Registry  *prometheus.Registry
}

// newHistory opens the store; its hooks migrate at start and, since they
// run after the chains stopped (their hooks were appended later), close
// the pool once no archiver writes any more.
func newHistory(p historyParams) (*history, error) {
	pc := p.Config.Postgres
	if pc.URL == "" {
		return &history{}, nil
	}
	store, err := blockstore.OpenHistory(context.Background(), pc, blockstore.Options{Logger: p.Log, Registerer: p.Registry})
	if err != nil {
		// The error may quote the URL (password masked, the rest not).
		return nil, errors.New("postgres.url: cannot be used (check its host and options)")
	}
	p.Lifecycle.Append(fx.Hook{OnStart: store.Start, OnStop: store.Stop})
	return &history{store: store}, nil
}

// readiness is the store's state for /readyz; nil without postgres.url.
func (h *history) readiness() *blockstore.Readiness {
	if h.store == nil {
		return nil
	}
	r := h.store.Readiness()
	return &r
}

var (
	_ stalker.Archive = (*blockstore.HistoryChain)(nil)
	_ router.History  = (*blockstore.HistoryChain)(nil)
)

// chain returns one chain's history store, nil without postgres.url or
// with the chain's history off.
func (h *history) chain(cc ChainConfig) *blockstore.HistoryChain {
	if h.store == nil || cc.History.Off {
		return nil
	}
	return h.store.Chain(cc.ChainID, cc.Name, cc.History.Policy())
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

// newPool builds the chain's remotes pool. It does no I/O: Start the pool
// before calling through it. replies is the process's reply budget, shared
// by every chain's pool (nil: the pool gets its own); with the process's tracer (nil: off) and the
// cluster's budget counters (nil: the process counts its own) and share of
// availability probes (nil: this process probes alone).
func (c ChainConfig) newPool(log *slog.Logger, m *remotes.Metrics, replies *wire.ReplyBudget, tr *tracing.Tracer,
	budgets budget.Store, share remotes.AvailShare, distrusted func(remotes.Distrust)) (*remotes.Pool, error) {
	pc := c.PoolConfig()
	pc.Replies, pc.Tracer, pc.Budgets, pc.Availability.Share = replies, tr, budgets, share
	pc.OnDistrust = distrusted
	pool, err := remotes.NewPool(pc, c.Remotes, log, m)
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
	sc := stalker.Config{Chain: c.Name, HeadConfig: c.Head, Integrity: c.Integrity.StalkerOn()}
	if archive != nil {
		sc.Archive = stalker.ArchiveConfig{Store: archive, HistoryConfig: c.History, Metrics: m}
	}
	return sc
}
