package router

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
)

// benchRemotes answers every call with one result and says its head.
type benchRemotes struct {
	quietTip
	head uint64
}

func (r benchRemotes) HealthyHead() uint64 { return r.head }

func (benchRemotes) ServeCall(context.Context, evm.Call) (json.RawMessage, error) {
	return json.RawMessage(`"0x1"`), nil
}

// judgedRemotes are benchRemotes that also say the recent canonical
// hashes, when they were last heard from and the block time: the head
// window is judged by hash and time on every call, as it is over a pool.
type judgedRemotes struct {
	benchRemotes
	hashes []string // by number, 0..head
}

func newJudgedRemotes(head uint64) judgedRemotes {
	r := judgedRemotes{benchRemotes: benchRemotes{head: head}}
	for n := range head + 1 {
		r.hashes = append(r.hashes, benchHash(n))
	}
	return r
}

func (r judgedRemotes) HashAt(n uint64) (string, bool) {
	if n > r.head {
		return "", false
	}
	return r.hashes[n], true
}
func (judgedRemotes) Reports(uint64, string) bool { return false }

func (judgedRemotes) HeardWithin(time.Time, time.Duration) bool { return true }
func (judgedRemotes) BlockTime() time.Duration                  { return time.Second }

func benchHash(n uint64) string { return fmt.Sprintf("0x%064x", n+0xb10c) }

// benchRouter is a router over a window of blocks 1..8 and remotes at
// the same head.
func benchRouter(b *testing.B) *Router { return benchRouterOver(b, benchRemotes{head: 8}) }

// benchRouterOver is benchRouter in front of remotes.
func benchRouterOver(b *testing.B, remotes Upstream) *Router {
	b.Helper()
	var blocks []*evm.Block
	for n := uint64(1); n <= 8; n++ {
		raw := fmt.Sprintf(`{"number":"0x%x","hash":%q,"parentHash":%q,"timestamp":"0x1","transactions":[],"uncles":[]}`,
			n, benchHash(n), benchHash(n-1))
		blk, err := evm.ParseBlock([]byte(raw), []byte(`[]`))
		if err != nil {
			b.Fatal(err)
		}
		blocks = append(blocks, blk)
	}
	w := headstore.NewWindow(8)
	if err := w.Reset(&headstore.Snapshot{Gen: "g", Seq: 1, Blocks: blocks}); err != nil {
		b.Fatal(err)
	}
	w.SetLive(true)
	return New(Config{Chain: "bench", ChainID: 1, MaxLag: 4}, w, remotes, nil)
}

func benchServe(b *testing.B, method, params string) {
	benchServeOn(b, benchRouter(b), method, params)
}

func benchServeOn(b *testing.B, rt *Router, method, params string) {
	req := &jrpc.Request{Method: method, Params: json.RawMessage(params)}
	if _, err := rt.ServeRPC(context.Background(), req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := rt.ServeRPC(ctx, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// A head-served call: the window answers.
func BenchmarkRouterHead(b *testing.B) {
	benchServe(b, "eth_getBlockByNumber", `["latest",false]`)
}

// A head-served call with the window judged by hash and time (the block's
// timestamp is old: the remotes' last report is read too), against
// BenchmarkRouterHead, where the remotes say neither.
func BenchmarkRouterHeadJudged(b *testing.B) {
	benchServeOn(b, benchRouterOver(b, newJudgedRemotes(8)), "eth_getBlockByNumber", `["latest",false]`)
}

// A pass-through call: pinned to the head's number, then forwarded.
func BenchmarkRouterPassThrough(b *testing.B) {
	benchServe(b, "eth_getBalance", `["0x0000000000000000000000000000000000000001","latest"]`)
}

// A pass-through call the cache cannot help: eth_getBalance of a fresh
// address at latest, with the chain's cache off and on (every call a
// miss, stored). The difference is what the cache costs a miss in the
// router, before the HTTP hops every call pays.
func BenchmarkRouterMiss(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			rt := benchRouter(b)
			if on {
				c := cache.New(cache.Config{}.WithDefaults(time.Second, false), cache.Options{Chain: "bench"})
				defer c.Close()
				rt.SetCache(c)
			}
			var next atomic.Uint64
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU(b)
			defer func() { b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op") }()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				params := []byte(`["0x0000000000000000000000000000000000000000","latest"]`)
				for pb.Next() {
					hex.Encode(params[2+2+24:2+2+40], binary.BigEndian.AppendUint64(nil, next.Add(1)))
					req := &jrpc.Request{Method: "eth_getBalance", Params: params}
					if _, err := rt.ServeRPC(ctx, req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// processCPU is the CPU time the process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
