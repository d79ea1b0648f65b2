package blockstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// Links tells a block that links by hash to a stored neighbour from one
// that has none, or whose neighbours are of another chain.
func TestLinks(t *testing.T) {
	p, _ := open(t)
	c := p.Chain(1, "test")
	mustPut(t, c, synthChain(t, "a", 10, 20, 1)...)
	zero := "0x" + strings.Repeat("00", 32)
	tests := []struct {
		name         string
		n            uint64
		hash, parent string
		want         bool
	}{
		{"child of the stored top", 21, synthHash("a", 21), synthHash("a", 20), true},
		{"parent of the stored bottom", 9, synthHash("a", 9), synthHash("a", 8), true},
		{"stored already", 15, synthHash("a", 15), synthHash("a", 14), true},
		{"no neighbour", 30, synthHash("a", 30), synthHash("a", 29), false},
		{"another chain's child", 21, synthHash("b", 21), synthHash("b", 20), false},
		{"another chain's parent", 9, synthHash("b", 9), synthHash("b", 8), false},
		{"another hash at a stored number", 15, synthHash("b", 15), synthHash("a", 14), false},
		{"genesis", 0, synthHash("a", 0), zero, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.Links(context.Background(), tt.n, tt.hash, tt.parent)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("Links(%d) = %v, want %v", tt.n, got, tt.want)
			}
		})
	}
}

// Purge removes exactly the blocks named (by number and hash), their
// transactions and logs, and cuts them out of the coverage; Refs lists
// what is stored.
func TestPurge(t *testing.T) {
	p, u := open(t)
	c := p.Chain(1, "test")
	other := p.Chain(2, "other")
	mustPut(t, c, synthChain(t, "a", 0, 30, 4)...)
	mustPut(t, other, synthChain(t, "a", 0, 30, 4)...)
	before := rowCounts(t, u)
	ctx := context.Background()

	refs, err := c.Refs(ctx, 10, 14, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 5 || refs[0].Number != 10 || refs[0].Hash != synthHash("a", 10) || refs[0].Parent != synthHash("a", 9) {
		t.Fatalf("Refs(10, 14) = %+v", refs)
	}
	if page, _ := c.Refs(ctx, 0, 30, 3); len(page) != 3 || page[2].Number != 2 {
		t.Fatalf("Refs with limit 3 = %+v", page)
	}

	purge := append(refs, StoredRef{Number: 20, Hash: synthHash("a", 20)}, StoredRef{Number: 30, Hash: synthHash("a", 30)},
		StoredRef{Number: 25, Hash: synthHash("b", 25)}) // not what is stored there: kept
	got, err := c.Purge(ctx, purge)
	if err != nil {
		t.Fatal(err)
	}
	// 4 transactions a block, 0+1+2+3 logs.
	if got.Blocks != 7 || got.Transactions != 28 || got.Logs != 42 {
		t.Errorf("purged %+v, want 7 blocks, 28 transactions, 42 logs", got)
	}
	if want := "[{10 14} {20 20} {30 30}]"; fmt.Sprint(got.Uncovered) != want {
		t.Errorf("uncovered %v, want %s", got.Uncovered, want)
	}
	if cov, want := fmt.Sprint(mustCovered(t, c, 0, 100)), "[{0 9} {15 19} {21 29}]"; cov != want {
		t.Errorf("coverage %s, want %s", cov, want)
	}
	if cov := fmt.Sprint(mustCovered(t, other, 0, 100)); cov != "[{0 30}]" {
		t.Errorf("the other chain's coverage %s: touched", cov)
	}
	if _, ok := answer(t, c, "eth_getBlockByNumber", `["0xc",false]`); ok {
		t.Error("purged block 12 still answered")
	}
	wantBlock(t, c, synthChain(t, "a", 25, 25, 4)[0])
	if after := rowCounts(t, u); after == before {
		t.Errorf("rows %s unchanged", after)
	}
	// The purged range takes another chain's blocks now, and Put links
	// them as usual.
	mustPut(t, c, synthChain(t, "a", 10, 14, 4)...)
	if cov := fmt.Sprint(mustCovered(t, c, 0, 100)); cov != "[{0 19} {21 29}]" {
		t.Errorf("coverage after a new Put %s", cov)
	}
	if again, err := c.Purge(ctx, []StoredRef{{Number: 20, Hash: synthHash("a", 20)}}); err != nil || again.Blocks != 0 {
		t.Errorf("purging a purged block: %+v, %v", again, err)
	}
}
