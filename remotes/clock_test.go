package remotes

import (
	"context"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
)

// sleep is a fakenode Options.Sleep on c. It waits d for real, so that
// calls still race one another (a hedge against a slow remote) as they
// would, and then moves c by exactly d: on c, a call answered after
// SetLatency(d) took d, however long a busy machine took to schedule it.
// A sleep cut short moves nothing.
func (c *testClock) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		c.add(d)
		return true
	}
}

// clockedNodes starts n fake nodes whose injected latencies move c, and
// lets tweak set each node's options first (nil: none).
func clockedNodes(t *testing.T, c *testClock, n int, tweak func(i int, o *fakenode.Options)) []*fakenode.Node {
	t.Helper()
	nodes := make([]*fakenode.Node, n)
	for i := range nodes {
		o := fakenode.Options{ChainID: testChainID, Sleep: c.sleep}
		if tweak != nil {
			tweak(i, &o)
		}
		nodes[i] = fakenode.Start(t, o)
	}
	return nodes
}

// clockedPool is testPool with c as the clock of the pool and its remotes,
// set before they start: the latencies they measure are the nodes'
// injected ones, taken off c.
func clockedPool(t *testing.T, c *testClock, cfg PoolConfig, nodes []*fakenode.Node, tweak func(i int, c *Config)) *Pool {
	t.Helper()
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = n.URL()
	}
	return startPoolWith(t, cfg, testConfigs(urls, tweak), nil, c.use)
}
