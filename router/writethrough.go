package router

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/forger"
	"github.com/venn-gateway/venn/jsonscan"
)

// DefaultWriteThroughQueue is how many blocks may wait to be written
// through to the history store; more are dropped (and counted).
const DefaultWriteThroughQueue = 256

// Outcomes of venn_history_writethrough_total.
const (
	wtQueued    = "queued"    // a block entered the queue
	wtDuplicate = "duplicate" // already queued or being written
	wtDropped   = "dropped"   // the queue was full
	wtStored    = "stored"    // written to the store
	wtOrphan    = "orphan"    // the hash asked for is not the canonical block at its number
	wtConflict  = "conflict"  // the store refused it: a stored neighbour disagrees
	wtFailed    = "failed"    // fetching or storing failed
	wtForeign   = "foreign"   // the chain the cluster follows has another block at its number
	wtUnlinked  = "unlinked"  // nothing links it to the chain the cluster follows
)

var wtOutcomes = []string{wtQueued, wtDuplicate, wtDropped, wtStored, wtOrphan, wtConflict, wtFailed, wtForeign, wtUnlinked}

// chainLinks is how the write-through tells that a block belongs to the
// chain the cluster follows, not to the chain of a remote that switched
// networks (whose blocks are internally consistent, and which Put alone
// would take wherever no stored neighbour disagrees). A nil field is not
// asked; a block none of them vouches for is not stored.
type chainLinks struct {
	// canonical is the cluster's hash of block n, from the head window
	// (the blocks it holds and the parent of the lowest).
	canonical func(n uint64) (hash string, ok bool)
	// stored reports whether the block links by hash to a stored
	// neighbour, and none disagrees.
	stored func(ctx context.Context, n uint64, hash, parent string) (bool, error)
	// confirm asks other remotes for block n's hash: how many agree with
	// hash, how many name another.
	confirm func(ctx context.Context, n uint64, hash string) (agree, disagree int)
}

// writeThrough writes settled blocks that clients fetched from the remotes
// (because the store lacked them) to the history store, whole: the block
// with its transactions and receipts, fetched again by the forger. Its
// queue is bounded and deduplicated by block number; a block that finds it
// full is dropped (the stalker's archive or a backfill stores it later).
// Run's caller owns its worker.
type writeThrough struct {
	history History
	forge   *forger.Forger
	settled func(uint64) bool
	log     *slog.Logger
	queue   chan wtJob
	// out counts by outcome: resolved once, so a late count after the
	// chain's series were deleted (Metrics.DropChain) never writes them
	// again.
	out   map[string]prometheus.Counter
	links chainLinks // set before run

	mu      sync.Mutex
	pending map[uint64]struct{} // queued or being written
}

// wtJob is one block to write through; hash, when known, is the block the
// client saw, which must be the canonical one.
type wtJob struct {
	number uint64
	hash   string
}

func newWriteThrough(h History, f *forger.Forger, settled func(uint64) bool, size int,
	log *slog.Logger, out *prometheus.CounterVec) *writeThrough {
	if size <= 0 {
		size = DefaultWriteThroughQueue
	}
	counts := make(map[string]prometheus.Counter, len(wtOutcomes))
	for _, o := range wtOutcomes {
		counts[o] = out.WithLabelValues(o)
	}
	return &writeThrough{history: h, forge: f, settled: settled, log: log, out: counts,
		queue: make(chan wtJob, size), pending: make(map[uint64]struct{})}
}

// offer queues the block that res (a remote's answer to method) is or
// belongs to, when it is settled. number is the block the params named,
// when they named one by number (an empty receipts list names no block).
func (w *writeThrough) offer(c *evm.Call, res json.RawMessage) {
	job, ok := blockOf(c, res)
	if !ok || !w.settled(job.number) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.pending[job.number]; ok {
		w.out[wtDuplicate].Inc()
		return
	}
	select {
	case w.queue <- job:
		w.pending[job.number] = struct{}{}
		w.out[wtQueued].Inc()
	default:
		w.out[wtDropped].Inc()
	}
}

// run writes queued blocks until ctx ends.
func (w *writeThrough) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case job := <-w.queue:
			outcome := w.safeWrite(ctx, job)
			w.out[outcome].Inc()
			w.mu.Lock()
			delete(w.pending, job.number)
			w.mu.Unlock()
		}
	}
}

// safeWrite is write that survives a panic: one bad block must not stop
// the write-through.
func (w *writeThrough) safeWrite(ctx context.Context, job wtJob) (outcome string) {
	defer func() {
		if p := recover(); p != nil {
			w.log.Error("write-through: panic", "block", job.number, "panic", p)
			outcome = wtFailed
		}
	}()
	return w.write(ctx, job)
}

// write fetches the block by number (canonical, being settled) and stores
// it when it links to the chain the cluster follows (link); a client's
// hash that is not that block is an orphan and is not stored.
func (w *writeThrough) write(ctx context.Context, job wtJob) string {
	b, err := w.forge.Block(ctx, job.number)
	if err != nil {
		w.log.Debug("write-through: fetch", "block", job.number, "err", err)
		return wtFailed
	}
	if job.hash != "" && b.Hash != job.hash {
		return wtOrphan
	}
	if !w.settled(b.Number) {
		return wtFailed // the settled line went back (a deep reorg): not now
	}
	if outcome := w.link(ctx, b); outcome != "" {
		return outcome
	}
	if err := w.history.Put(ctx, []*evm.Block{b}); err != nil {
		if errors.Is(err, blockstore.ErrConflict) {
			w.log.Warn("write-through: the store refused a block", "block", job.number, "hash", b.Hash, "err", err)
			return wtConflict
		}
		w.log.Debug("write-through: store", "block", job.number, "err", err)
		return wtFailed
	}
	return wtStored
}

// link checks that b belongs to the chain the cluster follows: its hash is
// the window's at its number, or it links by hash to a stored neighbour,
// or two remotes (so one besides the remote that served it) report its
// hash. It returns "" when so, else the outcome to count. A remote on
// another chain serves a chain whose every block links to its parent: only
// what the cluster holds, or another remote, can tell.
func (w *writeThrough) link(ctx context.Context, b *evm.Block) string {
	if w.links.canonical != nil {
		if h, ok := w.links.canonical(b.Number); ok {
			if h == b.Hash {
				return ""
			}
			w.log.Warn("write-through: a remote served a block of another chain: not stored",
				"block", b.Number, "hash", b.Hash, "canonical", h)
			return wtForeign
		}
	}
	if w.links.stored != nil {
		ok, err := w.links.stored(ctx, b.Number, b.Hash, b.Parent)
		if err != nil {
			w.log.Debug("write-through: links", "block", b.Number, "err", err)
			return wtFailed
		}
		if ok {
			return ""
		}
	}
	if w.links.confirm != nil {
		agree, disagree := w.links.confirm(ctx, b.Number, b.Hash)
		switch {
		case agree >= 2 && agree > disagree:
			return ""
		case disagree > 0:
			w.log.Warn("write-through: the remotes disagree on a settled block: not stored",
				"block", b.Number, "hash", b.Hash, "agree", agree, "disagree", disagree)
			return wtForeign
		}
	}
	w.log.Debug("write-through: the block links to nothing the cluster holds: not stored", "block", b.Number, "hash", b.Hash)
	return wtUnlinked
}

// blockOf reads which block a remote's answer is or belongs to: a block's
// number and hash, a receipt's or transaction's block, the block of a
// receipts list (or the number the params named, for an empty one).
func blockOf(c *evm.Call, res json.RawMessage) (wtJob, bool) {
	if len(res) == 0 || res[0] == 'n' {
		return wtJob{}, false
	}
	numKey, hashKey := "blockNumber", "blockHash"
	obj := []byte(res)
	switch c.Kind {
	case evm.KindBlock:
		numKey, hashKey = "number", "hash"
	case evm.KindReceipt, evm.KindTx:
	case evm.KindBlockReceipts:
		it := jsonscan.Array{Data: res, I: jsonscan.SkipSpace(res, 0) + 1}
		first, ok := it.Next()
		if !ok {
			if !c.BlockOK || c.Block.Kind != evm.RefNumber {
				return wtJob{}, false
			}
			return wtJob{number: c.Block.Number}, true
		}
		obj = first
	default:
		return wtJob{}, false
	}
	var s string
	if json.Unmarshal(jsonscan.Member(obj, numKey), &s) != nil {
		return wtJob{}, false // a pending transaction has no block yet
	}
	n, err := evm.ParseQuantity(s)
	if err != nil {
		return wtJob{}, false
	}
	var h string
	if json.Unmarshal(jsonscan.Member(obj, hashKey), &h) != nil || len(h) != 66 {
		return wtJob{}, false
	}
	return wtJob{number: n, hash: strings.ToLower(h)}, true
}
