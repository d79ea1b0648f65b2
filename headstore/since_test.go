package headstore

import (
	"context"
	"errors"
	"testing"

	"github.com/venn-gateway/venn/evm"
)

// numbersOf names blocks by number and hash, for comparing changes.
func refsOf(ps []*evm.Parts) []Ref {
	out := make([]Ref, len(ps))
	for i, p := range ps {
		out[i] = Ref{Number: p.Number, Hash: p.Hash}
	}
	return out
}

func sameRefs(a, b []Ref) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func refsOfBlocks(bs ...*evm.Block) []Ref {
	out := make([]Ref, len(bs))
	for i, b := range bs {
		out[i] = Ref{Number: b.Number, Hash: b.Hash}
	}
	return out
}

// TestSince: a reader at a cursor gets what it missed, reorg-corrected,
// whatever happened between its reads.
func TestSince(t *testing.T) {
	ctx := context.Background()
	c := newServeChain()
	main := serveMain(c) // 10..14
	w := newServeWindow(t, 8, main, 0, 0)
	at := func(name string) Cursor { b := c.blocks[name]; return Cursor{Number: b.Number, Hash: b.Hash} }

	// Before the reorg.
	ch, err := w.Since(ctx, at("12"), nil)
	if err != nil || len(ch.Removed) != 0 || !sameRefs(refsOf(ch.Added), refsOfBlocks(c.blocks["13"], c.blocks["14"])) || ch.Next != at("14") {
		t.Fatalf("from 12: %+v, %v", ch, err)
	}
	if ch, _ := w.Since(ctx, at("14"), nil); !ch.Empty() || ch.Next != at("14") {
		t.Fatalf("at the head: %+v", ch)
	}
	// Below the window: the gap is named, the whole window added.
	ch, _ = w.Since(ctx, Cursor{Number: 5, Hash: serveHash("block 5")}, nil)
	if !ch.HasGap || ch.GapFrom != 6 || ch.GapTo != 9 || len(ch.Added) != 5 {
		t.Fatalf("below the window: %+v", ch)
	}
	// A hashless cursor is taken as canonical.
	if ch, _ := w.Since(ctx, Cursor{Number: 13}, nil); len(ch.Added) != 1 || ch.Next != at("14") {
		t.Fatalf("hashless: %+v", ch)
	}

	// 13 and 14 leave for 13b.
	b13b := c.block("b", 13, c.blocks["12"].Hash, 0)
	if err := w.Apply(&Event{Seq: 2, Dropped: []Ref{{14, c.blocks["14"].Hash}, {13, c.blocks["13"].Hash}}, Added: []*evm.Block{b13b}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		give        Cursor
		wantRemoved []Ref
		wantAdded   []Ref
		wantNext    Cursor
	}{
		{"at the old head", at("14"), refsOfBlocks(c.blocks["13"], c.blocks["14"]), refsOfBlocks(b13b), at("13b")},
		{"at the orphaned 13", at("13"), refsOfBlocks(c.blocks["13"]), refsOfBlocks(b13b), at("13b")},
		{"below the fork", at("12"), nil, refsOfBlocks(b13b), at("13b")},
		{"at the new head", at("13b"), nil, nil, at("13b")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ch, err := w.Since(ctx, tt.give, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !sameRefs(refsOf(ch.Removed), tt.wantRemoved) || !sameRefs(refsOf(ch.Added), tt.wantAdded) || ch.Next != tt.wantNext {
				t.Fatalf("removed %v added %v next %v; want %v %v %v",
					refsOf(ch.Removed), refsOf(ch.Added), ch.Next, tt.wantRemoved, tt.wantAdded, tt.wantNext)
			}
		})
	}

	// A window that never saw the orphan (another replica, started after
	// the reorg) asks fetch; without it, it refuses rather than answer
	// without the removed logs.
	fresh := newServeWindow(t, 8, []*evm.Block{main[0], main[1], main[2], b13b}, 0, 0)
	if _, err := fresh.Since(ctx, at("13"), nil); !errors.Is(err, ErrOrphanUnknown) {
		t.Fatalf("unknown orphan: %v", err)
	}
	fetched := 0
	fetch := func(_ context.Context, hash string) (*evm.Parts, error) {
		for _, b := range main {
			if b.Hash == hash {
				fetched++
				return evm.Split(b)
			}
		}
		return nil, nil
	}
	ch, err = fresh.Since(ctx, at("13"), fetch)
	if err != nil || fetched != 1 || !sameRefs(refsOf(ch.Removed), refsOfBlocks(c.blocks["13"])) || ch.Next != at("13b") {
		t.Fatalf("fetched orphans: %+v, %v (fetched %d)", ch, err, fetched)
	}
	// A cursor above a window that does not know it (rebuilt, or the
	// new branch is shorter): nothing until the window reaches its
	// height and shows what replaced it.
	short := newServeWindow(t, 8, main[:3], 0, 0)
	if ch, err := short.Since(ctx, at("14"), nil); err != nil || !ch.Empty() || ch.Next != at("14") {
		t.Fatalf("above a rebuilt window: %+v, %v", ch, err)
	}
}
