package router

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes"
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
	pool, err := remotes.NewPool(remotes.PoolConfig{Chain: "dev", ChainID: fakenode.DefaultChainID,
		BlockTime: 100 * time.Millisecond, CallDeadline: 10 * time.Second}, []remotes.Config{
		{Name: "minor", URL: minor.URL(), Timeout: 5 * time.Second},
		{Name: "major", URL: major.URL(), Timeout: 5 * time.Second, Tier: remotes.TierSecondary},
	}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Stop(context.Background()) })
	testkit.WaitFor(t, 10*time.Second, "the remotes' heads", func() bool { return pool.HealthyHead() == 100 })

	c := cache.New(cache.Config{}.WithDefaults(time.Second, false), cache.Options{Chain: "dev"})
	t.Cleanup(c.Close)
	head := forkHead{fakeHead{tags: headstore.Tags{Latest: 100}, ok: true}, major}
	rt := New(Config{Chain: "dev", ChainID: fakenode.DefaultChainID, Cache: c,
		Settled: func() (uint64, bool) { return 36, true }}, head, pool, nil)
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
