package remotes

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/remotes/breaker"
	"github.com/venn-gateway/venn/remotes/health"
	"github.com/venn-gateway/venn/remotes/score"
)

// weighed is a scoring section that sets every weight of w (nil: none,
// the defaults).
func weighed(w *score.Weights) score.Config {
	if w == nil {
		return score.Config{}
	}
	v := *w
	return score.Config{Latency: &v.Latency, Errors: &v.Errors, Throttle: &v.Throttle, Lag: &v.Lag, Misbehaviour: &v.Misbehaviour}
}

func ptr[T any](v T) *T { return &v }

// offlinePool is a pool over n remotes that are never dialled: NewPool
// does no I/O and the pool is not started. Its remotes are on the right
// chain at head 100, so scoring sees them in rotation.
func offlinePool(t *testing.T, cfg PoolConfig, n int, tweak func(i int, c *Config)) *Pool {
	t.Helper()
	urls := make([]string, n)
	for i := range urls {
		urls[i] = fmt.Sprintf("http://127.0.0.1:9/%d", i) // never dialled
	}
	cfg.Chain, cfg.ChainID = "test", testChainID
	if cfg.MaxLag == 0 {
		cfg.MaxLag = DefaultMaxLag
	}
	p, err := NewPool(cfg, testConfigs(urls, tweak), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, r := range p.members() {
			r.t.Close()
		}
	})
	for _, r := range p.members() {
		r.cc.Set(health.OK)
		r.head.Store(100)
	}
	return p
}

// observeMs records k samples of about ms milliseconds (±jitter) in r.
func observeMs(r *Remote, k int, ms, jitter float64) {
	for range k {
		x := ms * (1 + jitter*(2*rand.Float64()-1))
		r.lat.Observe(time.Duration(x * float64(time.Millisecond)))
	}
}

func setFloat(a interface{ Store(uint64) }, v float64) { a.Store(math.Float64bits(v)) }

func TestScoreOrdersByWeights(t *testing.T) {
	// Each case sets remote 0 and remote 1 (both primary, both measured at
	// 2 ms unless the case says otherwise) and says which are preferred.
	tests := []struct {
		name    string
		weights *score.Weights // nil: defaults
		setup   func(p *Pool, a, b *Remote)
		want    [2]bool // preferred
		better  int     // the remote with the lower score; -1 equal
	}{
		{name: "equal remotes share", want: [2]bool{true, true}, better: -1},
		{name: "latency", setup: func(_ *Pool, _, b *Remote) { observeMs(b, 200, 6, 0) },
			want: [2]bool{true, false}, better: 0},
		{name: "latency weighed out", weights: &score.Weights{Latency: 0, Errors: 8},
			setup: func(_ *Pool, _, b *Remote) { observeMs(b, 200, 6, 0) }, want: [2]bool{true, true}, better: -1},
		{name: "errors", setup: func(_ *Pool, _, b *Remote) { setFloat(&b.errorEWMA, 0.2) },
			want: [2]bool{true, false}, better: 0},
		{name: "errors outweigh latency", setup: func(_ *Pool, a, b *Remote) {
			observeMs(b, 200, 2.6, 0) // 30% slower
			setFloat(&a.errorEWMA, 0.3)
		}, want: [2]bool{false, true}, better: 1},
		{name: "errors weighed out", weights: &score.Weights{Latency: 1},
			setup: func(_ *Pool, _, b *Remote) { setFloat(&b.errorEWMA, 0.5) }, want: [2]bool{true, true}, better: -1},
		{name: "throttles", setup: func(_ *Pool, a, _ *Remote) { setFloat(&a.sc.throttles, 0.3) },
			want: [2]bool{false, true}, better: 1},
		{name: "lag", setup: func(_ *Pool, _, b *Remote) { b.head.Store(97); setFloat(&b.sc.lagAvg, 3) },
			want: [2]bool{true, false}, better: 0},
		{name: "misbehaviour counted by the consensus checks", setup: func(_ *Pool, a, _ *Remote) { a.mb.count.Add(1) },
			want: [2]bool{false, true}, better: 1},
		{name: "misbehaviour weighed out", weights: &score.Weights{Latency: 1, Errors: 8},
			setup: func(_ *Pool, _, b *Remote) { b.mb.count.Add(3) }, want: [2]bool{true, true}, better: -1},
		{name: "unmeasured latency counts as the best", setup: func(_ *Pool, _, b *Remote) { b.lat = score.Latency{} },
			want: [2]bool{true, true}, better: -1},
		{name: "unmeasured latency keeps its penalties", setup: func(_ *Pool, _, b *Remote) {
			b.lat = score.Latency{}
			setFloat(&b.errorEWMA, 0.2)
		}, want: [2]bool{true, false}, better: 0},
		{name: "out of rotation: best of the others", setup: func(_ *Pool, a, b *Remote) {
			a.cc.Set(health.Wrong)
			observeMs(b, 200, 4, 0)
		}, want: [2]bool{true, true}, better: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := offlinePool(t, PoolConfig{Scoring: weighed(tt.weights)}, 2, nil)
			a, b := p.members()[0], p.members()[1]
			observeMs(a, 200, 2, 0)
			observeMs(b, 200, 2, 0)
			if tt.setup != nil {
				tt.setup(p, a, b)
			}
			p.rescore(time.Now())
			if got := [2]bool{a.Preferred(), b.Preferred()}; got != tt.want {
				t.Errorf("preferred %v, want %v (scores %.3g, %.3g)", got, tt.want, a.score(), b.score())
			}
			switch sa, sb := a.score(), b.score(); {
			case tt.better == -1 && math.Abs(sa-sb) > 1e-9*sa:
				t.Errorf("scores %.4g and %.4g, want equal", sa, sb)
			case tt.better == 0 && !(sa < sb), tt.better == 1 && !(sb < sa):
				t.Errorf("scores %.4g and %.4g, want remote %d lower", sa, sb, tt.better)
			}
		})
	}
}

// The misbehaviour level halves every half-life.
func TestMisbehaviourDecays(t *testing.T) {
	p := offlinePool(t, PoolConfig{Scoring: score.Config{MisbehaviourHalfLife: time.Minute}}, 1, nil)
	r := p.members()[0]
	now := time.Now()
	r.now = func() time.Time { return now }
	r.mb.count.Add(4)
	for _, tt := range []struct {
		after time.Duration
		want  float64
	}{{0, 4}, {time.Minute, 2}, {3 * time.Minute, 0.5}} {
		if got := r.misbehaviour(now.Add(tt.after)); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("after %v: level %v, want %v", tt.after, got, tt.want)
		}
	}
}

// Two near-equal remotes whose scores cross back and forth with noise: the
// margin keeps both preferred, where a bare "the best one" would flap.
func TestScoreHysteresis(t *testing.T) {
	tests := []struct {
		name     string
		margin   float64
		wantMin  int64 // switches of the preferred set
		wantMax  int64
		wantBoth bool // both preferred at the end
	}{
		{name: "default margin", margin: 0, wantMin: 0, wantMax: 0, wantBoth: true},
		{name: "no margin flaps", margin: 1e-9, wantMin: 20, wantMax: math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := offlinePool(t, PoolConfig{Scoring: score.Config{Margin: tt.margin}}, 2, nil)
			a, b := p.members()[0], p.members()[1]
			now := time.Now()
			for round := range 200 {
				// Every 5 scorings the one 10% slower changes: their
				// scores cross 40 times.
				fast, slow := a, b
				if round/5%2 == 1 {
					fast, slow = b, a
				}
				observeMs(fast, 128, 2.0, 0.05)
				observeMs(slow, 128, 2.2, 0.05)
				p.rescore(now.Add(time.Duration(round) * time.Second))
			}
			sw := a.sc.switches.Load() + b.sc.switches.Load()
			if sw < tt.wantMin || sw > tt.wantMax {
				t.Errorf("%d switches of the preferred set over 200 scorings, want %d..%d", sw, tt.wantMin, tt.wantMax)
			}
			if both := a.Preferred() && b.Preferred(); tt.wantBoth && !both {
				t.Errorf("preferred %v %v, want both", a.Preferred(), b.Preferred())
			}
		})
	}
}

// The same against real calls: two near-equal fake nodes share the calls
// evenly and the preferred set does not change. Their latencies are
// measured on their own clocks: on a busy machine the wall clock would add
// scheduling stalls of several milliseconds, far beyond the 10% between
// them. Each node and its remote have a clock of their own: on one clock, a
// call to one node that overlapped a call to the other (the pool's first
// head polls and checks) took both latencies, and one such sample among a
// remote's first few put it out of the preferred set for the rest of the
// run.
func TestScoreSharesNearEqualRemotes(t *testing.T) {
	clks := []*testClock{newTestClock(), newTestClock()}
	nodes := make([]*fakenode.Node, len(clks))
	urls := make([]string, len(clks))
	for i, c := range clks {
		nodes[i] = fakenode.Start(t, fakenode.Options{ChainID: testChainID, Sleep: c.sleep})
		urls[i] = nodes[i].URL()
	}
	nodes[0].SetLatency(2 * time.Millisecond)
	nodes[1].SetLatency(2200 * time.Microsecond)
	p := startPoolWith(t, PoolConfig{BlockTime: time.Hour, Scoring: score.Config{Interval: 10 * time.Millisecond}},
		testConfigs(urls, nil), nil, func(p *Pool) {
			p.now = clks[0].now
			for i, r := range p.members() {
				r.now = clks[i].now
			}
		})
	for _, n := range nodes {
		n.ResetCalls()
	}
	const calls = 400
	for i := range calls {
		if _, err := call(t, p, "eth_getBalance", balanceOf(i)); err != nil {
			t.Fatal(err)
		}
	}
	sw := p.members()[0].sc.switches.Load() + p.members()[1].sc.switches.Load()
	if sw > 2 {
		t.Errorf("%d switches of the preferred set over %d calls between near-equal remotes", sw, calls)
	}
	for i, n := range nodes {
		if got := n.Calls("eth_getBalance"); got < calls/4 {
			t.Errorf("n%d got %d of %d calls, want a fair share", i, got, calls)
		}
	}
}

// A clearly slower remote leaves the preferred set and gets only the probe
// share; its score is exported.
func TestScoreRoutesAwayFromSlowRemote(t *testing.T) {
	nodes := []*fakenode.Node{
		fakenode.Start(t, fakenode.Options{ChainID: testChainID}),
		fakenode.Start(t, fakenode.Options{ChainID: testChainID}),
	}
	nodes[1].SetLatency(15 * time.Millisecond)
	reg := prometheus.NewRegistry()
	rs := testConfigs([]string{nodes[0].URL(), nodes[1].URL()}, nil)
	p := startPool(t, PoolConfig{BlockTime: time.Hour, Scoring: score.Config{Interval: 10 * time.Millisecond, ProbeShare: ptr(0.02)}}, rs, NewMetrics(reg))
	// Until measured, both share; then the slow one leaves.
	waitFor(t, "the slow remote out of the preferred set", func() bool {
		_, _ = call(t, p, "eth_getBalance", balanceOf(rand.IntN(1<<20)))
		return !p.members()[1].Preferred() && p.members()[0].Preferred()
	})
	nodes[1].ResetCalls()
	const calls = 300
	for i := range calls {
		if _, err := call(t, p, "eth_getBalance", balanceOf(i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := nodes[1].Calls("eth_getBalance"); got > calls/10 {
		t.Errorf("the slow remote got %d of %d calls, want about the 2%% probe share", got, calls)
	}
	fast := testutil.ToFloat64(p.members()[0].sc.gauge)
	slow := testutil.ToFloat64(p.members()[1].sc.gauge)
	if !(fast > 0 && slow > 2*fast) {
		t.Errorf("venn_remote_score: fast %v, slow %v", fast, slow)
	}
	if n, err := testutil.GatherAndCount(reg, "venn_remote_score"); err != nil || n != 2 {
		t.Errorf("venn_remote_score has %d series (%v), want 2", n, err)
	}
}

// A remote that failed until its breaker opened, and then recovered, gets
// calls again only through the probe share: its score still carries its
// faults, and with head polls off nothing else would reach it. The first
// of them after the cooldown is the breaker's half-open probe. Its fault
// share fades with the calls it answers, not with time: the wait is
// bounded by calls (a busy machine makes fewer in a second), by those
// that reach it where the probe share should bring it back (a fault
// share fades to a hundredth in 90), by all calls where nothing should.
func TestProbeShareBringsRemoteBack(t *testing.T) {
	tests := []struct {
		name     string
		probe    float64
		wantBack bool
		enough   func(calls, reached int64) bool
	}{
		{name: "probe share", probe: 0.1, wantBack: true, enough: func(_, reached int64) bool { return reached >= 200 }},
		{name: "no probe share", probe: 0, wantBack: false, enough: func(calls, _ int64) bool { return calls >= 300 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := []*fakenode.Node{
				fakenode.Start(t, fakenode.Options{ChainID: testChainID}),
				fakenode.Start(t, fakenode.Options{ChainID: testChainID}),
			}
			for _, n := range nodes {
				// Equal latencies well above the noise of a loaded
				// machine: the recovered remote's score recovers fully.
				n.SetLatency(3 * time.Millisecond)
			}
			p := testPool(t, PoolConfig{BlockTime: time.Hour, Breaker: BreakerConfig{Failures: 2, Cooldown: 50 * time.Millisecond},
				Scoring: score.Config{Interval: 10 * time.Millisecond, ProbeShare: &tt.probe}}, nodes, nil)
			bad := p.members()[1]
			nodes[1].SetFailStatus(503)
			// Its faults take it out of the preferred set, perhaps before
			// its breaker opens; with a probe share its breaker opens too.
			waitFor(t, "n1 out of the preferred set", func() bool {
				_, _ = call(t, p, "eth_getBalance", balanceOf(rand.IntN(1<<20)))
				return !bad.Preferred() && (tt.probe == 0 || bad.brk.State() == breaker.Open)
			})
			nodes[1].SetFailStatus(0)
			nodes[1].ResetCalls()
			for i := int64(0); !tt.enough(i, nodes[1].Calls("eth_getBalance")); i++ {
				if _, err := call(t, p, "eth_getBalance", balanceOf(int(i))); err != nil {
					t.Fatal(err)
				}
				if bad.Preferred() && bad.brk.State() == breaker.Closed {
					break
				}
			}
			back := bad.Preferred() && bad.brk.State() == breaker.Closed
			if back != tt.wantBack {
				t.Fatalf("recovered remote back in the preferred set: %v, want %v (%d calls reached it, breaker %d)",
					back, tt.wantBack, nodes[1].Calls("eth_getBalance"), bad.brk.State())
			}
			if !tt.wantBack {
				if got := nodes[1].Calls("eth_getBalance"); got != 0 {
					t.Errorf("without a probe share the excluded remote got %d calls", got)
				}
			}
		})
	}
}
