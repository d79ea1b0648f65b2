package headstore

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/evm"
)

// TestHeaderOf: the header is the block object less its transactions and
// withdrawals, every other member byte for byte.
func TestHeaderOf(t *testing.T) {
	c := newServeChain()
	blocks := serveMain(c)
	b := blocks[1]
	raw := strings.Replace(string(b.Raw), `"transactions":[`, `"withdrawals":[{"index":"0x1"}], "transactions":[`, 1)
	h, ok := HeaderOf([]byte(raw))
	if !ok {
		t.Fatalf("HeaderOf(%.200s) failed", raw)
	}
	if h.Number != b.Number || h.Hash != b.Hash || h.Parent != b.Parent {
		t.Errorf("header %d %s (parent %s), want %d %s (%s)", h.Number, h.Hash, h.Parent, b.Number, b.Hash, b.Parent)
	}
	want := `{"baseFeePerGas":"0x7","hash":"` + b.Hash + `","number":"0xb","parentHash":"` + b.Parent +
		`","timestamp":` + serveQty(1_700_000_000+12*11) + `,"uncles":[]}`
	if string(h.Raw) != want {
		t.Errorf("header raw\n%s\nwant\n%s", h.Raw, want)
	}
	for _, bad := range []string{`null`, `[]`, `{"number":"0x1"}`, `{"number":"x","hash":"0x1","parentHash":"0x0"}`} {
		if _, ok := HeaderOf([]byte(bad)); ok {
			t.Errorf("HeaderOf(%s) ok, want refused", bad)
		}
	}

}

// TestServeAhead: while a header is announced ahead of the window, the
// window does not answer for its number (the remotes do), eth_blockNumber
// answers the header's number, and latest and the blocks it holds are
// served as ever; once the block arrives, the window answers for it.
func TestServeAhead(t *testing.T) {
	c := newServeChain()
	main := serveMain(c)
	w := newServeWindow(t, 8, main, 13, 12)
	next := c.block("", 15, main[len(main)-1].Hash, 0)
	h, ok := HeaderOf([]byte(c.hashOnly["15"]))
	if !ok {
		t.Fatal("no header")
	}
	announced := w.Announced()
	w.Announce(h)
	select {
	case <-announced:
	default:
		t.Fatal("Announce did not signal")
	}
	if got := w.Ahead(); len(got) != 1 || got[0].Hash != next.Hash {
		t.Fatalf("Ahead = %v, want the header of 15", got)
	}
	runServeCases(t, w, []serveCase{
		{name: "the announced number", method: "eth_getBlockByNumber", params: `["0xf",false]`, forward: true},
		{name: "latest, the window's head", method: "eth_getBlockByNumber", params: `["latest",false]`, want: c.hashOnly["14"]},
		{name: "receipts of the announced number", method: "eth_getBlockReceipts", params: `["0xf"]`, forward: true},
		{name: "the announced hash", method: "eth_getBlockByHash", params: `["` + next.Hash + `",false]`, forward: true},
		{name: "logs to the announced number", method: "eth_getLogs", params: `[{"fromBlock":"0xe","toBlock":"0xf"}]`, forward: true},
		{name: "above the announced number", method: "eth_getBlockByNumber", params: `["0x10",false]`, want: "null"},
		{name: "a block held", method: "eth_getBlockByNumber", params: `["0xe",false]`, want: c.hashOnly["14"]},
		{name: "block number", method: "eth_blockNumber", want: `"0xf"`},
	})
	// An announcement at or below the head is old news.
	old, _ := HeaderOf([]byte(c.hashOnly["14"]))
	w.Announce(old)
	if got := w.Ahead(); len(got) != 1 {
		t.Fatalf("Ahead after an old header = %d headers, want 1", len(got))
	}

	if err := w.Apply(&Event{Seq: 2, Added: []*evm.Block{next}}); err != nil {
		t.Fatal(err)
	}
	if got := w.Ahead(); len(got) != 0 {
		t.Fatalf("Ahead after its block = %v, want none", got)
	}
	runServeCases(t, w, []serveCase{
		{name: "the block, arrived", method: "eth_getBlockByNumber", params: `["0xf",false]`, want: c.hashOnly["15"]},
		{name: "latest, arrived", method: "eth_getBlockByNumber", params: `["latest",false]`, want: c.hashOnly["15"]},
		{name: "above", method: "eth_getBlockByNumber", params: `["0x10",false]`, want: "null"},
	})
}

// followHeaders follows s's headers into a fresh window until ctx ends.
func followHeaders(t *testing.T, s HeaderStore) *Window {
	t.Helper()
	w := NewWindow(8)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.FollowHeaders(ctx, w.Announce)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// announce publishes h once a follower listens (listening reports
// that; a header sent before is not replayed), and waits until w has it.
func announce(t *testing.T, s HeaderStore, epoch uint64, w *Window, listening func() bool, h *Header) {
	t.Helper()
	for i := 0; !listening(); i++ {
		if i == 100_000 {
			t.Fatal("the follower never listened")
		}
		runtime.Gosched()
	}
	heard := w.Announced()
	if err := s.PublishHeader(t.Context(), epoch, h); err != nil {
		t.Fatalf("publish header: %v", err)
	}
	<-heard
}

// TestMemoryHeaders: the same through the one-process store.
func TestMemoryHeaders(t *testing.T) {
	m := NewMemory(8)
	w := followHeaders(t, m)
	c := newServeChain()
	b := c.block("", 5, serveHash("block 4"), 0)
	h, _ := HeaderOf(b.Raw)
	announce(t, m, MemoryEpoch, w, m.headersFollowed, h)
	if got := w.Ahead(); len(got) != 1 || got[0].Hash != b.Hash {
		t.Fatalf("follower heard %+v", got)
	}
	if err := m.PublishHeader(t.Context(), 2, h); !errors.Is(err, ErrFenced) {
		t.Fatalf("publish header under another epoch = %v, want ErrFenced", err)
	}
}
