package remotes

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/breaker"
	"github.com/venn-gateway/venn/remotes/health"
)

const testChainID = 1337

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testPool starts a pool over the given nodes (remote i is named n<i>) and
// waits until every remote on the right chain is verified.
func testPool(t *testing.T, cfg PoolConfig, nodes []*fakenode.Node, tweak func(i int, c *Config)) *Pool {
	t.Helper()
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = n.URL()
	}
	return startPool(t, cfg, testConfigs(urls, tweak), nil)
}

// testTimeout is the attempt timeout of a test's remotes when the test is
// not about timeouts (those set their own): long enough that no attempt on
// a busy machine runs into it, so that a slow machine never turns into a
// failover or a timeout the test did not ask for.
const testTimeout = 10 * time.Second

// testConfigs names remote i n<i> with urls[i] and attempt timeout
// testTimeout, then lets tweak change it.
func testConfigs(urls []string, tweak func(i int, c *Config)) []Config {
	rs := make([]Config, len(urls))
	for i, u := range urls {
		rs[i] = Config{Name: fmt.Sprintf("n%d", i), URL: u, Timeout: testTimeout}
		if tweak != nil {
			tweak(i, &rs[i])
		}
	}
	return rs
}

// learnBlockTime as a test's block time leaves the pool to learn it.
const learnBlockTime = -1

// startPool starts a pool over rs on chain "test" (metrics m may be nil),
// stops it when the test ends, and waits until every remote's chain id is
// known and every remote on the right chain has a head. Its block time is
// 50 ms unless cfg says (learnBlockTime: learned).
func startPool(t *testing.T, cfg PoolConfig, rs []Config, m *Metrics) *Pool {
	t.Helper()
	return startPoolWith(t, cfg, rs, m, nil)
}

// startPoolWith is startPool with before called on the pool before it
// starts.
func startPoolWith(t *testing.T, cfg PoolConfig, rs []Config, m *Metrics, before func(*Pool)) *Pool {
	t.Helper()
	cfg.Chain = "test"
	cfg.ChainID = testChainID
	switch cfg.BlockTime {
	case 0:
		cfg.BlockTime = 50 * time.Millisecond
	case learnBlockTime:
		cfg.BlockTime = 0
	}
	if cfg.CallDeadline == 0 {
		cfg.CallDeadline = 5 * time.Second
	}
	if cfg.Availability.Probe == nil {
		cfg.Availability = noProbe() // its calls would be counted: avail_test.go turns it on
	}
	p, err := NewPool(cfg, rs, nil, m)
	if err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(p)
	}
	// Start waits for a ready remote, but not for long: a test may have none.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := p.Start(ctx); err != nil {
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
		for _, r := range p.members() {
			if r.cc.State() == health.Unknown || r.Head() == 0 && r.chainVerified() {
				return false
			}
		}
		return true
	})
	// The pool fetches one older block at its first head, to learn the
	// block time: done before the test counts calls. Two heads that the
	// remotes report a block apart can teach it first, and then there is
	// no fetch.
	waitFor(t, "the block time fetch", func() bool {
		tip := p.heads.t.Tip()
		return tip == nil || tip.Number <= 1 || p.heads.bootstraps.Load() > 0 || p.heads.t.Learned() != 0
	})
	return p
}

// waitFor polls cond until it holds, failing t after 5s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.WaitFor(t, 5*time.Second, what, cond)
}

func call(t *testing.T, p *Pool, method, params string) (json.RawMessage, error) {
	t.Helper()
	return p.Call(context.Background(), method, json.RawMessage(params))
}

// wireCode is the JSON-RPC code a client gets for err, 0 for none.
func wireCode(err error) int {
	if err == nil {
		return 0
	}
	return jrpc.ToWire(err).Code
}

func TestLaggingRemoteLeavesRotation(t *testing.T) {
	a := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	b := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	b.SetLag(20)
	p := testPool(t, PoolConfig{MaxLag: 5}, []*fakenode.Node{a, b}, nil)
	waitFor(t, "lag seen", func() bool { return p.Heads().Head() == 100 && p.members()[1].Head() == 80 })
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
	waitFor(t, "catch up", func() bool { return p.members()[1].Head() == 100 })
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
	waitFor(t, "heads", func() bool { return p.Heads().Head() == 100 && p.members()[1].Head() == 97 })
	b.ResetCalls()
	for i := range 20 {
		res, err := call(t, p, "eth_getBlockByNumber", fmt.Sprintf(`["0x%x",false]`, 98+i%3))
		if err != nil || isNull(res) {
			t.Fatalf("block %d: %s, %v", 98+i%3, res, err)
		}
	}
	if got := servedCalls(b, "eth_getBlockByNumber"); got != 0 {
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
	p := testPool(t, PoolConfig{Breaker: BreakerConfig{Failures: 3, Cooldown: 200 * time.Millisecond}, BlockTime: time.Hour},
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
		return p.members()[0].brk.State() == breaker.Closed
	})
}

func TestGetLogsSplitMatchesWholeRange(t *testing.T) {
	const params = `[{"fromBlock":"0x1","toBlock":"0x1f4"}]`
	want := refLogs(t, 500, params)
	limited := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 500})
	limited.SetMaxLogsRange(50)
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
			got, err := call(t, p, "eth_getLogs", params)
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
	notes := make([]jrpc.Note, 20)
	for i := range 20 {
		wg.Go(func() {
			ctx := jrpc.WithNote(context.Background(), &notes[i])
			res, err := p.Call(ctx, "eth_getBalance", json.RawMessage(`["0x0000000000000000000000000000000000000001","0x10"]`))
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
	// A caller served another's answer is told the remote that gave it
	// (gRPC's upstream_id, X-Venn-Remote).
	for i, nt := range notes {
		if nt.Remote != "n0" {
			t.Fatalf("caller %d's note names remote %q, want n0", i, nt.Remote)
		}
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

// front serves a fake node through an httptest server the test controls, for
// what the node has no knob for: an empty 200 reply, stopping it like a
// process (its listener closes and open connections are cut), and a record
// of the request headers that reached the upstream.
type front struct {
	node  *fakenode.Node
	srv   *httptest.Server
	empty atomic.Bool // answer 200 with an empty body without asking the node
	// closeNext closes the connection of the next request once it is read,
	// without a reply: a keep-alive connection the remote's idle timeout
	// closed as the request arrived.
	closeNext atomic.Bool

	mu      sync.Mutex
	headers []http.Header // of every request, WebSocket handshakes included
}

func newFront(t *testing.T, opts fakenode.Options) *front {
	t.Helper()
	f := &front{node: fakenode.New(opts)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	// Cleanups run last first: the node (and the WebSocket connections it
	// holds, which the server no longer tracks) closes before the server.
	t.Cleanup(f.srv.Close)
	t.Cleanup(f.node.Close)
	return f
}

func (f *front) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.headers = append(f.headers, r.Header.Clone())
	f.mu.Unlock()
	if f.closeNext.CompareAndSwap(true, false) {
		io.Copy(io.Discard, r.Body)
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			c.Close()
		}
		return
	}
	if f.empty.Load() {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		return
	}
	f.node.ServeHTTP(w, r)
}

func (f *front) URL() string   { return f.srv.URL + "/" }
func (f *front) WSURL() string { return "ws" + strings.TrimPrefix(f.srv.URL, "http") + "/" }

// stop is a stopped process: new connections are refused.
func (f *front) stop() { f.srv.Close() }

func (f *front) seenHeaders() []http.Header {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.headers)
}
