package stalker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/retry"
	"github.com/venn-gateway/venn/tracing"
)

// archiveBackoff bounds the wait between failed archive rounds.
const (
	archiveBackoffMin = time.Second
	archiveBackoffMax = 30 * time.Second
)

// Archive is the history store the leader files settled blocks in: the
// chain's *blockstore.Chain (or a wrapper that refuses until the schema is
// migrated).
type Archive interface {
	Put(ctx context.Context, blocks []*evm.Block) error
	Covered(ctx context.Context, from, to uint64) ([]blockstore.Range, error)
	Highest(ctx context.Context) (uint64, bool, error)
}

var _ Archive = (*blockstore.Chain)(nil)

// schemaWaiter is an Archive that stores nothing until its schema is in
// place (blockstore.HistoryChain): the archiver waits for it first.
type schemaWaiter interface {
	SchemaReady() <-chan struct{}
}

var _ schemaWaiter = (*blockstore.HistoryChain)(nil)

// ArchiveConfig turns archiving on for a chain's leader.
type ArchiveConfig struct {
	// Store receives the settled blocks; nil: no archiving.
	Store Archive
	// HistoryConfig is the settled line and the batch (config.go); zero
	// fields take the defaults.
	HistoryConfig
	// Metrics receives the archive's series; nil keeps unregistered ones.
	Metrics *ArchiveMetrics
}

// Settled is the settled line: the highest block number that no reorg is
// expected to replace, min(finalized when known, head - confirmations). ok
// is false when no block is settled yet.
func Settled(head, finalized, confirmations uint64) (uint64, bool) {
	if head < confirmations {
		return 0, false
	}
	line := head - confirmations
	if finalized > 0 {
		line = min(line, finalized)
	}
	return line, true
}

// FetchBlock fetches block n with its transactions and receipts through the
// remotes exactly as the leader does (receipts by the block's hash, per
// transaction where no remote has eth_getBlockReceipts, checked with
// Integrity). The backfill uses it; it needs no store.
func (s *Stalker) FetchBlock(ctx context.Context, n uint64) (*evm.Block, error) {
	return s.fetchBlock(ctx, "eth_getBlockByNumber", `"`+evm.Quantity(n)+`"`)
}

// Finalized reads the chain's finalized block number through the remotes;
// 0 when the chain or its remotes don't say.
func (s *Stalker) Finalized(ctx context.Context) uint64 {
	l := &leading{}
	s.readFinality(ctx, l)
	return l.finalized
}

// archiveView is what the leader last published: its canonical chain,
// ascending and parent-linked, and the finalized number it knew.
type archiveView struct {
	blocks    []*evm.Block
	finalized uint64
}

// archiver files one leadership's settled blocks in the history store. The
// leader hands it every published chain (offer) and never waits for it: a
// slow or absent Postgres delays archiving, never the head feed. Only the
// latest view is kept; the archiver catches up from it in batches.
type archiver struct {
	cfg    ArchiveConfig
	log    *slog.Logger
	m      archiveMetrics
	chain  string
	tracer *tracing.Tracer // nil: off

	mu   sync.Mutex
	view archiveView
	wake chan struct{} // capacity 1: an offer since the last take

	// Owned by run.
	resumed bool
	next    uint64 // the lowest number not archived yet (once resumed)
}

func (s *Stalker) newArchiver() *archiver {
	cfg := s.cfg.Archive
	cfg.Batch = max(cfg.Batch, 0) // Validate refuses less; unset takes the default
	cfg.HistoryConfig = cfg.HistoryConfig.WithDefaults(s.cfg.Window)
	m := cfg.Metrics
	if m == nil {
		m = NewArchiveMetrics(nil)
	}
	return &archiver{cfg: cfg, log: s.log, m: m.forChain(s.cfg.Chain), wake: make(chan struct{}, 1),
		chain: s.cfg.Chain, tracer: s.cfg.Tracer}
}

// offer hands the archiver the chain as just published. blocks must not be
// modified afterwards (the leader builds a new slice for every event).
func (a *archiver) offer(blocks []*evm.Block, finalized uint64) {
	a.mu.Lock()
	a.view = archiveView{blocks: blocks, finalized: finalized}
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *archiver) take() archiveView {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.view
}

// run archives until ctx ends. It starts once the store's schema is in
// place: on a first start the migrations run while the leader already
// publishes, and a store not migrated yet is no failure. A failed round is
// retried with backoff, and logged once per run of failures (Postgres down
// is also the blockstore's to report).
func (a *archiver) run(ctx context.Context) {
	if w, ok := a.cfg.Store.(schemaWaiter); ok {
		select {
		case <-w.SchemaReady():
		default:
			a.log.Info("archive: waiting for the history store's migrations")
			select {
			case <-w.SchemaReady():
			case <-ctx.Done():
				return
			}
		}
	}
	backoff := archiveBackoffMin
	failing := false
	for {
		err := a.archive(ctx, a.take())
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			a.m.errors.Inc()
			if !failing {
				a.log.Warn("archive: storing settled blocks failed; retrying", "err", err, "next", a.next)
				failing = true
			}
			if !retry.Sleep(ctx, backoff) {
				return
			}
			backoff = retry.Double(backoff, 0, archiveBackoffMax)
			continue
		}
		if failing {
			a.log.Info("archive: storing settled blocks again", "next", a.next)
			failing = false
		}
		backoff = archiveBackoffMin
		select {
		case <-ctx.Done():
			return
		case <-a.wake:
		}
	}
}

// archive stores the view's settled blocks above what is stored, in
// batches. It never stores a block above the settled line: those may still
// be reorged away.
func (a *archiver) archive(ctx context.Context, v archiveView) error {
	if len(v.blocks) == 0 {
		return nil
	}
	low, head := v.blocks[0].Number, v.blocks[len(v.blocks)-1].Number
	settled, ok := Settled(head, v.finalized, a.cfg.Confirmations)
	if !ok || settled < low {
		return nil
	}
	if !a.resumed {
		if err := a.resume(ctx, low, settled); err != nil {
			return err
		}
	}
	if a.next < low {
		// Blocks that left the window unarchived (Postgres was down, or
		// the feed started a fresh window): the backfill's to fetch.
		a.log.Warn("archive: gap below the head window, left to backfill",
			"from", a.next, "to", low-1, "blocks", low-a.next)
		a.next = low
	}
	for a.next <= settled {
		end := min(settled, a.next+uint64(a.cfg.Batch)-1)
		batch := v.blocks[a.next-low : end-low+1]
		if batch[0].Number != a.next || batch[len(batch)-1].Number != end {
			return fmt.Errorf("archive: published chain is not contiguous at %d", a.next)
		}
		err := a.put(ctx, batch)
		switch {
		case errors.Is(err, blockstore.ErrConflict):
			// A stored neighbour is not on the chain the leader published:
			// it was stored from a branch a reorg deeper than the settled
			// line replaced. Storing over it is not the archiver's call.
			a.m.errors.Inc()
			a.log.Error("archive: blocks conflict with stored neighbours; skipped, left to backfill",
				"from", a.next, "to", end, "err", err)
		case err != nil:
			return fmt.Errorf("put %d..%d: %w", a.next, end, err)
		default:
			a.m.blocks.Add(float64(len(batch)))
			a.m.height.Set(float64(end))
		}
		a.next = end + 1
	}
	return nil
}

// resume finds where this leadership starts: above the highest stored
// block, or lower where a hole in the store lies within the window (a
// leader that stopped before archiving everything it published, with a
// later block written through). With nothing stored it starts at the
// window's first block; older history is the backfill's.
func (a *archiver) resume(ctx context.Context, low, settled uint64) error {
	high, ok, err := a.cfg.Store.Highest(ctx)
	if err != nil {
		return fmt.Errorf("highest stored block: %w", err)
	}
	switch {
	case !ok:
		a.next = low
		a.log.Info("archive: history store is empty; archiving from the head window, older blocks need venn backfill",
			"from", low)
	case high+1 <= low:
		a.next = high + 1
		a.m.height.Set(float64(high))
	default:
		a.next = high + 1
		a.m.height.Set(float64(high))
		covered, err := a.cfg.Store.Covered(ctx, low, min(high, settled))
		if err != nil {
			return fmt.Errorf("covered: %w", err)
		}
		if hole := firstHole(covered, low, min(high, settled)); hole <= high {
			a.next = hole
		}
	}
	a.resumed = true
	a.log.Info("archive: resuming", "next", a.next, "settled", settled)
	return nil
}

// firstHole is the lowest number of [from, to] that covered (ascending
// ranges) leaves out, or to+1.
func firstHole(covered []blockstore.Range, from, to uint64) uint64 {
	next := from
	for _, r := range covered {
		if r.From > next {
			return next
		}
		next = max(next, r.To+1)
	}
	return min(next, to+1)
}

// ArchiveMetrics are the archive's series.
type ArchiveMetrics struct {
	height *prometheus.GaugeVec
	blocks *prometheus.CounterVec
	errors *prometheus.CounterVec
}

// NewArchiveMetrics registers the archive's metrics on reg (nil:
// unregistered).
func NewArchiveMetrics(reg prometheus.Registerer) *ArchiveMetrics {
	m := &ArchiveMetrics{
		height: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "venn", Name: "archive_height",
			Help: "Highest block this replica's leader archived to the history store."}, []string{"chain"}),
		blocks: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "archive_blocks_total",
			Help: "Settled blocks this replica's leader stored in the history store."}, []string{"chain"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "archive_errors_total",
			Help: "Archive rounds that failed and were retried, and batches skipped on a conflict."}, []string{"chain"}),
	}
	if reg != nil {
		reg.MustRegister(m.height, m.blocks, m.errors)
	}
	return m
}

// DropChain deletes chain's series, once its archiver has stopped for
// good (a reload removed the chain).
func (m *ArchiveMetrics) DropChain(chain string) {
	if m == nil {
		return
	}
	l := prometheus.Labels{"chain": chain}
	m.height.DeletePartialMatch(l)
	m.blocks.DeletePartialMatch(l)
	m.errors.DeletePartialMatch(l)
}

type archiveMetrics struct {
	height prometheus.Gauge
	blocks prometheus.Counter
	errors prometheus.Counter
}

func (m *ArchiveMetrics) forChain(chain string) archiveMetrics {
	return archiveMetrics{height: m.height.WithLabelValues(chain), blocks: m.blocks.WithLabelValues(chain),
		errors: m.errors.WithLabelValues(chain)}
}

// fullChain tracks the published chain's blocks for the archiver: the
// leader's refs only name them.
type fullChain struct {
	byHash map[string]*evm.Block
}

// reset loads the chain from a snapshot.
func (f *fullChain) reset(blocks []*evm.Block) {
	f.byHash = make(map[string]*evm.Block, len(blocks))
	for _, b := range blocks {
		f.byHash[b.Hash] = b
	}
}

// apply records ev's blocks and returns chain's blocks (chain being the
// refs after ev), dropping every other block it held.
func (f *fullChain) apply(ev *headstore.Event, chain []headstore.Ref) []*evm.Block {
	if f.byHash == nil {
		f.byHash = map[string]*evm.Block{}
	}
	for _, b := range ev.Added {
		f.byHash[b.Hash] = b
	}
	out := make([]*evm.Block, 0, len(chain))
	keep := make(map[string]*evm.Block, len(chain))
	for _, r := range chain {
		b, ok := f.byHash[r.Hash]
		if !ok {
			// Not known in full (cannot happen: every ref came from a
			// snapshot or an event): archive only below it.
			break
		}
		out = append(out, b)
		keep[r.Hash] = b
	}
	f.byHash = keep
	return out
}

// blocksOf returns chain's blocks as far as they are known.
func (f *fullChain) blocksOf(chain []headstore.Ref) []*evm.Block {
	out := make([]*evm.Block, 0, len(chain))
	for _, r := range chain {
		b, ok := f.byHash[r.Hash]
		if !ok {
			break
		}
		out = append(out, b)
	}
	return out
}

// put stores one batch of settled blocks, in a span of its own.
func (a *archiver) put(ctx context.Context, batch []*evm.Block) error {
	ctx, sp := a.tracer.StartRoot(ctx, spanArchive, trace.SpanKindInternal, nil)
	err := a.cfg.Store.Put(ctx, batch)
	if sp.IsRecording() {
		sp.SetAttributes(tracing.KeyChain.String(a.chain), tracing.KeyBlocks.Int(len(batch)),
			tracing.KeyFrom.Int64(int64(batch[0].Number)), tracing.KeyTo.Int64(int64(batch[len(batch)-1].Number)))
		if err != nil {
			sp.SetStatus(codes.Error, "put failed")
		}
	}
	sp.End()
	return err
}
