package router

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/simnode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes"
)

// benchAccounts numbers the accounts the proof benchmark asks for: each
// call a new one, so that each is a miss.
var benchAccounts atomic.Uint64

// BenchmarkProofCheckedMiss: what cache.verify: proofs costs a miss. Each
// iteration asks two routers over one pool, one with the cache unchecked
// and one proof-checked, for eth_getBalance at a settled block of the
// simulated backend, each call for an account never asked before (so
// every call misses); their times are reported as medians and the ratio
// of the medians. local: the pool is on the node's own HTTP endpoint (the
// node in the same process, so the figure is mostly CPU); remote-5ms:
// behind a fake node that forwards every call after 5 ms, as a provider
// some way off.
func BenchmarkProofCheckedMiss(b *testing.B) {
	sim := simnode.Start(b)
	sim.Deploy(b, []byte{0x60, 0x00}) // a block with state beyond genesis
	head := sim.Head(b).Number.Uint64()
	proxy := fakenode.Start(b, fakenode.Options{Name: "proxy", ChainID: simnode.ChainID})
	proxy.SetHook(func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		res, err := rawCall(context.Background(), sim.HTTPURL(), method, string(params))
		if err != nil {
			return nil, &jrpc.Error{Code: -32000, Message: err.Error()}, true
		}
		return res, nil, true
	})
	proxy.SetLatency(5 * time.Millisecond)
	for _, tt := range []struct{ name, url string }{{"local", sim.HTTPURL()}, {"remote-5ms", proxy.URL()}} {
		b.Run(tt.name, func(b *testing.B) {
			pool, err := remotes.NewPool(remotes.PoolConfig{Chain: "dev", ChainID: simnode.ChainID,
				BlockTime: 100 * time.Millisecond, CallDeadline: 10 * time.Second},
				[]remotes.Config{{Name: "node", URL: tt.url, Timeout: 5 * time.Second}}, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := pool.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = pool.Stop(context.Background()) }()
			testkit.WaitFor(b, 10*time.Second, "the pool at the node's head", func() bool { return pool.Heads().HealthyHead() >= head })
			at := evm.Quantity(head)
			var asks [2]func() time.Duration
			for i, verify := range []string{cache.VerifyNone, cache.VerifyProofs} {
				c := cache.New(cache.Config{Verify: verify}.WithDefaults(time.Second, false), cache.Options{Chain: "dev"})
				defer c.Close()
				rt := New(Config{Chain: "dev", ChainID: simnode.ChainID, Cache: c,
					Settled: func() (uint64, bool) { return head, true }}, nil, upstreamOf(pool), nil)
				asks[i] = func() time.Duration {
					params := fmt.Sprintf(`["0x%040x","%s"]`, 0xacc0000+benchAccounts.Add(1), at)
					n := &jrpc.Note{}
					start := time.Now()
					_, err := rt.ServeRPC(jrpc.WithNote(context.Background(), n), &jrpc.Request{Method: "eth_getBalance", Params: json.RawMessage(params)})
					d := time.Since(start)
					if err != nil || n.Cache != "miss" {
						b.Fatalf("%s: %v (%s)", params, err, n.Cache)
					}
					return d
				}
				asks[i]() // the block's hash and root
			}
			var unchecked, checked []time.Duration
			b.ResetTimer()
			for i := range b.N {
				// Alternating which goes first: neither always finds the
				// node warm from the other.
				first, second := i%2, 1-i%2
				d1, d2 := asks[first](), asks[second]()
				if first == 1 {
					d1, d2 = d2, d1
				}
				unchecked, checked = append(unchecked, d1), append(checked, d2)
			}
			b.StopTimer()
			mu, mc := median(unchecked), median(checked)
			b.ReportMetric(float64(mu.Microseconds()), "unchecked-µs")
			b.ReportMetric(float64(mc.Microseconds()), "checked-µs")
			b.ReportMetric(float64(mc)/float64(mu), "ratio")
		})
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
