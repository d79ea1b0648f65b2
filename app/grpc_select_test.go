package app

import (
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/emerald/pb"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
)

// A height selector sends a NativeCall item only to remotes whose head
// reaches it, and each reply names the remote that answered (never its
// URL); above every head the item gets a clear -32050 naming the floor and
// the highest head.
func TestGRPCHeightSelector(t *testing.T) {
	low := fakenode.Start(t, fakenode.Options{Head: 100})
	high := fakenode.Start(t, fakenode.Options{Head: 103})
	g := startGRPCApp(t, mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
grpc_listen: 127.0.0.1:0
shutdown_timeout: 5s
chains:
  - name: test
    chain_id: 1337
    grpc_id: 100
    remotes:
      - {name: low, url: "`+low.URL()+`/SECRETKEY1"}
      - {name: high, url: "`+high.URL()+`/SECRETKEY2"}
`))
	c := dial(t, g, nil)
	balance := func(sel *pb.Selector) *pb.NativeCallRequest {
		return &pb.NativeCallRequest{Chain: pb.ChainRef_CHAIN_ETHEREUM__MAINNET, Selector: sel, Items: []*pb.NativeCallItem{{
			Id: 1, Method: "eth_getBalance",
			Data: &pb.NativeCallItem_Payload{Payload: []byte(`["0x0000000000000000000000000000000000000001","latest"]`)}}}}
	}
	height := func(n uint64) *pb.Selector {
		return &pb.Selector{SelectorType: &pb.Selector_HeightSelector{HeightSelector: &pb.HeightSelector{
			HeightOrNumber: &pb.HeightSelector_Number{Number: n}}}}
	}
	one := func(req *pb.NativeCallRequest) *pb.NativeCallReplyItem {
		t.Helper()
		got, err := nativeCall(withKey(t, ""), c, req)
		if err != nil || len(got) != 1 {
			t.Fatalf("NativeCall: %d replies, %v", len(got), err)
		}
		if strings.Contains(got[0].UpstreamId, "127.0.0.1") || strings.Contains(got[0].UpstreamId, "SECRETKEY") {
			t.Fatalf("upstream_id shows a URL: %q", got[0].UpstreamId)
		}
		return got[0]
	}

	// Both remotes in rotation, each named when it answers: the low one
	// (3 blocks behind, within max_lag) takes calls without a selector.
	seen := map[string]bool{}
	testkit.WaitFor(t, 15*time.Second, "both remotes answering calls without a selector", func() bool {
		r := one(balance(nil))
		if r.Succeed {
			seen[r.UpstreamId] = true
		}
		return seen["low"] && seen["high"]
	})
	if len(seen) != 2 {
		t.Fatalf("upstream ids %v, want low and high", seen)
	}

	t.Run("a floor above one remote's head", func(t *testing.T) {
		lowCalls := low.Calls("eth_getBalance")
		for range 20 {
			if r := one(balance(height(103))); !r.Succeed || r.UpstreamId != "high" {
				t.Fatalf("height 103: succeed=%v %q from %q, want high's answer", r.Succeed, r.ErrorMessage, r.UpstreamId)
			}
		}
		if n := low.Calls("eth_getBalance") - lowCalls; n != 0 {
			t.Fatalf("the remote at 100 got %d calls under height 103", n)
		}
	})
	t.Run("an item's own selector, and the latest tag", func(t *testing.T) {
		req := balance(nil)
		req.Items[0].Selectors = []*pb.Selector{{SelectorType: &pb.Selector_HeightSelector{HeightSelector: &pb.HeightSelector{
			HeightOrNumber: &pb.HeightSelector_Tag{Tag: pb.BlockTag_LATEST}}}}}
		for range 10 {
			if r := one(req); !r.Succeed || r.UpstreamId != "high" {
				t.Fatalf("latest: succeed=%v %q from %q, want high's answer", r.Succeed, r.ErrorMessage, r.UpstreamId)
			}
		}
	})
	t.Run("a floor above every head", func(t *testing.T) {
		r := one(balance(height(200)))
		if r.Succeed || r.ItemErrorCode != -32050 || !strings.Contains(r.ErrorMessage, "block 200") ||
			!strings.Contains(r.ErrorMessage, "highest head in rotation is 103") || !strings.Contains(r.ErrorData, `"min_height":200`) {
			t.Fatalf("height 200: %+v", r)
		}
	})
	t.Run("venn's own answers", func(t *testing.T) {
		req := balance(height(200))
		req.Items[0].Method, req.Items[0].Data = "eth_chainId", nil
		if r := one(req); !r.Succeed || string(r.Payload) != `"0x539"` || r.UpstreamId != "venn:local" {
			t.Fatalf("eth_chainId: %+v", r)
		}
	})
}
