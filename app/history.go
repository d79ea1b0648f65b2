package app

import (
	"context"
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/fx"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/chain"
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

// Chain returns the chain configured under name.
func (c *Config) Chain(name string) (ChainConfig, bool) {
	for _, cc := range c.Chains {
		if cc.Name == name {
			return cc, true
		}
	}
	return ChainConfig{}, false
}

// OpenUpstream builds the chain's pool as serve does and starts it, for
// the history subcommands; Close stops it.
func (c *Config) OpenUpstream(ctx context.Context, cc ChainConfig, log *slog.Logger) (*chain.Upstream, error) {
	return chain.OpenUpstream(ctx, cc, c.Limits.MaxReplyBytesInFlight, log)
}
