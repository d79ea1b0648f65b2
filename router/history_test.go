package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
)

// fakeHistory is a history store whose answers the test sets.
type fakeHistory struct {
	answer  func(method string, params json.RawMessage) (json.RawMessage, bool, error)
	covered []blockstore.Range
	err     error // every call fails: Postgres is down

	mu   sync.Mutex
	logs [][2]uint64 // Logs ranges asked
}

func (h *fakeHistory) Answer(_ context.Context, c evm.Call) (json.RawMessage, bool, error) {
	if h.err != nil {
		return nil, false, h.err
	}
	if h.answer == nil {
		return nil, false, nil
	}
	return h.answer(c.Method, c.Params)
}

func (h *fakeHistory) Covered(_ context.Context, from, to uint64) ([]blockstore.Range, error) {
	if h.err != nil {
		return nil, h.err
	}
	var out []blockstore.Range
	for _, c := range h.covered {
		if c.To >= from && c.From <= to {
			out = append(out, blockstore.Range{From: max(c.From, from), To: min(c.To, to)})
		}
	}
	return out, nil
}

func (h *fakeHistory) Logs(_ context.Context, _ *evm.LogFilter, from, to uint64) (json.RawMessage, error) {
	if h.err != nil {
		return nil, h.err
	}
	h.mu.Lock()
	h.logs = append(h.logs, [2]uint64{from, to})
	h.mu.Unlock()
	return logsOf("store", from, to), nil
}

func (h *fakeHistory) Put(context.Context, []*evm.Block) error { return h.err }

// logsOf is a fake log list naming its source and range.
func logsOf(source string, from, to uint64) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`[{"src":%q,"from":%d,"to":%d}]`, source, from, to))
}

// logRemotes answers eth_getLogs with logsOf("remote", range) and
// everything else with "0x10", recording what reached it.
type logRemotes struct {
	quietTip
	mu   sync.Mutex
	sent []jrpc.Request
}

func (r *logRemotes) HealthyHead() uint64 { return 1000 }

func (r *logRemotes) ServeCall(_ context.Context, c evm.Call) (json.RawMessage, error) {
	r.mu.Lock()
	r.sent = append(r.sent, jrpc.Request{Method: c.Method, Params: c.Params})
	r.mu.Unlock()
	if c.Method != "eth_getLogs" {
		return json.RawMessage(`"0x10"`), nil
	}
	lr, err := evm.ParseLogRange(c.Params)
	if err != nil || lr.From.Kind != evm.RefNumber || lr.To.Kind != evm.RefNumber {
		return json.RawMessage(`[{"src":"remote","whole":true}]`), nil
	}
	return logsOf("remote", lr.From.Number, lr.To.Number), nil
}

func settledAt(n uint64) func() (uint64, bool) { return func() (uint64, bool) { return n, true } }

func sources(m *Metrics, chain string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range []string{"local", "head", "history", "forger", "remotes"} {
		if v := testutil.ToFloat64(m.answers.WithLabelValues(chain, s)); v != 0 {
			out[s] = v
		}
	}
	return out
}

func TestRouterReadsOnlySettledNumbersFromHistory(t *testing.T) {
	stored := json.RawMessage(`{"from":"history"}`)
	h := &fakeHistory{answer: func(string, json.RawMessage) (json.RawMessage, bool, error) { return stored, true, nil }}
	hash := `"0x` + strings.Repeat("ab", 32) + `"`
	tests := []struct {
		name, method, params string
		history              bool
	}{
		{"settled number", "eth_getBlockByNumber", `["0x64",true]`, true},
		{"above the settled line", "eth_getBlockByNumber", `["0x65",true]`, false},
		{"receipts by number", "eth_getBlockReceipts", `["0x10"]`, true},
		{"receipts by hash", "eth_getBlockReceipts", `[` + hash + `]`, true},
		{"tx by number and index", "eth_getTransactionByBlockNumberAndIndex", `["0x10","0x0"]`, true},
		{"count by number", "eth_getBlockTransactionCountByNumber", `["0x10"]`, true},
		{"uncle count by number", "eth_getUncleCountByBlockNumber", `["0x10"]`, true},
		{"block by hash", "eth_getBlockByHash", `[` + hash + `,false]`, true},
		{"receipt", "eth_getTransactionReceipt", `[` + hash + `]`, true},
		{"transaction", "eth_getTransactionByHash", `[` + hash + `]`, true},
		{"latest without a head window", "eth_getBlockByNumber", `["latest",false]`, false},
		{"finalized without a head window", "eth_getBlockByNumber", `["finalized",false]`, false},
		{"state is not history's", "eth_getBalance", `["0xab","0x10"]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			m := NewMetrics(prometheus.NewRegistry())
			rt := New(Config{Chain: "c", ChainID: 1, History: h, Settled: settledAt(100)}, nil, rec, m)
			res, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: tt.method, Params: json.RawMessage(tt.params)})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(res) == string(stored); got != tt.history {
				t.Fatalf("answered from history: %v, want %v (remotes saw %d calls)", got, tt.history, len(rec.sent))
			}
			want := map[string]float64{"remotes": 1}
			if tt.history {
				want = map[string]float64{"history": 1}
			}
			if got := sources(m, "c"); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("venn_answers_total by source = %v, want %v", got, want)
			}
		})
	}
}

func TestRouterResolvesTagsForHistoryFromTheHeadWindow(t *testing.T) {
	var asked []string
	h := &fakeHistory{answer: func(_ string, params json.RawMessage) (json.RawMessage, bool, error) {
		asked = append(asked, string(params))
		return json.RawMessage(`"stored"`), true, nil
	}}
	head := fakeHead{tags: headstore.Tags{Latest: 100, Safe: 90, Finalized: 80}, ok: true}
	rt := New(Config{Chain: "c", ChainID: 1, MaxLag: 5, History: h, Settled: settledAt(85)}, head, &recorder{}, nil)
	for _, tag := range []string{"finalized", "safe"} {
		if _, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: "eth_getBlockByNumber",
			Params: json.RawMessage(`["` + tag + `",false]`)}); err != nil {
			t.Fatal(err)
		}
	}
	// finalized is 80, at or below the settled line 85; safe is 90, above.
	if len(asked) != 1 || asked[0] != `["0x50",false]` {
		t.Fatalf("history asked %v, want only finalized, pinned to 0x50", asked)
	}
}

func TestRouterFallsThroughWhenHistoryFails(t *testing.T) {
	h := &fakeHistory{err: errors.New("dial tcp 127.0.0.1:5432: connection refused")}
	rec := &logRemotes{}
	m := NewMetrics(nil)
	rt := New(Config{Chain: "c", ChainID: 1, History: h, Settled: settledAt(100)}, nil, rec, m)
	for _, req := range []jrpc.Request{
		{Method: "eth_getBlockByNumber", Params: json.RawMessage(`["0x10",false]`)},
		{Method: "eth_getTransactionReceipt", Params: json.RawMessage(`["0x` + strings.Repeat("ab", 32) + `"]`)},
		{Method: "eth_getLogs", Params: json.RawMessage(`[{"fromBlock":"0x1","toBlock":"0x20"}]`)},
	} {
		if _, err := rt.ServeRPC(context.Background(), &req); err != nil {
			t.Fatalf("%s: client error %v while Postgres is down", req.Method, err)
		}
	}
	if got := sources(m, "c"); got["remotes"] != 3 || len(got) != 1 {
		t.Fatalf("answers by source %v, want 3 from the remotes", got)
	}
	if testutil.ToFloat64(m.writeThrough.WithLabelValues("c", wtQueued)) != 0 {
		t.Fatal("a block was queued for a store that is down")
	}
}

func TestRouterMergesLogsOfAPartlyCoveredRange(t *testing.T) {
	tests := []struct {
		name     string
		covered  []blockstore.Range
		give     string
		settled  uint64
		want     []string // src:from-to, in order
		upstream int      // eth_getLogs calls that reach the remotes
	}{
		{"all stored", []blockstore.Range{{From: 0, To: 100}}, `{"fromBlock":"0xa","toBlock":"0x14"}`, 100,
			[]string{"store:10-20"}, 0},
		{"holes and a tail above the settled line", []blockstore.Range{{From: 10, To: 19}, {From: 30, To: 39}},
			`{"fromBlock":"0x5","toBlock":"0x2d","address":"0x` + strings.Repeat("01", 20) + `"}`, 40,
			[]string{"remote:5-9", "store:10-19", "remote:20-29", "store:30-39", "remote:40-45"}, 3},
		{"nothing stored", nil, `{"fromBlock":"0x5","toBlock":"0x9"}`, 40, []string{"remote:5-9"}, 1},
		{"starts above the settled line", []blockstore.Range{{From: 0, To: 100}}, `{"fromBlock":"0x29","toBlock":"0x2d"}`, 40,
			[]string{"remote:41-45"}, 1},
		{"latest resolved by the head window", []blockstore.Range{{From: 0, To: 99}}, `{"fromBlock":"0x5a"}`, 99,
			[]string{"store:90-99", "remote:100-1000"}, 1},
		{"reversed range: the node's error", []blockstore.Range{{From: 0, To: 100}}, `{"fromBlock":"0x14","toBlock":"0xa"}`, 100,
			[]string{"remote:20-10"}, 1},
		{"past the head: the node's error", []blockstore.Range{{From: 0, To: 100}}, `{"fromBlock":"0xa","toBlock":"0x7d0"}`, 100,
			[]string{"remote:10-2000"}, 1},
		{"latest without a head window", []blockstore.Range{{From: 0, To: 100}}, `{"fromBlock":"0xa"}`, 100,
			[]string{"whole"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &fakeHistory{covered: tt.covered}
			h.answer = func(method string, params json.RawMessage) (json.RawMessage, bool, error) {
				lr, err := evm.ParseLogRange(params)
				if method != "eth_getLogs" || err != nil || lr.From.Kind != evm.RefNumber {
					return nil, false, nil
				}
				return logsOf("store", lr.From.Number, lr.To.Number), true, nil
			}
			rec := &logRemotes{}
			var head Head = fakeHead{tags: headstore.Tags{Latest: 1000}, ok: true}
			if strings.Contains(tt.name, "without a head window") {
				head = nil
			}
			rt := New(Config{Chain: "c", ChainID: 1, MaxLag: 5, History: h, Settled: settledAt(tt.settled)}, head, rec, nil)
			res, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: "eth_getLogs", Params: json.RawMessage("[" + tt.give + "]")})
			if err != nil {
				t.Fatal(err)
			}
			var logs []struct {
				Src      string
				From, To uint64
				Whole    bool
			}
			if err := json.Unmarshal(res, &logs); err != nil {
				t.Fatalf("%s: %v", res, err)
			}
			var got []string
			for _, l := range logs {
				if l.Whole {
					got = append(got, "whole")
					continue
				}
				got = append(got, fmt.Sprintf("%s:%d-%d", l.Src, l.From, l.To))
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Fatalf("parts %v, want %v", got, tt.want)
			}
			if len(rec.sent) != tt.upstream {
				t.Fatalf("%d upstream calls, want %d", len(rec.sent), tt.upstream)
			}
			for _, s := range rec.sent {
				if !strings.Contains(tt.give, "address") {
					continue
				}
				if !strings.Contains(string(s.Params), `"address":"0x0101`) {
					t.Fatalf("a part lost the filter: %s", s.Params)
				}
			}
		})
	}
}

func TestRouterLogsFallBackWholeWhenAStorePartFails(t *testing.T) {
	h := &fakeHistory{covered: []blockstore.Range{{From: 10, To: 19}, {From: 30, To: 39}}}
	first := true
	h.answer = func(string, json.RawMessage) (json.RawMessage, bool, error) {
		if first {
			first = false
			return json.RawMessage(`[]`), true, nil
		}
		return nil, false, errors.New("connection reset")
	}
	failing := &failingLogs{fakeHistory: h}
	rec := &logRemotes{}
	rt := New(Config{Chain: "c", ChainID: 1, History: failing, Settled: settledAt(100)}, nil, rec, nil)
	res, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: "eth_getLogs",
		Params: json.RawMessage(`[{"fromBlock":"0x5","toBlock":"0x2d"}]`)})
	if err != nil || string(res) != `[{"src":"remote","from":5,"to":45}]` {
		t.Fatalf("= %s, %v; want the remotes' answer for the whole range", res, err)
	}
}

// failingLogs is a store whose Logs fail (Postgres went down mid-call).
type failingLogs struct{ *fakeHistory }

func (failingLogs) Logs(context.Context, *evm.LogFilter, uint64, uint64) (json.RawMessage, error) {
	return nil, errors.New("connection reset")
}

func TestLogParts(t *testing.T) {
	r := func(a, b uint64) blockstore.Range { return blockstore.Range{From: a, To: b} }
	tests := []struct {
		name     string
		from, to uint64
		covered  []blockstore.Range
		want     string
	}{
		{"all", 5, 9, []blockstore.Range{r(5, 9)}, "[{5 9 true}]"},
		{"head and tail", 5, 20, []blockstore.Range{r(8, 12)}, "[{5 7 false} {8 12 true} {13 20 false}]"},
		{"edges", 5, 20, []blockstore.Range{r(5, 6), r(19, 20)}, "[{5 6 true} {7 18 false} {19 20 true}]"},
		{"clipped", 5, 20, []blockstore.Range{r(0, 6), r(15, 30)}, "[{5 6 true} {7 14 false} {15 20 true}]"},
		{"adjacent", 5, 9, []blockstore.Range{r(5, 6), r(7, 9)}, "[{5 6 true} {7 9 true}]"},
		{"uncovered tail", 5, 9, []blockstore.Range{r(5, 6)}, "[{5 6 true} {7 9 false}]"},
	}
	for _, tt := range tests {
		if got := fmt.Sprint(logParts(tt.from, tt.to, tt.covered)); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestBlockOf(t *testing.T) {
	h := "0x" + strings.Repeat("ab", 32)
	H := "0x" + strings.Repeat("AB", 32)
	tests := []struct {
		method, params, res string
		want                wtJob
		ok                  bool
	}{
		{"eth_getBlockByNumber", `["0x5",true]`, `{"hash":"` + H + `","number":"0x5"}`, wtJob{5, h}, true},
		{"eth_getBlockByHash", `["` + h + `",false]`, `{"number":"0x6","hash":"` + h + `"}`, wtJob{6, h}, true},
		{"eth_getTransactionReceipt", `["0x1"]`, `{"blockHash":"` + h + `","blockNumber":"0x7"}`, wtJob{7, h}, true},
		{"eth_getTransactionByHash", `["0x1"]`, `{"blockHash":null,"blockNumber":null}`, wtJob{}, false},
		{"eth_getBlockReceipts", `["0x8"]`, `[{"blockHash":"` + h + `","blockNumber":"0x8"}]`, wtJob{8, h}, true},
		{"eth_getBlockReceipts", `["0x9"]`, `[]`, wtJob{9, ""}, true},
		{"eth_getBlockReceipts", `["` + h + `"]`, `[]`, wtJob{}, false},
		{"eth_getBlockByNumber", `["0x5",true]`, `null`, wtJob{}, false},
		{"eth_getBalance", `["0x1","0x5"]`, `"0x0"`, wtJob{}, false},
	}
	for _, tt := range tests {
		got, ok := blockOf(parsed(tt.method, tt.params), json.RawMessage(tt.res))
		if ok != tt.ok || got != tt.want {
			t.Errorf("%s %s → %v, %v; want %v, %v", tt.method, tt.res, got, ok, tt.want, tt.ok)
		}
	}
}

func TestWriteThroughQueueIsBoundedAndDeduplicated(t *testing.T) {
	m := NewMetrics(nil)
	out := m.writeThrough.MustCurryWith(prometheus.Labels{"chain": "c"})
	w := newWriteThrough(&fakeHistory{}, nil, func(n uint64) bool { return n <= 100 }, 2, discard(), out)
	block := func(n uint64) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"number":"0x%x","hash":"0x%064x"}`, n, n))
	}
	for _, n := range []uint64{1, 1, 2, 3, 200} {
		w.offer(parsed("eth_getBlockByNumber", ""), block(n))
	}
	for outcome, want := range map[string]float64{wtQueued: 2, wtDuplicate: 1, wtDropped: 1} {
		if got := testutil.ToFloat64(out.WithLabelValues(outcome)); got != want {
			t.Errorf("outcome %s: %v, want %v", outcome, got, want)
		}
	}
	if len(w.queue) != 2 {
		t.Fatalf("%d queued, want 2 (block 200 is above the settled line)", len(w.queue))
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// logsHead is a fresh head window that holds blocks from low up.
type logsHead struct {
	fakeHead
	low uint64
}

func (h logsHead) Answer(c evm.Call) (json.RawMessage, bool) {
	lr := c.Range
	if c.Kind != evm.KindLogs || !c.RangeOK || lr.From.Kind != evm.RefNumber || lr.From.Number < h.low {
		return nil, false
	}
	return logsOf("head", lr.From.Number, lr.To.Number), true
}

func TestRouterLogsTakeTheRangeAboveHistoryFromTheHeadWindow(t *testing.T) {
	h := &fakeHistory{covered: []blockstore.Range{{From: 0, To: 89}}}
	rec := &logRemotes{}
	head := logsHead{fakeHead: fakeHead{tags: headstore.Tags{Latest: 1000}, ok: true}, low: 90}
	rt := New(Config{Chain: "c", ChainID: 1, MaxLag: 5, History: h, Settled: settledAt(89)}, head, rec, nil)
	res, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: "eth_getLogs",
		Params: json.RawMessage(`[{"fromBlock":"0x50","toBlock":"latest"}]`)})
	want := `[{"src":"store","from":80,"to":89},{"src":"head","from":90,"to":1000}]`
	if err != nil || string(res) != want {
		t.Fatalf("= %s, %v; want %s", res, err, want)
	}
	if len(rec.sent) != 0 {
		t.Fatalf("remotes got %v", rec.sent)
	}
}

// downRemotes are remotes that are all down: no head, every call fails.
type downRemotes struct{ recorder }

func (r *downRemotes) HealthyHead() uint64 { return 0 }

func (r *downRemotes) ServeCall(ctx context.Context, c evm.Call) (json.RawMessage, error) {
	_, _ = r.recorder.ServeCall(ctx, c)
	return nil, errors.New("no remote in rotation")
}

// TestRouterReadsCoverageWithoutAHead: with no head known (no window, no
// remote up), numbers the store holds whole are read from it, since they
// were settled when stored; anything else goes to the remotes. A head
// that cannot settle them (a chain younger than that) is evidence
// against the store, as is a remotes' head below them.
func TestRouterReadsCoverageWithoutAHead(t *testing.T) {
	stored := json.RawMessage(`{"from":"history"}`)
	unknown := func() (uint64, bool) { return 0, false }
	tests := []struct {
		name, method, params string
		head                 Head   // nil: none
		remotesHead          uint64 // 0: the remotes are down
		history              bool
	}{
		{"block in a stored range", "eth_getBlockByNumber", `["0x10",true]`, nil, 0, true},
		{"receipts in a stored range", "eth_getBlockReceipts", `["0x14"]`, nil, 0, true},
		{"count in a stored range", "eth_getBlockTransactionCountByNumber", `["0xa"]`, nil, 0, true},
		{"logs over a stored range", "eth_getLogs", `[{"fromBlock":"0xa","toBlock":"0x14"}]`, nil, 0, true},
		{"block outside", "eth_getBlockByNumber", `["0x15",true]`, nil, 0, false},
		{"logs partly stored", "eth_getLogs", `[{"fromBlock":"0x5","toBlock":"0x14"}]`, nil, 0, false},
		{"logs to latest", "eth_getLogs", `[{"fromBlock":"0xa"}]`, nil, 0, false},
		{"latest", "eth_getBlockByNumber", `["latest",false]`, nil, 0, false},
		{"a window head that cannot settle it", "eth_getBlockByNumber", `["0x10",true]`,
			fakeHead{tags: headstore.Tags{Latest: 30}, ok: true}, 0, false},
		{"an empty window", "eth_getBlockByNumber", `["0x10",true]`, fakeHead{}, 0, true},
		{"remotes whose head is above it", "eth_getBlockByNumber", `["0x10",true]`, nil, 100, true},
		{"remotes whose head is below it", "eth_getBlockByNumber", `["0x10",true]`, nil, 12, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &fakeHistory{covered: []blockstore.Range{{From: 10, To: 20}},
				answer: func(string, json.RawMessage) (json.RawMessage, bool, error) { return stored, true, nil }}
			var remotes Upstream = &downRemotes{}
			if tt.remotesHead > 0 {
				remotes = &headRemotes{head: tt.remotesHead}
			}
			m := NewMetrics(nil)
			rt := New(Config{Chain: "c", ChainID: 1, History: h, Settled: unknown}, tt.head, remotes, m)
			res, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: tt.method, Params: json.RawMessage(tt.params)})
			fromStore := err == nil && (string(res) == string(stored) || strings.Contains(string(res), `"src":"store"`))
			if fromStore != tt.history {
				t.Fatalf("answered from history: %v (%s, %v), want %v", fromStore, res, err, tt.history)
			}
			if got := sources(m, "c")["history"] == 1; got != tt.history {
				t.Fatalf("venn_answers_total by source = %v", sources(m, "c"))
			}
		})
	}
}

// headRemotes are remotes in rotation at head.
type headRemotes struct {
	recorder
	head uint64
}

func (r *headRemotes) HealthyHead() uint64 { return r.head }

// parsed is a call as the router parses it; "" params are none.
func parsed(method, params string) *evm.Call {
	var p json.RawMessage
	if params != "" {
		p = json.RawMessage(params)
	}
	c := evm.ParseCall(method, p)
	return &c
}
