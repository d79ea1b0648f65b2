package stalker

import (
	"errors"
	"fmt"
	"time"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/headstore"
)

// maxArchiveBatch bounds HistoryConfig.Batch: one batch is one Postgres
// transaction held in memory whole.
const maxArchiveBatch = 10_000

// Archiving defaults.
const (
	// DefaultConfirmations is how far below the head a block counts as
	// settled when the chain's finalized block is not known or is higher.
	DefaultConfirmations = 64
	// DefaultArchiveBatch is how many blocks one Put stores.
	DefaultArchiveBatch = 100
)

// HeadConfig is a chain's head feed, as config.yaml's chains[].head writes
// it.
type HeadConfig struct {
	// Window is how many blocks below and including the head every replica
	// keeps and serves from memory; 0: headstore.DefaultWindow.
	Window int `yaml:"window"`
	// Backfill bounds how many blocks a leader fetches to fill a gap
	// between the published head and the remotes' (after a restart, a
	// failover or lag), so that subscribers miss none; deeper gaps start
	// a fresh window. 0: 4 windows.
	Backfill int `yaml:"backfill"`
	// FinalityInterval is how often safe and finalized are read; 0:
	// DefaultFinalityInterval of the block time the upstream knows then.
	FinalityInterval time.Duration `yaml:"finality_interval"`
}

// DefaultFinalityInterval is how often a chain of blockTime blocks reads
// safe and finalized when not configured: 8 blocks, at least 10 s.
func DefaultFinalityInterval(blockTime time.Duration) time.Duration {
	return max(8*blockTime, 10*time.Second)
}

// WithDefaults fills the zero fields; blockTime is the configured block
// time, 0 when it is learned (the finality interval then follows it).
func (c HeadConfig) WithDefaults(blockTime time.Duration) HeadConfig {
	if c.Window == 0 {
		c.Window = headstore.DefaultWindow
	}
	if c.Backfill == 0 {
		c.Backfill = 4 * c.Window
	}
	if c.FinalityInterval == 0 && blockTime > 0 {
		c.FinalityInterval = DefaultFinalityInterval(blockTime)
	}
	return c
}

// Validate reports every problem of a defaulted head section, each naming
// its field.
func (c HeadConfig) Validate() error {
	var errs []error
	if c.Window < 0 {
		errs = append(errs, errors.New("window: must be positive"))
	}
	if c.Backfill < 0 {
		errs = append(errs, errors.New("backfill: must be positive"))
	}
	if c.FinalityInterval < 0 {
		errs = append(errs, errors.New("finality_interval: must be positive"))
	}
	return errors.Join(errs...)
}

// HistoryConfig is how a chain's leader archives settled blocks, as
// config.yaml's chains[].history writes it.
type HistoryConfig struct {
	// Confirmations: a block at least this far below the published head
	// is settled (and at most the finalized block, when known). It must be
	// below the window: the leader archives from the blocks it published.
	Confirmations uint64 `yaml:"confirmations"`
	// Batch is how many blocks one Put stores.
	Batch int `yaml:"batch"`
	// KeepBlocks keeps only the newest KeepBlocks blocks of the chain's
	// history: older partitions are dropped whole. 0 keeps everything;
	// otherwise at least the head window and the confirmations, so that
	// no block the leader still archives or may reorg is dropped.
	KeepBlocks uint64 `yaml:"keep_blocks"`
	// PartitionBlocks is the block range of one partition of the chain's
	// history; 0: the store's default (100,000).
	PartitionBlocks uint64 `yaml:"partition_blocks"`
	// Off keeps no history of the chain at all: nothing is archived and
	// nothing is read from the store, though postgres.url is set.
	Off bool `yaml:"off"`
}

// minPartitionBlocks bounds HistoryConfig.PartitionBlocks.
const minPartitionBlocks = blockstore.MinPartitionBlocks

// Policy is how the store keeps the chain's history.
func (c HistoryConfig) Policy() blockstore.Policy {
	return blockstore.Policy{PartitionBlocks: c.PartitionBlocks, KeepBlocks: c.KeepBlocks}
}

// WithDefaults fills the zero fields for a head window of window blocks
// (0: unknown): DefaultConfirmations, but well inside a small window, and
// DefaultArchiveBatch.
func (c HistoryConfig) WithDefaults(window int) HistoryConfig {
	if c.Confirmations == 0 {
		c.Confirmations = DefaultConfirmations
		if window > 0 {
			c.Confirmations = min(c.Confirmations, uint64(window)/2)
		}
	}
	if c.Batch == 0 {
		c.Batch = DefaultArchiveBatch
	}
	return c
}

// Validate reports every problem of a defaulted history section under a
// head window of window blocks, each naming its field.
func (c HistoryConfig) Validate(window int) error {
	var errs []error
	if c.Batch < 0 {
		errs = append(errs, errors.New("batch: must be positive"))
	} else if c.Batch > maxArchiveBatch {
		errs = append(errs, fmt.Errorf("batch: must be at most %d", maxArchiveBatch))
	}
	if c.PartitionBlocks != 0 && c.PartitionBlocks < minPartitionBlocks {
		errs = append(errs, fmt.Errorf("partition_blocks: must be at least %d", minPartitionBlocks))
	}
	if floor := max(uint64(max(window, 0)), c.Confirmations); c.KeepBlocks != 0 && c.KeepBlocks < floor {
		// The newest blocks archived are still within the window:
		// dropping them would drop what the leader is still archiving
		// and what a reorg may replace.
		errs = append(errs, fmt.Errorf("keep_blocks: must be 0 (keep all) or at least head.window and confirmations (%d)", floor))
	}
	if window > 0 && c.Confirmations >= uint64(window) {
		// The leader archives from its window: a block settled only
		// below it would never be archived.
		errs = append(errs, fmt.Errorf("confirmations: must be below head.window (%d)", window))
	}
	return errors.Join(errs...)
}
