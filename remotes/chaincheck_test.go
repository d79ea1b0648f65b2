package remotes

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/remotes/breaker"
	"github.com/venn-gateway/venn/remotes/health"
)

// waitWithin is waitFor with the deadline d.
func waitWithin(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
}

// blockTenHash asks the pool for block 10 and returns its hash.
func blockTenHash(t *testing.T, p *Pool) string {
	t.Helper()
	res, err := call(t, p, "eth_getBlockByNumber", `["0xa",false]`)
	if err != nil {
		t.Fatal(err)
	}
	var b struct{ Hash string }
	if err := json.Unmarshal(res, &b); err != nil {
		t.Fatal(err)
	}
	return b.Hash
}

// A remote that switches to another chain after its start check leaves
// rotation within the re-check period, serves nothing more, and comes back
// once it is on the chain again. Before the re-check it kept serving the
// other chain's blocks for as long as venn ran.
func TestChainSwitchLeavesRotation(t *testing.T) {
	const recheck = 300 * time.Millisecond
	good := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	sw := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	m := NewMetrics(nil)
	p := startPool(t, PoolConfig{ChainRecheck: recheck}, testConfigs([]string{sw.URL(), good.URL()}, nil), m)
	r := p.members()[0]
	want := good.BlockHash(10)

	sw.SwitchChain(5)
	switched := time.Now()
	// The bound is one re-check period; the slack is for a busy machine.
	waitWithin(t, 10*recheck, "the switched remote out of rotation", func() bool { return !r.healthy(p.now()) })
	t.Logf("out of rotation %v after the switch (re-check every %v)", time.Since(switched).Round(time.Millisecond), recheck)
	if got := testutil.ToFloat64(m.cc.wrong.WithLabelValues("test", "n0")); got != 1 {
		t.Errorf("venn_remote_wrong_chain = %v, want 1", got)
	}

	sw.ResetCalls()
	for range 40 {
		if got := blockTenHash(t, p); got != want {
			t.Fatalf("block 10 served as %s, another chain's: want %s", got, want)
		}
	}
	if got := sw.Calls("eth_getBlockByNumber"); got != 0 {
		t.Fatalf("the switched remote got %d block calls after it left rotation", got)
	}

	sw.SwitchChain(0)
	waitWithin(t, 10*recheck, "the remote back in rotation", func() bool { return r.healthy(p.now()) })
	if got := testutil.ToFloat64(m.cc.wrong.WithLabelValues("test", "n0")); got != 0 {
		t.Errorf("venn_remote_wrong_chain = %v once back, want 0", got)
	}
}

// A remote whose connection is made again (its heads stream, its WebSocket
// call connection, its breaker closing after an outage) may be another
// endpoint: its chain id is asked at once, not at the next periodic check
// (an hour away here), and no answer of the other chain is served in
// between where the remote was down (its breaker open). Before, the chain
// id was asked once at start.
func TestChainRecheckedOnReconnect(t *testing.T) {
	tests := []struct {
		name  string
		cfg   PoolConfig
		tweak func(n *fakenode.Node, c *Config)
		// outage waits, while the node is down, for what must have happened.
		outage func(r *Remote) bool
		// calls: clients call while the node comes back; none may get an
		// answer of the other chain. Only where the breaker opened: a
		// reconnect does not take a remote out of rotation.
		calls bool
		poke  bool // clients call, answers not judged
	}{
		{
			name:  "heads stream reconnected",
			cfg:   PoolConfig{BlockTime: 5 * time.Second}, // no polls to open the breaker
			tweak: func(n *fakenode.Node, c *Config) { c.WSURL = n.WSURL() },
		},
		{
			name:  "websocket call connection dialled again",
			cfg:   PoolConfig{BlockTime: 5 * time.Second},
			tweak: func(n *fakenode.Node, c *Config) { c.URL = n.WSURL() },
			poke:  true, // a call dials; it is answered, and the check follows
		},
		{
			name:   "breaker closing after an outage",
			cfg:    PoolConfig{Breaker: BreakerConfig{Failures: 1, Cooldown: 200 * time.Millisecond}},
			outage: func(r *Remote) bool { return r.brk.State() == breaker.Open },
			calls:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			good := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
			sw := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
			cfg := tt.cfg
			cfg.ChainRecheck = time.Hour
			rs := testConfigs([]string{sw.URL(), good.URL()}, func(i int, c *Config) {
				if i == 0 && tt.tweak != nil {
					tt.tweak(sw, c)
				}
			})
			p := startPool(t, cfg, rs, nil)
			r := p.members()[0]
			if tt.calls {
				blockTenHash(t, p) // the call connection is up
			}
			if r.cfg.WSURL != "" {
				waitFor(t, "the heads stream", func() bool { return r.cc.State() != health.Unknown && !r.cc.HeadsHeld() })
			}

			sw.SetDown(true)
			if tt.outage != nil {
				waitFor(t, "the outage seen", func() bool { return tt.outage(r) })
			}
			sw.SwitchChain(5)
			sw.SetDown(false)

			want := good.BlockHash(10)
			waitWithin(t, 10*time.Second, "the remote found on the other chain", func() bool {
				switch {
				case tt.calls:
					if got := blockTenHash(t, p); got != want {
						t.Fatalf("block 10 served as %s, the other chain's: want %s", got, want)
					}
				case tt.poke:
					_, _ = call(t, p, "eth_getBlockByNumber", `["0xa",false]`)
				}
				return r.cc.State() == health.Wrong
			})
			if r.healthy(p.now()) {
				t.Fatal("remote on the other chain still healthy")
			}
		})
	}
}
