package remotes

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
)

// logsHook answers eth_getLogs through fn (other methods go to the node);
// fn sees the filter's numeric range (0, 0 for tags) and its params.
func logsHook(fn func(from, to uint64, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool)) fakenode.Hook {
	return func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method != "eth_getLogs" {
			return nil, nil, false
		}
		lr, err := evm.ParseLogRange(params)
		if err != nil {
			return nil, nil, false
		}
		return fn(lr.From.Number, lr.To.Number, params)
	}
}

// refLogs is what one uncapped node answers for the filter, to compare a
// split answer with. The node is asked in process, not through a pool: the
// whole range in one call is the slowest call of these tests, and a pool
// would hold it to a remote's attempt timeout.
func refLogs(t *testing.T, head uint64, filter string) json.RawMessage {
	t.Helper()
	ref := fakenode.New(fakenode.Options{ChainID: testChainID, Head: head})
	t.Cleanup(ref.Close)
	res := shadowCall(ref, "eth_getLogs", json.RawMessage(filter))
	if len(res) < 100 {
		t.Fatalf("reference answer too small to compare: %s", res)
	}
	return res
}

// A split eth_getLogs is bounded whatever range the client asks for: a
// range past the head is the node's to answer, the parts are capped (and refused before any
// upstream call when over the cap), and so is the merged size.
func TestGetLogsBounded(t *testing.T) {
	const head = 500
	tests := []struct {
		name      string
		give      string // params
		maxRange  uint64 // configured cap of the remote; 0 none
		maxParts  int
		maxBytes  int64
		wantCode  int    // 0: success, the same logs as wantRange from one node
		wantRange string // params for the reference node
		wantCalls int64  // eth_getLogs calls upstream; -1 any
	}{
		{name: "over the parts cap: refused, nothing sent",
			give: `[{"fromBlock":"0x0","toBlock":"0x1f4"}]`, maxRange: 1, maxParts: 50,
			wantCode: jrpc.CodeLimitExceeded, wantCalls: 0},
		// A range ending far above the head is the node's to refuse (geth:
		// "block range extends beyond current head block"); venn sends it
		// once, unsplit, and never answers with the logs up to the head.
		{name: "toBlock max uint64 with a cap: one unsplit call, the node's answer",
			give: `[{"fromBlock":"0x0","toBlock":"0xffffffffffffffff"}]`, maxRange: 1, maxParts: 50,
			wantCode: jrpc.CodeInvalidParams, wantCalls: 1},
		{name: "toBlock max uint64 - 1: one unsplit call, the node's answer",
			give: `[{"fromBlock":"0x1","toBlock":"0xfffffffffffffffe"}]`, maxRange: 50,
			wantCode: jrpc.CodeInvalidParams, wantCalls: 1},
		{name: "toBlock max uint64 with no cap: one call, the node's answer",
			give:     `[{"fromBlock":"0x1","toBlock":"0xffffffffffffffff"}]`,
			wantCode: jrpc.CodeInvalidParams, wantCalls: 1},
		{name: "merged result over the size cap",
			give: `[{"fromBlock":"0x1","toBlock":"0x1f4"}]`, maxRange: 50, maxBytes: 100_000,
			wantCode: jrpc.CodeLimitExceeded, wantCalls: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want json.RawMessage
			if tt.wantCode == 0 {
				want = refLogs(t, head, tt.wantRange)
			}
			n := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: head})
			p := testPool(t, PoolConfig{GetLogsMaxParts: tt.maxParts}, []*fakenode.Node{n}, func(_ int, c *Config) {
				c.MaxLogsRange = tt.maxRange
				c.MaxResponseBytes = tt.maxBytes
			})
			n.ResetCalls()
			got, err := call(t, p, "eth_getLogs", tt.give)
			if code := wireCode(err); code != tt.wantCode || (tt.wantCode == 0 && err != nil) {
				t.Fatalf("err = %v (code %d), want code %d", err, code, tt.wantCode)
			}
			if tt.wantCode == jrpc.CodeLimitExceeded && !strings.Contains(err.Error(), "narrow the range") {
				t.Errorf("limit error %q does not say how to fix it", err)
			}
			if tt.wantCode == 0 && !jsonEqual(t, got, want) {
				t.Errorf("got %d bytes, want the %d bytes of %s", len(got), len(want), tt.wantRange)
			}
			if c := n.Calls("eth_getLogs"); tt.wantCalls >= 0 && c != tt.wantCalls {
				t.Errorf("%d upstream eth_getLogs calls, want %d", c, tt.wantCalls)
			}
		})
	}
}

// A "too many results" hint sizes the parts of the query that got it and
// nothing else; a range cap the remote names is remembered.
func TestGetLogsLearnsOnlyRangeCaps(t *testing.T) {
	const dense = "0x00000000000000000000000000000000000000d1"
	tests := []struct {
		name string
		// refuse answers a query over too many blocks, or returns nil.
		refuse         func(from, to uint64, params json.RawMessage) *jrpc.Error
		wantFirst      int64  // upstream calls for the first (refused) query
		wantSecond     int64  // upstream calls for the next, sparse query
		wantRemembered uint64 // the remote's span cap afterwards
	}{
		{name: "result-count hint is not a cap",
			refuse: func(from, to uint64, params json.RawMessage) *jrpc.Error {
				if !strings.Contains(string(params), dense) || to-from+1 <= 20 {
					return nil
				}
				return &jrpc.Error{Code: -32005, Message: fmt.Sprintf(
					"query returned more than 10000 results. Try with this block range [0x%x, 0x%x].", from, from+19)}
			},
			wantFirst: 1 + 25, wantSecond: 1, wantRemembered: 0},
		{name: "range cap is remembered",
			refuse: func(from, to uint64, _ json.RawMessage) *jrpc.Error {
				if to-from+1 <= 100 {
					return nil
				}
				return &jrpc.Error{Code: -32000, Message: "exceed maximum block range: 100"}
			},
			wantFirst: 1 + 5, wantSecond: 5, wantRemembered: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 500})
			p := testPool(t, PoolConfig{}, []*fakenode.Node{n}, nil)
			n.SetHook(logsHook(func(from, to uint64, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
				if e := tt.refuse(from, to, params); e != nil {
					return nil, e, true
				}
				return nil, nil, false
			}))
			n.ResetCalls()
			if _, err := call(t, p, "eth_getLogs", `[{"fromBlock":"0x1","toBlock":"0x1f4","address":"`+dense+`"}]`); err != nil {
				t.Fatal(err)
			}
			if got := n.Calls("eth_getLogs"); got != tt.wantFirst {
				t.Errorf("first query: %d upstream calls, want %d", got, tt.wantFirst)
			}
			n.ResetCalls()
			if _, err := call(t, p, "eth_getLogs", `[{"fromBlock":"0x1","toBlock":"0x1f4","address":"0x00000000000000000000000000000000000000e2"}]`); err != nil {
				t.Fatal(err)
			}
			if got := n.Calls("eth_getLogs"); got != tt.wantSecond {
				t.Errorf("next sparse query: %d upstream calls, want %d", got, tt.wantSecond)
			}
			if got := p.members()[0].maxLogsSpan(); got != tt.wantRemembered {
				t.Errorf("remembered span %d, want %d", got, tt.wantRemembered)
			}
		})
	}
}

// A learned span cap has a floor, keeps the tightest value while fresh and
// expires.
func TestLearnedSpan(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name       string
		configured uint64
		learn      []uint64 // one a minute
		after      time.Duration
		want       uint64
	}{
		{name: "floor", learn: []uint64{3}, want: minLearnedSpan},
		{name: "tighter wins", learn: []uint64{500, 200}, want: 200},
		{name: "wider ignored while fresh", learn: []uint64{200, 500}, want: 200},
		{name: "expires", learn: []uint64{200}, after: learnedSpanTTL, want: 0},
		{name: "renewed by the same cap", learn: []uint64{200, 200}, after: learnedSpanTTL - 30*time.Second, want: 200},
		{name: "configured cap lower", configured: 50, learn: []uint64{200}, want: 50},
		{name: "configured cap back after expiry", configured: 500, learn: []uint64{200}, after: 2 * learnedSpanTTL, want: 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := t0
			r := &Remote{cfg: Config{MaxLogsRange: tt.configured}, log: slog.New(slog.DiscardHandler),
				now: func() time.Time { return now }}
			for i, s := range tt.learn {
				now = t0.Add(time.Duration(i) * time.Minute)
				r.learnSpan(s)
			}
			now = now.Add(tt.after)
			if got := r.maxLogsSpan(); got != tt.want {
				t.Fatalf("maxLogsSpan = %d, want %d", got, tt.want)
			}
		})
	}
}

// eth_getLogs up to "latest" does not need the one remote at the very tip:
// while it is full, a remote a block behind answers.
func TestGetLogsLatestWhileTipBusy(t *testing.T) {
	tests := []struct {
		name     string
		give     string
		maxRange uint64
	}{
		{name: "toBlock absent", give: `[{"fromBlock":"0x50"}]`},
		{name: "toBlock latest", give: `[{"fromBlock":"0x50","toBlock":"latest"}]`},
		{name: "both tags", give: `[{"fromBlock":"latest","toBlock":"latest"}]`},
		{name: "split up to latest", give: `[{"fromBlock":"0x14","toBlock":"latest"}]`, maxRange: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tip := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
			behind := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
			behind.SetLag(1)
			// Polling once is enough: heads stay 100 and 99.
			p := testPool(t, PoolConfig{MaxLag: 5, BlockTime: time.Hour}, []*fakenode.Node{tip, behind}, func(i int, c *Config) {
				c.MaxLogsRange = tt.maxRange
				if i == 0 {
					c.MaxInFlight = 1
				} else {
					c.Tier = TierSecondary
				}
			})
			waitFor(t, "heads", func() bool { return p.Heads().Head() == 100 && p.members()[1].Head() == 99 })

			// Hold the tip's only slot with a call that waits.
			entered, release := make(chan struct{}), make(chan struct{})
			tip.SetHook(func(method string, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
				if method == "eth_getBalance" {
					close(entered)
					<-release
				}
				return nil, nil, false
			})
			var wg sync.WaitGroup
			wg.Go(func() {
				_, _ = call(t, p, "eth_getBalance", `["0x0000000000000000000000000000000000000001","latest"]`)
			})
			defer wg.Wait()
			defer close(release)
			<-entered

			res, err := call(t, p, "eth_getLogs", tt.give)
			if err != nil {
				t.Fatalf("tip busy: %v", err)
			}
			if got := tip.Calls("eth_getLogs"); got != 0 {
				t.Errorf("the busy tip got %d eth_getLogs calls", got)
			}
			if got := behind.Calls("eth_getLogs"); got == 0 {
				t.Error("the remote behind was not asked")
			}
			var logs []json.RawMessage
			if err := json.Unmarshal(res, &logs); err != nil {
				t.Fatalf("result %s: %v", res, err)
			}
		})
	}
}

// A split part whose result is not an array is a bad reply from that
// remote: another remote answers it, and no logs are lost.
func TestGetLogsNonArrayPartFailsOver(t *testing.T) {
	const filter = `[{"fromBlock":"0x1","toBlock":"0x1f4"}]`
	want := refLogs(t, 500, filter)
	tests := []struct {
		name     string
		give     json.RawMessage // n0's result for every part
		both     bool            // n1 answers the same
		wantCode int
	}{
		{name: "null", give: nil},
		{name: "object", give: json.RawMessage(`{"logs":[]}`)},
		{name: "string", give: json.RawMessage(`"0x"`)},
		{name: "every remote", give: nil, both: true, wantCode: jrpc.CodeNoRemote},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n0 := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 500})
			n1 := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 500})
			p := testPool(t, PoolConfig{}, []*fakenode.Node{n0, n1}, func(i int, c *Config) {
				c.MaxLogsRange = 50
				if i == 1 {
					c.Tier = TierSecondary
				}
			})
			bad := logsHook(func(_, _ uint64, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
				return tt.give, nil, true
			})
			n0.SetHook(bad)
			if tt.both {
				n1.SetHook(bad)
			}
			n0.ResetCalls()
			n1.ResetCalls()
			got, err := call(t, p, "eth_getLogs", filter)
			if code := wireCode(err); code != tt.wantCode || (tt.wantCode == 0 && err != nil) {
				t.Fatalf("err = %v (code %d), want code %d", err, code, tt.wantCode)
			}
			if tt.wantCode != 0 {
				return
			}
			if !jsonEqual(t, got, want) {
				t.Fatalf("got %d bytes, want %d: logs lost", len(got), len(want))
			}
			if a, b := n0.Calls("eth_getLogs"), n1.Calls("eth_getLogs"); a != 10 || b != 10 {
				t.Errorf("calls n0 %d, n1 %d; want 10 each (every part failed over)", a, b)
			}
		})
	}
}

// Parts finish out of order (a slow tail, nested splits) and still merge
// in block order, with no more parts in flight than the concurrency limit
// at every nesting level together.
func TestGetLogsMergedInOrder(t *testing.T) {
	const filter = `[{"fromBlock":"0x1","toBlock":"0x1f4"}]`
	want := refLogs(t, 500, filter)
	tests := []struct {
		name        string
		configured  uint64 // venn's cap
		real        uint64 // the node's cap: below venn's, parts split again
		concurrency int
	}{
		{name: "flat", configured: 20, concurrency: 8},
		{name: "nested", configured: 100, real: 30, concurrency: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 500})
			p := testPool(t, PoolConfig{GetLogsConcurrency: tt.concurrency}, []*fakenode.Node{n}, func(_ int, c *Config) {
				c.MaxLogsRange = tt.configured
			})
			n.SetMaxLogsRange(tt.real)
			n.SetSlowTail(0.5, 20*time.Millisecond)
			var inFlight, peak atomic.Int64
			n.SetHook(logsHook(func(_, _ uint64, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
				k := inFlight.Add(1)
				for {
					old := peak.Load()
					if k <= old || peak.CompareAndSwap(old, k) {
						break
					}
				}
				time.Sleep(2 * time.Millisecond) // the node's work: lets calls overlap
				inFlight.Add(-1)
				return nil, nil, false
			}))
			got, err := call(t, p, "eth_getLogs", filter)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, want) {
				t.Fatalf("merged %d bytes differ from the whole range (%d bytes)", len(got), len(want))
			}
			if k := peak.Load(); k > int64(tt.concurrency) {
				t.Errorf("%d parts in flight, limit %d", k, tt.concurrency)
			}
		})
	}
}

// Too-large answers that a smaller range cannot cure fail over; a split
// that cannot go further answers with the provider's own error, not an
// internal one.
func TestGetLogsTooLargeAnswers(t *testing.T) {
	const filter = `[{"fromBlock":"0x1","toBlock":"0x64"}]`
	addresses := &jrpc.Error{Code: -32000, Message: "exceed max addresses or topics per search position"}
	results := &jrpc.Error{Code: -32005, Message: "query returned more than 10000 results"}
	tests := []struct {
		name       string
		n0, n1     *jrpc.Error // every eth_getLogs answer; nil: the node's
		wantCode   int
		wantN0     int64
		wantN1     int64 // -1: any
		wantInText string
	}{
		{name: "too many addresses fails over without splitting", n0: addresses,
			wantN0: 1, wantN1: 1},
		{name: "too many addresses everywhere: the provider's error", n0: addresses, n1: addresses,
			wantCode: -32000, wantN0: 1, wantN1: 1, wantInText: "exceed max addresses"},
		{name: "split to single blocks: the provider's error", n0: results, n1: results,
			wantCode: -32005, wantN0: -1, wantN1: -1, wantInText: "query returned more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n0 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
			n1 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
			p := testPool(t, PoolConfig{}, []*fakenode.Node{n0, n1}, func(i int, c *Config) {
				if i == 1 {
					c.Tier = TierSecondary
				}
			})
			for _, x := range []struct {
				n *fakenode.Node
				e *jrpc.Error
			}{{n0, tt.n0}, {n1, tt.n1}} {
				if x.e != nil {
					x.n.SetHook(logsHook(func(_, _ uint64, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
						return nil, x.e, true
					}))
				}
			}
			n0.ResetCalls()
			n1.ResetCalls()
			_, err := call(t, p, "eth_getLogs", filter)
			if code := wireCode(err); code != tt.wantCode || (tt.wantCode == 0 && err != nil) {
				t.Fatalf("err = %v (code %d), want code %d", err, code, tt.wantCode)
			}
			if tt.wantInText != "" && !strings.Contains(err.Error(), tt.wantInText) {
				t.Errorf("err %q, want the provider's %q", err, tt.wantInText)
			}
			if got := n0.Calls("eth_getLogs"); tt.wantN0 >= 0 && got != tt.wantN0 {
				t.Errorf("n0 got %d calls, want %d", got, tt.wantN0)
			}
			if got := n1.Calls("eth_getLogs"); tt.wantN1 >= 0 && got != tt.wantN1 {
				t.Errorf("n1 got %d calls, want %d", got, tt.wantN1)
			}
		})
	}
}

// Only remotes that could take the call decide whether to split: an
// uncapped remote that is denied eth_getLogs (or down) must not stop the
// split that the capped one needs.
func TestGetLogsSplitIgnoresRemotesOutOfPlay(t *testing.T) {
	const head = 500
	filter := `[{"fromBlock":"0x1","toBlock":"0xc8"}]`
	want := refLogs(t, head, filter)
	uncapped := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: head})
	capped := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: head})
	p := testPool(t, PoolConfig{}, []*fakenode.Node{uncapped, capped}, func(i int, c *Config) {
		if i == 0 {
			c.Methods.Deny = []string{"eth_getLogs"}
		} else {
			c.MaxLogsRange = 50
		}
	})
	got, err := call(t, p, "eth_getLogs", filter)
	if err != nil {
		t.Fatalf("eth_getLogs: %v", err)
	}
	if !jsonEqual(t, got, want) {
		t.Errorf("split answer differs from one node's")
	}
	if c := capped.Calls("eth_getLogs"); c != 4 {
		t.Errorf("capped remote got %d calls, want 4 parts of 50", c)
	}
	if c := uncapped.Calls("eth_getLogs"); c != 0 {
		t.Errorf("denied remote got %d eth_getLogs calls", c)
	}
}

// A split that runs out of call_deadline says so, and how to fix it,
// whichever part noticed first.
func TestGetLogsSplitTimeout(t *testing.T) {
	n := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 500})
	p := testPool(t, PoolConfig{CallDeadline: 150 * time.Millisecond, GetLogsConcurrency: 1}, []*fakenode.Node{n},
		func(_ int, c *Config) { c.MaxLogsRange = 10 })
	n.SetLatency(40 * time.Millisecond)
	_, err := call(t, p, "eth_getLogs", `[{"fromBlock":"0x1","toBlock":"0x1f4"}]`)
	je := jrpc.ToWire(err)
	if err == nil || je.Code != jrpc.CodeTimeout || !strings.Contains(je.Message, "narrow the range") {
		t.Fatalf("err = %v, want -32051 saying to narrow the range", err)
	}
}
