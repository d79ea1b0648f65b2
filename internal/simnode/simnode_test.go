package simnode

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/rpc"
)

// TestServesHTTPAndWS: the node answers over HTTP on 127.0.0.1, and a
// WebSocket client sees a Fork as geth's subscriptions show it: the
// fork point again, then the new branch.
func TestServesHTTPAndWS(t *testing.T) {
	n := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	hc, err := rpc.DialContext(ctx, n.HTTPURL())
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	var id string
	if err := hc.CallContext(ctx, &id, "eth_chainId"); err != nil || id != "0x539" {
		t.Fatalf("eth_chainId over HTTP = %q, %v; want 0x539", id, err)
	}

	wc, err := rpc.DialContext(ctx, n.WSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	heads := make(chan json.RawMessage, 16)
	sub, err := wc.EthSubscribe(ctx, heads, "newHeads")
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	base := n.Head(t).Hash()
	first := n.Commit()
	n.Fork(t, base)
	second := n.Commit()
	if first == second {
		t.Fatal("the new branch's block is the old one")
	}
	want := []common.Hash{first, base, second}
	for i, w := range want {
		select {
		case raw := <-heads:
			var h struct{ Hash common.Hash }
			if err := json.Unmarshal(raw, &h); err != nil {
				t.Fatal(err)
			}
			if h.Hash != w {
				t.Fatalf("head %d = %s, want %s", i, h.Hash, w)
			}
		case err := <-sub.Err():
			t.Fatal(err)
		case <-ctx.Done():
			t.Fatalf("head %d: %v", i, ctx.Err())
		}
	}
}
