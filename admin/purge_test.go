package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
)

// settledView: every block is settled, with a made-up hash.
type settledView struct{}

func (settledView) Settled() (uint64, bool)               { return 1 << 40, true }
func (settledView) CanonicalHash(uint64) (string, bool)   { return "", false }
func (settledView) CanonicalNumber(string) (uint64, bool) { return 0, false }
func (settledView) SettledHash(_ context.Context, n uint64) (string, bool) {
	return "0x" + evm.Quantity(n)[2:] + "00000000000000000000000000000000000000000000000000000000000000"[:64-len(evm.Quantity(n)[2:])], true
}

// TestCachePurgeRequests: POST /admin/chains/{chain}/cache/purge drops the
// entries its body selects (by method, remote, block range) and says how
// many; a range that ends below its start, an unknown chain and a chain
// without a cache are refused.
func TestCachePurgeRequests(t *testing.T) {
	c := cache.New(cache.Config{}.WithDefaults(time.Second, false), cache.Options{Chain: "purge"})
	t.Cleanup(c.Close)
	for _, block := range []string{"0x10", "0x20"} {
		get := evm.ParseCall("eth_getBalance", json.RawMessage(`["0x00000000000000000000000000000000000000aa","`+block+`"]`))
		_, _, _ = c.Serve(context.Background(), &get, settledView{}, false, func(context.Context, string) (json.RawMessage, error) {
			return json.RawMessage(`"0x1"`), nil
		})
	}
	nodes := []*fakenode.Node{fakenode.Start(t, fakenode.Options{Head: 100})}
	r := startReplica(t, "purge", "solo", nodes, nil, &clock{now: time.Now()}, func(o *Options) {
		o.Chains[0].PurgeCache = c.Purge
		o.Chains = append(o.Chains, Chain{Name: "nocache", Path: "/nocache", Pool: o.Chains[0].Pool, Heads: o.Chains[0].Heads})
	})
	base := r.srv.URL + "/admin/chains/"
	tests := []struct {
		path, body string
		want       int
		purged     int64
	}{
		{"purge/cache/purge", `{"method":"eth_call"}`, http.StatusOK, 0},
		{"purge/cache/purge", `{"from":16,"to":16}`, http.StatusOK, 1},
		{"purge/cache/purge", `{"from":9,"to":8}`, http.StatusBadRequest, 0},
		{"purge/cache/purge", `{"nope":1}`, http.StatusBadRequest, 0},
		{"other/cache/purge", `{}`, http.StatusNotFound, 0},
		{"nocache/cache/purge", `{}`, http.StatusConflict, 0},
		{"purge/cache/purge", `{"method":"eth_getBalance"}`, http.StatusOK, 1},
	}
	for _, tt := range tests {
		code, body := testkit.AdminDo(t, "POST", base+tt.path, testToken, tt.body)
		if code != tt.want {
			t.Fatalf("POST %s %s = %d %s, want %d", tt.path, tt.body, code, body, tt.want)
		}
		var got struct{ Purged int64 }
		if code == http.StatusOK && (json.Unmarshal([]byte(body), &got) != nil || got.Purged != tt.purged) {
			t.Fatalf("POST %s %s = %s, want %d purged", tt.path, tt.body, body, tt.purged)
		}
	}
}
