package edge

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
)

// sourceHandler answers every call with the same bytes, noting the part
// venn would have answered it from: eth_blockNumber the head window,
// eth_call the remotes, eth_getBalance the cache.
func sourceHandler() jrpc.Handler {
	return jrpc.HandlerFunc(func(ctx context.Context, req *jrpc.Request) (json.RawMessage, error) {
		n := jrpc.NoteOf(ctx)
		switch req.Method {
		case "eth_blockNumber":
			n.Answered("head")
		case "eth_getBalance":
			n.Answered("cache")
		case "eth_fail":
			n.Answered("remotes")
			return nil, &jrpc.Error{Code: 3, Message: "execution reverted"}
		default:
			n.Answered("remotes")
		}
		return json.RawMessage(`"0x1"`), nil
	})
}

func TestPricing(t *testing.T) {
	p := newPricing(CreditsConfig{Preset: "venn", Methods: map[string]int64{"eth_call": 7, "debug_*": 300, "debug_traceCall": 99},
		ServedFrom: map[string]float64{"history": 2}}.withDefaults())
	tests := []struct {
		method, source string
		want           int64
	}{
		{"eth_call", "remotes", 7},           // overridden
		{"eth_getLogs", "remotes", 60},       // the preset's
		{"eth_getLogs", "head", 30},          // the head window's half
		{"eth_getBalance", "cache", 5},       // the cache's half
		{"eth_blockNumber", "head", 3},       // half of 5, rounded up
		{"eth_getLogs", "history", 120},      // served_from
		{"debug_traceBlock", "remotes", 300}, // an overridden prefix
		{"debug_traceCall", "remotes", 99},   // an exact name beats a prefix
		{"eth_somethingNew", "remotes", 10},  // the default
	}
	for _, tt := range tests {
		if got := p.cost(tt.method, tt.source); got != tt.want {
			t.Errorf("cost(%s from %s) = %d, want %d", tt.method, tt.source, got, tt.want)
		}
	}
	if got := newPricing(CreditsConfig{Preset: "alchemy"}).cost("eth_getBlockReceipts", "remotes"); got != 500 {
		t.Errorf("alchemy's eth_getBlockReceipts = %d", got)
	}
	if got := p.label("eth_madeUp" + strconv.Itoa(42)); got != "other" {
		t.Errorf("label of an unknown method = %q", got)
	}
}

// budgetReplica is one replica of a cluster: its own edge and server,
// counting on the shared Budgets given.
func budgetReplica(t *testing.T, c Config, b *Budgets) *testServer {
	t.Helper()
	return newTestServer(t, c, Options{Budgets: b}, sourceHandler())
}

// TestBudgetsAcrossReplicas: two replicas on one Redis keep one count of a
// tenant's credits; once it is spent on one, the other refuses too, with
// -32005, the reset time, HTTP 429 and Retry-After.
func TestBudgetsAcrossReplicas(t *testing.T) {
	rdb, token := testkit.Redis(t, func(token string) string { return "venn:credits:{tenant:t-" + token + "}*" })
	name := "t-" + token
	clock := newFakeClock()
	clock.t = time.Date(2026, 12, 6, 10, 30, 5, 0, time.UTC)
	c := Config{
		Auth:    AuthConfig{Keys: []APIKey{{Name: "svc", Key: aliceSecret, Tenant: name}}},
		Tenants: []Tenant{{Name: name, Credits: Budget{PerMinute: 100, PerMonth: 1000}}},
	}
	ba := NewBudgets(BudgetsOptions{Redis: rdb, Clock: clock.Now})
	bb := NewBudgets(BudgetsOptions{Redis: rdb, Clock: clock.Now})
	a, b := budgetReplica(t, c, ba), budgetReplica(t, c, bb)
	key := map[string]string{"X-Api-Key": aliceSecret}
	ctx := context.Background()

	// 2 eth_call (20 each) on A, a batch of 3 eth_blockNumber from the
	// head window (3 each) and a reverted eth_fail (10) on B.
	var spent int64
	for range 2 {
		status, h, body := do(t, a, httpCall{header: key, body: callOf("eth_call")})
		if status != 200 || h.Get("X-Venn-Credits") != "20" {
			t.Fatalf("eth_call on A: %d credits %q %s", status, h.Get("X-Venn-Credits"), body)
		}
		spent += 20
	}
	status, h, body := do(t, b, httpCall{header: key, body: "[" + callOf("eth_blockNumber") + "," + callOf("eth_blockNumber") + "," +
		callOf("eth_blockNumber") + "," + callOf("eth_fail") + "]"})
	if status != 200 || h.Get("X-Venn-Credits") != "19" {
		t.Fatalf("batch on B: %d credits %q %s", status, h.Get("X-Venn-Credits"), body)
	}
	spent += 19
	// B has not heard of A's spending yet: its remaining is its own view.
	if got := h.Get("X-Venn-Credits-Remaining-Minute"); got != "81" {
		t.Errorf("B's remaining before a flush = %s, want 81", got)
	}

	// One flush each (A's, B's, then A's again to learn B's): one count.
	for _, bs := range []*Budgets{ba, bb, ba} {
		if err := bs.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for name, bs := range map[string]*Budgets{"A": ba, "B": bb} {
		if m, mo := bs.Spent(c.Tenants[0].Name); m != spent || mo != spent {
			t.Errorf("%s sees %d this minute and %d this month, want %d", name, m, mo, spent)
		}
	}

	// Spend the rest of the minute on A: 41 left, so 3 eth_call (a
	// message is admitted while any is left, and may overspend).
	for range 3 {
		if status, _, body := do(t, a, httpCall{header: key, body: callOf("eth_call")}); status != 200 {
			t.Fatalf("eth_call on A: %d %s", status, body)
		}
	}
	status, h, body = do(t, a, httpCall{header: key, body: callOf("eth_call")})
	if status != 429 || h.Get("Retry-After") != "55" || !strings.Contains(body, `"code":-32005`) ||
		!strings.Contains(body, "resets at 2026-12-06T10:31:00Z") {
		t.Errorf("A over its minute: %d Retry-After %q %s", status, h.Get("Retry-After"), body)
	}
	// B refuses too once A's spending reached Redis and B's flush read it.
	if status, _, _ := do(t, b, httpCall{header: key, body: callOf("eth_call")}); status != 200 {
		t.Errorf("B before the flush: %d (it cannot know yet)", status)
	}
	for _, bs := range []*Budgets{ba, bb} {
		if err := bs.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	status, h, body = do(t, b, httpCall{header: key, body: callOf("eth_blockNumber")})
	if status != 429 || h.Get("Retry-After") == "" || !strings.Contains(body, "minutely budget of 100 credits") {
		t.Errorf("B after the flush: %d %s", status, body)
	}

	// The next minute starts afresh; the month remembers.
	clock.Add(time.Minute)
	status, h, _ = do(t, b, httpCall{header: key, body: callOf("eth_call")})
	if status != 200 || h.Get("X-Venn-Credits-Remaining-Minute") != "80" {
		t.Errorf("next minute: %d remaining %q", status, h.Get("X-Venn-Credits-Remaining-Minute"))
	}
	if m, _ := rdb.Get(ctx, "venn:credits:{tenant:"+name+"}:M202612").Int64(); m != spent+3*20+20 {
		t.Errorf("Redis holds %d for the month, want %d", m, spent+3*20+20)
	}
}

// TestBudgetsFlushLoop: with the flush running, a tenant that spends its
// budget on one replica is refused on the other within a flush or two.
func TestBudgetsFlushLoop(t *testing.T) {
	rdb, token := testkit.Redis(t, func(token string) string { return "venn:credits:{tenant:t-" + token + "}*" })
	name := "t-" + token
	c := Config{
		Auth:    AuthConfig{Keys: []APIKey{{Name: "svc", Key: aliceSecret, Tenant: name}}},
		Tenants: []Tenant{{Name: name, Credits: Budget{PerMonth: 40}}},
	}
	ba := NewBudgets(BudgetsOptions{Redis: rdb, FlushInterval: 20 * time.Millisecond})
	bb := NewBudgets(BudgetsOptions{Redis: rdb, FlushInterval: 20 * time.Millisecond})
	ba.Start()
	bb.Start()
	t.Cleanup(func() { ba.Stop(context.Background()); bb.Stop(context.Background()) })
	a, b := budgetReplica(t, c, ba), budgetReplica(t, c, bb)
	key := map[string]string{"X-Api-Key": aliceSecret}
	for range 2 {
		if status, _, body := do(t, a, httpCall{header: key, body: callOf("eth_call")}); status != 200 {
			t.Fatalf("on A: %d %s", status, body)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, _, body := do(t, b, httpCall{header: key, body: callOf("eth_chainId")})
		if status == 429 {
			if !strings.Contains(body, "monthly budget of 40 credits") {
				t.Errorf("B's refusal: %s", body)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B still serves the tenant 10s after A spent its month")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		for _, m := bb.Spent(name); m < 40 && ctx.Err() == nil; _, m = bb.Spent(name) {
			select {
			case <-ctx.Done():
			case <-time.After(time.Millisecond):
			}
		}
		cancel()
	}
}

// TestCreditHeaders: the credit headers carry each value apart, with a
// budget of one period or both, and an append to one header's values
// leaves the next header's alone.
func TestCreditHeaders(t *testing.T) {
	for _, c := range []struct {
		st                   BudgetState
		total, minute, month string
	}{
		{BudgetState{MinuteLeft: 81, MonthLeft: 1152921504606846968}, "19", "81", "1152921504606846968"},
		{BudgetState{MinuteLeft: -1, MonthLeft: 7}, "19", "", "7"},
		{BudgetState{MinuteLeft: 0, MonthLeft: -1}, "19", "0", ""},
		{BudgetState{MinuteLeft: -1, MonthLeft: -1}, "19", "", ""},
	} {
		h := http.Header{}
		setCreditHeaders(h, 19, c.st)
		got := [3]string{h.Get(creditsHeader), h.Get(creditsMinuteHeader), h.Get(creditsMonthHeader)}
		if want := [3]string{c.total, c.minute, c.month}; got != want {
			t.Errorf("%+v: headers %q, want %q", c.st, got, want)
		}
		if _, ok := h[creditsMinuteHeader]; ok != (c.st.MinuteLeft >= 0) {
			t.Errorf("%+v: minute header present %v", c.st, ok)
		}
		h.Add(creditsHeader, "x")
		if h.Get(creditsMinuteHeader) != c.minute || h.Get(creditsMonthHeader) != c.month {
			t.Errorf("%+v: an append to %s changed the others: %v", c.st, creditsHeader, h)
		}
	}
}
