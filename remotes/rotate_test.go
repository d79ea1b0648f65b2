package remotes

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
)

// rotationPace is how often each worker of a rotation load calls: a
// client polling, whose failed calls fail fast and do not spin.
const rotationPace = 20 * time.Millisecond

// rotationLoad keeps workers calling p until stop, each at most once per
// rotationPace, counting the calls that failed and the ones answered.
type rotationLoad struct {
	failed, ok atomic.Int64
	lastErr    atomic.Value
	stop       chan struct{}
	wg         sync.WaitGroup
}

func startRotationLoad(p *Pool, workers int) *rotationLoad {
	l := &rotationLoad{stop: make(chan struct{})}
	for range workers {
		l.wg.Go(func() {
			tick := time.NewTicker(rotationPace)
			defer tick.Stop()
			for {
				select {
				case <-l.stop:
					return
				case <-tick.C:
				}
				_, err := p.Call(context.Background(), "eth_getBalance",
					json.RawMessage(`["0x0000000000000000000000000000000000000001","0x10"]`))
				if err != nil {
					l.failed.Add(1)
					l.lastErr.Store(err.Error())
				} else {
					l.ok.Add(1)
				}
			}
		})
	}
	return l
}

func (l *rotationLoad) end() { close(l.stop); l.wg.Wait() }

// rotate reloads p with its one remote at u and waits until the remote
// in selection is the new one and has served calls of the load.
func rotate(t testing.TB, p *Pool, cfg PoolConfig, u string, l *rotationLoad) {
	t.Helper()
	rotateAll(t, p, cfg, []string{u}, l)
}

// rotateAll reloads p with remote i at urls[i] and waits until every
// remote in selection is at its new URL and the load has had answers.
func rotateAll(t testing.TB, p *Pool, cfg PoolConfig, urls []string, l *rotationLoad) {
	t.Helper()
	rs := make([]Config, len(urls))
	for i, u := range urls {
		rs[i] = Config{Name: fmt.Sprintf("n%d", i), URL: u, Timeout: 2 * time.Second}
	}
	if _, err := p.Reconfigure(cfg, rs); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the replacements to take over", func() bool {
		for i, r := range p.members() {
			if r.cfg.URL != urls[i] {
				return false
			}
		}
		return true
	})
	served := l.ok.Load()
	testkit.WaitFor(t, 10*time.Second, "calls answered after the rotation", func() bool { return l.ok.Load() >= served+4 })
}

// A reload that rotates the only remote's key, under load, fails no call:
// at the same endpoint the replacement takes over the verified chain and
// head at once; at another endpoint the old remote serves until the
// replacement is verified. The old code failed about 7 calls a rotation
// with -32050 (100 ms remotes): the replacement served only once its
// chain id and head were known, and the old one had left.
func TestRotationDropsNoCall(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	b := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	a.SetLatency(100 * time.Millisecond)
	b.SetLatency(100 * time.Millisecond)
	keys := []string{"/v3/KEYaaaa0000111122223333", "/v3/KEYbbbb4444555566667777"}
	tests := []struct {
		name string
		urls []string // rotated through in turn
	}{
		{"same endpoint, new key", []string{a.URL() + keys[0], a.URL() + keys[1]}},
		{"another endpoint", []string{a.URL() + keys[0], b.URL() + keys[1]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := PoolConfig{Chain: "test", ChainID: testChainID, BlockTime: time.Second, CallDeadline: 5 * time.Second}
			p := startPool(t, cfg, []Config{{Name: "n0", URL: tt.urls[0], Timeout: 2 * time.Second}}, nil)
			cfg = *p.conf()
			l := startRotationLoad(p, 8)
			defer l.end()
			for i := 1; i <= 4; i++ {
				rotate(t, p, cfg, tt.urls[i%len(tt.urls)], l)
			}
			l.end()
			l.stop = make(chan struct{}) // the deferred end finds it open
			if n := l.failed.Load(); n != 0 {
				t.Errorf("%d of %d calls failed across 4 rotations; last: %v", n, n+l.ok.Load(), l.lastErr.Load())
			}
		})
	}
}

// A reload that comes while a replacement is pending drops it: it never
// serves, closes, and the later config is the one that takes over.
func TestRotationSupersededByReload(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	b := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	c := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	cfg := PoolConfig{Chain: "test", ChainID: testChainID, BlockTime: time.Second, CallDeadline: 5 * time.Second}
	p := startPool(t, cfg, []Config{{Name: "n0", URL: a.URL(), Timeout: 2 * time.Second}}, nil)
	cfg = *p.conf()
	b.SetDown(true) // its replacement cannot be verified: it stays pending
	old := p.members()[0]
	if _, err := p.Reconfigure(cfg, []Config{{Name: "n0", URL: b.URL(), Timeout: 2 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	if p.members()[0] != old || len(p.swaps) != 1 {
		t.Fatalf("the old remote left before its replacement was verified")
	}
	pendingSlot := p.swaps[0].new.slot
	if _, err := call(t, p, "eth_getBalance", `["0x0000000000000000000000000000000000000001","0x10"]`); err != nil {
		t.Fatalf("the old remote does not serve while its replacement is pending: %v", err)
	}
	if _, err := p.Reconfigure(cfg, []Config{{Name: "n0", URL: c.URL(), Timeout: 2 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "c to take over", func() bool { return p.members()[0].cfg.URL == c.URL() })
	p.mu.Lock()
	free := p.slots&(1<<pendingSlot) == 0 || p.members()[0].slot == pendingSlot
	p.mu.Unlock()
	if !free {
		t.Errorf("the dropped replacement still holds its slot")
	}
	b.SetDown(false)
	if _, err := call(t, p, "eth_getBalance", `["0x0000000000000000000000000000000000000001","0x10"]`); err != nil {
		t.Fatal(err)
	}
	if n := b.Calls("eth_getBalance"); n != 0 {
		t.Errorf("the dropped replacement served %d calls", n)
	}
}

func TestSameEndpoint(t *testing.T) {
	const k1, k2 = "KEYaaaa0000111122223333", "KEYbbbb4444555566667777"
	tests := []struct {
		name string
		a, b Config
		want bool
	}{
		{"key in the path", Config{URL: "https://eth.example.io/v3/" + k1}, Config{URL: "https://eth.example.io/v3/" + k2}, true},
		{"key in the query", Config{URL: "https://eth.example.io/rpc?apikey=abc"}, Config{URL: "https://eth.example.io/rpc?apikey=xyz"}, true},
		{"user info", Config{URL: "https://u:p1@eth.example.io"}, Config{URL: "https://u:p2@eth.example.io"}, true},
		{"header value", Config{URL: "https://eth.example.io", Headers: map[string]string{"X-Api-Key": "a"}},
			Config{URL: "https://eth.example.io", Headers: map[string]string{"X-Api-Key": "b"}}, true},
		{"other settings only", Config{URL: "https://eth.example.io", Timeout: time.Second}, Config{URL: "https://eth.example.io", Weight: new(2.0)}, true},
		{"another host", Config{URL: "https://eth.example.io/v3/" + k1}, Config{URL: "https://eth2.example.io/v3/" + k1}, false},
		{"another port", Config{URL: "http://10.0.0.1:8545"}, Config{URL: "http://10.0.0.1:8546"}, false},
		{"another network in the path", Config{URL: "https://rpc.example.io/eth/" + k1}, Config{URL: "https://rpc.example.io/polygon/" + k1}, false},
		{"another network in the query", Config{URL: "https://rpc.example.io/?network=mainnet"}, Config{URL: "https://rpc.example.io/?network=sepolia"}, false},
		{"a header added", Config{URL: "https://eth.example.io"}, Config{URL: "https://eth.example.io", Headers: map[string]string{"X-Api-Key": "b"}}, false},
		{"another ws url", Config{URL: "https://eth.example.io", WSURL: "wss://eth.example.io/ws"}, Config{URL: "https://eth.example.io", WSURL: "wss://ws.example.io/ws"}, false},
	}
	for _, tt := range tests {
		if got := sameEndpoint(tt.a, tt.b); got != tt.want {
			t.Errorf("%s: sameEndpoint = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// BenchmarkKeyRotation rotates the keys of both remotes of a chain under
// load (8 callers, each calling every 20 ms or when its last call
// returned, 100 ms remotes): once per op. failed/rotation is the
// calls that failed per rotation; the figure is 0. Both remotes
// keep their endpoint ("same-endpoint": the key in the path changes) or
// move to another ("new-endpoint").
func BenchmarkKeyRotation(b *testing.B) {
	nodes := make([]*fakenode.Node, 4)
	for i := range nodes {
		nodes[i] = fakenode.Start(b, fakenode.Options{ChainID: testChainID, Head: 100})
		nodes[i].SetLatency(100 * time.Millisecond)
	}
	keys := []string{"/v3/KEYaaaa0000111122223333", "/v3/KEYbbbb4444555566667777"}
	for _, bb := range []struct {
		name string
		urls func(round int) []string
	}{
		{"same-endpoint", func(round int) []string {
			k := keys[round%2]
			return []string{nodes[0].URL() + k, nodes[1].URL() + k}
		}},
		{"new-endpoint", func(round int) []string {
			k := keys[round%2]
			return []string{nodes[2*(round%2)].URL() + k, nodes[2*(round%2)+1].URL() + k}
		}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			cfg := PoolConfig{Chain: "test", ChainID: testChainID, BlockTime: time.Second, CallDeadline: 5 * time.Second}
			first := bb.urls(0)
			p := startPoolB(b, cfg, []Config{{Name: "n0", URL: first[0], Timeout: 2 * time.Second},
				{Name: "n1", URL: first[1], Timeout: 2 * time.Second}})
			cfg = *p.conf()
			l := startRotationLoad(p, 8)
			round := 0
			b.ResetTimer()
			for b.Loop() {
				round++
				rotateAll(b, p, cfg, bb.urls(round), l)
			}
			b.StopTimer()
			l.end()
			b.ReportMetric(float64(l.failed.Load())/float64(round), "failed/rotation")
			b.ReportMetric(float64(l.ok.Load())/float64(round), "ok/rotation")
		})
	}
}

// startPoolB starts a pool for a benchmark and waits for every remote to
// be in rotation.
func startPoolB(b *testing.B, cfg PoolConfig, rs []Config) *Pool {
	b.Helper()
	cfg.Availability = noProbe()
	p, err := NewPool(cfg, rs, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			b.Error(err)
		}
	})
	testkit.WaitFor(b, 10*time.Second, "every remote in rotation", func() bool {
		for _, s := range p.Status() {
			if !s.InRotation {
				return false
			}
		}
		return true
	})
	return p
}
