package cache

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/internal/testkit"
)

// A cache replaced by another of its chain (a reload's new settings)
// leaves the size gauges once closed: two caches reporting the same
// chain and tier would fail the whole scrape.
func TestClosedCacheLeavesSizes(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	old := New(testConfig(), Options{Chain: "dev", Metrics: m})
	next := New(testConfig(), Options{Chain: "dev", Metrics: m})
	defer next.Close()
	old.Close()
	if n, err := testutil.GatherAndCount(reg, "venn_cache_entries"); err != nil || n != 1 {
		t.Errorf("venn_cache_entries: %d series, %v; want 1, no error", n, err)
	}
}

// DropChain deletes a chain's series and no other's; a cache of the chain
// built after counts afresh.
func TestDropChain(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	serve := func(c *Cache) {
		t.Helper()
		up := &upstream{res: `"0x0"`}
		if _, err, _ := c.Serve(context.Background(), call("eth_getBalance", `["`+testAddr+`","0x10"]`),
			newView(100, nil), false, up.fetch); err != nil {
			t.Fatal(err)
		}
	}
	gone := New(testConfig(), Options{Chain: "gone", Metrics: m})
	kept := New(testConfig(), Options{Chain: "kept", Metrics: m})
	defer kept.Close()
	serve(gone)
	serve(kept)
	if testkit.Series(t, reg, map[string]string{"chain": "gone"}) == 0 {
		t.Fatal("no series of the chain before")
	}
	gone.Close()
	m.DropChain("gone")
	// A call still on the closed cache, of a method it had not counted.
	up := &upstream{res: `"0x"`}
	if _, err, _ := gone.Serve(context.Background(), call("eth_getCode", `["`+testAddr+`","0x10"]`),
		newView(100, nil), false, up.fetch); err != nil {
		t.Fatal(err)
	}
	if n := testkit.Series(t, reg, map[string]string{"chain": "gone"}); n != 0 {
		t.Errorf("%d series of the dropped chain left", n)
	}
	if testkit.Series(t, reg, map[string]string{"chain": "kept"}) == 0 {
		t.Error("the other chain's series went too")
	}

	again := New(testConfig(), Options{Chain: "gone", Metrics: m})
	defer again.Close()
	serve(again)
	if got := testutil.ToFloat64(m.requests.WithLabelValues("gone", "eth_getBalance", "memory", "miss")); got != 1 {
		t.Errorf("misses of the chain added again: %v, want 1 (counted afresh)", got)
	}
}
