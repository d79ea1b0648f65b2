package blockstore

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/pgtest"
)

// TestRetention keeps the newest 1,500 blocks in partitions of 1,000: once
// the archive passes block 3,000 the partitions wholly below the kept
// range are gone, with their coverage, and what is kept still answers.
func TestRetention(t *testing.T) {
	u := pgtest.New(t)
	h, err := OpenHistory(context.Background(), Config{URL: u}, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h.ready.Store(true) // migrated by pgtest
	t.Cleanup(func() { _ = h.Stop(context.Background()) })
	ctx := t.Context()
	g := h.Chain(1, "test", Policy{PartitionBlocks: 1000, KeepBlocks: 1500})
	c := g.c
	blocks := synthChain(t, "a", 0, 3199, 2)
	for i := 0; i < len(blocks); i += 400 {
		if err := g.Put(ctx, blocks[i:i+400]); err != nil {
			t.Fatal(err)
		}
	}
	// The last Put crossed into the span of 3,000: the floor is 1,700, so
	// [0, 1000) went; [1000, 2000) holds kept blocks and stays.
	if got, want := partitionsOf(t, u), []string{"1:1000-2000", "1:2000-3000", "1:3000-4000", "1:4000-5000"}; !slices.Equal(got, want) {
		t.Errorf("partitions %v, want %v", got, want)
	}
	if got := mustCovered(t, c, 0, 5000); !slices.Equal(got, []Range{{1000, 3199}}) {
		t.Errorf("coverage %v, want [1000, 3199]", got)
	}
	for _, n := range []uint64{0, 999} {
		if _, ok, err := c.Answer(ctx, evm.ParseCall("eth_getBlockByNumber", []byte(`["`+evm.Quantity(n)+`",false]`))); ok || err != nil {
			t.Errorf("block %d after retention: ok %v, %v; want not stored", n, ok, err)
		}
	}
	if _, ok, err := c.Answer(ctx, evm.ParseCall("eth_getLogs", []byte(`[{"fromBlock":"0x3e0","toBlock":"0x3f0"}]`))); ok || err != nil {
		t.Errorf("eth_getLogs across the dropped range: ok %v, %v; want not answered", ok, err)
	}
	if _, err := c.Logs(ctx, &evm.LogFilter{}, 900, 1100); !errors.Is(err, ErrNotCovered) {
		t.Errorf("Logs across the dropped range = %v, want ErrNotCovered", err)
	}
	res, ok, err := c.Answer(ctx, evm.ParseCall("eth_getLogs", []byte(`[{"fromBlock":"0x3e8","toBlock":"0x3f1"}]`)))
	if !ok || err != nil || count(res) != 10 {
		t.Errorf("eth_getLogs of blocks 1000..1009 kept: ok %v, %v, %d logs; want 10", ok, err, count(res))
	}
}

// TestRetentionReadsNeverSeeCoverageWithoutRows reads blocks' logs while
// retention drops their partition: every read answers the stored log or
// says the range is not stored; none finds the range covered and empty.
func TestRetentionReadsNeverSeeCoverageWithoutRows(t *testing.T) {
	p, _ := open(t)
	ctx := t.Context()
	c := p.ChainWith(1, "test", Policy{PartitionBlocks: 1000, KeepBlocks: 1000})
	blocks := synthChain(t, "a", 0, 1999, 2)
	for i := 0; i < len(blocks); i += 500 {
		mustPut(t, c, blocks[i:i+500]...)
	}
	const readers = 4
	var stop atomic.Bool
	var wg sync.WaitGroup
	var reads, gone atomic.Int64
	errs := make(chan error, readers)
	for r := range readers {
		wg.Go(func() {
			for i := 0; !stop.Load() || i < 20; i++ {
				if i > 100_000 {
					return
				}
				n := uint64((r*250 + i) % 1000)
				res, err := c.Logs(ctx, &evm.LogFilter{}, n, n)
				switch {
				case errors.Is(err, ErrNotCovered):
					gone.Add(1)
				case err != nil:
					// A reader may lose a deadlock to the drop: the
					// call fails and goes to the remotes.
				case count(res) != 1:
					errs <- errors.New("block " + evm.Quantity(n) + " read as covered with " + string(res))
					return
				}
				reads.Add(1)
			}
		})
	}
	var dropped []Range
	var err error
	for attempt := 0; attempt < 5 && len(dropped) == 0; attempt++ {
		dropped, err = c.Retain(ctx)
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if err != nil || !slices.Equal(dropped, []Range{{0, 999}}) {
		t.Fatalf("Retain = %v, %v; want [0, 999] dropped", dropped, err)
	}
	if gone.Load() == 0 {
		t.Errorf("no read saw the range dropped (%d reads)", reads.Load())
	}
}

// TestRetentionBacksOffAfterFailure: a drop that times out on a lock is
// not retried by the next Put (each retry would stall every chain's
// reads up to the lock timeout) but by the first Put a retry delay later.
func TestRetentionBacksOffAfterFailure(t *testing.T) {
	u := pgtest.New(t)
	h, err := OpenHistory(context.Background(), Config{URL: u}, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h.ready.Store(true) // migrated by pgtest
	var clock atomic.Int64
	clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	h.now = func() time.Time { return time.Unix(0, clock.Load()) }
	t.Cleanup(func() { _ = h.Stop(context.Background()) })
	ctx := t.Context()
	g := h.Chain(1, "test", Policy{PartitionBlocks: 1000, KeepBlocks: 1500})
	blocks := synthChain(t, "a", 0, 3999, 2)
	put := func(from uint64) {
		t.Helper()
		if err := g.Put(ctx, blocks[from:from+400]); err != nil {
			t.Fatal(err)
		}
	}
	for from := uint64(0); from < 2800; from += 400 {
		put(from)
	}

	// Another session holds a partition to be dropped: the Put that
	// crosses into the span of 3,000 fails to drop [0, 1000).
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE logs_c1_0 IN ACCESS SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	put(2800)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := partitionsOf(t, u); len(got) == 0 || got[0] != "1:0-1000" {
		t.Fatalf("partitions after the failed drop %v, want 1:0-1000 kept", got)
	}

	put(3200) // within the delay: not retried
	if got := partitionsOf(t, u); len(got) == 0 || got[0] != "1:0-1000" {
		t.Errorf("partitions after a Put within the retry delay %v, want 1:0-1000 kept", got)
	}

	clock.Add(int64(retentionRetryDelay))
	put(3600) // the floor is 2,500 now
	if got, want := partitionsOf(t, u), []string{"1:2000-3000", "1:3000-4000", "1:4000-5000"}; !slices.Equal(got, want) {
		t.Errorf("partitions after the retry delay %v, want %v", got, want)
	}
	if got := mustCovered(t, g.c, 0, 5000); !slices.Equal(got, []Range{{2000, 3999}}) {
		t.Errorf("coverage %v, want [2000, 3999]", got)
	}
}
