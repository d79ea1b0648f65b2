package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
)

const (
	testAddr = "0x00000000000000000000000000000000000000aa"
	hashA    = "0xaa00000000000000000000000000000000000000000000000000000000000001"
	hashB    = "0xbb00000000000000000000000000000000000000000000000000000000000001"
)

// view is a chain with a settled line and canonical hashes by number.
type view struct {
	mu      sync.Mutex
	settled uint64
	known   bool
	canon   map[uint64]string
	changed chan struct{}
	// hashless: the settled blocks' hashes are not known.
	hashless bool
}

func newView(settled uint64, canon map[uint64]string) *view {
	return &view{settled: settled, known: true, canon: canon, changed: make(chan struct{})}
}

func (v *view) Settled() (uint64, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.settled, v.known
}

func (v *view) CanonicalHash(n uint64) (string, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	h, ok := v.canon[n]
	return h, ok
}

// settledHash is the test chain's hash of settled block n.
func settledHash(n uint64) string { return fmt.Sprintf("0x5e%062x", n) }

// SettledHash knows every settled block's hash, but while hashless is set.
func (v *view) SettledHash(_ context.Context, n uint64) (string, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.hashless || !v.known || n > v.settled {
		return "", false
	}
	return settledHash(n), true
}

func (v *view) CanonicalNumber(hash string) (uint64, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for n, h := range v.canon {
		if h == hash {
			return n, true
		}
	}
	return 0, false
}

func (v *view) Changed() <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.changed
}

// reorg replaces block n's hash and wakes the followers.
func (v *view) reorg(n uint64, hash string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.canon[n] = hash
	close(v.changed)
	v.changed = make(chan struct{})
}

// isRevert is the remotes' classification of a revert, in short.
func isRevert(_ string, err error) bool {
	je, ok := errors.AsType[*jrpc.Error](err)
	return ok && je.Code == 3
}

func testConfig() Config {
	return Config{}.WithDefaults(time.Second, false)
}

func newTestCache(t *testing.T, cfg Config, lower ...Layer) (*Cache, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	c := New(cfg, Options{Chain: "dev", Lower: lower, Metrics: NewMetrics(reg), IsRevert: isRevert})
	t.Cleanup(c.Close)
	return c, reg
}

// upstream answers with res (or err) and counts its calls.
type upstream struct {
	calls atomic.Int64
	res   string
	err   error
}

func (u *upstream) fetch(context.Context, string) (json.RawMessage, error) {
	u.calls.Add(1)
	if u.err != nil {
		return nil, u.err
	}
	return json.RawMessage(u.res), nil
}

func call(method, params string) *evm.Call {
	c := evm.ParseCall(method, json.RawMessage(params))
	return &c
}

func TestServeHitMissAndSpellings(t *testing.T) {
	c, reg := newTestCache(t, testConfig())
	v := newView(100, nil)
	up := &upstream{res: `"0x0"`}
	for _, params := range []string{
		`["` + testAddr + `","0x10"]`,
		`[ "0X00000000000000000000000000000000000000AA", "0X10" ]`,
		`["` + testAddr + `",{"blockNumber":"0x10"}]`,
	} {
		res, err, _ := c.Serve(context.Background(), call("eth_getBalance", params), v, false, up.fetch)
		if err != nil || string(res) != `"0x0"` {
			t.Fatalf("%s: %s %v", params, res, err)
		}
	}
	if n := up.calls.Load(); n != 1 {
		t.Fatalf("upstream calls %d, want 1: a zero balance is cached and spellings share it", n)
	}
	if got := testutil.ToFloat64(c.m.requests.WithLabelValues("dev", "eth_getBalance", "memory", "hit")); got != 2 {
		t.Errorf("memory hits %v, want 2", got)
	}
	if n, err := testutil.GatherAndCount(reg, "venn_cache_entries"); err != nil || n != 1 {
		t.Errorf("venn_cache_entries series %d %v", n, err)
	}
}

// TestServeBypass: a client's no-cache reads nothing and stores the fresh
// answer, which the next call is served.
func TestServeBypass(t *testing.T) {
	c, _ := newTestCache(t, testConfig())
	v := newView(100, nil)
	get := call("eth_getCode", `["`+testAddr+`","0x5"]`)
	old, fresh := &upstream{res: `"0x"`}, &upstream{res: `"0x60"`}
	if _, _, o := c.Serve(context.Background(), get, v, false, old.fetch); o != Miss {
		t.Fatalf("first call: %v, want a miss", o)
	}
	if res, _, o := c.Serve(context.Background(), get, v, true, fresh.fetch); o != Bypass || string(res) != `"0x60"` {
		t.Fatalf("bypass: %s %v", res, o)
	}
	if res, _, o := c.Serve(context.Background(), get, v, false, old.fetch); o != Hit || string(res) != `"0x60"` {
		t.Fatalf("after the bypass: %s %v, want the fresh answer stored", res, o)
	}
}

func TestServeNeverStores(t *testing.T) {
	revert := &jrpc.Error{Code: 3, Message: "execution reverted", Data: json.RawMessage(`"0x08c379a0"`)}
	tests := []struct {
		name   string
		method string
		params string
		up     *upstream
		cfg    func(*Config)
		calls  int64
	}{
		{name: "header not found", method: "eth_getBalance", params: `["` + testAddr + `","0x5"]`,
			up: &upstream{err: &jrpc.Error{Code: -32000, Message: "header not found"}}, calls: 2},
		// null pinned to the settled block's hash: the remote lacks it,
		// and the call goes once more by number, twice.
		{name: "null", method: "eth_getBlockReceipts", params: `["0x5"]`, up: &upstream{res: `null`}, calls: 4},
		{name: "timeout", method: "eth_call", params: `[{"to":"` + testAddr + `"},"0x5"]`,
			up: &upstream{err: context.DeadlineExceeded}, calls: 2},
		{name: "settled revert", method: "eth_call", params: `[{"to":"` + testAddr + `"},"0x5"]`,
			up: &upstream{err: revert}, calls: 1},
		{name: "settled revert, off", method: "eth_call", params: `[{"to":"` + testAddr + `"},"0x5"]`,
			up: &upstream{err: revert}, cfg: func(c *Config) { c.CacheReverts.Settled = new(false) }, calls: 2},
		{name: "recent revert", method: "eth_call", params: `[{"to":"` + testAddr + `"},"0x65"]`,
			up: &upstream{err: revert}, calls: 2},
		{name: "pending", method: "eth_getBalance", params: `["` + testAddr + `","pending"]`, up: &upstream{res: `"0x1"`}, calls: 2},
		{name: "earliest", method: "eth_getBalance", params: `["` + testAddr + `","earliest"]`, up: &upstream{res: `"0x1"`}, calls: 2},
		{name: "latest not pinned", method: "eth_getBalance", params: `["` + testAddr + `","latest"]`, up: &upstream{res: `"0x1"`}, calls: 2},
		{name: "no block", method: "eth_getBalance", params: `["` + testAddr + `"]`, up: &upstream{res: `"0x1"`}, calls: 2},
		{name: "not in the set", method: "eth_gasPrice", params: `[]`, up: &upstream{res: `"0x1"`}, calls: 2},
		{name: "unknown near-head number", method: "eth_getBalance", params: `["` + testAddr + `","0x70"]`, up: &upstream{res: `"0x1"`}, calls: 2},
		{name: "near-head trace", method: "debug_traceCall", params: `[{"to":"` + testAddr + `"},"0x65"]`, up: &upstream{res: `{}`}, calls: 2},
		{name: "settled trace", method: "debug_traceCall", params: `[{"to":"` + testAddr + `"},"0x5"]`, up: &upstream{res: `{}`}, calls: 1},
		{name: "removed", method: "eth_getCode", params: `["` + testAddr + `","0x5"]`, up: &upstream{res: `"0x"`},
			cfg: func(c *Config) { c.Methods.Remove = []string{"eth_getCode"} }, calls: 2},
		{name: "too large", method: "eth_getCode", params: `["` + testAddr + `","0x5"]`, up: &upstream{res: `"0x` + string(make([]byte, 0)) + `"`},
			cfg: func(c *Config) { c.MaxEntryBytes = 3 }, calls: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{}
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			c, _ := newTestCache(t, cfg.WithDefaults(time.Second, false))
			v := newView(100, map[uint64]string{0x65: hashA})
			for range 2 {
				_, _, _ = c.Serve(context.Background(), call(tt.method, tt.params), v, false, tt.up.fetch)
			}
			if n := tt.up.calls.Load(); n != tt.calls {
				t.Fatalf("upstream calls %d, want %d", n, tt.calls)
			}
		})
	}
}

func TestServeRevertAnswer(t *testing.T) {
	c, _ := newTestCache(t, testConfig())
	v := newView(100, nil)
	revert := &jrpc.Error{Code: 3, Message: "execution reverted", Data: json.RawMessage(`"0x08c379a0"`)}
	up := &upstream{err: revert}
	get := call("eth_call", `[{"to":"`+testAddr+`"},"0x5"]`)
	_, _, _ = c.Serve(context.Background(), get, v, false, up.fetch)
	_, err, o := c.Serve(context.Background(), get, v, false, up.fetch)
	je, ok := errors.AsType[*jrpc.Error](err)
	if o != Hit || !ok || je.Code != 3 || string(je.Data) != `"0x08c379a0"` {
		t.Fatalf("%v err %v, want the revert", o, err)
	}
}

// TestServeReorg: a near-head entry is keyed by its block's hash; after a
// reorg the same number is another key, and Run drops the orphan's entry.
func TestServeReorg(t *testing.T) {
	c, _ := newTestCache(t, testConfig())
	v := newView(100, map[uint64]string{0x65: hashA})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx, v, v.Settled) }()
	t.Cleanup(func() { cancel(); <-done })

	get := call("eth_getBalance", `["`+testAddr+`","0x65"]`)
	a := &upstream{res: `"0x1"`}
	if res, _, _ := c.Serve(context.Background(), get, v, false, a.fetch); string(res) != `"0x1"` {
		t.Fatalf("first: %s", res)
	}
	if _, _, o := c.Serve(context.Background(), get, v, false, a.fetch); o != Hit {
		t.Fatalf("second call on the same branch: %v, want a hit", o)
	}
	v.reorg(0x65, hashB)
	b := &upstream{res: `"0x2"`}
	if res, _, o := c.Serve(context.Background(), get, v, false, b.fetch); o != Miss || string(res) != `"0x2"` {
		t.Fatalf("after the reorg: %s %v, want the new branch's answer", res, o)
	}
	orphan := mustKey(t, call("eth_getBalance", `["`+testAddr+`",{"blockHash":"`+hashA+`"}]`), v)
	// The eviction is counted after the delete, on Run's goroutine: wait
	// for the count, then the entry must be gone.
	testkit.WaitFor(t, 5*time.Second, "a reorg eviction", func() bool {
		return testutil.ToFloat64(c.tiers[0].evictions.WithLabelValues("reorg")) >= 1
	})
	if _, ok, _ := c.memory.Get(context.Background(), orphan); ok {
		t.Error("the orphan's entry is still in memory")
	}
	if got := testutil.ToFloat64(c.tiers[0].evictions.WithLabelValues("reorg")); got != 1 {
		t.Errorf("reorg evictions %v, want 1", got)
	}
}

func mustKey(t *testing.T, c *evm.Call, v View) Key {
	t.Helper()
	k, _, ok := deriveKey("dev", c, v)
	if !ok {
		t.Fatal("no key")
	}
	return k
}

// TestServePinsNearHeadFetches: a near-head answer is stored under its
// block's hash, so the fetch is told to pin the call to that hash (a remote
// on another branch must not answer by number for its own block); a
// settled number's is pinned to the settled block's hash (a remote on
// another chain must not answer by number for its own block there
// either), a by-hash call's own block fixes its answer, and an uncached
// one is sent as it came.
func TestServePinsNearHeadFetches(t *testing.T) {
	c, _ := newTestCache(t, testConfig())
	v := newView(100, map[uint64]string{0x65: hashA})
	tests := []struct {
		method, params, want string
	}{
		{"eth_getBalance", `["` + testAddr + `","0x65"]`, hashA},
		{"eth_getBalance", `["` + testAddr + `","0x10"]`, settledHash(0x10)},
		{"eth_getBalance", `["` + testAddr + `",{"blockHash":"` + hashB + `"}]`, ""},
		{"debug_traceCall", `[{"to":"` + testAddr + `"},"0x11"]`, ""}, // a trace's block param is not EIP-1898's
		{"eth_getBalance", `["` + testAddr + `","0x66"]`, ""},         // the window knows no hash: not cached
		{"eth_gasPrice", `[]`, ""},
	}
	for _, tt := range tests {
		got := "unset"
		_, _, _ = c.Serve(context.Background(), call(tt.method, tt.params), v, false,
			func(_ context.Context, pinned string) (json.RawMessage, error) {
				got = pinned
				return json.RawMessage(`"0x1"`), nil
			})
		if got != tt.want {
			t.Errorf("%s %s: fetch pinned to %q, want %q", tt.method, tt.params, got, tt.want)
		}
	}
}

// lacksBlock is the remotes' verdict that the remote lacks the block, in
// short.
func lacksBlock(_ string, err error) bool {
	je, ok := errors.AsType[*jrpc.Error](err)
	return ok && je.Message == "header for hash not found"
}

// byBlock is an upstream that may lack the near-head block by hash (as a
// remote behind the window, or on another branch, does) and answers by
// number; it counts the sends of each kind.
type byBlock struct {
	lacks          atomic.Bool
	lacksAsNull    bool // it says so as geth's eth_getBlockReceipts does: null
	pinned, byNum  atomic.Int64
	byNumberAnswer string
	byNumberErr    error
}

func (b *byBlock) fetch(_ context.Context, pinned string) (json.RawMessage, error) {
	if pinned == "" {
		b.byNum.Add(1)
		if b.byNumberErr != nil {
			return nil, b.byNumberErr
		}
		return json.RawMessage(b.byNumberAnswer), nil
	}
	b.pinned.Add(1)
	switch {
	case b.lacks.Load() && b.lacksAsNull:
		return json.RawMessage(`null`), nil
	case b.lacks.Load():
		return nil, &jrpc.Error{Code: -32000, Message: "header for hash not found"}
	}
	return json.RawMessage(`"0xcafe"`), nil
}

// TestServeUnpinnedWhenTheRemotesLackTheBlock: a near-head miss whose
// pinned fetch finds no remote with the block is sent once more by number,
// as without the cache, and that answer is served, never stored (its
// branch is unknown); once a remote has the block, the pinned answer is
// stored as usual. Other failures are not sent again, nor are settled
// calls, which were never pinned.
func TestServeUnpinnedWhenTheRemotesLackTheBlock(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := New(testConfig(), Options{Chain: "dev", Metrics: NewMetrics(reg), IsRevert: isRevert, LacksBlock: lacksBlock})
	t.Cleanup(c.Close)
	v := newView(100, map[uint64]string{0x65: hashA})
	near := call("eth_getBalance", `["`+testAddr+`","0x65"]`)
	up := &byBlock{byNumberAnswer: `"0xbeef"`}
	up.lacks.Store(true)
	for i := range 2 {
		res, err, o := c.Serve(context.Background(), near, v, false, up.fetch)
		if err != nil || string(res) != `"0xbeef"` || o != Miss {
			t.Fatalf("call %d, no remote with the block: %s %v %v, want the by-number answer, a miss", i, res, err, o)
		}
	}
	if p, n := up.pinned.Load(), up.byNum.Load(); p != 2 || n != 2 {
		t.Fatalf("%d pinned and %d by-number sends, want 2 and 2: the by-number answer was stored", p, n)
	}
	if got := testutil.ToFloat64(c.m.requests.WithLabelValues("dev", "eth_getBalance", "any", "unpinned")); got != 2 {
		t.Errorf("unpinned %v, want 2", got)
	}
	if got := testutil.ToFloat64(c.m.requests.WithLabelValues("dev", "eth_getBalance", "memory", "stored")); got != 0 {
		t.Errorf("stored %v, want 0", got)
	}

	up.lacks.Store(false) // a remote has the block now
	for i, want := range []Outcome{Miss, Hit} {
		res, err, o := c.Serve(context.Background(), near, v, false, up.fetch)
		if err != nil || string(res) != `"0xcafe"` || o != want {
			t.Fatalf("call %d, the block found: %s %v %v, want the pinned answer, %v", i, res, err, o, want)
		}
	}
	if p, n := up.pinned.Load(), up.byNum.Load(); p != 3 || n != 2 {
		t.Errorf("%d pinned and %d by-number sends, want 3 and 2", p, n)
	}

	tests := []struct {
		name   string
		params string
		err    error
	}{
		{"by hash, not pinned", `["` + testAddr + `",{"blockHash":"` + hashB + `"}]`, &jrpc.Error{Code: -32000, Message: "header for hash not found"}},
		{"another failure", `["` + testAddr + `","0x65"]`, &jrpc.Error{Code: -32005, Message: "rate limited"}},
		{"a revert", `["` + testAddr + `","0x65"]`, &jrpc.Error{Code: 3, Message: "execution reverted"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newTestCache(t, testConfig())
			c.lacksBlock = lacksBlock
			var sends []string
			_, err, _ := c.Serve(context.Background(), call("eth_getBalance", tt.params), v, false,
				func(_ context.Context, pinned string) (json.RawMessage, error) {
					sends = append(sends, pinned)
					return nil, tt.err
				})
			if err != tt.err || len(sends) != 1 {
				t.Errorf("%v after sends %q, want the upstream's error after one send", err, sends)
			}
		})
	}

	// The by-number answer fails too: the client gets that error, as it
	// would without the cache.
	byNumErr := &jrpc.Error{Code: -32000, Message: "header not found"}
	lagging := &byBlock{byNumberErr: byNumErr}
	lagging.lacks.Store(true)
	_, err, _ := c.Serve(context.Background(), call("eth_getCode", `["`+testAddr+`","0x65"]`), v, false, lagging.fetch)
	if err != byNumErr {
		t.Errorf("both sends failed: %v, want the by-number error", err)
	}
}

// TestServeHitAllocations: a memory hit costs the canonical params'
// buffer and nothing else (no decoded params, no timeout context).
func TestServeHitAllocations(t *testing.T) {
	c, _ := newTestCache(t, testConfig())
	v := newView(100, nil)
	get := call("eth_call", `[{"to":"`+testAddr+`","data":"0x70a08231"},"0x5"]`)
	up := (&upstream{res: `"0x1"`}).fetch // bound once: a method value costs an allocation
	_, _, _ = c.Serve(context.Background(), get, v, false, up)
	n := testing.AllocsPerRun(100, func() {
		if _, _, o := c.Serve(context.Background(), get, v, false, up); o != Hit {
			t.Fatal(o)
		}
	})
	if n > 1 {
		t.Errorf("a hit allocates %v times, want at most 1", n)
	}
}

// eth_getBlockReceipts of a block a remote lacks is geth's null, not an
// error: a near-head miss answered so by hash is sent once more by number,
// and the block's receipts are served, not a null for a block that exists.
func TestServeUnpinnedReceiptsWhenTheRemotesAnswerNull(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := New(testConfig(), Options{Chain: "dev", Metrics: NewMetrics(reg), IsRevert: isRevert, LacksBlock: lacksBlock})
	t.Cleanup(c.Close)
	v := newView(100, map[uint64]string{0x65: hashA})
	up := &byBlock{byNumberAnswer: `[{"status":"0x1"}]`, lacksAsNull: true}
	up.lacks.Store(true)
	res, err, _ := c.Serve(context.Background(), call("eth_getBlockReceipts", `["0x65"]`), v, false, up.fetch)
	if err != nil || string(res) != up.byNumberAnswer {
		t.Fatalf("got %s %v, want the by-number receipts", res, err)
	}
	if p, n := up.pinned.Load(), up.byNum.Load(); p != 1 || n != 1 {
		t.Fatalf("%d pinned and %d by-number sends, want 1 and 1", p, n)
	}
	if got := testutil.ToFloat64(c.m.requests.WithLabelValues("dev", "eth_getBlockReceipts", "any", "unpinned")); got != 1 {
		t.Errorf("unpinned %v, want 1", got)
	}
}

// TestRequireCanonicalAfterReorg: an EIP-1898 hash with requireCanonical
// is answered from the cache only while its block is canonical: after a
// reorg orphans it, the call goes upstream (geth refuses it there: "not
// currently canonical"), and the entry is evicted; a hash the window does
// not hold is not cached, for the cache cannot tell whether it is
// canonical.
func TestRequireCanonicalAfterReorg(t *testing.T) {
	cfg := testConfig()
	lower := newFakeTier("redis")
	c, _ := newTestCache(t, cfg, cfg.RedisLayer(lower))
	v := newView(100, map[uint64]string{0x65: hashA})
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan struct{})
	go func() { defer close(ran); c.Run(ctx, v, v.Settled) }()
	t.Cleanup(func() { cancel(); <-ran })
	get := func(hash string) *evm.Call {
		return call("eth_getBalance", `["`+testAddr+`",{"blockHash":"`+hash+`","requireCanonical":true}]`)
	}
	up := &upstream{res: `"0x7"`}
	for i, want := range []Outcome{Miss, Hit} {
		if res, _, o := c.Serve(t.Context(), get(hashA), v, false, up.fetch); o != want || string(res) != `"0x7"` {
			t.Fatalf("call %d while canonical: %s %v, want %v", i, res, o, want)
		}
	}
	k := mustKey(t, get(hashA), v)
	v.reorg(0x65, hashB)
	if _, _, o := c.Serve(t.Context(), get(hashA), v, false, up.fetch); o == Hit {
		t.Fatal("served from the cache after its block was orphaned")
	}
	if up.calls.Load() != 2 {
		t.Fatalf("upstream calls %d, want 2: the orphan's call goes upstream", up.calls.Load())
	}
	if !testkit.Poll(10*time.Second, func() bool {
		_, inMem, _ := c.memory.Get(t.Context(), k)
		return !inMem
	}) {
		t.Fatal("the orphan's entry was not evicted")
	}
	if _, _, o := c.Serve(t.Context(), get(hashB), v, false, up.fetch); o != Miss {
		t.Fatalf("the new canonical block's call: %v, want a miss", o)
	}
	if _, _, o := c.Serve(t.Context(), get("0xcc00000000000000000000000000000000000000000000000000000000000001"), v, false, up.fetch); o != None {
		t.Fatalf("a hash the window does not hold: %v, want none", o)
	}
}

// TestServeSettledWithoutItsHash: a settled number whose block's hash the
// cluster cannot say is answered by number, as without the cache, and
// not stored: nothing says which chain's block the answer is of.
func TestServeSettledWithoutItsHash(t *testing.T) {
	c, _ := newTestCache(t, testConfig())
	v := newView(100, nil)
	v.hashless = true
	up := &upstream{res: `"0x1"`}
	for i := range 2 {
		if res, _, o := c.Serve(context.Background(), call("eth_getBalance", `["`+testAddr+`","0x10"]`), v, false, up.fetch); string(res) != `"0x1"` || o != Miss {
			t.Fatalf("call %d: %s %v, want the answer, a miss", i, res, o)
		}
	}
	if n := up.calls.Load(); n != 2 {
		t.Fatalf("upstream calls %d, want 2: an unpinned settled answer was stored", n)
	}
}
