package router

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes"
)

// windowOf is a live window holding node's blocks from..to, as a leader
// would have published them.
func windowOf(t *testing.T, node *fakenode.Node, from, to uint64) *headstore.Window {
	t.Helper()
	var blocks []*evm.Block
	for n := from; n <= to; n++ {
		raw := mustRPC(t, node, "eth_getBlockByNumber", `["`+evm.Quantity(n)+`",true]`)
		rc := mustRPC(t, node, "eth_getBlockReceipts", `["`+evm.Quantity(n)+`"]`)
		b, err := evm.ParseBlock([]byte(raw), []byte(rc))
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, b)
	}
	w := headstore.NewWindow(int(to - from + 1))
	if err := w.Reset(&headstore.Snapshot{Gen: "g", Seq: 1, Blocks: blocks}); err != nil {
		t.Fatal(err)
	}
	w.SetLive(true)
	return w
}

// freshWorld is a router over a live window of node's blocks 93..100 and
// a pool of node, with its answers counted by source.
func freshWorld(t *testing.T, node *fakenode.Node) (*Router, *prometheus.Registry, *remotes.Pool) {
	t.Helper()
	pool := startForkPool(t, remotes.Config{Name: "node", URL: node.URL(), Timeout: 5 * time.Second})
	testkit.WaitFor(t, 10*time.Second, "the pool's tip at block 100", func() bool {
		h, ok := pool.Heads().HashAt(100)
		return ok && h == node.BlockHash(100)
	})
	reg := prometheus.NewRegistry()
	rt := New(Config{Chain: "dev", ChainID: fakenode.DefaultChainID, MaxLag: 5}, windowOf(t, node, 93, 100), upstreamOf(pool), NewMetrics(reg))
	return rt, reg, pool
}

// latestFrom asks rt for the latest block: its hash, and whether the head
// window answered.
func latestFrom(t *testing.T, rt *Router, reg *prometheus.Registry) (string, bool) {
	t.Helper()
	before, _ := testkit.Value(t, reg, "venn_answers_total", map[string]string{"source": "head"})
	res, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: "eth_getBlockByNumber", Params: json.RawMessage(`["latest",false]`)})
	if err != nil {
		t.Fatal(err)
	}
	var b struct{ Hash string }
	if err := json.Unmarshal(res, &b); err != nil {
		t.Fatal(err)
	}
	after, _ := testkit.Value(t, reg, "venn_answers_total", map[string]string{"source": "head"})
	return b.Hash, after > before
}

// The window holds block 100, and the remotes replace it with a sibling at
// the same height, as a reorg while no leader publishes does. Numbers
// still agree; hashes do not: the window must not answer until it holds
// what the remotes do. Before, freshness was judged by numbers only and
// the window served the orphan.
func TestRouterWindowOnAnOrphanIsNotServed(t *testing.T) {
	node := fakenode.Start(t, fakenode.Options{ChainID: fakenode.DefaultChainID, Head: 100})
	rt, reg, pool := freshWorld(t, node)
	orphan := node.BlockHash(100)
	if h, fromHead := latestFrom(t, rt, reg); h != orphan || !fromHead {
		t.Fatalf("latest is %s (from the window: %v), want %s from the window", h, fromHead, orphan)
	}

	node.SetFork(100, 9)
	sibling := node.BlockHash(100)
	testkit.WaitFor(t, 10*time.Second, "the pool's tip on the sibling", func() bool {
		h, _ := pool.Heads().HashAt(100)
		return h == sibling
	})
	if h, fromHead := latestFrom(t, rt, reg); h != sibling || fromHead {
		t.Fatalf("latest is %s (from the window: %v), want the sibling %s from the remotes", h, fromHead, sibling)
	}
}

// The window's head is older than the chain's block time allows (the fake
// chain's timestamps are years old) and no remote reported its head
// within that time either, as after a pause of the whole process: the
// window must not answer. A remote's report within the time vouches for a
// quiet chain's old head.
func TestRouterOldWindowIsNotServed(t *testing.T) {
	node := fakenode.Start(t, fakenode.Options{ChainID: fakenode.DefaultChainID, Head: 100})
	rt, reg, _ := freshWorld(t, node)
	if _, fromHead := latestFrom(t, rt, reg); !fromHead {
		t.Fatal("latest not from the window, whose old head a remote reported just now")
	}
	rt.now = func() time.Time { return time.Now().Add(time.Minute) } // a minute without a word
	if _, fromHead := latestFrom(t, rt, reg); fromHead {
		t.Fatal("latest from a window that is a minute older than the remotes' last report")
	}
}

// One remote's head becomes a sibling of the window's (a remote switched
// to another network, or one that alone saw a reorg) and the chain's tip
// follows it; another remote in rotation still reports the window's head.
// The window goes on answering: sending every call to the remotes would
// send them to the switched one too.
func TestRouterWindowAnswersWhileARemoteReportsItsHead(t *testing.T) {
	node := fakenode.Start(t, fakenode.Options{ChainID: fakenode.DefaultChainID, Head: 100})
	other := fakenode.Start(t, fakenode.Options{ChainID: fakenode.DefaultChainID, Head: 100})
	pool := startForkPool(t, remotes.Config{Name: "node", URL: node.URL(), Timeout: 5 * time.Second},
		remotes.Config{Name: "other", URL: other.URL(), Timeout: 5 * time.Second})
	testkit.WaitFor(t, 10*time.Second, "the pool's tip at block 100", func() bool {
		h, ok := pool.Heads().HashAt(100)
		return ok && h == node.BlockHash(100)
	})
	reg := prometheus.NewRegistry()
	rt := New(Config{Chain: "dev", ChainID: fakenode.DefaultChainID, MaxLag: 5}, windowOf(t, node, 93, 100), upstreamOf(pool), NewMetrics(reg))

	other.SetFork(100, 9)
	sibling := other.BlockHash(100)
	testkit.WaitFor(t, 10*time.Second, "the pool's tip on the sibling", func() bool {
		h, _ := pool.Heads().HashAt(100)
		return h == sibling
	})
	if h, fromHead := latestFrom(t, rt, reg); h != node.BlockHash(100) || !fromHead {
		t.Fatalf("latest is %s (from the window: %v), want the window's %s", h, fromHead, node.BlockHash(100))
	}
}
