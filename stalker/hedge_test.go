package stalker

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes"
)

// TestStalkerHedgesASlowFetch leads a chain over two remotes: "slow", the
// primary, which turns slow at serving blocks and receipts (not heads)
// once the window is full, and "quick", a secondary. The new blocks must
// reach the window through quick's hedges, not wait for slow.
func TestStalkerHedgesASlowFetch(t *testing.T) {
	slow := startNode(t, fakenode.Options{ChainID: testChainID, Head: 100})
	quick := startNode(t, fakenode.Options{ChainID: testChainID, Head: 100})
	var slowOn atomic.Bool
	slow.SetHook(func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		fetch := method == "eth_getBlockReceipts" || method == "eth_getBlockByHash" ||
			method == "eth_getBlockByNumber" && !strings.Contains(string(params), `"latest"`)
		if fetch && slowOn.Load() {
			time.Sleep(1500 * time.Millisecond) // the fault: a remote slow at serving blocks
		}
		return nil, nil, false
	})
	reg := prometheus.NewRegistry()
	pool, err := remotes.NewPool(remotes.PoolConfig{Chain: "test", ChainID: testChainID,
		BlockTime: 200 * time.Millisecond, CallDeadline: 5 * time.Second}, []remotes.Config{
		{Name: "slow", URL: slow.URL(), Timeout: 3 * time.Second},
		{Name: "quick", URL: quick.URL(), Timeout: 3 * time.Second, Tier: remotes.TierSecondary},
	}, nil, remotes.NewMetrics(reg))
	if err != nil {
		t.Fatal(err)
	}
	const window = 8
	f := followPool(t, []*fakenode.Node{slow, quick}, pool, window)
	f.lead(t)
	f.waitCanonical(t, quick, window)

	slowOn.Store(true)
	fetched := quick.Calls("eth_getBlockReceipts")
	// A block the quick remote reported first is fetched from it, with
	// nothing to hedge: blocks are mined until one was asked of the slow
	// remote (a handful at most), and every one is served in time.
	won := 0.0
	for range 12 {
		slow.Mine(1)
		quick.Mine(1)
		f.waitCanonical(t, quick, window)
		if won = counter(t, reg, "venn_hedges_total", map[string]string{"outcome": "won"}); won >= 1 {
			break
		}
	}
	if won < 1 {
		var others []string
		for _, o := range []string{"lost", "skipped_budget", "skipped_no_remote"} {
			others = append(others, fmt.Sprintf("%s %v", o, counter(t, reg, "venn_hedges_total", map[string]string{"outcome": o})))
		}
		t.Errorf("venn_hedges_total{outcome=won} = %v after 12 blocks (%s): no hedge answered for the slow remote",
			won, strings.Join(others, ", "))
	}
	// The window takes a block's header before its receipts: the receipts
	// hedge may still be on its way.
	if !testkit.Poll(5*time.Second, func() bool { return quick.Calls("eth_getBlockReceipts") > fetched }) {
		t.Error("quick served no receipts of the new blocks")
	}
}
