package remotes

import (
	"context"
	"math/bits"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/remotes/verdict"
)

// A removed remote's series are deleted once it has left; a replaced
// one's stay with the remote of its name; a pool stopped for good drops its own.
func TestRetiredSeriesDeleted(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	b := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	reg := prometheus.NewRegistry()
	cfg := PoolConfig{Chain: "test", ChainID: testChainID, BlockTime: 50 * time.Millisecond, CallDeadline: 5 * time.Second}
	p := startPool(t, cfg, testConfigs([]string{a.URL(), b.URL()}, nil), NewMetrics(reg))
	n1 := map[string]string{"chain": "test", "remote": "n1"}
	waitFor(t, "both remotes' series", func() bool {
		return testkit.Series(t, reg, map[string]string{"remote": "n0"}) > 5 && testkit.Series(t, reg, n1) > 5
	})

	var gone *Remote
	for _, r := range p.members() {
		if r.Name() == "n1" {
			gone = r
		}
	}
	replaced := testConfigs([]string{a.URL()}, func(_ int, c *Config) { c.MaxInFlight = 7 })
	if _, err := p.Reconfigure(cfg, replaced); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the removed remote's series deleted", func() bool { return testkit.Series(t, reg, n1) == 0 })
	// A call still in flight on it fails after: it writes none again.
	gone.m.failed(verdict.Verdict{Class: verdict.ClassRetry, Reason: verdict.ReasonTimeout}, -32000, 503)
	if n := testkit.Series(t, reg, n1); n != 0 {
		t.Errorf("a late failure wrote %d series of the removed remote again", n)
	}
	waitFor(t, "the replaced remote gone", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return bits.OnesCount64(p.slots) == 1 // the new n0's: the old one's slot is free
	})
	if n := testkit.Series(t, reg, map[string]string{"remote": "n0"}); n < 5 {
		t.Errorf("%d series of n0 after its old self left: the new n0's went with it", n)
	}

	if err := p.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	p.DropSeries()
	if n := testkit.Series(t, reg, map[string]string{"chain": "test"}); n != 0 {
		t.Errorf("%d series of the stopped chain left", n)
	}
}
