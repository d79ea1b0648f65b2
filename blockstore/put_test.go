package blockstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/pgtest"
)

// answer calls Answer and fails the test on a Postgres error.
func answer(t testing.TB, c *Chain, method, params string) (json.RawMessage, bool) {
	t.Helper()
	res, ok, err := c.Answer(context.Background(), evm.ParseCall(method, json.RawMessage(params)))
	if err != nil {
		t.Fatalf("%s %s: %v", method, params, err)
	}
	return res, ok
}

// wantBlock checks the store serves b exactly as it was put.
func wantBlock(t testing.TB, c *Chain, b *evm.Block) {
	t.Helper()
	n := `"` + evm.Quantity(b.Number) + `"`
	if got, ok := answer(t, c, "eth_getBlockByNumber", `[`+n+`,true]`); !ok || !bytes.Equal(got, b.Raw) {
		t.Fatalf("block %d: got %v %.300s\nwant %.300s", b.Number, ok, got, b.Raw)
	}
	if got, ok := answer(t, c, "eth_getBlockReceipts", `["`+b.Hash+`"]`); !ok || !bytes.Equal(got, b.Receipts) {
		t.Fatalf("receipts %d: got %v %.300s\nwant %.300s", b.Number, ok, got, b.Receipts)
	}
}

// rowCounts counts the rows of every table of the database at u.
func rowCounts(t testing.TB, u string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var out []string
	for _, table := range []string{"blocks", "transactions", "logs", "coverage"} {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s=%d", table, n))
	}
	return strings.Join(out, " ")
}

func TestPutIdempotentAndCovered(t *testing.T) {
	reg := prometheus.NewRegistry()
	u := pgtest.New(t)
	p := openURL(t, u, reg)
	c := p.Chain(1, "one")
	ctx := context.Background()
	blocks := synthChain(t, "a", 0, 19, 6)

	if got := mustCovered(t, c, 0, 100); len(got) != 0 {
		t.Fatalf("empty store: Covered = %v", got)
	}
	if _, ok, err := c.Highest(ctx); ok || err != nil {
		t.Fatalf("empty store: Highest ok=%v err=%v", ok, err)
	}
	mustPut(t, c, blocks[10:15]...)
	mustPut(t, c, blocks[0:3]...)
	mustPut(t, c, blocks[17], blocks[16]) // out of order
	tests := []struct {
		from, to uint64
		want     []Range
	}{
		{0, 100, []Range{{0, 2}, {10, 14}, {16, 17}}},
		{1, 11, []Range{{1, 2}, {10, 11}}},
		{3, 9, nil},
		{14, 16, []Range{{14, 14}, {16, 16}}},
		{5, 4, nil},
	}
	for _, tt := range tests {
		if got := mustCovered(t, c, tt.from, tt.to); !slices.Equal(got, tt.want) {
			t.Errorf("Covered(%d, %d) = %v, want %v", tt.from, tt.to, got, tt.want)
		}
	}
	before := rowCounts(t, u)
	mustPut(t, c, blocks[0:3]...)   // again
	mustPut(t, c, blocks[11:13]...) // a part again
	if after := rowCounts(t, u); after != before {
		t.Fatalf("a repeated Put changed the tables: %s, then %s", before, after)
	}
	mustPut(t, c, blocks[2:11]...) // joins 0-2 and 10-14 across stored ends
	mustPut(t, c, blocks[15])      // fills the last gap: one range
	if got, want := mustCovered(t, c, 0, 100), []Range{{0, 17}}; !slices.Equal(got, want) {
		t.Fatalf("Covered = %v, want %v", got, want)
	}
	if got := rowCounts(t, u); !strings.HasSuffix(got, "coverage=1") {
		t.Fatalf("coverage rows not merged: %s", got)
	}
	if n, ok, err := c.Highest(ctx); n != 17 || !ok || err != nil {
		t.Fatalf("Highest = %d, %v, %v; want 17", n, ok, err)
	}
	if got := testutil.ToFloat64(p.m.blocks); got != 18 {
		t.Fatalf("venn_blockstore_blocks_stored_total = %v, want 18", got)
	}
	for _, b := range blocks[:18] {
		wantBlock(t, c, b)
	}
	if _, ok := answer(t, c, "eth_getBlockByNumber", `["0x12",false]`); ok {
		t.Fatal("answered a block never put")
	}

	// Another chain with the same blocks is another history.
	other := p.Chain(2, "two")
	if got := mustCovered(t, other, 0, 100); len(got) != 0 {
		t.Fatalf("chain 2: Covered = %v before any Put", got)
	}
	if _, ok := answer(t, other, "eth_getBlockByHash", `["`+blocks[3].Hash+`",false]`); ok {
		t.Fatal("chain 2 answered chain 1's block")
	}
	mustPut(t, other, blocks[3:5]...)
	wantBlock(t, other, blocks[4])
	if got, want := mustCovered(t, other, 0, 100), []Range{{3, 4}}; !slices.Equal(got, want) {
		t.Fatalf("chain 2: Covered = %v, want %v", got, want)
	}
}

// TestPutConflict: a batch holding a block that disagrees with a stored
// block or with a neighbour is refused whole.
func TestPutConflict(t *testing.T) {
	u := pgtest.New(t)
	p := openURL(t, u, nil)
	c := p.Chain(1, "one")
	a := synthChain(t, "a", 0, 30, 3)
	mustPut(t, c, a[0:5]...)   // 0-4
	mustPut(t, c, a[8:12]...)  // 8-11
	mustPut(t, c, a[20:21]...) // 20

	// Blocks of fork b, with chosen parents.
	fork := func(n uint64, parent string) *evm.Block { return synthBlock(t, "b", n, parent, 2) }
	tests := []struct {
		name  string
		batch []*evm.Block
	}{
		{"another hash at a stored number", []*evm.Block{fork(3, a[2].Hash)}},
		{"parent is not the stored block below", []*evm.Block{fork(5, synthHash("x"))}},
		{"the stored block above names another parent", []*evm.Block{fork(7, a[6].Hash)}},
		{"both ends of a gap", []*evm.Block{a[5], fork(6, a[5].Hash), fork(7, synthHash("b", 6))}},
		{"parent is not the batch's block below", []*evm.Block{a[13], fork(14, a[12].Hash)}},
		{"two blocks at one number", []*evm.Block{a[15], fork(15, a[14].Hash)}},
		{"good blocks with one conflict", []*evm.Block{a[12], a[13], a[14], a[15], fork(21, a[19].Hash)}},
		{"the block below a stored one is not its parent", []*evm.Block{fork(19, a[18].Hash)}},
	}
	before := rowCounts(t, u)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Put(context.Background(), tt.batch)
			if !errors.Is(err, ErrConflict) {
				t.Fatalf("Put = %v, want ErrConflict", err)
			}
			if after := rowCounts(t, u); after != before {
				t.Fatalf("a refused Put stored rows: %s, then %s", before, after)
			}
			for _, b := range tt.batch {
				if _, ok := answer(t, c, "eth_getBlockByHash", `["`+b.Hash+`",false]`); ok && b.Hash != a[b.Number].Hash {
					t.Fatalf("block %d %s of a refused batch is served", b.Number, b.Hash)
				}
			}
		})
	}
	if got, want := mustCovered(t, c, 0, 100), []Range{{0, 4}, {8, 11}, {20, 20}}; !slices.Equal(got, want) {
		t.Fatalf("Covered = %v, want %v", got, want)
	}
	// The right blocks still fit.
	mustPut(t, c, a[5:8]...)
	mustPut(t, c, a[12:20]...)
	if got, want := mustCovered(t, c, 0, 100), []Range{{0, 20}}; !slices.Equal(got, want) {
		t.Fatalf("Covered = %v, want %v", got, want)
	}
}

// TestPutConcurrent: Puts racing on the same chain, overlapping and
// neighbouring, all succeed and store each block once; of two
// neighbouring batches that disagree, one is refused.
func TestPutConcurrent(t *testing.T) {
	u := pgtest.New(t)
	p := openURL(t, u, nil)
	c := p.Chain(1, "one")
	a := synthChain(t, "a", 0, 99, 2)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 8 {
		wg.Go(func() {
			// Each writer puts every block, in batches of a size and
			// offset of its own.
			size := 5 + w*3
			for from := (w * 7) % size; from < len(a); from += size {
				if err := c.Put(context.Background(), a[from:min(from+size, len(a))]); err != nil {
					errs <- err
					return
				}
			}
			if err := c.Put(context.Background(), a[:(w*7)%size]); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Put: %v", err)
	}
	if got, want := mustCovered(t, c, 0, 1000), []Range{{0, 99}}; !slices.Equal(got, want) {
		t.Fatalf("Covered = %v, want %v", got, want)
	}
	if got, want := rowCounts(t, u), "blocks=100 transactions=200 logs=100 coverage=1"; got != want {
		t.Fatalf("rows: %s, want %s", got, want)
	}

	// Neighbours that disagree, put at the same moment: the link check
	// of whichever commits second sees the first.
	for round := range 5 {
		c := p.Chain(uint64(100+round), "race")
		x := synthChain(t, fmt.Sprint("x", round), 0, 9, 1)
		y := synthChain(t, fmt.Sprint("y", round), 10, 19, 1) // 10's parent is not x's 9
		var errX, errY error
		var wg sync.WaitGroup
		wg.Go(func() { errX = c.Put(context.Background(), x) })
		wg.Go(func() { errY = c.Put(context.Background(), y) })
		wg.Wait()
		if (errX == nil) == (errY == nil) || !errors.Is(errors.Join(errX, errY), ErrConflict) {
			t.Fatalf("round %d: Put x = %v, Put y = %v; want exactly one ErrConflict", round, errX, errY)
		}
	}
}

// TestUnusualJSON: JSON the store cannot split (whitespace, upper-case
// hex) is kept whole and served exactly; JSON with control characters is
// refused.
func TestUnusualJSON(t *testing.T) {
	p, _ := open(t)
	c := p.Chain(1, "one")
	b := synthChain(t, "a", 0, 2, 3)
	spaced := func(b *evm.Block) *evm.Block {
		raw := strings.Replace(string(b.Raw), `"transactions":[{`, `"transactions": [ {`, 1)
		raw = strings.Replace(raw, `"hash":"0x`, `"hash":"0X`, 1)
		rcs := strings.ReplaceAll(string(b.Receipts), `"logs":[{`, `"logs":[ {`)
		return parse(t, []byte(raw), []byte(rcs))
	}
	odd := []*evm.Block{b[0], spaced(b[1]), b[2]}
	mustPut(t, c, odd...)
	for _, b := range odd {
		wantBlock(t, c, b)
	}
	hashOnly, ok := answer(t, c, "eth_getBlockByNumber", `["0x1",false]`)
	parts, err := evm.Split(odd[1])
	if err != nil || !ok || !bytes.Equal(hashOnly, parts.HashOnly) {
		t.Fatalf("hash-only block: %v %v %.300s\nwant %.300s", ok, err, hashOnly, parts.HashOnly)
	}

	bad := synthChain(t, "c", 5, 5, 1)[0]
	bad.Raw = bytes.Replace(bad.Raw, []byte(`"miner":`), []byte("\x01\"miner\":"), 1)
	if err := c.Put(context.Background(), []*evm.Block{bad}); !errors.Is(err, ErrInvalidBlock) {
		t.Fatalf("Put of a block with a control character: %v, want ErrInvalidBlock", err)
	}
}
