package stalker

import (
	"context"
	"encoding/json"
	"math/big"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/headstore/redisstore"
	"github.com/venn-gateway/venn/integrity"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/keyspace"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/subcenter"
)

// replica is one replica's head feed and subscriptions: a follower of the
// chain's Redis store into a window, and a subscription center on it
// served over WebSocket, with an ethclient SubscribeNewHead subscriber.
type replica struct {
	w     *headstore.Window
	url   string
	heads chan *types.Header
	// caughtUp: the subscriber's headers from before the test's first
	// block were read (TestHeadersFirstOnEveryReplica's check).
	caughtUp bool
}

func startReplica(t *testing.T, chain string, window int) *replica {
	t.Helper()
	rdb, _ := testkit.Redis(t, func(string) string { return "venn:{" + chain + "}:*" })
	r := &replica{w: headstore.NewWindow(window), heads: make(chan *types.Header, 64)}
	fol := headstore.NewFollower(chain, redisstore.New(rdb, chain, window), r.w, nil, nil)
	c := subcenter.New(chain, r.w, nil, subcenter.Options{}, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { fol.Run(ctx) })
	wg.Go(func() { c.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	s := jrpc.NewServer(jrpc.Options{})
	s.Handle("test", jrpc.HandlerFunc(func(ctx context.Context, req *jrpc.Request) (json.RawMessage, error) {
		switch req.Method {
		case "eth_subscribe":
			return c.Subscribe(ctx, req.Params)
		case "eth_unsubscribe":
			return c.Unsubscribe(ctx, req.Params)
		}
		return nil, &jrpc.Error{Code: jrpc.CodeMethodNotFound, Message: "no"}
	}))
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	r.url = "ws" + strings.TrimPrefix(hs.URL, "http") + "/test"
	return r
}

// subscribe connects an ethclient newHeads subscriber once the window has
// a chain (the dispatcher starts from it).
func (r *replica) subscribe(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ec, err := ethclient.DialContext(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ec.Close)
	sub, err := ec.SubscribeNewHead(ctx, r.heads)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sub.Unsubscribe)
}

// waitHead waits until the window's head is n.
func (r *replica) waitHead(t *testing.T, n uint64) {
	t.Helper()
	for {
		changed := r.w.Changed()
		if h, _, ok := r.w.Head(); ok && h == n {
			return
		}
		select {
		case <-changed:
		case <-time.After(headersFirstSettle):
			t.Fatalf("window never reached %d", n)
		}
	}
}

// headersFirstSettle bounds a wait for a header or a window; failing.
const headersFirstSettle = 20 * time.Second

// next reads the subscriber's next header.
func (r *replica) next(t *testing.T) *types.Header {
	t.Helper()
	select {
	case h := <-r.heads:
		return h
	case <-time.After(headersFirstSettle):
		t.Fatal("no header came")
		return nil
	}
}

// TestHeadersFirstOnEveryReplica leads a chain through Redis with two
// replicas following it, each with an ethclient newHeads subscriber. The
// node's receipts are held back for new blocks: each replica's subscriber
// must get the new header while its window still lacks the block (and
// forwards a call for it rather than answer null), then the block reaches
// the window and no header is told twice. A reorg at the tip after a
// header was told is told too: the sibling at the same height.
func TestHeadersFirstOnEveryReplica(t *testing.T) {
	const window = 8
	node := startNode(t, fakenode.Options{ChainID: testChainID, Head: 40})
	gate := make(chan struct{})
	var held sync.Mutex
	holding := false
	node.SetHook(func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method == "eth_getBlockReceipts" || method == "eth_getTransactionReceipt" {
			held.Lock()
			g, on := gate, holding
			held.Unlock()
			if on {
				<-g
			}
		}
		return nil, nil, false
	})
	hold := func(on bool) {
		held.Lock()
		defer held.Unlock()
		if !on && holding {
			close(gate)
			gate = make(chan struct{})
		}
		holding = on
	}
	t.Cleanup(func() { hold(false) })

	rdb, token := testkit.Redis(t, func(token string) string { return "venn:{headers-first-" + token + "}:*" })
	chain := "headers-first-" + token
	if err := rdb.Set(t.Context(), keyspace.For(chain).Epoch, 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	pool, err := remotes.NewPool(remotes.PoolConfig{Chain: chain, ChainID: testChainID,
		BlockTime: 50 * time.Millisecond, CallDeadline: 10 * time.Second},
		[]remotes.Config{{Name: "n0", URL: node.URL(), Timeout: 10 * time.Second}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Stop(context.Background()) })

	replicas := []*replica{startReplica(t, chain, window), startReplica(t, chain, window)}
	st := New(Config{Chain: chain, HeadConfig: HeadConfig{Window: window}}, pool, pool.Heads(), redisstore.New(rdb, chain, window), nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); st.Lead(ctx, 1) }()
	t.Cleanup(func() { cancel(); <-done })
	for _, r := range replicas {
		r.waitHead(t, 40)
	}
	for _, r := range replicas {
		r.subscribe(t, r.url)
	}

	check := func(r *replica, want uint64) *types.Header {
		t.Helper()
		h := r.next(t)
		if !r.caughtUp {
			// A subscription that came while its replica's dispatcher was
			// still catching up with the window (a busy machine: the window
			// reached 40 before the dispatcher ran) is told the blocks the
			// dispatcher had not told yet first: each canonical, in order.
			r.caughtUp = true
			for prev := uint64(0); h.Number.Uint64() <= 40; h = r.next(t) {
				n := h.Number.Uint64()
				if prev != 0 && n != prev+1 {
					t.Fatalf("catching up, header %d after %d", n, prev)
				}
				if got := strings.ToLower(h.ParentHash.Hex()); got != node.BlockHash(n-1) {
					t.Fatalf("catching up, header %d's parent is %s, not the chain's %s", n, got, node.BlockHash(n-1))
				}
				prev = n
			}
		}
		if h.Number.Cmp(new(big.Int).SetUint64(want)) != 0 {
			t.Fatalf("header %v, want %d", h.Number, want)
		}
		return h
	}
	for round := uint64(41); round <= 43; round++ {
		hold(true)
		node.Mine(1)
		for i, r := range replicas {
			h := check(r, round)
			if got, want := strings.ToLower(h.ParentHash.Hex()), node.BlockHash(round-1); got != want {
				t.Fatalf("replica %d: header %d's parent %s, want %s", i, round, got, want)
			}
			if n, _, _ := r.w.Head(); n != round-1 {
				t.Fatalf("replica %d: the window is at %d when header %d came: not ahead", i, n, round)
			}
			if res, ok := r.w.Answer(evm.ParseCall("eth_getBlockByNumber", json.RawMessage(`["`+evm.Quantity(round)+`",false]`))); ok {
				t.Fatalf("replica %d: the window answered %s for block %d, which it lacks", i, res, round)
			}
		}
		hold(false)
		for _, r := range replicas {
			r.waitHead(t, round)
		}
	}
	// The tip replaced after its header was told: the sibling is told,
	// and the next block extends it. Each header once, in order.
	hold(true)
	node.Mine(1)
	first := make([]*types.Header, len(replicas))
	for i, r := range replicas {
		first[i] = check(r, 44)
	}
	hold(false)
	for _, r := range replicas {
		r.waitHead(t, 44)
	}
	node.Reorg(1)
	for i, r := range replicas {
		if h := check(r, 44); h.Hash() == first[i].Hash() {
			t.Fatalf("replica %d: header 44 after the reorg is the one told before", i)
		}
	}
	for n := uint64(45); n <= 46; n++ {
		node.Mine(1)
		for i, r := range replicas {
			h := check(r, n)
			if got, want := strings.ToLower(h.ParentHash.Hex()), node.BlockHash(n-1); got != want {
				t.Fatalf("replica %d: header %d's parent %s, want %s", i, n, got, want)
			}
			r.waitHead(t, n)
		}
	}
}

// TestAnnounceRules: a header is announced only when good enough for a
// subscriber: its hash is its fields' (with Integrity) and it is the
// block asked for, it extends the published head or the header announced
// last, and it was not announced before.
func TestAnnounceRules(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "integrity", "testdata", "geth", "block-0x3.json"))
	if err != nil {
		t.Fatal(err)
	}
	h, ok := headstore.HeaderOf(raw)
	if !ok {
		t.Fatal("no header in the fixture")
	}
	byNumber := evm.BlockRef{Kind: evm.RefNumber, Number: 3}
	if !headerGood(h, byNumber) {
		t.Fatalf("geth's block 3 header is not good enough: %+v", integrity.VerifyBlock(h.Raw, byNumber))
	}
	if headerGood(h, evm.BlockRef{Kind: evm.RefNumber, Number: 4}) {
		t.Error("a header for another number is good enough")
	}
	forged, ok := headstore.HeaderOf([]byte(strings.Replace(string(raw), `"gasUsed":"0x33134"`, `"gasUsed":"0x33135"`, 1)))
	if !ok {
		t.Fatal("no forged header")
	}
	if headerGood(forged, byNumber) {
		t.Error("a header whose fields do not hash to its hash is good enough")
	}

	a := newAnnouncer(nil, 1, nil)
	a.from(headstore.Ref{Number: 2, Hash: "0xother"})
	a.offer(h)
	if len(a.queue) != 0 {
		t.Fatal("a header whose parent is not the published head was announced")
	}
	a.from(headstore.Ref{Number: 2, Hash: h.Parent})
	a.offer(h)
	a.offer(h) // a hedged fetch's second answer
	if len(a.queue) != 1 {
		t.Fatalf("%d headers queued, want the one, once", len(a.queue))
	}
	child := &headstore.Header{Number: 4, Hash: "0xchild", Parent: h.Hash}
	a.offer(child) // extends the header announced last
	if len(a.queue) != 2 {
		t.Fatal("a header extending the one announced last was not announced")
	}
}
