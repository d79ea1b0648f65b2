package chain

import (
	"fmt"
	"log/slog"

	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/natsfeed"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/remotes/budget"
	"github.com/venn-gateway/venn/remotes/wire"
	"github.com/venn-gateway/venn/router"
	"github.com/venn-gateway/venn/stalker"
	"github.com/venn-gateway/venn/subcenter"
	"github.com/venn-gateway/venn/tracing"
)

// Config is one chain, served at /Name: the settings of each part a chain
// is built of, in that part's own type. Package app reads, defaults and
// validates it (as app.ChainConfig); this package only builds from it.
type Config struct {
	Name    string `yaml:"name"`
	ChainID uint64 `yaml:"chain_id"`
	// Pool is the chain's remotes pool (package remotes), written inline
	// in the chain: block_time, chain_recheck, max_lag, call_deadline,
	// max_attempts, getlogs_concurrency, getlogs_max_parts,
	// broadcast_fanout, pending_poll_interval, breaker, consensus, cordon,
	// misbehaviour_log, hedge and scoring.
	Pool    remotes.PoolConfig    `yaml:",inline"`
	Head    stalker.HeadConfig    `yaml:"head"`
	History stalker.HistoryConfig `yaml:"history"`
	Remotes []remotes.Config      `yaml:"remotes"`
	// Integrity checks blocks and receipts remotes send against their
	// hashes and roots, and refetches what fails from another remote.
	Integrity IntegrityConfig `yaml:"integrity"`
	// Cache is the chain's response cache (package cache).
	Cache cache.Config `yaml:"cache"`
	// GetLogsLimits cap clients' eth_getLogs on the chain (package router).
	GetLogsLimits router.LogLimits `yaml:"getlogs_limits"`
	// Filters are the chain's polled filters (eth_newFilter and the
	// rest), which venn serves itself (package subcenter).
	Filters subcenter.FilterConfig `yaml:"filters"`
	// StaticAnswers answers methods (and exact params) from config,
	// without a remote (package router).
	StaticAnswers []router.StaticAnswer `yaml:"static_answers"`
	// NATS publishes the chain's head feed to a JetStream stream while
	// this replica leads it (package natsfeed): `nats: {stream: true}`.
	NATS natsfeed.Config `yaml:"nats"`
	// GRPCID is the chain's Dshackle ChainRef code on the gRPC API
	// (package emerald); 0 takes it from the chain id's row of emerald's
	// table. A chain with neither is not served over gRPC.
	GRPCID int32 `yaml:"grpc_id"`
}

// IntegrityConfig says which fetches are checked (package integrity).
// Stalker is a pointer because absent (on) differs from false.
type IntegrityConfig struct {
	// Stalker checks every block the leader fetches, and its receipts;
	// default on. Off only for a chain whose blocks venn can't hash at all
	// (its checks then count as skipped anyway) or a fake node.
	Stalker *bool `yaml:"stalker"`
	// ClientCalls checks clients' eth_getBlockByNumber/ByHash,
	// eth_getBlockReceipts and eth_getTransactionReceipt answered by the
	// remotes; default off (it costs CPU per call, and those calls lose
	// hedging, votes and sharing with unchecked calls).
	ClientCalls bool `yaml:"client_calls"`
}

// StalkerOn reports whether the stalker's fetches are checked.
func (i IntegrityConfig) StalkerOn() bool { return i.Stalker == nil || *i.Stalker }

// PoolConfig is the chain's pool settings with its name and id, for
// remotes.NewPool.
func (c Config) PoolConfig() remotes.PoolConfig {
	pc := c.Pool
	pc.Chain, pc.ChainID = c.Name, c.ChainID
	return pc
}

// StalkerConfig is the chain's stalker settings; archive is where settled
// blocks go (nil: not archived).
func (c Config) StalkerConfig(archive stalker.Archive, m *stalker.ArchiveMetrics) stalker.Config {
	sc := stalker.Config{Chain: c.Name, HeadConfig: c.Head, Integrity: c.Integrity.StalkerOn()}
	if archive != nil {
		sc.Archive = stalker.ArchiveConfig{Store: archive, HistoryConfig: c.History, Metrics: m}
	}
	return sc
}

// newPool builds the chain's remotes pool. It does no I/O: Start the pool
// before calling through it. replies is the process's reply budget, shared
// by every chain's pool (nil: the pool gets its own); with the process's tracer (nil: off) and the
// cluster's budget counters (nil: the process counts its own) and share of
// availability probes (nil: this process probes alone); distrusted is told
// of each remote whose answers are no longer trusted (nil: nobody).
func (c Config) newPool(log *slog.Logger, m *remotes.Metrics, replies *wire.ReplyBudget, tr *tracing.Tracer,
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
func (c Config) settledLine(w *headstore.Window) func() (uint64, bool) {
	return func() (uint64, bool) {
		tags, ok := w.Tags()
		if !ok {
			return 0, false
		}
		return stalker.Settled(tags.Latest, tags.Finalized, c.History.Confirmations)
	}
}
