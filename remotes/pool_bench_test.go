package remotes

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/venn-gateway/venn/remotes/budget"
	"github.com/venn-gateway/venn/remotes/health"
)

// cannedTransport answers every call at once with the same result: the
// pool's own per-call cost, without HTTP.
type cannedTransport struct{}

func (cannedTransport) Call(context.Context, string, json.RawMessage) (json.RawMessage, int, error) {
	return json.RawMessage(`"0x1"`), 200, nil
}

func (cannedTransport) Close() {}

// cannedPool is a started-looking pool of n remotes that answer at once;
// tweak, when set, changes each remote's config.
func cannedPool(b *testing.B, cfg PoolConfig, n int, tweak func(i int, c *Config)) *Pool {
	b.Helper()
	rs := make([]Config, n)
	for i := range rs {
		rs[i] = Config{Name: fmt.Sprintf("n%d", i), URL: fmt.Sprintf("http://127.0.0.1:9/%d", i), Timeout: time.Second}
		if tweak != nil {
			tweak(i, &rs[i])
		}
	}
	cfg.Chain, cfg.ChainID = "bench", testChainID
	p, err := NewPool(cfg, rs, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range p.members() {
		r.t.Close()
		r.t = cannedTransport{}
		r.cc.Set(health.OK)
		r.head.Store(100)
	}
	return p
}

// BenchmarkPoolCall is one read through the pool (dedup, routing, the
// remote's accounting) against remotes that answer at once.
func BenchmarkPoolCall(b *testing.B) {
	params := json.RawMessage(`["0x0000000000000000000000000000000000000001","latest"]`)
	hedged := HedgeConfig{Groups: []HedgeGroup{{Methods: []string{"eth_getBalance"}, Delay: time.Second}}}
	// Weights on every remote and a budget (in units, priced per method)
	// on each but the last, so none runs out: selection's draw by share
	// and the per-call count.
	budgeted := func(i int, c *Config) {
		c.Weight = ptr(float64(i + 1))
		if i < 2 {
			c.Budget = budget.Config{Units: 1 << 62, Per: budget.PeriodMonth, Cost: map[string]uint64{"eth_getLogs": 75, "debug_trace*": 300}}
		}
	}
	for _, bc := range []struct {
		name  string
		n     int
		cfg   PoolConfig
		tweak func(int, *Config)
	}{
		{name: "remotes=1", n: 1},
		{name: "remotes=3", n: 3},
		// A hedge armed on every call and never sent: the race's own cost.
		{name: "remotes=3,hedged", n: 3, cfg: PoolConfig{Hedge: hedged}},
		{name: "remotes=3,weights+budgets", n: 3, tweak: budgeted},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := cannedPool(b, bc.cfg, bc.n, bc.tweak)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Call(context.Background(), "eth_getBalance", params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
