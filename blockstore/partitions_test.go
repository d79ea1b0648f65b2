package blockstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/pgtest"
	"github.com/venn-gateway/venn/migrations"
)

// storeOld writes blocks as the store did before partitioning: rows and
// coverage, without partitions.
func storeOld(t *testing.T, c *Chain, blocks []*evm.Block) {
	t.Helper()
	ctx := context.Background()
	rows, err := prepare(blocks)
	if err != nil {
		t.Fatal(err)
	}
	tx, rollback, err := c.beginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer rollback()
	if err := c.copy(ctx, tx, rows); err != nil {
		t.Fatal(err)
	}
	for _, run := range runs(rows) {
		if err := c.cover(ctx, tx, run); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// dump returns every row of the history tables as text, in key order.
func dump(t *testing.T, u string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	out := map[string][]string{}
	for table, order := range map[string]string{
		"blocks": "chain_id, number", "transactions": "chain_id, block_number, idx",
		"logs": "chain_id, block_number, log_index", "coverage": "chain_id, from_block",
	} {
		rows, err := conn.Query(ctx, `SELECT t::text FROM `+table+` t ORDER BY `+order)
		if err != nil {
			t.Fatal(err)
		}
		if out[table], err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// partitionsOf returns the partitions history_partitions lists, as
// "chain:from-to" (to exclusive).
func partitionsOf(t *testing.T, u string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT format('%s:%s-%s', chain_id, from_block, to_block) FROM history_partitions ORDER BY chain_id, from_block`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// answers asks the chain for its blocks, receipts and logs of from..to.
func answers(t *testing.T, c *Chain, from, to uint64) []string {
	t.Helper()
	var out []string
	ask := func(method, params string) {
		res, ok, err := c.Answer(context.Background(), evm.ParseCall(method, json.RawMessage(params)))
		if err != nil {
			t.Fatalf("%s %s: %v", method, params, err)
		}
		out = append(out, fmt.Sprintf("%s %s: %v %s", method, params, ok, res))
	}
	for n := from; n <= to; n++ {
		q := `"` + evm.Quantity(n) + `"`
		ask("eth_getBlockByNumber", `[`+q+`,true]`)
		ask("eth_getBlockReceipts", `[`+q+`]`)
	}
	ask("eth_getLogs", `[{"fromBlock":"`+evm.Quantity(from)+`","toBlock":"`+evm.Quantity(to)+`"}]`)
	return out
}

// TestMigrationPartitionsFilledStore fills a store of the schema before
// partitioning (two chains, blocks on both sides of a partition bound),
// migrates it, and finds every row as it was, in partitions of 100,000
// blocks, answering the same, with the span above each chain's highest
// block made too, so a replica not yet upgraded (writing without making
// partitions) goes on storing; Put goes on into the partitions it finds
// and makes the ones it needs.
func TestMigrationPartitionsFilledStore(t *testing.T) {
	u := pgtest.Empty(t)
	ctx := context.Background()
	if err := migrations.UpTo(ctx, u, 3, nil); err != nil {
		t.Fatal(err)
	}
	p := openURL(t, u, nil)
	one, two := p.Chain(1, "one"), p.Chain(2, "two")
	storeOld(t, one, synthChain(t, "a", 99_995, 100_004, 4))
	storeOld(t, one, synthChain(t, "a", 100_010, 100_012, 4))
	storeOld(t, two, synthChain(t, "b", 250_000, 250_003, 4))
	before := dump(t, u)
	answersOne, answersTwo := answers(t, one, 99_995, 100_004), answers(t, two, 250_000, 250_003)

	applied, err := migrations.Up(ctx, u, nil)
	if err != nil || len(applied) == 0 || applied[0] != 4 {
		t.Fatalf("migrate: applied %v, %v; want 4 first", applied, err)
	}
	after := dump(t, u)
	for table, rows := range before {
		if len(rows) == 0 {
			t.Fatalf("no %s rows before the migration: the fill is broken", table)
		}
		if !slices.Equal(after[table], rows) {
			t.Errorf("%s: %d rows before the migration, %d after, or some differ", table, len(rows), len(after[table]))
		}
	}
	want := []string{"1:0-100000", "1:100000-200000", "1:200000-300000", "2:200000-300000", "2:300000-400000"}
	if got := partitionsOf(t, u); !slices.Equal(got, want) {
		t.Errorf("partitions after the migration %v, want %v", got, want)
	}
	var outside int
	if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM logs WHERE tableoid::regclass::text NOT LIKE 'logs_c%'`).Scan(&outside); err != nil || outside != 0 {
		t.Errorf("%d logs outside a chain's partition (%v)", outside, err)
	}

	// The pool's cached statements name the old tables' plans: a fresh one.
	p = openURL(t, u, nil)
	one, two = p.Chain(1, "one"), p.Chain(2, "two")
	if got := answers(t, one, 99_995, 100_004); !slices.Equal(got, answersOne) {
		t.Errorf("chain one answers differently after the migration:\n%v\nbefore:\n%v", got, answersOne)
	}
	if got := answers(t, two, 250_000, 250_003); !slices.Equal(got, answersTwo) {
		t.Errorf("chain two answers differently after the migration")
	}
	storeOld(t, one, synthChain(t, "a", 200_000, 200_001, 4)) // as a replica not yet upgraded writes
	storeOld(t, two, synthChain(t, "b", 300_000, 300_001, 4))
	mustPut(t, one, synthChain(t, "a", 100_005, 100_009, 4)...)
	mustPut(t, one, synthChain(t, "a", 420_000, 420_001, 1)...)
	want = []string{"1:0-100000", "1:100000-200000", "1:200000-300000", "1:400000-500000", "1:500000-600000", "2:200000-300000", "2:300000-400000"}
	if got := partitionsOf(t, u); !slices.Equal(got, want) {
		t.Errorf("partitions after Puts %v, want %v (the span written and the next)", got, want)
	}
	if got := mustCovered(t, one, 0, 1_000_000); !slices.Equal(got, []Range{{99_995, 100_012}, {200_000, 200_001}, {420_000, 420_001}}) {
		t.Errorf("coverage of chain one %v", got)
	}
}

// TestPutMakesPartitions: Put makes the partition of every block it
// stores and the next range ahead; a partition made elsewhere with
// another range is fitted around, and one dropped under a replica that
// knew it is made again rather than failing the write.
func TestPutMakesPartitions(t *testing.T) {
	p, u := open(t)
	c := p.ChainWith(7, "seven", Policy{PartitionBlocks: 1000})
	mustPut(t, c, synthChain(t, "a", 998, 1001, 1)...)
	if got, want := partitionsOf(t, u), []string{"7:0-1000", "7:1000-2000", "7:2000-3000"}; !slices.Equal(got, want) {
		t.Errorf("partitions %v, want %v", got, want)
	}

	// Another replica with a larger span: its partitions stop where the
	// existing ones start.
	wide := p.ChainWith(7, "seven", Policy{PartitionBlocks: 5000})
	mustPut(t, wide, synthChain(t, "a", 3500, 3500, 1)...)
	if got, want := partitionsOf(t, u), []string{"7:0-1000", "7:1000-2000", "7:2000-3000", "7:3000-5000", "7:5000-10000"}; !slices.Equal(got, want) {
		t.Errorf("partitions %v, want %v", got, want)
	}

	// Retention on another replica drops the partition c last wrote to.
	other := p.ChainWith(7, "seven", Policy{PartitionBlocks: 1000, KeepBlocks: 1})
	mustPut(t, other, synthChain(t, "a", 9000, 9000, 1)...)
	if _, err := other.Retain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := partitionsOf(t, u); slices.Contains(got, "7:1000-2000") {
		t.Fatalf("retention left %v", got)
	}
	mustPut(t, c, synthChain(t, "a", 1002, 1003, 1)...)
	if got := mustCovered(t, c, 0, 10_000); !slices.Contains(got, Range{1002, 1003}) {
		t.Errorf("coverage %v after a Put into a dropped partition's range", got)
	}
}

// TestPutMakesPartitionsConcurrently: replicas writing into the same new
// range at once (each its own Chain, knowing no partitions) both store
// their blocks; the partition is made once.
func TestPutMakesPartitionsConcurrently(t *testing.T) {
	p, u := open(t)
	const writers = 4
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		c := p.ChainWith(3, "three", Policy{PartitionBlocks: 1000})
		blocks := synthChain(t, "a", uint64(5000+100*i), uint64(5000+100*i+9), 1)
		wg.Go(func() { errs[i] = c.Put(context.Background(), blocks) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	if got, want := partitionsOf(t, u), []string{"3:5000-6000", "3:6000-7000"}; !slices.Equal(got, want) {
		t.Errorf("partitions %v, want %v", got, want)
	}
	if got := mustCovered(t, p.Chain(3, "three"), 0, 10_000); len(got) != writers {
		t.Errorf("coverage %v, want the %d writers' ranges", got, writers)
	}
}
