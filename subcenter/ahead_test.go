package subcenter

import (
	"fmt"
	"slices"
	"testing"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
)

// announce hands the window block b's header, as a follower does with one
// the leader announced ahead of the block.
func (f *feed) announce(b *evm.Block) {
	f.t.Helper()
	h, ok := headstore.HeaderOf(b.Raw)
	if !ok {
		f.t.Fatalf("no header in block %d", b.Number)
	}
	f.w.Announce(h)
}

// TestHeadersAheadToldOnce: a header announced ahead of its block is told
// to newHeads subscribers at once, exactly as the block's own head would
// be, and not again when the block comes; logs wait for the block. A
// subscription that began between the two gets the head with the block.
// A header whose block never comes is followed by the block that took its
// number; a header that does not extend the chain told waits for its
// block; a sibling header at a number told ahead is told too, once.
func TestHeadersAheadToldOnce(t *testing.T) {
	f := newFeed(t, 16)
	f.extend("a", 1, 5, "a")
	c := startCenter(t, f, Options{})
	heads, logs := newNotifier(), newNotifier()
	subscribe(t, c, heads, `["newHeads"]`)
	subscribe(t, c, logs, `["logs",{}]`)
	waitView(t, c, 5)

	short := func(b *evm.Block) string { return fmt.Sprintf("0x%x/%s", b.Number, b.Hash[60:]) }
	expect := func(n *notifier, want ...*evm.Block) {
		t.Helper()
		var w []string
		for _, b := range want {
			w = append(w, short(b))
		}
		if got := headNumbers(t, n.collect(t, len(want))); !slices.Equal(got, w) {
			t.Fatalf("heads\n got %v\nwant %v", got, w)
		}
	}
	logOf := func(b *evm.Block, removed bool) logNote {
		return logNote{b.Hash, removed}
	}
	expectLogs := func(want ...logNote) {
		t.Helper()
		if got := logNotes(t, logs, len(want)); !slices.Equal(got, want) {
			t.Fatalf("logs\n got %v\nwant %v", got, want)
		}
	}

	// Header first: told at once, byte for byte the block's own head.
	a6 := block("a", 6, "a")
	f.announce(a6)
	note := heads.collect(t, 1)[0]
	p6, err := evm.Split(a6)
	if err != nil {
		t.Fatal(err)
	}
	if want := string(newHead(p6.HashOnly)); note.result != want {
		t.Fatalf("header told ahead\n got %s\nwant %s", note.result, want)
	}
	logs.quiet(t)
	// Its block: logs, and no second head.
	f.apply(nil, a6)
	expectLogs(logOf(a6, false))
	waitView(t, c, 6)
	heads.quiet(t)

	// A subscription that began after the header was told gets the head
	// with the block.
	a7 := block("a", 7, "a")
	f.announce(a7)
	expect(heads, a7)
	late := newNotifier()
	subscribe(t, c, late, `["newHeads"]`)
	f.apply(nil, a7)
	expect(late, a7)
	expectLogs(logOf(a7, false))
	waitView(t, c, 7)
	heads.quiet(t)

	// A header told whose block never comes: the block at its number is
	// told, and its logs; then the next header, which extends it.
	a8 := block("a", 8, "a")
	f.announce(a8)
	expect(heads, a8)
	expect(late, a8)
	b8 := block("b", 8, "a")
	f.apply(nil, b8)
	expect(heads, b8)
	expect(late, b8)
	expectLogs(logOf(b8, false))
	waitView(t, c, 8)
	b9 := block("b", 9, "b")
	f.announce(b9)
	expect(heads, b9)
	expect(late, b9)

	// A sibling at the number told ahead is told; neither is told again
	// when the window's change wakes the dispatcher, nor the block.
	c9 := block("c", 9, "b")
	f.announce(c9)
	expect(heads, c9)
	expect(late, c9)
	f.apply(nil, c9)
	expectLogs(logOf(c9, false))
	waitView(t, c, 9)
	heads.quiet(t)
	late.quiet(t)

	// A header that does not extend the chain told waits for its block.
	d11 := block("d", 11, "d")
	f.announce(d11)
	heads.quiet(t)
}
