package remotes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
)

const testChainID = 1337

// testPool starts a pool over the given nodes (remote i is named n<i>) and
// waits until every remote on the right chain is verified.
func testPool(t *testing.T, cfg PoolConfig, nodes []*fakenode.Node, tweak func(i int, c *Config)) *Pool {
	t.Helper()
	cfg.Chain = "test"
	cfg.ChainID = testChainID
	if cfg.BlockTime == 0 {
		cfg.BlockTime = 50 * time.Millisecond
	}
	if cfg.CallDeadline == 0 {
		cfg.CallDeadline = 5 * time.Second
	}
	var rs []Config
	for i, n := range nodes {
		c := Config{Name: fmt.Sprintf("n%d", i), URL: n.URL(), Timeout: 2 * time.Second}
		if tweak != nil {
			tweak(i, &c)
		}
		rs = append(rs, c)
	}
	p, err := NewPool(cfg, rs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
	waitFor(t, "remotes verified", func() bool {
		for i, r := range p.remotes {
			_ = i
			if r.chainState.Load() == chainUnknown || r.Head() == 0 && r.chainVerified() {
				return false
			}
		}
		return true
	})
	return p
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
}

func call(t *testing.T, p *Pool, method, params string) (json.RawMessage, error) {
	t.Helper()
	return p.Call(context.Background(), method, json.RawMessage(params))
}

func wireCode(err error) int {
	var je *jrpc.Error
	if errors.As(err, &je) {
		return je.Code
	}
	return 0
}

func TestFailoverRules(t *testing.T) {
	const balance = `["0x00000000000000000000000000000000000000aa","latest"]`
	tests := []struct {
		name string
		// fault is applied to the first remote (n0); n1 is healthy.
		fault    func(n *fakenode.Node)
		method   string
		params   string
		wantErr  int // wire code, 0 = success
		wantN0   int64
		wantN1   int64
		wantMore bool // n1 may be asked (failover happened)
	}{
		{name: "revert returns at once", fault: func(n *fakenode.Node) {},
			method: "eth_call", params: `[{"to":"0x0000000000000000000000000000000000000001","data":"0xdeadbeef"},"latest"]`, wantErr: 3, wantN0: 1, wantN1: 0},
		{name: "invalid params return at once", fault: func(n *fakenode.Node) { n.SetRPCError(-32602, "invalid argument 0: hex string without 0x prefix") },
			method: "eth_getBalance", params: balance, wantErr: -32602, wantN0: 1, wantN1: 0},
		{name: "http 503 fails over", fault: func(n *fakenode.Node) { n.SetFailStatus(503) },
			method: "eth_getBalance", params: balance, wantN0: 1, wantN1: 1},
		{name: "http 429 fails over", fault: func(n *fakenode.Node) { n.SetFailStatus(429) },
			method: "eth_getBalance", params: balance, wantN0: 1, wantN1: 1},
		{name: "rate-limit error fails over", fault: func(n *fakenode.Node) { n.SetRPCError(-32005, "rate limit exceeded") },
			method: "eth_getBalance", params: balance, wantN0: 1, wantN1: 1},
		{name: "header not found fails over", fault: func(n *fakenode.Node) { n.SetRPCError(-32000, "header not found") },
			method: "eth_getBalance", params: balance, wantN0: 1, wantN1: 1},
		{name: "internal error fails over", fault: func(n *fakenode.Node) { n.SetRPCError(-32603, "internal error") },
			method: "eth_getBalance", params: balance, wantN0: 1, wantN1: 1},
		{name: "garbage reply fails over", fault: func(n *fakenode.Node) { n.SetGarbage(true) },
			method: "eth_getBalance", params: balance, wantN0: 1, wantN1: 1},
		{name: "dropped connection fails over", fault: func(n *fakenode.Node) { n.SetDrop(true) },
			method: "eth_getBalance", params: balance, wantN0: 1, wantN1: 1},
		{name: "method not found fails over", fault: func(n *fakenode.Node) {
			n.SetRPCError(-32601, "the method eth_getBalance does not exist/is not available")
		},
			method: "eth_getBalance", params: balance, wantN0: 1, wantN1: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n0 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
			n1 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
			// n0 is primary and n1 secondary, so n0 is always asked first.
			p := testPool(t, PoolConfig{}, []*fakenode.Node{n0, n1}, func(i int, c *Config) {
				if i == 1 {
					c.Tier = TierSecondary
				}
			})
			tt.fault(n0)
			n0.ResetCalls()
			n1.ResetCalls()
			_, err := call(t, p, tt.method, tt.params)
			if got := wireCode(err); got != tt.wantErr || (tt.wantErr == 0 && err != nil) {
				t.Fatalf("err = %v (code %d), want code %d", err, got, tt.wantErr)
			}
			if got := n0.Calls(tt.method); got != tt.wantN0 {
				t.Errorf("n0 got %d calls, want %d", got, tt.wantN0)
			}
			if got := n1.Calls(tt.method); got != tt.wantN1 {
				t.Errorf("n1 got %d calls, want %d", got, tt.wantN1)
			}
		})
	}
}

func TestWrongChainNeverUsed(t *testing.T) {
	good := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	wrong := fakenode.Start(t, fakenode.Options{ChainID: 5})
	p := testPool(t, PoolConfig{}, []*fakenode.Node{wrong, good}, nil)
	if p.remotes[0].chainState.Load() != chainWrong {
		t.Fatal("remote on chain 5 not marked wrong")
	}
	for range 20 {
		if _, err := call(t, p, "eth_getBalance", `["0x0000000000000000000000000000000000000001","latest"]`); err != nil {
			t.Fatal(err)
		}
	}
	if got := wrong.Calls("eth_getBalance"); got != 0 {
		t.Fatalf("wrong-chain remote got %d calls", got)
	}
}

func TestLaggingRemoteLeavesRotation(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	b := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	b.SetLag(20)
	p := testPool(t, PoolConfig{MaxLag: 5}, []*fakenode.Node{a, b}, nil)
	waitFor(t, "lag seen", func() bool { return p.Head() == 100 && p.remotes[1].Head() == 80 })
	for range 20 {
		if _, err := call(t, p, "eth_getBalance", `["0x0000000000000000000000000000000000000001","latest"]`); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.Calls("eth_getBalance"); got != 0 {
		t.Fatalf("lagging remote got %d calls", got)
	}
	// It comes back once it catches up.
	b.SetLag(0)
	waitFor(t, "catch up", func() bool { return p.remotes[1].Head() == 100 })
	waitFor(t, "back in rotation", func() bool {
		_, _ = call(t, p, "eth_getBalance", `["0x0000000000000000000000000000000000000002","latest"]`)
		return b.Calls("eth_getBalance") > 0
	})
}

func TestHeightAwareRouting(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	b := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	b.SetLag(3) // within MaxLag: in rotation, but without blocks 98..100
	p := testPool(t, PoolConfig{MaxLag: 5}, []*fakenode.Node{a, b}, nil)
	waitFor(t, "heads", func() bool { return p.Head() == 100 && p.remotes[1].Head() == 97 })
	for i := range 20 {
		res, err := call(t, p, "eth_getBlockByNumber", fmt.Sprintf(`["0x%x",false]`, 98+i%3))
		if err != nil || isNull(res) {
			t.Fatalf("block %d: %s, %v", 98+i%3, res, err)
		}
	}
	if got := b.Calls("eth_getBlockByNumber"); got != 0 {
		t.Fatalf("remote without the block got %d calls", got)
	}
}

func TestFallbackOnlyWhenNothingElse(t *testing.T) {
	prim := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	fb := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	p := testPool(t, PoolConfig{}, []*fakenode.Node{prim, fb}, func(i int, c *Config) {
		if i == 1 {
			c.Tier = TierFallback
		}
	})
	for range 20 {
		if _, err := call(t, p, "eth_getBalance", `["0x0000000000000000000000000000000000000001","latest"]`); err != nil {
			t.Fatal(err)
		}
	}
	if got := fb.Calls("eth_getBalance"); got != 0 {
		t.Fatalf("fallback used %d times while primary was healthy", got)
	}
	prim.SetFailStatus(503)
	if _, err := call(t, p, "eth_getBalance", `["0x0000000000000000000000000000000000000001","latest"]`); err != nil {
		t.Fatalf("fallback did not serve: %v", err)
	}
	if fb.Calls("eth_getBalance") != 1 {
		t.Fatal("fallback not asked when primary failed")
	}
}

func TestBreakerOpensAndProbesBack(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	b := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	p := testPool(t, PoolConfig{BreakerFailures: 3, BreakerCooldown: 200 * time.Millisecond, BlockTime: time.Hour},
		[]*fakenode.Node{a, b}, func(i int, c *Config) {
			if i == 1 {
				c.Tier = TierSecondary
			}
		})
	a.SetFailStatus(503)
	for range 10 {
		if _, err := call(t, p, "eth_getBalance", `["0x0000000000000000000000000000000000000001","latest"]`); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.Calls("eth_getBalance"); got != 3 {
		t.Fatalf("broken remote got %d calls, want 3 then the breaker opens", got)
	}
	a.SetFailStatus(0)
	waitFor(t, "probe back in", func() bool {
		_, _ = call(t, p, "eth_getBalance", `["0x0000000000000000000000000000000000000001","latest"]`)
		return p.remotes[0].brk.state.Load() == breakerClosed
	})
}

func TestGetLogsSplitMatchesWholeRange(t *testing.T) {
	ref := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 500})
	limited := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 500})
	limited.SetMaxLogsRange(50)
	filter := `[{"fromBlock":"0x1","toBlock":"0x1f4","address":["0x%s"]}]`
	whole := testPool(t, PoolConfig{}, []*fakenode.Node{ref}, nil)
	want, err := call(t, whole, "eth_getLogs", `[{"fromBlock":"0x1","toBlock":"0x1f4"}]`)
	if err != nil {
		t.Fatal(err)
	}
	_ = filter
	tests := []struct {
		name  string
		tweak func(i int, c *Config)
	}{
		{name: "configured cap", tweak: func(_ int, c *Config) { c.MaxLogsRange = 50 }},
		{name: "learned from range errors", tweak: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := testPool(t, PoolConfig{GetLogsConcurrency: 3}, []*fakenode.Node{limited}, tt.tweak)
			limited.ResetCalls()
			got, err := call(t, p, "eth_getLogs", `[{"fromBlock":"0x1","toBlock":"0x1f4"}]`)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, want) {
				t.Fatalf("split result differs from the whole range: got %d bytes, want %d", len(got), len(want))
			}
			if limited.Calls("eth_getLogs") < 10 {
				t.Fatalf("only %d upstream calls: not split", limited.Calls("eth_getLogs"))
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("bad json %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("bad json %s: %v", b, err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func TestSendRawTransactionBroadcast(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	b := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	c := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	p := testPool(t, PoolConfig{BroadcastFanout: 3}, []*fakenode.Node{a, b, c}, nil)
	const tx = `["0x02f86b0180843b9aca00850df8475800825208940000000000000000000000000000000000000001880de0b6b3a764000080c0"]`
	first, err := call(t, p, "eth_sendRawTransaction", tx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "broadcast to all", func() bool {
		return a.Calls("eth_sendRawTransaction") == 1 && b.Calls("eth_sendRawTransaction") == 1 && c.Calls("eth_sendRawTransaction") == 1
	})
	// Every remote now says "already known": that is success, with the hash.
	again, err := call(t, p, "eth_sendRawTransaction", tx)
	if err != nil {
		t.Fatalf("resend: %v", err)
	}
	if string(again) != string(first) {
		t.Fatalf("resend hash %s, first %s", again, first)
	}
	// A dead remote among them does not fail the send.
	a.SetFailStatus(503)
	if _, err := call(t, p, "eth_sendRawTransaction", `["0x02f86b01018203e8"]`); err != nil {
		t.Fatal(err)
	}
}

func TestDeduplicatesConcurrentReads(t *testing.T) {
	n := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	p := testPool(t, PoolConfig{}, []*fakenode.Node{n}, nil)
	n.SetLatency(100 * time.Millisecond)
	n.ResetCalls()
	var wg sync.WaitGroup
	results := make([]string, 20)
	for i := range 20 {
		wg.Go(func() {
			res, err := call(t, p, "eth_getBalance", `["0x0000000000000000000000000000000000000001","0x10"]`)
			if err != nil {
				t.Error(err)
			}
			results[i] = string(res)
		})
	}
	wg.Wait()
	if got := n.Calls("eth_getBalance"); got > 2 {
		t.Fatalf("%d upstream calls for 20 identical concurrent reads", got)
	}
	for _, r := range results {
		if r != results[0] {
			t.Fatalf("callers got different answers: %q vs %q", r, results[0])
		}
	}
}

func TestNoRemoteAndDeadline(t *testing.T) {
	n := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	p := testPool(t, PoolConfig{CallDeadline: 300 * time.Millisecond}, []*fakenode.Node{n}, nil)
	n.SetLatency(2 * time.Second)
	_, err := call(t, p, "eth_getBalance", `["0x0000000000000000000000000000000000000001","latest"]`)
	if got := wireCode(err); got != jrpc.CodeTimeout {
		t.Fatalf("slow remote: err %v, want code %d", err, jrpc.CodeTimeout)
	}
	n.SetLatency(0)
	n.SetFailStatus(503)
	_, err = call(t, p, "eth_getBalance", `["0x0000000000000000000000000000000000000002","latest"]`)
	if got := wireCode(err); got != jrpc.CodeNoRemote {
		t.Fatalf("dead remote: err %v, want code %d", err, jrpc.CodeNoRemote)
	}
}
