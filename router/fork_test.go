package router

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/remotes/verdict"
)

// forkHead is a head window at latest 100 on node's branch.
type forkHead struct {
	fakeHead
	node *fakenode.Node
}

func (h forkHead) CanonicalHash(n uint64) (string, bool) { return h.node.BlockHash(n), true }

// TestCacheNeverStoresAMinorityBranch: a near-head state call is stored
// under the window's hash at its number. The preferred remote is on
// another branch at that number and answers by number for its own block;
// the call goes pinned to the window's hash, so that remote lacks it, the
// pool asks the other, and only the canonical block's answer is stored and
// served, the same bytes a node on the window's branch gives.
func TestCacheNeverStoresAMinorityBranch(t *testing.T) {
	major := fakenode.Start(t, fakenode.Options{Name: "major"})
	minor := fakenode.Start(t, fakenode.Options{Name: "minor"})
	minor.SetFork(96, 7)
	if major.BlockHash(100) == minor.BlockHash(100) {
		t.Fatal("the nodes share block 100")
	}
	// The minority's own state at 100: another balance than the canonical
	// block's (the fake's balances do not follow forks by themselves).
	minor.SetHook(func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method != "eth_getBalance" || bytes.Contains(params, []byte("blockHash")) {
			return nil, nil, false
		}
		return json.RawMessage(`"0xbad"`), nil, true
	})
	pool := startForkPool(t,
		remotes.Config{Name: "minor", URL: minor.URL(), Timeout: 5 * time.Second},
		remotes.Config{Name: "major", URL: major.URL(), Timeout: 5 * time.Second, Tier: remotes.TierSecondary})
	// Both: a healthy head of 100 is the minority's alone until the
	// canonical remote is in rotation too, and a call pinned to the
	// canonical block then finds no remote with it.
	testkit.WaitFor(t, 10*time.Second, "both remotes in rotation at head 100", func() bool {
		n := 0
		for _, s := range pool.Status() {
			if s.InRotation && s.Head == 100 {
				n++
			}
		}
		return n == 2
	})

	c := cache.New(cache.Config{}.WithDefaults(time.Second, false), cache.Options{Chain: "dev"})
	t.Cleanup(c.Close)
	head := forkHead{fakeHead{tags: headstore.Tags{Latest: 100}, ok: true}, major}
	rt := New(Config{Chain: "dev", ChainID: fakenode.DefaultChainID, Cache: c,
		Settled: func() (uint64, bool) { return 36, true }}, head, upstreamOf(pool), nil)
	for i := range 3 {
		addr := fmt.Sprintf("0x%040x", 0xa0+i)
		want := mustRPC(t, major, "eth_getBalance", `["`+addr+`","0x64"]`)
		for _, block := range []string{`"latest"`, `"0x64"`} {
			req := &jrpc.Request{Method: "eth_getBalance", Params: json.RawMessage(`["` + addr + `",` + block + `]`)}
			res, err := rt.ServeRPC(context.Background(), req)
			if err != nil || string(res) != want {
				t.Fatalf("%s at %s: %s %v, want the canonical block's %s", addr, block, res, err, want)
			}
		}
	}
	// Per address: the test's own call and the miss; the number was a hit.
	if n := major.Calls("eth_getBalance"); n != 6 {
		t.Errorf("the canonical remote answered %d balances, want 6", n)
	}
}

// mustRPC is node's own answer to one call.
func mustRPC(t *testing.T, node *fakenode.Node, method, params string) string {
	t.Helper()
	res, err := rawCall(context.Background(), node.URL(), method, params)
	if err != nil {
		t.Fatal(err)
	}
	return string(res)
}

// TestCacheAnswersByNumberWhenNoRemoteHasTheBlock: the only remote is on
// another branch at the window's near-head number, so the call pinned to
// the window's hash finds no remote with the block. The client still gets
// the answer the call by number gets without the cache, and it is not
// stored (nothing says which branch it is of); once the remote follows
// the window's branch, the pinned answer is stored and served.
func TestCacheAnswersByNumberWhenNoRemoteHasTheBlock(t *testing.T) {
	node := fakenode.Start(t, fakenode.Options{Name: "node"})
	canon := fakenode.New(fakenode.Options{Name: "canon"}) // the window's branch; never listens
	node.SetFork(96, 7)
	if node.BlockHash(100) == canon.BlockHash(100) {
		t.Fatal("the branches share block 100")
	}
	var pinned, byNumber atomic.Int64
	node.SetHook(func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method == "eth_getBalance" {
			if bytes.Contains(params, []byte("blockHash")) {
				pinned.Add(1)
			} else {
				byNumber.Add(1)
			}
		}
		return nil, nil, false
	})
	pool := startForkPool(t, remotes.Config{Name: "node", URL: node.URL(), Timeout: 5 * time.Second})
	testkit.WaitFor(t, 10*time.Second, "the remote's head", func() bool { return pool.Heads().HealthyHead() == 100 })

	reg := prometheus.NewRegistry()
	c := cache.New(cache.Config{}.WithDefaults(time.Second, false), cache.Options{Chain: "dev",
		Metrics: cache.NewMetrics(reg), LacksBlock: func(method string, err error) bool {
			return verdict.Classify(method, err).LacksBlock()
		}})
	t.Cleanup(c.Close)
	head := forkHead{fakeHead{tags: headstore.Tags{Latest: 100}, ok: true}, canon}
	rt := New(Config{Chain: "dev", ChainID: fakenode.DefaultChainID, Cache: c,
		Settled: func() (uint64, bool) { return 36, true }}, head, upstreamOf(pool), nil)
	const addr = "0x00000000000000000000000000000000000000a0"
	serve := func() string {
		t.Helper()
		req := &jrpc.Request{Method: "eth_getBalance", Params: json.RawMessage(`["` + addr + `","0x64"]`)}
		res, err := rt.ServeRPC(context.Background(), req)
		if err != nil {
			t.Fatalf("eth_getBalance at 0x64: %v", err)
		}
		return string(res)
	}
	want := mustRPC(t, node, "eth_getBalance", `["`+addr+`","0x64"]`)
	byNumber.Store(0)
	for i := range 2 {
		if got := serve(); got != want {
			t.Fatalf("call %d: %s, want the by-number answer %s", i, got, want)
		}
	}
	// Each call: pinned (the remote lacks the block), then by number.
	if p, n := pinned.Load(), byNumber.Load(); p != 2 || n != 2 {
		t.Fatalf("%d pinned and %d by-number sends, want 2 and 2: an unpinned answer was stored", p, n)
	}
	if got := cacheCount(t, reg, "any", "unpinned"); got != 2 {
		t.Errorf("unpinned %v, want 2", got)
	}
	if got := cacheCount(t, reg, "memory", "stored"); got != 0 {
		t.Errorf("stored %v, want 0", got)
	}

	node.SetFork(96, 0) // the remote is on the window's branch now
	pinned.Store(0)
	for range 2 {
		if got := serve(); got != want {
			t.Fatalf("with the block found: %s, want %s", got, want)
		}
	}
	if p, n := pinned.Load(), byNumber.Load(); p != 1 || n != 2 {
		t.Errorf("%d pinned and %d more by-number sends, want 1 (then a hit) and none", p, n-2)
	}
	if got := cacheCount(t, reg, "memory", "stored"); got != 1 {
		t.Errorf("stored %v, want 1", got)
	}
}

// cacheCount is venn_cache_requests_total of eth_getBalance on chain dev
// at tier and outcome, as reg holds it (0: no such series).
func cacheCount(t *testing.T, reg *prometheus.Registry, tier, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "venn_cache_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["chain"] == "dev" && l["method"] == "eth_getBalance" && l["tier"] == tier && l["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// startForkPool is a started pool of the fake chain on remotes, stopped at
// cleanup.
func startForkPool(t *testing.T, rs ...remotes.Config) *remotes.Pool {
	t.Helper()
	return startChainPool(t, fakenode.DefaultChainID, rs...)
}

// TestCacheNeverStoresAnotherChainsSettledAnswer: the preferred remote
// was re-pointed at another network at the same height (every block
// differs) and answers a state call at a settled number for its own
// block. The call goes pinned to the hash of the cluster's block at that
// number, so that remote lacks it, the pool asks the other, and only the
// cluster's chain's answer is stored and served.
func TestCacheNeverStoresAnotherChainsSettledAnswer(t *testing.T) {
	major := fakenode.Start(t, fakenode.Options{Name: "major"})
	other := fakenode.Start(t, fakenode.Options{Name: "other"})
	other.SetFork(1, 9)
	if major.BlockHash(20) == other.BlockHash(20) {
		t.Fatal("the nodes share block 20")
	}
	other.SetHook(func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method != "eth_getBalance" || bytes.Contains(params, []byte("blockHash")) {
			return nil, nil, false
		}
		return json.RawMessage(`"0xbad"`), nil, true
	})
	pool := startForkPool(t,
		remotes.Config{Name: "other", URL: other.URL(), Timeout: 5 * time.Second},
		remotes.Config{Name: "major", URL: major.URL(), Timeout: 5 * time.Second, Tier: remotes.TierSecondary})
	testkit.WaitFor(t, 10*time.Second, "both remotes in rotation at head 100", func() bool {
		n := 0
		for _, s := range pool.Status() {
			if s.InRotation && s.Head == 100 {
				n++
			}
		}
		return n == 2
	})
	c := cache.New(cache.Config{}.WithDefaults(time.Second, false), cache.Options{Chain: "dev"})
	t.Cleanup(c.Close)
	head := forkHead{fakeHead{tags: headstore.Tags{Latest: 100}, ok: true}, major}
	rt := New(Config{Chain: "dev", ChainID: fakenode.DefaultChainID, Cache: c,
		Settled: func() (uint64, bool) { return 36, true }}, head, upstreamOf(pool), nil)
	const addr = "0x00000000000000000000000000000000000000a0"
	want := mustRPC(t, major, "eth_getBalance", `["`+addr+`","0x14"]`)
	for i := range 3 {
		req := &jrpc.Request{Method: "eth_getBalance", Params: json.RawMessage(`["` + addr + `","0x14"]`)}
		res, err := rt.ServeRPC(context.Background(), req)
		if err != nil || string(res) != want {
			t.Fatalf("call %d at settled block 20: %s %v, want the cluster's chain's %s", i, res, err, want)
		}
	}
}
