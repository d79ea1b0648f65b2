package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/retry"
)

// backfillChunk is the unit replicas claim: blocks n with the same
// n / backfillChunk. It is fixed, not configured, so that every replica
// claims the same chunks whatever its settings.
const backfillChunk = 100

// busyRetry is how long a backfill waits before looking again at chunks
// another replica holds.
const busyRetry = time.Second

// backfillStore is what the backfill needs of the chain's history store.
type backfillStore interface {
	Put(ctx context.Context, blocks []*evm.Block) error
	Covered(ctx context.Context, from, to uint64) ([]blockstore.Range, error)
}

// backfiller fills a range of a chain's history, safely alongside other
// backfills of the same chain: a chunk is worked on only under its claim
// (blockstore.Claims); a chunk another backfill holds is skipped and
// looked at again later, by which time it is usually stored. Whatever is stored already is skipped, so a backfill
// that was interrupted resumes where it stopped.
type backfiller struct {
	store  backfillStore
	claims *blockstore.Claims // one session per chunk worker
	fetch  func(ctx context.Context, n uint64) (*evm.Block, error)
	batch  int // blocks per Put
	conc   int // blocks fetched at once
	sem    chan struct{}

	stored, skipped atomic.Uint64
}

// backfillSummary is what a backfill did.
type backfillSummary struct {
	stored, skipped uint64
	took            time.Duration
}

// backfillSpec is where and how a backfiller works: the history store's
// URL (for its claims' sessions), the chain, the blocks fetched at
// once and the blocks per write.
type backfillSpec struct {
	url         string
	chainID     uint64
	conc, batch int
}

func newBackfiller(ctx context.Context, spec backfillSpec, store backfillStore,
	fetch func(context.Context, uint64) (*evm.Block, error)) (*backfiller, error) {
	conc := spec.conc
	claims, err := blockstore.OpenClaims(ctx, spec.url, spec.chainID, chunkWorkers(conc)+1)
	if err != nil {
		return nil, err
	}
	return &backfiller{store: store, claims: claims, fetch: fetch,
		batch: max(spec.batch, 1), conc: conc, sem: make(chan struct{}, conc)}, nil
}

func (b *backfiller) close() { b.claims.Close() }

// chunkWorkers is how many chunks are worked on at once: enough to keep
// conc fetches busy while a finished chunk is written, few enough that
// the blocks held in memory stay a handful of chunks.
func chunkWorkers(conc int) int { return (conc + 3) / 4 }

// run fills from..to and returns what it did; progress is told as it goes.
func (b *backfiller) run(ctx context.Context, from, to uint64, p *progress) (backfillSummary, error) {
	start := time.Now()
	stopProgress := p.start(&b.stored, &b.skipped)
	var pending []uint64
	for c := from / backfillChunk; c <= to/backfillChunk; c++ {
		pending = append(pending, c)
	}
	var err error
	for len(pending) > 0 {
		var busy []uint64
		if busy, err = b.pass(ctx, pending, from, to); err != nil {
			break
		}
		if len(busy) > 0 && !retry.Sleep(ctx, busyRetry) {
			err = ctx.Err()
			break
		}
		pending = busy
	}
	stopProgress(err == nil)
	return backfillSummary{stored: b.stored.Load(), skipped: b.skipped.Load(), took: time.Since(start)}, err
}

// pass works on every chunk once and returns those other sessions held.
func (b *backfiller) pass(ctx context.Context, chunks []uint64, from, to uint64) ([]uint64, error) {
	var (
		mu   sync.Mutex
		busy []uint64
		next atomic.Int64
	)
	g, gctx := errgroup.WithContext(ctx)
	for range min(chunkWorkers(b.conc), len(chunks)) {
		g.Go(func() error {
			sess, err := b.claims.Session(gctx)
			if err != nil {
				return err
			}
			defer sess.Close()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(chunks) {
					return nil
				}
				c := chunks[i]
				lo, hi := max(from, c*backfillChunk), min(to, c*backfillChunk+backfillChunk-1)
				done, err := b.chunk(gctx, sess, c, lo, hi)
				if err != nil {
					return err
				}
				if !done {
					mu.Lock()
					busy = append(busy, c)
					mu.Unlock()
				}
			}
		})
	}
	err := g.Wait()
	return busy, err
}

// chunk fills lo..hi of chunk c under its claim; done is false when
// another session holds the claim.
func (b *backfiller) chunk(ctx context.Context, sess *blockstore.ClaimSession, c, lo, hi uint64) (done bool, err error) {
	holes, err := b.holes(ctx, lo, hi)
	if err != nil || len(holes) == 0 {
		if err == nil {
			b.skipped.Add(hi - lo + 1)
		}
		return err == nil, err
	}
	release, got, err := sess.Claim(ctx, c)
	if err != nil || !got {
		if err != nil {
			err = fmt.Errorf("claim blocks %d..%d: %w", lo, hi, err)
		}
		return false, err
	}
	defer release()
	// Stored meanwhile by the session that held the claim before.
	if holes, err = b.holes(ctx, lo, hi); err != nil {
		return false, err
	}
	missing := uint64(0)
	for _, h := range holes {
		missing += h.To - h.From + 1
	}
	b.skipped.Add(hi - lo + 1 - missing)
	for _, h := range holes {
		if err := b.fill(ctx, h.From, h.To); err != nil {
			return false, err
		}
	}
	return true, nil
}

// holes returns the parts of lo..hi the store does not hold.
func (b *backfiller) holes(ctx context.Context, lo, hi uint64) ([]blockstore.Range, error) {
	covered, err := b.store.Covered(ctx, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("covered %d..%d: %w", lo, hi, err)
	}
	var out []blockstore.Range
	next := lo
	for _, r := range covered {
		if r.From > next {
			out = append(out, blockstore.Range{From: next, To: r.From - 1})
		}
		if r.To >= hi {
			return out, nil
		}
		next = max(next, r.To+1)
	}
	return append(out, blockstore.Range{From: next, To: hi}), nil
}

// fill fetches lo..hi, a few at once under the backfill's bound, and
// stores them in batches.
func (b *backfiller) fill(ctx context.Context, lo, hi uint64) error {
	for start := lo; start <= hi; {
		end := min(hi, start+uint64(b.batch)-1)
		blocks := make([]*evm.Block, end-start+1)
		g, gctx := errgroup.WithContext(ctx)
	fetch:
		for n := start; n <= end; n++ {
			select {
			case b.sem <- struct{}{}:
			case <-gctx.Done():
				break fetch
			}
			g.Go(func() error {
				defer func() { <-b.sem }()
				blk, err := b.fetch(gctx, n)
				if err != nil {
					return fmt.Errorf("block %d: %w", n, err)
				}
				blocks[n-start] = blk
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := b.store.Put(ctx, blocks); err != nil {
			return fmt.Errorf("store blocks %d..%d: %w", start, end, err)
		}
		b.stored.Add(uint64(len(blocks)))
		if end == hi {
			break
		}
		start = end + 1
	}
	return nil
}

// progress shows a backfill's progress on w about once a second: blocks
// done of the total (stored now or found stored), the rate of this
// process's stores and the time left at that rate. On a terminal the line
// is rewritten in place.
type progress struct {
	what  string // the command: "backfill", "verify"
	w     io.Writer
	total uint64
	tty   bool
	every time.Duration
}

func newProgress(w io.Writer, total uint64, what string) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progress{what: what, w: w, total: total, tty: tty, every: time.Second}
}

// start shows progress until the returned stop is called; stop prints the
// last line (finished says whether the work is complete).
func (p *progress) start(stored, skipped *atomic.Uint64) (stop func(finished bool)) {
	begin := time.Now()
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(p.every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				p.line(stored.Load(), skipped.Load(), time.Since(begin), false)
			}
		}
	})
	return func(finished bool) {
		close(quit)
		wg.Wait()
		p.line(stored.Load(), skipped.Load(), time.Since(begin), finished)
	}
}

func (p *progress) line(stored, skipped uint64, elapsed time.Duration, last bool) {
	done := min(stored+skipped, p.total)
	rate := float64(stored) / max(elapsed.Seconds(), 1e-3)
	eta := "?"
	switch {
	case done == p.total:
		eta = "0s"
	case rate > 0:
		eta = time.Duration(float64(p.total-done) / rate * float64(time.Second)).Round(time.Second).String()
	}
	msg := fmt.Sprintf("%s %d/%d blocks (%.1f%%), %.0f blocks/s, ETA %s",
		p.what, done, p.total, 100*float64(done)/float64(max(p.total, 1)), rate, eta)
	switch {
	case p.tty && last:
		fmt.Fprintf(p.w, "\r\033[K%s\n", msg)
	case p.tty:
		fmt.Fprintf(p.w, "\r\033[K%s", msg)
	default:
		fmt.Fprintln(p.w, msg)
	}
}
