package remotes

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
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
	cfg := PoolConfig{Scoring: ScoringConfig{Interval: time.Hour}}
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
	cfg := PoolConfig{Scoring: ScoringConfig{Interval: time.Hour}}
	rs := testConfigs([]string{cheap.URL(), other.URL()}, func(i int, c *Config) {
		if i == 0 {
			// Only eth_getBalance is priced, so head polls do not spend
			// the budget while the test runs.
			c.Weight = ptr(100.0)
			c.Budget = Budget{Units: 60, Per: PeriodDay, Cost: map[string]uint64{"default": 0, "eth_getBalance": 2}}
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
	if got := testutil.ToFloat64(m.bm.used.WithLabelValues("test", "n0")); got != 1 {
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

// budgetPool is a pool that is never started, over a remote with budget b
// at an address nothing listens on: its counts are added by hand.
func budgetPool(t *testing.T, chain string, b Budget, store BudgetStore, log *slog.Logger, m *Metrics) *Pool {
	t.Helper()
	p, err := NewPool(PoolConfig{Chain: chain, ChainID: testChainID, Budgets: store},
		[]Config{{Name: "paid", URL: "http://" + testkit.ClosedAddr(t), Budget: b}}, log, m)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBudgetWithoutStoreCountsLocally(t *testing.T) {
	p := budgetPool(t, "local", Budget{Units: 1000, Per: PeriodHour,
		Cost: map[string]uint64{"default": 1, "eth_getLogs": 75, "debug_trace*": 300, "debug_traceBlockByHash": 500}}, nil, nil, nil)
	r := p.members()[0]
	for _, m := range []string{"eth_getLogs", "debug_traceTransaction", "debug_traceBlockByHash", "eth_chainId"} {
		r.bill(m)
	}
	now := time.Now()
	p.flushBudgets(context.Background(), now)
	p.flushBudgets(context.Background(), now)
	if got := r.budgetUsed(); got != 0.876 {
		t.Fatalf("used %v, want (75+300+500+1)/1000", got)
	}
}

// A notification costs only in a units budget, at exactly its cost
// table's eth_subscription entry: never the default, never a call.
func TestBudgetNotificationPrice(t *testing.T) {
	tests := []struct {
		name string
		give Budget
		want float64 // used after one notification
	}{
		{"calls", Budget{Calls: 100, Per: PeriodDay}, 0},
		{"units priced", Budget{Units: 100, Per: PeriodDay, Cost: map[string]uint64{"default": 5, "eth_subscription": 40}}, 0.4},
		{"units unpriced", Budget{Units: 100, Per: PeriodDay, Cost: map[string]uint64{"default": 5, "eth_*": 7}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := budgetPool(t, "notify", tt.give, nil, nil, nil).members()[0]
			r.bill(notificationMethod)
			if got := r.budgetUsed(); got != tt.want {
				t.Fatalf("one notification used %v, want %v", got, tt.want)
			}
		})
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
		c.Budget = Budget{Units: 1 << 40, Per: PeriodMonth,
			Cost: map[string]uint64{"default": 0, "eth_subscribe": subscribe, "eth_subscription": notification}}
	})
	p := startPool(t, PoolConfig{}, rs, nil)
	r := p.members()[0]
	waitFor(t, "the heads subscription", func() bool { return n.Calls("eth_subscribe") > 0 })
	n.Mine(3)
	waitFor(t, "three notifications billed", func() bool {
		used := int64(r.budgetUsed()*float64(int64(1)<<40)) - subscribe*n.Calls("eth_subscribe")
		return used >= 3*notification && used%notification == 0
	})
}

func TestBudgetConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		give Config
		want string // "" valid
	}{
		{"calls", Config{Budget: Budget{Calls: 10, Per: PeriodMonth}}, ""},
		{"units", Config{Budget: Budget{Units: 10, Per: PeriodDay, Cost: map[string]uint64{"eth_getLogs": 75, "debug_trace*": 300}}}, ""},
		{"weight", Config{Weight: ptr(0.5)}, ""},
		{"no period", Config{Budget: Budget{Calls: 10}}, "budget.per: required"},
		{"both", Config{Budget: Budget{Calls: 10, Units: 10, Per: PeriodDay}}, "budget: set calls or units, not both"},
		{"cost with calls", Config{Budget: Budget{Calls: 10, Per: PeriodDay, Cost: map[string]uint64{"eth_call": 2}}}, "budget.cost: prices compute units"},
		{"period alone", Config{Budget: Budget{Per: PeriodDay}}, "budget: needs calls or units"},
		{"bad pattern", Config{Budget: Budget{Units: 10, Per: PeriodDay, Cost: map[string]uint64{"debug_*trace": 2}}}, `budget.cost: "debug_*trace" is not a method`},
		{"zero weight", Config{Weight: ptr(0.0)}, "weight: must be above 0"},
		{"huge weight", Config{Weight: ptr(1e6)}, "weight: must be above 0 and at most 1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.give
			c.Name, c.URL = "a", "http://h"
			err := c.WithDefaults(0).Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestPeriodBounds(t *testing.T) {
	at := time.Date(2026, 12, 31, 23, 59, 0, 0, time.UTC)
	tests := []struct {
		give     Period
		wantEnd  time.Time
		wantName string
	}{
		{PeriodHour, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), "h2026123123"},
		{PeriodDay, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), "d20261231"},
		{PeriodMonth, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), "m202612"},
	}
	for _, tt := range tests {
		_, end, name := tt.give.bounds(at)
		if !end.Equal(tt.wantEnd) || name != tt.wantName {
			t.Errorf("%v: end %v name %s, want %v %s", tt.give, end, name, tt.wantEnd, tt.wantName)
		}
	}
}
