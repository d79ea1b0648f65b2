package router

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/forger"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
)

// callFunc is a func as forger.Calls.
type callFunc func(ctx context.Context, c evm.Call) (json.RawMessage, error)

func (f callFunc) ServeCall(ctx context.Context, c evm.Call) (json.RawMessage, error) {
	return f(ctx, c)
}

// inProcess is remotes that serve calls from a fake node's handler without
// a listener.
func inProcess(n *fakenode.Node) forger.Calls {
	return callFunc(func(ctx context.Context, c evm.Call) (json.RawMessage, error) {
		body := `{"jsonrpc":"2.0","id":1,"method":"` + c.Method + `","params":` + string(c.Params) + `}`
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		n.Handler().ServeHTTP(rec, req)
		var reply struct {
			Result json.RawMessage `json:"result"`
			Error  *jrpc.Error     `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &reply); err != nil {
			return nil, err
		}
		if reply.Error != nil {
			return nil, reply.Error
		}
		return reply.Result, nil
	})
}

// putHistory records what Put stores; put decides its answer.
type putHistory struct {
	fakeHistory
	mu     sync.Mutex
	stored []*evm.Block
	put    func(b *evm.Block) error
	done   chan struct{} // one value per Put
}

func (h *putHistory) Put(_ context.Context, blocks []*evm.Block) error {
	defer func() { h.done <- struct{}{} }()
	if err := h.put(blocks[0]); err != nil {
		return err
	}
	h.mu.Lock()
	h.stored = append(h.stored, blocks...)
	h.mu.Unlock()
	return nil
}

func TestWriteThroughStoresCanonicalSettledBlocks(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	node := fakenode.New(fakenode.Options{ChainID: 1337, Head: 50})
	defer node.Close()
	h := &putHistory{done: make(chan struct{}, 8), put: func(b *evm.Block) error {
		if b.Number == 7 {
			return fmt.Errorf("put: %w", blockstore.ErrConflict)
		}
		return nil
	}}
	m := NewMetrics(nil)
	out := m.writeThrough.MustCurryWith(prometheus.Labels{"chain": "c"})
	w := newWriteThrough(h, forger.New(inProcess(node), nil), func(n uint64) bool { return n <= 40 }, 8, discard(), out)
	w.links.canonical = func(n uint64) (string, bool) { return node.BlockHash(n), true }
	block := func(n uint64, hash string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"number":"0x%x","hash":"%s"}`, n, hash))
	}
	w.offer(parsed("eth_getBlockByNumber", ""), block(5, node.BlockHash(5)))
	w.offer(parsed("eth_getBlockByHash", ""), block(6, "0x"+strings.Repeat("ee", 32))) // a sibling of block 6
	w.offer(parsed("eth_getBlockByNumber", ""), block(7, node.BlockHash(7)))
	w.offer(parsed("eth_getBlockReceipts", `["0x8"]`), json.RawMessage(`[]`))

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.run(ctx) })
	deadline := time.After(10 * time.Second)
	for range 3 { // Puts of 5, 7 and 8; the orphan is never put
		select {
		case <-h.done:
		case <-deadline:
			t.Fatal("write-through did not put the blocks")
		}
	}
	cancel()
	wg.Wait()
	for outcome, want := range map[string]float64{wtQueued: 4, wtStored: 2, wtOrphan: 1, wtConflict: 1} {
		if got := testutil.ToFloat64(out.WithLabelValues(outcome)); got != want {
			t.Errorf("outcome %s: %v, want %v", outcome, got, want)
		}
	}
	if len(h.stored) != 2 || h.stored[0].Hash != node.BlockHash(5) || h.stored[1].Number != 8 {
		t.Fatalf("stored %d blocks", len(h.stored))
	}
	if _, err := evm.Split(h.stored[0]); err != nil {
		t.Fatalf("stored block is not whole: %v", err)
	}
	if len(w.pending) != 0 {
		t.Fatalf("%d blocks still marked pending", len(w.pending))
	}
}

// A settled block is written through only when it links to the chain the
// cluster follows: the window's hash at its number, a stored neighbour, or
// two remotes reporting it. A remote that switched chains serves blocks
// that link to each other, and Put alone takes any with no stored
// neighbour; before these checks they were all stored.
func TestWriteThroughStoresOnlyLinkedBlocks(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ours := fakenode.New(fakenode.Options{ChainID: 1337, Head: 50})
	defer ours.Close()
	theirs := fakenode.New(fakenode.Options{ChainID: 5, Head: 50}) // what a switched remote serves
	defer theirs.Close()
	const n = 20
	window := func(hash string) func(uint64) (string, bool) {
		return func(uint64) (string, bool) { return hash, true }
	}
	stored := func(ok bool) func(context.Context, uint64, string, string) (bool, error) {
		return func(context.Context, uint64, string, string) (bool, error) { return ok, nil }
	}
	confirm := func(agree, disagree int) func(context.Context, uint64, string) (int, int) {
		return func(context.Context, uint64, string) (int, int) { return agree, disagree }
	}
	tests := []struct {
		name  string
		from  *fakenode.Node // the remote the block is fetched from
		links chainLinks
		want  string
	}{
		{"the window's block", ours, chainLinks{canonical: window(ours.BlockHash(n))}, wtStored},
		{"another chain's block at a window number", theirs,
			chainLinks{canonical: window(ours.BlockHash(n)), stored: stored(true), confirm: confirm(2, 0)}, wtForeign},
		{"links to a stored neighbour", ours, chainLinks{stored: stored(true)}, wtStored},
		{"another chain's block, no stored neighbour, one remote", theirs,
			chainLinks{stored: stored(false), confirm: confirm(1, 0)}, wtUnlinked},
		{"confirmed by two remotes", ours, chainLinks{stored: stored(false), confirm: confirm(2, 0)}, wtStored},
		{"the remotes disagree", theirs, chainLinks{stored: stored(false), confirm: confirm(1, 1)}, wtForeign},
		{"nothing to link to", theirs, chainLinks{}, wtUnlinked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &putHistory{done: make(chan struct{}, 1), put: func(*evm.Block) error { return nil }}
			out := NewMetrics(nil).writeThrough.MustCurryWith(prometheus.Labels{"chain": "c"})
			w := newWriteThrough(h, forger.New(inProcess(tt.from), nil), func(n uint64) bool { return n <= 40 }, 8, discard(), out)
			w.links = tt.links
			if got := w.write(context.Background(), wtJob{number: n}); got != tt.want {
				t.Fatalf("outcome %s, want %s", got, tt.want)
			}
			if stored := len(h.stored) > 0; stored != (tt.want == wtStored) {
				t.Fatalf("stored %v with outcome %s", stored, tt.want)
			}
		})
	}
}
