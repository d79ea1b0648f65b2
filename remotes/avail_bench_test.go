package remotes

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkHistoricalState is the figure of block-availability routing:
// upstream calls per client call of old-state reads (eth_getBalance at a
// block more than the full nodes' 128-block window below the head, a new
// holder each) through a pool of one archive and two pruned full nodes.
//
//   - cold,ascending: nothing learnt and no probe, blocks in rising order
//     as an indexer replays history: an answer teaches only that block,
//     so each call pays as if venn knew nothing (what venn did before).
//   - cold,random: nothing learnt and no probe, random old blocks: the
//     answers teach as they come.
//   - probed,random: after the probe the first old call starts.
//
// wasted/call counts the calls sent to a pruned node; probe_calls the
// probe's own calls (all remotes, all kinds), paid once per probe_every.
//
//	go test -run '^$' -bench HistoricalState -benchtime 600x -count 3 ./remotes/
func BenchmarkHistoricalState(b *testing.B) {
	const oldest = availHead - 2*availWindow // every block asked is pruned at the full nodes
	for _, bc := range []struct {
		name      string
		probe     bool
		ascending bool
	}{
		{name: "cold,ascending", ascending: true},
		{name: "cold,random"},
		{name: "probed,random", probe: true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			nodes := availNodes(b)
			urls := []string{nodes[0].URL(), nodes[1].URL(), nodes[2].URL()}
			cfg := PoolConfig{BlockTime: time.Hour, Availability: noProbe()}
			if bc.probe {
				cfg.Availability = probeOn()
			}
			p := benchPool(b, cfg, testConfigs(urls, nil))
			ctx := context.Background()
			probeCalls := int64(0)
			if bc.probe {
				if _, err := p.Call(ctx, "eth_getBalance", json.RawMessage(balanceAt(1))); err != nil {
					b.Fatal(err)
				}
				deadline := time.Now().Add(10 * time.Second)
				for !probed(p) {
					if time.Now().After(deadline) {
						b.Fatal("remotes not probed")
					}
					time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
				}
				for _, n := range nodes {
					probeCalls += n.TotalCalls()
				}
			}
			for _, n := range nodes {
				n.ResetCalls()
			}
			rng := rand.New(rand.NewPCG(1, 2))
			i := 0
			for b.Loop() {
				block := uint64(1 + i%oldest)
				if !bc.ascending {
					block = 1 + rng.Uint64N(oldest)
				}
				params := json.RawMessage(fmt.Sprintf(`["0x%040x","0x%x"]`, i+1, block))
				if _, err := p.Call(ctx, "eth_getBalance", params); err != nil {
					b.Fatal(err)
				}
				i++
			}
			var total, wasted int64
			for k, n := range nodes {
				c := n.Calls("eth_getBalance")
				total += c
				if k > 0 {
					wasted += c
				}
			}
			b.ReportMetric(float64(total)/float64(b.N), "upstream/call")
			b.ReportMetric(float64(wasted)/float64(b.N), "wasted/call")
			if bc.probe {
				b.ReportMetric(float64(probeCalls), "probe_calls")
			}
		})
	}
}

// probed reports whether every remote's state window came from the probe.
func probed(p *Pool) bool {
	for _, s := range p.Status() {
		for _, a := range s.Availability {
			if a.Kind == KindState.String() && a.Source != "probe" {
				return false
			}
		}
	}
	return true
}
