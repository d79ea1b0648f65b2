package router

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
)

// benchRemotes answers every call with one result and says its head.
type benchRemotes struct{ head uint64 }

func (r benchRemotes) HealthyHead() uint64 { return r.head }

func (benchRemotes) ServeRPC(context.Context, *jrpc.Request) (json.RawMessage, error) {
	return json.RawMessage(`"0x1"`), nil
}

func benchHash(n uint64) string { return fmt.Sprintf("0x%064x", n+0xb10c) }

// benchRouter is a router over a window of blocks 1..8 and remotes at
// the same head.
func benchRouter(b *testing.B) *Router {
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
	return New(Config{Chain: "bench", ChainID: 1, MaxLag: 4}, w, benchRemotes{head: 8}, nil)
}

func benchServe(b *testing.B, method, params string) {
	rt := benchRouter(b)
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

// A pass-through call: pinned to the head's number, then forwarded.
func BenchmarkRouterPassThrough(b *testing.B) {
	benchServe(b, "eth_getBalance", `["0x0000000000000000000000000000000000000001","latest"]`)
}
