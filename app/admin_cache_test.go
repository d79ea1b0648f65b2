package app

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
)

// TestAdminChainCache: a chain's admin state carries its cache's: the
// tiers on (memory alone without redis.url), and the hit ratio.
func TestAdminChainCache(t *testing.T) {
	node := fakenode.Start(t, fakenode.Options{})
	a := startAdminApp(t, adminConfig(t, node, ""))
	code, body := testkit.AdminDo(t, http.MethodGet, a.admin+"/admin/chains/test", adminToken, "")
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, body)
	}
	var v struct {
		Cache *struct {
			Tiers []struct {
				Name    string `json:"name"`
				Entries *int64 `json:"entries"`
			} `json:"tiers"`
			HitRatio *float64 `json:"hit_ratio"`
		} `json:"cache"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if v.Cache == nil || len(v.Cache.Tiers) != 1 || v.Cache.Tiers[0].Name != "memory" ||
		v.Cache.Tiers[0].Entries == nil || v.Cache.HitRatio == nil {
		t.Fatalf("cache state %s, want the memory tier and a hit ratio", body)
	}
}
