package remotes

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/remotes/budget"
	"github.com/venn-gateway/venn/remotes/score"
)

// balanceCall asks for a different account each time: identical reads in
// flight would share one call.
func balanceCall(t *testing.T, p *Pool, i int) error {
	t.Helper()
	_, err := call(t, p, "eth_getBalance", fmt.Sprintf(`["0x%040x","latest"]`, i+1))
	return err
}

func TestWeightSplitsTierShare(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	b := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	// Scores do not move within the test: both stay in the preferred set,
	// as they start, so the weights alone split the calls.
	cfg := PoolConfig{Scoring: score.Config{Interval: time.Hour}}
	p := testPool(t, cfg, []*fakenode.Node{a, b}, func(i int, c *Config) {
		if i == 0 {
			c.Weight = ptr(3.0)
		}
	})
	const n = 400
	for i := range n {
		if err := balanceCall(t, p, i); err != nil {
			t.Fatal(err)
		}
	}
	// 3:1 is 300 of 400; seven standard deviations (8.7) either side.
	if got := a.Calls("eth_getBalance"); got < 240 || got > 360 {
		t.Fatalf("weight 3 remote got %d of %d calls (b %d), want about 300", got, n, b.Calls("eth_getBalance"))
	}
}

func TestBudgetExhaustedMovesTraffic(t *testing.T) {
	cheap := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	other := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	m := NewMetrics(nil)
	cfg := PoolConfig{Scoring: score.Config{Interval: time.Hour}}
	rs := testConfigs([]string{cheap.URL(), other.URL()}, func(i int, c *Config) {
		if i == 0 {
			// Only eth_getBalance is priced, so head polls do not spend
			// the budget while the test runs.
			c.Weight = ptr(100.0)
			c.Budget = budget.Config{Units: 60, Per: budget.PeriodDay, Cost: map[string]uint64{"default": 0, "eth_getBalance": 2}}
		}
	})
	p := startPool(t, cfg, rs, m)
	for i := range 100 {
		if err := balanceCall(t, p, i); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := cheap.Calls("eth_getBalance"), int64(30); got != want {
		t.Fatalf("budgeted remote got %d calls, want %d (60 units at 2 a call)", got, want)
	}
	if got := other.Calls("eth_getBalance"); got != 70 {
		t.Fatalf("other remote got %d calls, want 70", got)
	}
	p.flushBudgets(context.Background(), time.Now())
	if got := testutil.ToFloat64(m.bm.Used("test", "n0")); got != 1 {
		t.Fatalf("venn_remote_budget_used_ratio = %v, want 1", got)
	}
	if st := p.Status(); st[0].BudgetUsed == nil || *st[0].BudgetUsed != 1 || *st[0].Weight != 100 || st[1].BudgetUsed != nil {
		t.Fatalf("status: %+v", st)
	}
	// Past its budget, the remote still answers when nothing else can.
	other.SetFailStatus(503)
	if err := balanceCall(t, p, 1000); err != nil {
		t.Fatalf("no answer with only the spent remote left: %v", err)
	}
	if got := cheap.Calls("eth_getBalance"); got != 31 {
		t.Fatalf("spent remote got %d calls, want 31: it is the last one that can answer", got)
	}
}

// The newHeads subscription venn keeps on a remote is billed: its
// eth_subscribe, and each notification received.
func TestBudgetCountsHeadNotifications(t *testing.T) {
	n := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	const subscribe, notification = 10, 1000
	rs := testConfigs([]string{n.URL()}, func(_ int, c *Config) {
		c.WSURL = n.WSURL()
		// Nothing else costs, so what is used is the subscription's.
		c.Budget = budget.Config{Units: 1 << 40, Per: budget.PeriodMonth,
			Cost: map[string]uint64{"default": 0, "eth_subscribe": subscribe, "eth_subscription": notification}}
	})
	p := startPool(t, PoolConfig{}, rs, nil)
	r := p.members()[0]
	waitFor(t, "the heads subscription", func() bool { return n.Calls("eth_subscribe") > 0 })
	n.Mine(3)
	waitFor(t, "three notifications billed", func() bool {
		used := int64(r.bud.Used()*float64(int64(1)<<40)) - subscribe*n.Calls("eth_subscribe")
		return used >= 3*notification && used%notification == 0
	})
}

// A remote's weight and budget are checked with the rest of its section.
func TestRemoteValidatesWeightAndBudget(t *testing.T) {
	c := Config{Name: "a", URL: "http://h", Weight: ptr(0.0), Budget: budget.Config{Calls: 10}}
	err := c.WithDefaults(0).Validate()
	for _, want := range []string{"weight: must be above 0", "budget.per: required"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q", err, want)
		}
	}
}
