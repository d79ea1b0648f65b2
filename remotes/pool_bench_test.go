package remotes

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// cannedTransport answers every call at once with the same result: the
// pool's own per-call cost, without HTTP.
type cannedTransport struct{}

func (cannedTransport) call(context.Context, string, json.RawMessage) (json.RawMessage, int, error) {
	return json.RawMessage(`"0x1"`), 200, nil
}

func (cannedTransport) close() {}

// cannedPool is a started-looking pool of n remotes that answer at once.
func cannedPool(b *testing.B, cfg PoolConfig, n int) *Pool {
	b.Helper()
	rs := make([]Config, n)
	for i := range rs {
		rs[i] = Config{Name: fmt.Sprintf("n%d", i), URL: fmt.Sprintf("http://127.0.0.1:9/%d", i), Timeout: time.Second}
	}
	cfg.Chain, cfg.ChainID = "bench", testChainID
	p, err := NewPool(cfg, rs, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range p.members() {
		r.t.close()
		r.t = cannedTransport{}
		r.chainState.Store(chainOK)
		r.head.Store(100)
	}
	return p
}

// BenchmarkPoolCall is one read through the pool (dedup, routing, the
// remote's accounting) against remotes that answer at once.
func BenchmarkPoolCall(b *testing.B) {
	params := json.RawMessage(`["0x0000000000000000000000000000000000000001","latest"]`)
	hedged := HedgeConfig{Groups: []HedgeGroup{{Methods: []string{"eth_getBalance"}, Delay: time.Second}}}
	for _, bc := range []struct {
		name string
		n    int
		cfg  PoolConfig
	}{
		{name: "remotes=1", n: 1},
		{name: "remotes=3", n: 3},
		// A hedge armed on every call and never sent: the race's own cost.
		{name: "remotes=3,hedged", n: 3, cfg: PoolConfig{Hedge: hedged}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := cannedPool(b, bc.cfg, bc.n)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Call(context.Background(), "eth_getBalance", params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
