package chain

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/router"
	"github.com/venn-gateway/venn/stalker"
	"github.com/venn-gateway/venn/subcenter"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const blockTime = 200 * time.Millisecond

// testConfig is a chain in front of node, defaulted as app would.
func testConfig(node *fakenode.Node) Config {
	off := false
	pool := remotes.PoolConfig{BlockTime: blockTime}.WithDefaults(1)
	head := stalker.HeadConfig{}.WithDefaults(pool.BlockTime)
	return Config{Name: "test", ChainID: 1337, Pool: pool, Head: head,
		History:       stalker.HistoryConfig{}.WithDefaults(head.Window),
		Integrity:     IntegrityConfig{Stalker: &off},
		Cache:         cache.Config{}.WithDefaults(pool.BlockTime, false),
		GetLogsLimits: router.LogLimits{}.WithDefaults(),
		Filters:       subcenter.FilterConfig{}.WithDefaults(),
		Remotes:       []remotes.Config{remotes.Config{Name: "a", URL: node.URL()}.WithDefaults(pool.CallDeadline)}}
}

// testParts are a process's parts without Redis, Postgres or NATS.
func testParts() *Parts {
	reg := prometheus.NewRegistry()
	m := remotes.NewMetrics(reg)
	return &Parts{ReplicaID: "r1", Metrics: NewMetrics(reg), Remotes: m,
		Replies: remotes.NewReplyBudget(64<<20, m), Tiers: NewCacheTiers(nil, ""),
		Logger: slog.New(slog.DiscardHandler)}
}

// A chain started alone leads (in memory there is nobody else), fills its
// head window from its remotes, applies a reload in place section by
// section, hands its leadership over on a drain and stops.
func TestChainLifecycle(t *testing.T) {
	node := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: blockTime})
	fakenode.MineEvery(t, blockTime, node)
	cc := testConfig(node)
	c, err := New(cc, testParts())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Start(ctx, true); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 20*time.Second, "the chain to lead and fill its head window", func() bool {
		_, ok := c.WindowHead()
		return ok && c.State().Leading
	})

	next := cc
	next.GetLogsLimits.MaxBlockRange++
	next.Head.Window++
	rep := c.Reconfigure(next, "chains[0]")
	if !slices.Contains(rep.Changes, "chain test: getlogs_limits applied") || len(rep.Problems) > 0 {
		t.Errorf("reconfigure: %+v", rep)
	}
	if !slices.Equal(rep.Restart, []string{"chains[0] head"}) {
		t.Errorf("restart required %q, want the head section's", rep.Restart)
	}
	if c.Config().GetLogsLimits != next.GetLogsLimits || c.Config().Head == next.Head {
		t.Errorf("config in force %+v: want the limits applied and the head as built", c.Config())
	}

	released, err := c.Drain(ctx)
	if err != nil || !released {
		t.Errorf("Drain = %v, %v; want released", released, err)
	}
	if c.State().Leading {
		t.Error("still leading after the drain")
	}
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	c.Forget()
}
