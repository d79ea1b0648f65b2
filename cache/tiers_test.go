package cache

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/internal/testkit"
)

// fakeTier is a lower tier with function fields; nil ones keep entries in
// a map.
type fakeTier struct {
	name  string
	mu    sync.Mutex
	m     map[Key]Entry
	fail  error
	claim func(k Key) bool
}

func newFakeTier(name string) *fakeTier { return &fakeTier{name: name, m: map[Key]Entry{}} }

func (f *fakeTier) Name() string { return f.name }

func (f *fakeTier) Get(_ context.Context, k Key) (Entry, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return Entry{}, false, f.fail
	}
	e, ok := f.m[k]
	return e, ok, nil
}

func (f *fakeTier) Set(_ context.Context, k Key, e Entry, _ time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.m[k] = e
	return nil
}

func (f *fakeTier) setFail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = err
}

// claimer is a fakeTier that is also a Claimer.
type claimer struct{ *fakeTier }

func (c claimer) Claim(_ context.Context, k Key, _ time.Duration) (bool, error) {
	return c.claim(k), nil
}

func (c claimer) Release(context.Context, Key) error { return nil }

// Watch: another replica's claim holds until its entry is there.
func (c claimer) Watch(ctx context.Context, k Key) (Entry, bool, bool, error) {
	e, ok, err := c.Get(ctx, k)
	return e, ok, true, err
}

// TestLowerTierFillsMemory: a hit below fills memory; the next is memory's.
func TestLowerTierFillsMemory(t *testing.T) {
	lower := newFakeTier("redis")
	c, _ := newTestCache(t, testConfig(), testConfig().RedisLayer(lower))
	v := newView(100, nil)
	get := call("eth_getCode", `["`+testAddr+`","0x5"]`)
	k := mustKey(t, get, v)
	_ = lower.Set(context.Background(), k, Entry{Value: []byte(`"0x60"`), Settled: true, Method: "eth_getCode"}, 0)
	up := &upstream{res: `"0x"`}
	for range 2 {
		if res, _, o := c.Serve(context.Background(), get, v, false, up.fetch); o != Hit || string(res) != `"0x60"` {
			t.Fatalf("%s %v, want the lower tier's answer", res, o)
		}
	}
	if got := testutil.ToFloat64(c.m.requests.WithLabelValues("dev", "eth_getCode", "redis", "hit")); got != 1 {
		t.Errorf("redis hits %v, want 1: the second is memory's", got)
	}
}

// TestTierOutageIsAMiss: a failing tier costs misses and one log line each
// way, never the client's answer.
func TestTierOutageIsAMiss(t *testing.T) {
	lower := newFakeTier("redis")
	logs := &testkit.Buffer{}
	cfg := testConfig()
	c := New(cfg, Options{Chain: "dev", Lower: []Layer{cfg.RedisLayer(lower)}, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	t.Cleanup(c.Close)
	v := newView(100, nil)
	lower.setFail(errors.New("connection refused"))
	up := &upstream{res: `"0x1"`}
	for i := range 3 {
		get := call("eth_getBalance", `["`+testAddr+`","`+[]string{"0x1", "0x2", "0x3"}[i]+`"]`)
		if res, err, _ := c.Serve(context.Background(), get, v, false, up.fetch); err != nil || string(res) != `"0x1"` {
			t.Fatalf("during the outage: %s %v", res, err)
		}
	}
	lower.setFail(nil)
	_, _, _ = c.Serve(context.Background(), call("eth_getBalance", `["`+testAddr+`","0x4"]`), v, false, up.fetch)
	if n := logs.Count("cache tier unavailable"); n != 1 {
		t.Errorf("outage logged %d times, want once:\n%s", n, logs)
	}
	if n := logs.Count("cache tier answers again"); n != 1 {
		t.Errorf("recovery logged %d times, want once:\n%s", n, logs)
	}
	if got := testutil.ToFloat64(c.m.storeErrors.WithLabelValues("dev", "redis", "get")); got != 3 {
		t.Errorf("get errors %v, want 3", got)
	}
}

// TestClaimedMissWaitsForTheWinner: another replica holds the claim; its
// answer, once in the shared tier, is served without an upstream call.
func TestClaimedMissWaitsForTheWinner(t *testing.T) {
	lower := newFakeTier("redis")
	v := newView(100, nil)
	get := call("eth_getCode", `["`+testAddr+`","0x5"]`)
	k := mustKey(t, get, v)
	lower.claim = func(Key) bool {
		// The winner stores its answer while this replica polls.
		go func() { _ = lower.Set(context.Background(), k, Entry{Value: []byte(`"0x60"`), Settled: true}, 0) }()
		return false
	}
	cfg := testConfig()
	c, _ := newTestCache(t, cfg, cfg.RedisLayer(claimer{lower}))
	up := &upstream{res: `"0x"`}
	if res, _, o := c.Serve(context.Background(), get, v, false, up.fetch); o != Hit || string(res) != `"0x60"` {
		t.Fatalf("%s %v, want the winner's answer", res, o)
	}
	if up.calls.Load() != 0 {
		t.Fatal("asked upstream though another replica held the claim")
	}
}

// TestConcurrentMissesShareOneCall: misses for one key in one process
// make one upstream call.
func TestConcurrentMissesShareOneCall(t *testing.T) {
	c, _ := newTestCache(t, testConfig())
	v := newView(100, nil)
	release := make(chan struct{})
	var calls sync.WaitGroup
	n := 0
	var mu sync.Mutex
	fetch := func(context.Context) ([]byte, error) {
		mu.Lock()
		n++
		mu.Unlock()
		<-release
		return []byte(`"0x1"`), nil
	}
	const callers = 8
	entered := make(chan struct{}, callers)
	for i := range callers {
		calls.Go(func() {
			// Different spellings of one call.
			params := `["` + testAddr + `","0x5"]`
			if i%2 == 1 {
				params = `["` + testAddr + `",{"blockNumber":"0X5"}]`
			}
			entered <- struct{}{}
			res, err, _ := c.Serve(context.Background(), call("eth_getBalance", params), v, false,
				func(ctx context.Context, _ string) (json.RawMessage, error) { return fetch(ctx) })
			if err != nil || string(res) != `"0x1"` {
				t.Errorf("%s %v", res, err)
			}
		})
	}
	for range callers {
		<-entered
	}
	testkit.Poll(time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return n > 0 })
	close(release)
	calls.Wait()
	if n != 1 {
		t.Errorf("%d upstream calls for %d concurrent callers", n, callers)
	}
}

// deadlineTier is a lower tier that records the time left on each call's
// context and misses.
type deadlineTier struct {
	mu   sync.Mutex
	left []time.Duration // 0: no deadline
}

func (d *deadlineTier) Name() string { return "redis" }

func (d *deadlineTier) note(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var left time.Duration
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	d.left = append(d.left, left)
}

func (d *deadlineTier) Get(ctx context.Context, _ Key) (Entry, bool, error) {
	d.note(ctx)
	return Entry{}, false, nil
}

func (d *deadlineTier) Set(ctx context.Context, _ Key, _ Entry, _ time.Duration) error {
	d.note(ctx)
	return nil
}

// TestTierTimeoutBoundsEachOperation: every operation of a tier below
// memory gets tier_timeout, not the client's deadline and not more.
func TestTierTimeoutBoundsEachOperation(t *testing.T) {
	for _, timeout := range []time.Duration{DefaultTierTimeout, time.Hour} {
		cfg := testConfig()
		cfg.TierTimeout = timeout
		lower := &deadlineTier{}
		c, _ := newTestCache(t, cfg, cfg.RedisLayer(lower))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
		_, _, _ = c.Serve(ctx, call("eth_getCode", `["`+testAddr+`","0x5"]`), newView(100, nil), false, (&upstream{res: `"0x60"`}).fetch)
		cancel()
		lower.mu.Lock()
		left := lower.left
		lower.mu.Unlock()
		if len(left) != 2 { // the lookup and the store
			t.Fatalf("tier_timeout %v: %d operations, want 2", timeout, len(left))
		}
		for i, l := range left {
			if l <= 0 || l > timeout || timeout-l > time.Minute {
				t.Errorf("tier_timeout %v: operation %d had %v left, want about %v", timeout, i, l, timeout)
			}
		}
	}
}
