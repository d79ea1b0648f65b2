package remotes

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/settings"
)

// Per-remote settings seen from the pool: what reaches which upstream.

func balanceOf(i int) string {
	return fmt.Sprintf(`["0x%040x","latest"]`, i+1)
}

// throttled is venn_remote_throttled_total for one remote of chain "test",
// read from the registry a scrape would read.
func throttled(t *testing.T, reg *prometheus.Registry, remote string) float64 {
	t.Helper()
	const name = "venn_remote_throttled_total"
	if n, err := testutil.GatherAndCount(reg, name); err != nil || n == 0 {
		t.Fatalf("%s not registered (%d series, %v)", name, n, err)
	}
	v, _ := testkit.Value(t, reg, name, map[string]string{"chain": "test", "remote": remote})
	return v
}

func TestRateLimitSendsExcessElsewhere(t *testing.T) {
	const (
		burst = 3
		calls = 10
	)
	n0 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	n1 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	reg := prometheus.NewRegistry()
	// n0 is primary, so every call tries it first. Its bucket holds burst
	// tokens and refills one per 100 s: nothing refills during the test.
	// BlockTime keeps polls (which spend tokens too) to the first one.
	rs := testConfigs([]string{n0.URL(), n1.URL()}, func(i int, c *Config) {
		if i == 0 {
			c.RateLimit = settings.RateLimit{RPS: 0.01, Burst: burst}
		} else {
			c.Tier = TierSecondary
		}
	})
	p := startPool(t, PoolConfig{BlockTime: time.Hour}, rs, NewMetrics(reg))
	n0.ResetCalls()
	before := throttled(t, reg, "n0")

	for i := range calls {
		if _, err := call(t, p, "eth_getBalance", balanceOf(i)); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	sent0, sent1 := n0.Calls("eth_getBalance"), n1.Calls("eth_getBalance")
	if sent0 == 0 || sent0 > burst {
		t.Errorf("n0 got %d calls, want 1..%d (its burst)", sent0, burst)
	}
	if sent0+sent1 != calls {
		t.Errorf("n0 %d + n1 %d calls, want %d in all", sent0, sent1, calls)
	}
	if got, want := throttled(t, reg, "n0")-before, float64(calls-sent0); got != want {
		t.Errorf("venn_remote_throttled_total{remote=n0} rose by %v, want %v (one per call kept from n0)", got, want)
	}
	if got := throttled(t, reg, "n1"); got != 0 {
		t.Errorf("venn_remote_throttled_total{remote=n1} = %v, want 0", got)
	}
}

// With no other remote, a burst over the configured rate is smoothed: calls
// wait briefly for a token instead of failing; a wait past the limit fails.
func TestRateLimitWaitsWhenAlone(t *testing.T) {
	n0 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	rs := testConfigs([]string{n0.URL()}, func(_ int, c *Config) { c.RateLimit = settings.RateLimit{RPS: 10, Burst: 1} })
	p := startPool(t, PoolConfig{BlockTime: time.Hour}, rs, nil)
	waitFor(t, "the start-up poll's token back", func() bool { return p.members()[0].lim.Tokens() >= 1 })

	const calls = 4 // one from the bucket, then one per 100 ms
	errs := make(chan error, calls)
	start := time.Now()
	for i := range calls {
		go func() {
			_, err := call(t, p, "eth_getBalance", balanceOf(i))
			errs <- err
		}()
	}
	for range calls {
		if err := <-errs; err != nil {
			t.Fatalf("a call over the rate failed instead of waiting: %v", err)
		}
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Errorf("%d calls at 10/s took %v: the rate limit was not applied", calls, took)
	}

	// 30 calls at once need up to 3 s of tokens: those past the 1 s wait fail.
	fail := make(chan error, 30)
	for i := range 30 {
		go func() {
			_, err := call(t, p, "eth_getBalance", balanceOf(100+i))
			fail <- err
		}()
	}
	failed := 0
	for range 30 {
		if err := <-fail; err != nil {
			failed++
		}
	}
	if failed == 0 {
		t.Error("no call failed although the wait is bounded at 1 s")
	}
}

func TestMaxInFlightSendsExcessElsewhere(t *testing.T) {
	n0 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	n1 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	rs := testConfigs([]string{n0.URL(), n1.URL()}, func(i int, c *Config) {
		if i == 0 {
			c.MaxInFlight = 1
		} else {
			c.Tier = TierSecondary
		}
	})
	p := startPool(t, PoolConfig{BlockTime: time.Hour}, rs, nil)
	n0.ResetCalls()

	// n0's one slot is taken by a call its node holds until released.
	release := make(chan struct{})
	n0.SetHook(func(m string, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if m == "eth_getBalance" {
			<-release
		}
		return nil, nil, false
	})
	held := make(chan error, 1)
	go func() {
		_, err := p.Call(context.Background(), "eth_getBalance", json.RawMessage(balanceOf(0)))
		held <- err
	}()
	released := false
	defer func() {
		if !released {
			close(release)
			<-held
		}
	}()
	waitFor(t, "n0 busy", func() bool { return n0.Calls("eth_getBalance") == 1 })

	for i := 1; i <= 3; i++ {
		if _, err := call(t, p, "eth_getBalance", balanceOf(i)); err != nil {
			t.Fatalf("call %d while n0 is full: %v", i, err)
		}
	}
	if got := n0.Calls("eth_getBalance"); got != 1 {
		t.Errorf("n0 got %d calls while full, want only the one holding its slot", got)
	}
	if got := n1.Calls("eth_getBalance"); got != 3 {
		t.Errorf("n1 got %d calls, want 3", got)
	}

	close(release)
	released = true
	if err := <-held; err != nil {
		t.Fatalf("held call: %v", err)
	}
	// With its slot free, n0 serves again.
	if _, err := call(t, p, "eth_getBalance", balanceOf(9)); err != nil {
		t.Fatal(err)
	}
	if got := n0.Calls("eth_getBalance"); got != 2 {
		t.Errorf("n0 got %d calls after its slot freed, want 2", got)
	}
}

func TestMethodAllowAndDeny(t *testing.T) {
	tests := []struct {
		name  string
		tweak func(c *Config) // n0's lists; n1 has none
	}{
		{name: "deny by name", tweak: func(c *Config) { c.Methods.Deny = []string{"eth_getBalance"} }},
		{name: "deny by prefix", tweak: func(c *Config) { c.Methods.Deny = []string{"eth_getBal*"} }},
		{name: "deny by namespace", tweak: func(c *Config) { c.Methods.Deny = []string{"eth_"} }},
		{name: "not in allow list", tweak: func(c *Config) { c.Methods.Allow = []string{"eth_call", "debug_"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n0 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
			n1 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
			// Both primary: without the lists, calls would spread over both.
			p := startPool(t, PoolConfig{}, testConfigs([]string{n0.URL(), n1.URL()}, func(i int, c *Config) {
				if i == 0 {
					tt.tweak(c)
				}
			}), nil)
			for i := range 20 {
				if _, err := call(t, p, "eth_getBalance", balanceOf(i)); err != nil {
					t.Fatal(err)
				}
			}
			if got := n0.Calls("eth_getBalance"); got != 0 {
				t.Errorf("n0 got %d eth_getBalance calls it is configured not to take", got)
			}
			if got := n1.Calls("eth_getBalance"); got != 20 {
				t.Errorf("n1 got %d calls, want 20", got)
			}
		})
	}
}

func TestMethodDeniedEverywhere(t *testing.T) {
	n0 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	n1 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	p := startPool(t, PoolConfig{}, testConfigs([]string{n0.URL(), n1.URL()}, func(i int, c *Config) {
		if i == 0 {
			c.Methods.Deny = []string{"debug_"}
		} else {
			c.Methods.Allow = []string{"eth_"}
		}
	}), nil)
	n0.ResetCalls()
	n1.ResetCalls()
	const method = "debug_traceTransaction"
	_, err := call(t, p, method, `["0x0000000000000000000000000000000000000000000000000000000000000001"]`)
	if got := wireCode(err); got != jrpc.CodeMethodNotFound {
		t.Fatalf("err = %v (code %d), want %d", err, got, jrpc.CodeMethodNotFound)
	}
	if got := n0.Calls(method) + n1.Calls(method); got != 0 {
		t.Errorf("a method no remote takes reached the nodes %d times", got)
	}
}

func TestHeadersReachUpstream(t *testing.T) {
	f := newFront(t, fakenode.Options{ChainID: testChainID})
	want := map[string]string{"X-Api-Key": "k-123", "Authorization": "Bearer t-456"}
	p := startPool(t, PoolConfig{}, testConfigs([]string{f.URL()}, func(_ int, c *Config) {
		c.WSURL = f.WSURL()
		c.Headers = want
	}), nil)
	if _, err := call(t, p, "eth_getBalance", balanceOf(0)); err != nil {
		t.Fatal(err)
	}
	// The newHeads connection is up once a head arrives over it; blocks
	// mined before it subscribed are not sent, so keep mining.
	waitFor(t, "head over newHeads", func() bool {
		f.node.Mine(1)
		return p.members()[0].wsHeadAt.Load() != 0
	})

	var posts, handshakes int
	for _, h := range f.seenHeaders() {
		if h.Get("Upgrade") != "" {
			handshakes++
		} else {
			posts++
		}
		for k, v := range want {
			if got := h.Get(k); got != v {
				t.Errorf("request (upgrade %q) has %s = %q, want %q", h.Get("Upgrade"), k, got, v)
			}
		}
	}
	if posts < 2 || handshakes < 1 {
		t.Errorf("saw %d HTTP calls and %d WebSocket handshakes, want at least 2 and 1", posts, handshakes)
	}
}
