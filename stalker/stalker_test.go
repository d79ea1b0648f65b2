package stalker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes"
)

const testChainID = 1337

// feed is a stalker leading one chain over fake nodes, with a window
// following its memory store.
type feed struct {
	nodes  []*fakenode.Node
	pool   *remotes.Pool
	store  *headstore.Memory
	window *headstore.Window
	m      *Metrics
	size   int
}

func startFeed(t *testing.T, window int, nodes ...*fakenode.Node) *feed {
	t.Helper()
	f := newFeed(t, window, false, nodes...)
	f.lead(t)
	return f
}

// newFeed starts the pool (following newHeads with ws) and the window's
// follower; lead starts a stalker.
func newFeed(t *testing.T, window int, ws bool, nodes ...*fakenode.Node) *feed {
	t.Helper()
	rs := make([]remotes.Config, len(nodes))
	for i, n := range nodes {
		rs[i] = remotes.Config{Name: fmt.Sprintf("n%d", i), URL: n.URL(), Timeout: time.Second}
		if ws {
			rs[i].WSURL = n.WSURL()
		}
	}
	// A remote taken down and brought back returns after its breaker's
	// cooldown (10 s by default, as long as waitCanonical waits): keep it
	// short, so a test waits for the stalker, not for the breaker.
	pool, err := remotes.NewPool(remotes.PoolConfig{Chain: "test", ChainID: testChainID,
		BlockTime: 50 * time.Millisecond, CallDeadline: 3 * time.Second,
		Breaker: remotes.BreakerConfig{Cooldown: 200 * time.Millisecond}}, rs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return followPool(t, nodes, pool, window)
}

// followPool starts pool and a follower of a memory head store of window
// blocks; both stop when the test ends.
func followPool(t *testing.T, nodes []*fakenode.Node, pool *remotes.Pool, window int) *feed {
	t.Helper()
	if err := pool.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	f := &feed{nodes: nodes, pool: pool, store: headstore.NewMemory(window),
		window: headstore.NewWindow(window), m: NewMetrics(nil), size: window}
	fol := headstore.NewFollower("test", f.store, f.window, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { fol.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		_ = pool.Stop(context.Background())
	})
	return f
}

// lead runs a new stalker as the chain's leader until stop is called or
// the test ends.
func (f *feed) lead(t *testing.T) (stop func()) {
	t.Helper()
	st := New(Config{Chain: "test", HeadConfig: HeadConfig{Window: f.size}}, f.pool, f.pool.Heads(), f.store, nil, f.m)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); st.Lead(ctx, headstore.MemoryEpoch) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// waitCanonical waits until the window holds exactly the node's chain from
// head-size+1 (or block 0) up to its head.
func (f *feed) waitCanonical(t *testing.T, n *fakenode.Node, size int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f.matches(n, size)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("window never matched the node: %v", err)
		}
		select {
		case <-f.window.Changed():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (f *feed) matches(n *fakenode.Node, size int) error {
	blocks := f.window.Blocks()
	head := n.Head()
	want := min(size, int(head)+1)
	if len(blocks) != want {
		return fmt.Errorf("window holds %d blocks, want %d", len(blocks), want)
	}
	for i, b := range blocks {
		num := head - uint64(want-1-i)
		if b.Number != num || b.Hash != n.BlockHash(num) {
			return fmt.Errorf("block %d is %d %s, want %d %s", i, b.Number, b.Hash, num, n.BlockHash(num))
		}
	}
	return nil
}

func TestStalkerFollowsHeadsAndReorgs(t *testing.T) {
	node := startNode(t, fakenode.Options{ChainID: testChainID, Head: 100})
	f := startFeed(t, 16, node)
	f.waitCanonical(t, node, 16)

	node.Mine(3)
	f.waitCanonical(t, node, 16)

	orphan := f.window.Blocks()[15] // the head, about to be replaced
	orphanTx := node.TxHash(orphan.Number, 0)
	node.Reorg(3)
	node.Mine(1)
	f.waitCanonical(t, node, 16)
	if got := testutil.ToFloat64(f.m.reorgs.WithLabelValues("test")); got != 1 {
		t.Errorf("reorgs_total = %v, want 1", got)
	}
	// The orphan is gone from every index the window serves from.
	for _, c := range []struct {
		method, params string
	}{
		{"eth_getBlockByHash", `["` + orphan.Hash + `",false]`},
		{"eth_getTransactionByHash", `["` + orphanTx + `"]`},
		{"eth_getTransactionReceipt", `["` + orphanTx + `"]`},
	} {
		if res, ok := f.window.Answer(evm.ParseCall(c.method, json.RawMessage(c.params))); ok {
			t.Errorf("%s(orphan) answered from the window: %.80s", c.method, res)
		}
	}
}

// A chain at genesis has a head: block 0 is published as soon as the
// remotes report it, so that block 1 comes as a new head on top of it
// (newHeads subscribers are told it) and not as the window's first block.
func TestStalkerPublishesGenesis(t *testing.T) {
	node := startNode(t, fakenode.Options{ChainID: testChainID})
	node.SetHead(0)
	f := startFeed(t, 16, node)
	f.waitCanonical(t, node, 16)
	if gen, seq := f.window.Seq(); gen == "" || seq != 1 {
		t.Fatalf("window at seq %q %d, want genesis as the first event", gen, seq)
	}
	if n, ok := f.window.Latest(); n != 0 || !ok {
		t.Fatalf("window latest %d %v, want 0 true", n, ok)
	}

	node.Mine(1)
	f.waitCanonical(t, node, 16)
	if _, seq := f.window.Seq(); seq != 2 {
		t.Fatalf("window at seq %d, want block 1 as the second event", seq)
	}
}

func TestStalkerKeepsFollowingWithARemoteDown(t *testing.T) {
	a := startNode(t, fakenode.Options{ChainID: testChainID, Head: 50})
	b := startNode(t, fakenode.Options{ChainID: testChainID, Head: 50})
	f := startFeed(t, 8, a, b)
	f.waitCanonical(t, a, 8)

	a.SetDown(true)
	for range 5 {
		a.Mine(1)
		b.Mine(1)
	}
	f.waitCanonical(t, b, 8)

	// A lagging remote does not hold the stalker back either.
	b.SetLag(3)
	a.SetDown(false)
	for range 3 {
		a.Mine(1)
		b.Mine(1)
	}
	f.waitCanonical(t, a, 8)
}

func TestStalkerFetchesReceiptsPerTransactionWithoutBlockReceipts(t *testing.T) {
	node := startNode(t, fakenode.Options{ChainID: testChainID, Head: 20})
	node.SetHook(func(method string, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method == "eth_getBlockReceipts" {
			return nil, &jrpc.Error{Code: -32601, Message: "the method eth_getBlockReceipts does not exist/is not available"}, true
		}
		return nil, nil, false
	})
	f := startFeed(t, 4, node)
	f.waitCanonical(t, node, 4)
	if node.Calls("eth_getTransactionReceipt") == 0 {
		t.Fatal("no per-transaction receipt calls")
	}
	top := f.window.Blocks()[3]
	res, ok := f.window.Answer(evm.ParseCall("eth_getBlockReceipts", json.RawMessage(`["`+top.Hash+`"]`)))
	if !ok {
		t.Fatal("window does not answer the receipts it assembled")
	}
	var rs []struct {
		TransactionHash string `json:"transactionHash"`
	}
	if err := json.Unmarshal(res, &rs); err != nil || len(rs) == 0 || rs[0].TransactionHash != node.TxHash(top.Number, 0) {
		t.Fatalf("assembled receipts = %.200s (%v)", res, err)
	}
}

func TestStalkerBackfillIsBounded(t *testing.T) {
	node := startNode(t, fakenode.Options{ChainID: testChainID, Head: 10_000})
	f := startFeed(t, 8, node)
	f.waitCanonical(t, node, 8)
	// Head polls (latest) are not fetches.
	if got := node.Calls("eth_getBlockByNumber") - node.CallsAt("eth_getBlockByNumber", "latest"); got > 8+4 {
		t.Fatalf("%d eth_getBlockByNumber calls to start a window of 8 blocks", got)
	}
	// A leader that was away a long time starts a fresh window instead of
	// fetching everything it missed.
	node.Mine(1000)
	f.waitCanonical(t, node, 8)
}

func startNode(t *testing.T, opts fakenode.Options) *fakenode.Node {
	t.Helper()
	n := fakenode.New(opts)
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n
}

// A tip replaced by a sibling at the same height is published as a reorg
// at once, not when the next block comes: polled and over newHeads, and by
// a new leader whose window still holds the replaced tip.
func TestStalkerSameHeightReorg(t *testing.T) {
	for _, ws := range []bool{false, true} {
		name := "polled"
		if ws {
			name = "newHeads"
		}
		t.Run(name, func(t *testing.T) {
			node := startNode(t, fakenode.Options{ChainID: testChainID, Head: 100})
			f := newFeed(t, 16, ws, node)
			f.lead(t)
			f.waitCanonical(t, node, 16)

			for range 3 { // back and forth: every reorg is a new sibling
				node.Reorg(1)
				f.waitCanonical(t, node, 16)
			}
			if got := testutil.ToFloat64(f.m.reorgs.WithLabelValues("test")); got != 3 {
				t.Errorf("reorgs_total = %v, want 3", got)
			}
		})
	}
	t.Run("new leader", func(t *testing.T) {
		node := startNode(t, fakenode.Options{ChainID: testChainID, Head: 100})
		f := newFeed(t, 16, false, node)
		stop := f.lead(t)
		f.waitCanonical(t, node, 16)
		stop()

		// No leader while the tip is replaced; the pool sees it.
		node.Reorg(1)
		waitTip(t, f.pool, node.BlockHash(100))
		f.lead(t)
		f.waitCanonical(t, node, 16)
	})
}

// waitTip waits until the pool's tip is hash.
func waitTip(t *testing.T, pool *remotes.Pool, hash string) {
	t.Helper()
	p := pool.Heads()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, h := p.Tip(); h == hash {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool tip never became %s", hash)
		}
		select {
		case <-p.HeadChanged():
		case <-time.After(50 * time.Millisecond):
		}
	}
}
