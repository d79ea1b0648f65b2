package remotes

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/remotes/score"
)

// BenchmarkHedgeTail measures client-side latency through a pool of two
// primary remotes, one of which is slow on 5% of its requests, with
// hedging off and on. Both answer in about 5 ms (a provider's round trip);
// the slow one adds 100 ms to every 20th request it gets. Calls run 4 at a
// time with a fresh address each (nothing is shared). It reports p50, p99
// and p99.9 in ms, upstream calls per client call, and the shares of calls
// that sent a hedge and that were answered by it. Run it with a fixed
// count, e.g.
//
//	go test -run '^$' -bench HedgeTail -benchtime 4000x -count 3 ./remotes/
func BenchmarkHedgeTail(b *testing.B) {
	const (
		base        = 5 * time.Millisecond
		tail        = 100 * time.Millisecond
		concurrency = 4
		warmup      = 400
	)
	groups := func(budget float64, g HedgeGroup) HedgeConfig {
		g.Methods = []string{"eth_getBalance"}
		return HedgeConfig{Budget: budget, Groups: []HedgeGroup{g}}
	}
	for _, bc := range []struct {
		name  string
		hedge HedgeConfig
	}{
		{name: "off"},
		{name: "p90", hedge: groups(0, HedgeGroup{Quantile: 0.9})}, // the default budget, 0.1
		{name: "p90-budget0.2", hedge: groups(0.2, HedgeGroup{Quantile: 0.9})},
		{name: "delay10ms", hedge: groups(0, HedgeGroup{Delay: 10 * time.Millisecond})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			nodes := []*fakenode.Node{
				fakenode.Start(b, fakenode.Options{ChainID: testChainID}),
				fakenode.Start(b, fakenode.Options{ChainID: testChainID}),
			}
			for _, n := range nodes {
				n.SetLatency(base)
			}
			nodes[1].SetSlowTail(0.05, tail)
			rs := testConfigs([]string{nodes[0].URL(), nodes[1].URL()}, nil)
			// Scoring off (all weights 0): the two remotes share the calls
			// evenly whatever their latency, so only hedging differs.
			p := benchPool(b, PoolConfig{BlockTime: time.Hour, Hedge: bc.hedge, Scoring: weighed(&score.Weights{})}, rs)

			var seq atomic.Int64
			run := func(n int, lat []time.Duration) {
				var next atomic.Int64
				var wg sync.WaitGroup
				for range concurrency {
					wg.Go(func() {
						for {
							i := int(next.Add(1)) - 1
							if i >= n {
								return
							}
							params := json.RawMessage(fmt.Sprintf(`["0x%040x","latest"]`, seq.Add(1)))
							start := time.Now()
							if _, err := p.Call(context.Background(), "eth_getBalance", params); err != nil {
								b.Error(err)
								return
							}
							if lat != nil {
								lat[i] = time.Since(start)
							}
						}
					})
				}
				wg.Wait()
			}
			run(warmup, nil) // latency quantiles and scores settle
			for _, n := range nodes {
				n.ResetCalls()
			}
			var before hedgeCounts
			if p.hedger() != nil {
				before = hedgeCountsOf(p)
			}
			lat := make([]time.Duration, b.N)
			b.ResetTimer()
			run(b.N, lat)
			b.StopTimer()

			slices.Sort(lat)
			at := func(q float64) float64 {
				return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) / float64(time.Millisecond)
			}
			b.ReportMetric(at(0.5), "p50_ms")
			b.ReportMetric(at(0.99), "p99_ms")
			b.ReportMetric(at(0.999), "p999_ms")
			upstream := nodes[0].Calls("eth_getBalance") + nodes[1].Calls("eth_getBalance")
			b.ReportMetric(float64(upstream)/float64(b.N), "upstream/call")
			var c hedgeCounts
			if p.hedger() != nil {
				c = hedgeCountsOf(p)
			}
			b.ReportMetric((c.won+c.lost-before.won-before.lost)/float64(b.N)*100, "hedged_%")
			b.ReportMetric((c.won-before.won)/float64(b.N)*100, "won_%")
		})
	}
}

// benchPool is startPool for a benchmark.
func benchPool(b *testing.B, cfg PoolConfig, rs []Config) *Pool {
	b.Helper()
	cfg.Chain, cfg.ChainID = "bench", testChainID
	p, err := NewPool(cfg, rs, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			b.Error(err)
		}
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		ready := true
		for _, r := range p.members() {
			ready = ready && r.Head() > 0
		}
		if ready {
			return p
		}
		if time.Now().After(deadline) {
			b.Fatal("remotes not ready")
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
}
