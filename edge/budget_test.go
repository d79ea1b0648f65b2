package edge

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
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
		if got := headerCredits(t, h); status != 200 || got != (Credits{Call: 20, Minute: 100 - 20 - spent, Month: 1000 - 20 - spent}) {
			t.Fatalf("eth_call on A: %d credits %+v %s", status, got, body)
		}
		spent += 20
	}
	status, h, body := do(t, b, httpCall{header: key, body: "[" + callOf("eth_blockNumber") + "," + callOf("eth_blockNumber") + "," +
		callOf("eth_blockNumber") + "," + callOf("eth_fail") + "]"})
	// B has not heard of A's spending yet: its remaining is its own view.
	if got := headerCredits(t, h); status != 200 || got != (Credits{Call: 19, Minute: 81, Month: 981}) {
		t.Fatalf("batch on B: %d credits %+v %s, want 19 with 81 and 981 left", status, got, body)
	}
	spent += 19

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
	if got := headerCredits(t, h); status != 200 || got.Minute != 80 {
		t.Errorf("next minute: %d credits %+v, want 80 left this minute", status, got)
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

// headerCredits is what an answer's X-Venn-Credits header says.
func headerCredits(t *testing.T, h http.Header) Credits {
	t.Helper()
	vs := h.Values(creditsHeader)
	if len(vs) != 1 {
		t.Fatalf("%s: %q, want one value", creditsHeader, vs)
	}
	c, err := ParseCredits(vs[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCreditsHeader: the one credit header carries the call's cost and
// the budgets that are set, as an RFC 8941 dictionary that ParseCredits
// reads back; no other credit header is written.
func TestCreditsHeader(t *testing.T) {
	for _, c := range []struct {
		st   BudgetState
		want string
	}{
		{BudgetState{MinuteLeft: 81, MonthLeft: 9223372036854775807}, "call=19, minute=81, month=9223372036854775807"},
		{BudgetState{MinuteLeft: -1, MonthLeft: 7}, "call=19, month=7"},
		{BudgetState{MinuteLeft: 0, MonthLeft: -1}, "call=19, minute=0"},
		{noBudget, "call=19"},
	} {
		v := string(appendCredits(nil, 19, c.st))
		if v != c.want {
			t.Errorf("%+v: %s: %s, want %s", c.st, creditsHeader, v, c.want)
		}
		got, err := ParseCredits(v)
		if want := (Credits{Call: 19, Minute: c.st.MinuteLeft, Month: c.st.MonthLeft}); err != nil || got != want {
			t.Errorf("ParseCredits(%q) = %+v, %v, want %+v", c.want, got, err, want)
		}
	}
	for v, want := range map[string]Credits{
		"call=5":                   {Call: 5, Minute: -1, Month: -1},
		"month=3,call=5, other=?1": {Call: 5, Minute: -1, Month: 3},
		"call=5,\tminute=2":        {Call: 5, Minute: 2, Month: -1},
	} {
		if got, err := ParseCredits(v); err != nil || got != want {
			t.Errorf("ParseCredits(%q) = %+v, %v, want %+v", v, got, err, want)
		}
	}
	for _, v := range []string{"", "minute=1", "call=x", "call=1, month=1.5"} {
		if _, err := ParseCredits(v); err == nil {
			t.Errorf("ParseCredits(%q) took it", v)
		}
	}
}

// BenchmarkCreditsHeader is appendCredits' own cost, into room it is
// given (jrpc.AnswerHeader's): no allocation.
func BenchmarkCreditsHeader(b *testing.B) {
	var room [96]byte
	st := BudgetState{MinuteLeft: 99960, MonthLeft: 999999960}
	b.ReportAllocs()
	for b.Loop() {
		if len(appendCredits(room[:0], 40, st)) > len(room) {
			b.Fatal("the value outgrew its room")
		}
	}
}

// usageRows is a UsageSink that keeps the calls and credits it is given,
// by tenant, chain and method.
type usageRows struct {
	mu   sync.Mutex
	rows map[[3]string][2]int64
}

func (u *usageRows) Series(tenant, chain, method string) func(time.Time, int64, int64, int64, int64) {
	k := [3]string{tenant, chain, method}
	return func(_ time.Time, calls, credits, _, _ int64) {
		u.mu.Lock()
		defer u.mu.Unlock()
		r := u.rows[k]
		u.rows[k] = [2]int64{r[0] + calls, r[1] + credits}
	}
}

// TestChargeSlots: a tenant's calls are priced and counted through the
// slots resolved on each method's first call, the same as on it; methods
// no table or registry knows are counted under "other", each priced by
// its own name (a prefix here), never by the slot's.
func TestChargeSlots(t *testing.T) {
	u := &usageRows{rows: make(map[[3]string][2]int64)}
	c := Config{
		Auth:    AuthConfig{Keys: []APIKey{{Name: "svc", Key: aliceSecret, Tenant: "team"}}},
		Tenants: []Tenant{{Name: "team", Credits: Budget{PerMonth: 1000}}},
		Credits: CreditsConfig{Methods: map[string]int64{"eth_made*": 7}},
	}
	s := newTestServer(t, c, Options{Usage: u}, sourceHandler())
	key := map[string]string{"X-Api-Key": aliceSecret}
	spent := int64(0)
	for _, tt := range []struct {
		method string
		want   int64
	}{
		{"eth_madeUp1", 7}, {"eth_call", 20}, {"eth_madeUp1", 7}, {"eth_madeUp2", 7},
		{"eth_blockNumber", 3}, {"eth_chainId", 1}, {"eth_call", 20}, {"eth_blockNumber", 3},
	} {
		status, h, body := do(t, s, httpCall{header: key, body: callOf(tt.method)})
		spent += tt.want
		if got := headerCredits(t, h); status != 200 || got != (Credits{Call: tt.want, Minute: -1, Month: 1000 - spent}) {
			t.Fatalf("%s: %d credits %+v %s, want %d with %d left", tt.method, status, got, body, tt.want, 1000-spent)
		}
	}
	want := map[[3]string][2]int64{
		{"team", testChain, "other"}:           {3, 21},
		{"team", testChain, "eth_call"}:        {2, 40},
		{"team", testChain, "eth_blockNumber"}: {2, 6},
		{"team", testChain, "eth_chainId"}:     {1, 1},
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if !maps.Equal(u.rows, want) {
		t.Errorf("usage %v, want %v", u.rows, want)
	}
}

// TestBudgetLoweredByReload: a tenant under its budget is let through
// without the budgets' lock; a reload that lowers the budget below what
// it spent refuses its next call.
func TestBudgetLoweredByReload(t *testing.T) {
	bs := NewBudgets(BudgetsOptions{})
	c := Config{
		Auth:    AuthConfig{Keys: []APIKey{{Name: "svc", Key: aliceSecret, Tenant: "team"}}},
		Tenants: []Tenant{{Name: "team", Credits: Budget{PerMinute: 100}}},
	}
	key := map[string]string{"X-Api-Key": aliceSecret}
	a := budgetReplica(t, c, bs)
	for range 3 {
		if status, _, body := do(t, a, httpCall{header: key, body: callOf("eth_call")}); status != 200 {
			t.Fatalf("under the budget: %d %s", status, body)
		}
	}
	c.Tenants[0].Credits.PerMinute = 50
	b := budgetReplica(t, c, bs) // the reloaded configuration, on the same counts
	status, _, body := do(t, b, httpCall{header: key, body: callOf("eth_call")})
	if status != 429 || !strings.Contains(body, "minutely budget of 50 credits") {
		t.Errorf("after lowering the budget to 50 with 60 spent: %d %s", status, body)
	}
	c.Tenants[0].Credits.PerMinute = 1000
	b = budgetReplica(t, c, bs)
	if status, _, body := do(t, b, httpCall{header: key, body: callOf("eth_call")}); status != 200 {
		t.Errorf("after raising it to 1000: %d %s", status, body)
	}
}
