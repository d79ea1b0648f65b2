package remotes

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
)

// A reload adds a remote, keeps the unchanged one with its state, and
// the new one takes calls once it is followed.
func TestReconfigureAddsRemote(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	b := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	cfg := PoolConfig{Chain: "test", ChainID: testChainID, BlockTime: 50 * time.Millisecond, CallDeadline: 5 * time.Second}
	rs := testConfigs([]string{a.URL()}, nil)
	p := startPool(t, cfg, rs, nil)
	kept := p.members()[0]

	rs2 := testConfigs([]string{a.URL(), b.URL()}, nil)
	rec, err := p.Reconfigure(cfg, rs2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec.Added, []string{"n1"}) || len(rec.Removed)+len(rec.Replaced) != 0 {
		t.Errorf("reconfiguration = %+v, want n1 added", rec)
	}
	if p.members()[0] != kept {
		t.Error("the unchanged remote was rebuilt: its health is lost")
	}
	added := p.members()[1]
	if added.slot == kept.slot {
		t.Errorf("new remote shares slot %d", added.slot)
	}
	waitFor(t, "the new remote to take calls", func() bool {
		_, _ = call(t, p, "eth_getBalance", `["0x0000000000000000000000000000000000000001","0x10"]`)
		return b.Calls("eth_getBalance") > 0
	})
}

// A remote removed while a call is in flight on it answers that call,
// then leaves: its transport closes and it takes no new call.
func TestReconfigureRemovesRemoteInFlight(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	b := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	hold := func(method string, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method == "eth_getBalance" {
			entered <- struct{}{}
			<-release
		}
		return nil, nil, false
	}
	a.SetHook(hold)
	cfg := PoolConfig{Chain: "test", ChainID: testChainID, BlockTime: 50 * time.Millisecond, CallDeadline: 5 * time.Second}
	p := startPool(t, cfg, testConfigs([]string{a.URL(), b.URL()}, func(i int, c *Config) {
		if i == 1 {
			c.Tier = TierFallback // n0 takes the call
		}
	}), nil)

	type answer struct {
		res json.RawMessage
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := p.Call(context.Background(), "eth_getBalance", json.RawMessage(`["0x0000000000000000000000000000000000000001","0x10"]`))
		done <- answer{res, err}
	}()
	<-entered
	gone := p.members()[0]
	rec, err := p.Reconfigure(cfg, []Config{{Name: "n1", URL: b.URL(), Timeout: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec.Removed, []string{"n0"}) {
		t.Errorf("reconfiguration = %+v, want n0 removed", rec)
	}
	close(release)
	if got := <-done; got.err != nil || len(got.res) == 0 {
		t.Fatalf("call in flight on the removed remote: %s, %v", got.res, got.err)
	}
	if a.Calls("eth_getBalance") != 1 || b.Calls("eth_getBalance") != 0 {
		t.Errorf("calls: removed %d, kept %d; want the call answered by the removed remote alone",
			a.Calls("eth_getBalance"), b.Calls("eth_getBalance"))
	}
	waitFor(t, "the removed remote to finish", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.slots&(1<<gone.slot) == 0
	})
	a.SetHook(nil)
	before := a.TotalCalls()
	for range 5 {
		if _, err := call(t, p, "eth_getBalance", `["0x0000000000000000000000000000000000000001","0x11"]`); err != nil {
			t.Fatal(err)
		}
	}
	if a.TotalCalls() != before {
		t.Error("the removed remote took calls after it left")
	}
}

// A changed remote is replaced; another chain is refused and changes
// nothing.
func TestReconfigureReplacesAndRefuses(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	cfg := PoolConfig{Chain: "test", ChainID: testChainID, BlockTime: 50 * time.Millisecond, CallDeadline: 5 * time.Second}
	p := startPool(t, cfg, testConfigs([]string{a.URL()}, nil), nil)
	first := p.members()[0]
	other := cfg
	other.ChainID++
	if _, err := p.Reconfigure(other, testConfigs([]string{a.URL()}, nil)); err == nil {
		t.Error("another chain id was taken")
	}
	if p.members()[0] != first {
		t.Error("a refused reconfiguration changed the remotes")
	}
	rec, err := p.Reconfigure(cfg, testConfigs([]string{a.URL()}, func(_ int, c *Config) { c.MaxInFlight = 7 }))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rec.Replaced, []string{"n0"}) || p.members()[0] == first {
		t.Errorf("reconfiguration = %+v, want n0 replaced", rec)
	}
	changed := cfg
	changed.MaxAttempts = 2
	if rec, err := p.Reconfigure(changed, testConfigs([]string{a.URL()}, func(_ int, c *Config) { c.MaxInFlight = 7 })); err != nil || !rec.Settings {
		t.Errorf("settings change: %+v, %v", rec, err)
	}
	if p.conf().MaxAttempts != 2 {
		t.Errorf("max_attempts %d after reload, want 2", p.conf().MaxAttempts)
	}
}

// Breaker, chain_recheck and the misbehaviour half-life change on the
// remotes already in the pool, in place: a reload keeps their health.
func TestReconfigureRetunesInPlace(t *testing.T) {
	cfg := PoolConfig{Chain: "test", ChainID: testChainID, BlockTime: 50 * time.Millisecond}
	rs := testConfigs([]string{"http://127.0.0.1:1"}, nil)
	p, err := NewPool(cfg, rs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(context.Background()) })
	r := p.members()[0]
	now := time.Unix(1_000_000, 0)
	r.now = func() time.Time { return now }
	r.brk.Fault(now)
	r.brk.Fault(now)
	r.mb.count.Add(8)
	r.misbehaviour(now) // the scorer folds the count in now

	next := cfg
	next.Breaker = BreakerConfig{Failures: 3, Cooldown: 7 * time.Second}
	next.ChainRecheck = 9 * time.Second
	next.Scoring.MisbehaviourHalfLife = time.Second
	rec, err := p.Reconfigure(next, rs)
	if err != nil {
		t.Fatal(err)
	}
	if p.members()[0] != r || len(rec.Replaced)+len(rec.Added)+len(rec.Removed) != 0 || !rec.Settings {
		t.Fatalf("reconfiguration = %+v, remote kept: %v; want the remote kept, settings changed", rec, p.members()[0] == r)
	}
	if got := r.cc.Every(); got != 9*time.Second {
		t.Errorf("chain recheck %v, want 9s", got)
	}
	if got := r.brk.Cooldown(); got != 7*time.Second {
		t.Errorf("breaker cooldown %v, want 7s", got)
	}
	if !r.brk.Fault(now) { // its third in a row: the two before the reload count
		t.Error("the third fault did not open the breaker at failures: 3")
	}
	now = now.Add(3 * time.Second) // three new half-lives
	if got := r.misbehaviour(now); got < 0.9 || got > 1.1 {
		t.Errorf("misbehaviour level %v after 3 half-lives of 1s, want 8/8", got)
	}
}
