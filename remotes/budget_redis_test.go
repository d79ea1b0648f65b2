package remotes_test

// The budget counters shared in Redis (redisstore.Budgets) as the pool
// flushes them: here, not in redisstore, because the flushes and the
// counts are the pool's (export_test.go opens them).

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/keyspace"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/remotes/budget"
	"github.com/venn-gateway/venn/remotes/redisstore"
)

// redisBudgetPool is a pool that is never started, over a remote with
// budget b at an address nothing listens on, its counts in store.
func redisBudgetPool(t *testing.T, chain string, b budget.Config, store budget.Store, log *slog.Logger, m *remotes.Metrics) *remotes.Pool {
	t.Helper()
	p, err := remotes.NewPool(remotes.PoolConfig{Chain: chain, ChainID: 1337, Budgets: store},
		[]remotes.Config{{Name: "paid", URL: "http://" + testkit.ClosedAddr(t), Budget: b}}, log, m)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBudgetCountedAcrossReplicas(t *testing.T) {
	rdb, token := testkit.Redis(t, func(tok string) string { return "venn:{budget" + tok + "}:*" })
	chain := "budget" + token
	store := redisstore.NewBudgets(rdb)
	var logs testkit.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	m := remotes.NewMetrics(nil)
	b := budget.Config{Calls: 100, Per: budget.PeriodMonth}
	one := redisBudgetPool(t, chain, b, store, log, m)
	two := redisBudgetPool(t, chain, b, store, log, remotes.NewMetrics(nil))
	r1, r2 := one.Members()[0], two.Members()[0]
	now := time.Now()

	for range 50 {
		r1.Meter().Bill("eth_call")
	}
	if got := r1.Meter().Used(); got != 0.5 {
		t.Fatalf("before a flush replica one sees %v used, want its own 0.5", got)
	}
	one.FlushBudgets(context.Background(), now)
	two.FlushBudgets(context.Background(), now)
	if got := r2.Meter().Used(); got != 0.5 {
		t.Fatalf("replica two sees %v used after a flush, want 0.5 from replica one", got)
	}
	for range 35 {
		r2.Meter().Bill("eth_call")
	}
	two.FlushBudgets(context.Background(), now)
	one.FlushBudgets(context.Background(), now)
	if got := r1.Meter().Used(); got != 0.85 {
		t.Fatalf("replica one sees %v used, want 0.85", got)
	}
	if got := testutil.ToFloat64(m.BudgetUsedGauge(chain, "paid")); got != 0.85 {
		t.Fatalf("venn_remote_budget_used_ratio = %v, want 0.85", got)
	}
	if r1.Meter().Over() || r1.Meter().Share(1) >= 1 {
		t.Fatalf("at 85%%: over budget %v, share %v; want in budget, share below its weight", r1.Meter().Over(), r1.Meter().Share(1))
	}
	for range 20 {
		r1.Meter().Bill("eth_call")
	}
	for range 3 { // flushes of a spent budget log it once
		one.FlushBudgets(context.Background(), now)
		two.FlushBudgets(context.Background(), now)
	}
	if !r1.Meter().Over() || !r2.Meter().Over() {
		t.Fatalf("105 of 100 calls: replicas see %v and %v used", r1.Meter().Used(), r2.Meter().Used())
	}
	if n := logs.Count("remote budget nearly used"); n != 2 {
		t.Errorf("80%% logged %d times, want once per replica:\n%s", n, logs.String())
	}
	if n := logs.Count("remote budget used:"); n != 2 {
		t.Errorf("100%% logged %d times, want once per replica:\n%s", n, logs.String())
	}
	// The next month starts from nothing.
	next := now.AddDate(0, 1, 0)
	one.FlushBudgets(context.Background(), next)
	if got := r1.Meter().Used(); got != 0 {
		t.Fatalf("a new period starts at %v used, want 0", got)
	}
}

func TestBudgetCountsStayInTheirPeriod(t *testing.T) {
	rdb, token := testkit.Redis(t, func(tok string) string { return "venn:{budget" + tok + "}:*" })
	chain := "budget" + token
	p := redisBudgetPool(t, chain, budget.Config{Calls: 100, Per: budget.PeriodHour}, redisstore.NewBudgets(rdb), nil, nil)
	r := p.Members()[0]
	ctx := context.Background()
	// The current hour's last second, so that the counters' expiry (the
	// period's end and a grace) is still ahead of the real clock Redis keeps.
	_, end, endedPeriod := budget.PeriodHour.Bounds(time.Now())
	at := end.Add(-time.Second)
	_, _, nextPeriod := budget.PeriodHour.Bounds(end)

	for range 5 {
		r.Meter().Bill("eth_call")
	}
	p.FlushBudgets(ctx, at)
	// Billed in the hour's last flush interval, flushed after it ended.
	for range 7 {
		r.Meter().Bill("eth_call")
	}
	// The ended hour's counter cannot take them at first (not a number):
	// they are sent to it again with the next flush.
	ended := keyspace.BudgetKey(chain, "paid", endedPeriod)
	if err := rdb.Set(ctx, ended, "x", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	p.FlushBudgets(ctx, at.Add(budget.FlushInterval))
	if got := r.Meter().Used(); got != 0 {
		t.Fatalf("the new hour starts at %v used, want 0", got)
	}
	if err := rdb.Set(ctx, ended, "5", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	r.Meter().Bill("eth_call")
	p.FlushBudgets(ctx, at.Add(2*budget.FlushInterval))
	for _, tt := range []struct {
		period string
		want   int64
	}{{endedPeriod, 12}, {nextPeriod, 1}} {
		if got, err := rdb.Get(ctx, keyspace.BudgetKey(chain, "paid", tt.period)).Int64(); err != nil || got != tt.want {
			t.Errorf("period %s counted %d (%v), want %d", tt.period, got, err, tt.want)
		}
	}
	if got := r.Meter().Used(); got != 0.01 {
		t.Fatalf("used %v in the new hour, want 0.01", got)
	}
}

func TestBudgetFlushPartlyFailed(t *testing.T) {
	rdb, token := testkit.Redis(t, func(tok string) string { return "venn:{budget" + tok + "}:*" })
	chain := "budget" + token
	b := budget.Config{Calls: 100, Per: budget.PeriodMonth}
	var logs testkit.Buffer
	p, err := remotes.NewPool(remotes.PoolConfig{Chain: chain, ChainID: 1337, Budgets: redisstore.NewBudgets(rdb)},
		[]remotes.Config{
			{Name: "good", URL: "http://" + testkit.ClosedAddr(t), Budget: b},
			{Name: "bad", URL: "http://" + testkit.ClosedAddr(t), Budget: b},
		}, slog.New(slog.NewTextHandler(&logs, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now()
	_, _, period := budget.PeriodMonth.Bounds(now)
	goodKey, badKey := keyspace.BudgetKey(chain, "good", period), keyspace.BudgetKey(chain, "bad", period)
	// bad's counter is a list: its INCRBY fails, good's in the same
	// pipeline succeeds.
	if err := rdb.RPush(ctx, badKey, "x").Err(); err != nil {
		t.Fatal(err)
	}
	good, bad := p.Members()[0], p.Members()[1]
	for range 10 {
		good.Meter().Bill("eth_call")
		bad.Meter().Bill("eth_call")
	}
	p.FlushBudgets(ctx, now)
	if !strings.Contains(logs.String(), "budget counts not flushed") {
		t.Fatalf("a failed flush is not logged:\n%s", logs.String())
	}
	if got := bad.Meter().Used(); got != 0.1 {
		t.Fatalf("the failed remote's own count is %v, want 0.1 kept for the next flush", got)
	}
	if err := rdb.Del(ctx, badKey).Err(); err != nil {
		t.Fatal(err)
	}
	p.FlushBudgets(ctx, now)
	for _, tt := range []struct {
		key  string
		want int64
	}{{goodKey, 10}, {badKey, 10}} {
		if got, err := rdb.Get(ctx, tt.key).Int64(); err != nil || got != tt.want {
			t.Errorf("%s counted %d (%v), want %d: each count added once", tt.key, got, err, tt.want)
		}
	}
	if good.Meter().Used() != 0.1 || bad.Meter().Used() != 0.1 {
		t.Fatalf("used %v and %v, want 0.1 each", good.Meter().Used(), bad.Meter().Used())
	}
}
