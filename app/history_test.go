package app

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/pgtest"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
)

// TestAppHistory runs venn with a history store that is down at start: it
// starts and serves, migrates once Postgres comes up, then archives the
// settled blocks its leader publishes and serves them from the store.
func TestAppHistory(t *testing.T) {
	direct := pgtest.Empty(t)
	proxy := pgtest.NewProxy(t, direct)
	proxy.Stop() // down before venn starts
	node := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 100, FinalizedDepth: 1 << 20, SafeDepth: 1 << 20})
	var asked90 atomic.Int64 // calls for block 90 that reached the node
	node.SetHook(func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if strings.Contains(string(params), `"`+evm.Quantity(90)+`"`) {
			asked90.Add(1)
		}
		return nil, nil, false
	})

	url := "postgres://root:SECRETPW@" + proxy.Addr() + "/" + pgtest.Name(direct) + "?sslmode=disable&connect_timeout=2"
	cfg := mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
log: {level: debug}
shutdown_timeout: 5s
postgres: {url: "`+url+`"}
chains:
  - name: test
    chain_id: 1337
    block_time: 50ms
    head: {window: 16}
    history: {confirmations: 4, batch: 5}
    integrity: {stalker: false}
    remotes: [{name: node, url: "`+node.URL()+`"}]
`)
	logs := &testkit.Buffer{}
	logged := func(s string) bool {
		return strings.Contains(logs.String(), s)
	}
	var s *servers
	app := fxtest.New(t, fx.Supply(cfg), Module, LogOutput(logs), fx.Populate(&s))
	app.RequireStart()
	defer app.RequireStop()
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	rpc := "http://" + s.rpc.bound.String() + "/test"

	// Postgres is down: venn serves the head all the same.
	testkit.WaitFor(t, 10*time.Second, "the migrations to fail", func() bool { return logged("history store unavailable") })
	if r := post(t, client, rpc, `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`); r.Error != nil {
		t.Fatalf("eth_blockNumber with Postgres down: %+v", r.Error)
	}

	// Postgres comes up: the retry migrates, the leader archives.
	proxy.Start()
	testkit.WaitFor(t, 10*time.Second, "the history store to be ready", func() bool { return logged("history store ready") })
	store, err := blockstore.Open(context.Background(), direct, blockstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	hist := store.Chain(1337, "test")
	waitArchived := func(to uint64) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			high, ok, err := hist.Highest(context.Background())
			if err == nil && ok && high >= to {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("archived up to %d (%v, %v), want %d", high, ok, err, to)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitArchived(96) // the window is 85..100; 4 confirmations

	// Below the window now, and stored: answered without the node.
	node.Mine(20)
	waitArchived(116)
	testkit.WaitFor(t, 10*time.Second, "the window to move on", func() bool {
		r := post(t, client, rpc, `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`)
		return string(r.Result) == `"0x78"`
	})
	asked90.Store(0)
	r := post(t, client, rpc, `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["`+evm.Quantity(90)+`",false]}`)
	if r.Error != nil || !strings.Contains(string(r.Result), node.BlockHash(90)) {
		t.Fatalf("block 90 = %.200s %+v", r.Result, r.Error)
	}
	if n := asked90.Load(); n != 0 {
		t.Errorf("block 90 was asked of the node %d times; the store holds it", n)
	}
	_, body := get(t, client, "http://"+s.metrics.bound.String()+"/metrics")
	for _, want := range []string{`venn_archive_height{chain="test"} 116`, `venn_answers_total{chain="test",source="history"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if logged("SECRETPW") {
		t.Error("the logs show the Postgres password")
	}
}

// TestAppHistoryFirstStart starts venn on an empty database, as on a
// first start: the leader publishes while the migrations run, and the
// archive waits for them. Nothing of a healthy start is logged as a
// warning (it read as if Postgres were down).
func TestAppHistoryFirstStart(t *testing.T) {
	db := pgtest.Empty(t)
	node := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 100, FinalizedDepth: 1 << 20, SafeDepth: 1 << 20})
	cfg := mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
shutdown_timeout: 5s
postgres: {url: "`+db+`"}
chains:
  - name: test
    chain_id: 1337
    block_time: 50ms
    head: {window: 16}
    history: {confirmations: 4, batch: 5}
    integrity: {stalker: false}
    remotes: [{name: node, url: "`+node.URL()+`"}]
`)
	logs := &testkit.Buffer{}
	var s *servers
	app := fxtest.New(t, fx.Supply(cfg), Module, LogOutput(logs), fx.Populate(&s))
	app.RequireStart()
	defer app.RequireStop()
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	testkit.WaitFor(t, 20*time.Second, "the leader to archive its settled blocks", func() bool {
		_, body := get(t, client, "http://"+s.metrics.bound.String()+"/metrics")
		return strings.Contains(body, `venn_archive_height{chain="test"} 96`)
	})
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("a healthy first start logged: %s", line)
		}
	}
	_, body := get(t, client, "http://"+s.metrics.bound.String()+"/metrics")
	if !strings.Contains(body, `venn_archive_errors_total{chain="test"} 0`) {
		t.Errorf("archive errors counted on a healthy first start:\n%s", grepLines(body, "venn_archive_errors_total"))
	}
}

// TestAppHistoryStall stalls the history store's Postgres under a serving
// replica (it accepts connections and bytes, and answers nothing): a call
// that reads history is answered by the remotes well inside call_deadline,
// the calls after it do not wait on the store at all, and /readyz stays
// ready (the remotes serve) but says the store is down, and up again once
// Postgres answers.
func TestAppHistoryStall(t *testing.T) {
	proxy := pgtest.NewProxy(t, pgtest.New(t))
	node := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 100, FinalizedDepth: 1 << 20, SafeDepth: 1 << 20})
	const callDeadline = 10 * time.Second
	cfg := mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
log: {level: debug}
shutdown_timeout: 5s
postgres: {url: "`+proxy.URL()+`"}
chains:
  - name: test
    chain_id: 1337
    block_time: 50ms
    call_deadline: `+callDeadline.String()+`
    head: {window: 16}
    history: {confirmations: 4, batch: 5}
    integrity: {stalker: false}
    remotes: [{name: node, url: "`+node.URL()+`"}]
`)
	readTimeout := cfg.Postgres.ReadTimeout
	var s *servers
	app := fxtest.New(t, fx.Supply(cfg), Module, LogOutput(io.Discard), fx.Populate(&s))
	app.RequireStart()
	defer app.RequireStop()
	client := &http.Client{Timeout: time.Minute} // the bounds under test are venn's
	defer client.CloseIdleConnections()
	rpc := "http://" + s.rpc.bound.String() + "/test"
	readyz := func() (int, readiness) {
		code, body := get(t, client, "http://"+s.metrics.bound.String()+"/readyz")
		var r readiness
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("readyz body %q: %v", body, err)
		}
		return code, r
	}
	historyIs := func(state string) func() bool {
		return func() bool {
			code, r := readyz()
			return code == http.StatusOK && r.Ready && r.History != nil && r.History.State == state &&
				r.Degraded == (state != blockstore.StateUp)
		}
	}
	testkit.WaitFor(t, 10*time.Second, "readyz to say the history store is up", historyIs(blockstore.StateUp))
	defer proxy.Resume() // before the app stops: what a stall holds is let go
	// The leader archived up to its settled line: the head is known.
	testkit.WaitFor(t, 10*time.Second, "the leader to archive", func() bool {
		_, body := get(t, client, "http://"+s.metrics.bound.String()+"/metrics")
		return strings.Contains(body, `venn_archive_height{chain="test"} 96`)
	})
	// Block 50 is settled and below the window: history is asked first.
	call := func() time.Duration {
		t.Helper()
		start := time.Now()
		r := post(t, client, rpc, `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["`+evm.Quantity(50)+`",false]}`)
		took := time.Since(start)
		if r.Error != nil || !strings.Contains(string(r.Result), node.BlockHash(50)) {
			t.Fatalf("block 50 = %.200s %+v", r.Result, r.Error)
		}
		return took
	}
	call()

	proxy.Pause()
	took := call()
	t.Logf("the first call on a stalled store took %v (read timeout %v)", took.Round(time.Millisecond), readTimeout)
	if took > readTimeout+callDeadline/4 {
		t.Fatalf("the first call on a stalled store took %v; want the read timeout (%v) and the remote's answer, well inside call_deadline (%v)",
			took.Round(time.Millisecond), readTimeout, callDeadline)
	}
	if code, r := readyz(); code != http.StatusOK || !r.Ready || !r.Degraded || r.History == nil ||
		r.History.State != blockstore.StateDown || r.History.Required {
		t.Fatalf("readyz on a stalled store = %d %+v %+v; want 200, ready, degraded, history down and not required", code, r, r.History)
	}
	for range 3 {
		took := call()
		t.Logf("then: %v", took.Round(time.Millisecond))
		if took >= readTimeout {
			t.Fatalf("a call took %v with the store known down: it waited on Postgres", took.Round(time.Millisecond))
		}
	}

	proxy.Resume()
	testkit.WaitFor(t, 10*time.Second, "readyz to say the history store is up again", historyIs(blockstore.StateUp))
}

// TestReadinessWithHistory: a history store that is not up makes /readyz
// 503 only when postgres.required says so; degraded either way.
func TestReadinessWithHistory(t *testing.T) {
	tests := []struct {
		give      string
		required  bool
		wantReady bool
	}{
		{blockstore.StateUp, false, true},
		{blockstore.StateUp, true, true},
		{blockstore.StateDown, false, true},
		{blockstore.StateDown, true, false},
		{blockstore.StateMigrating, false, true},
		{blockstore.StateMigrating, true, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s required %v", tt.give, tt.required), func(t *testing.T) {
			h := &healthHandler{chains: &chains{}, draining: new(atomic.Bool), history: func() *blockstore.Readiness {
				return &blockstore.Readiness{State: tt.give, Required: tt.required}
			}}
			rec := httptest.NewRecorder()
			h.ready(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
			var r readiness
			if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
				t.Fatal(err)
			}
			wantCode := http.StatusOK
			if !tt.wantReady {
				wantCode = http.StatusServiceUnavailable
			}
			if rec.Code != wantCode || r.Ready != tt.wantReady || r.Degraded != (tt.give != blockstore.StateUp) ||
				r.History == nil || r.History.State != tt.give || r.History.Required != tt.required {
				t.Fatalf("readyz = %d %s", rec.Code, rec.Body.Bytes())
			}
		})
	}
}

// nodeResult is a fake node's result for one call, served in process.
func nodeResult(t *testing.T, node *fakenode.Node, method, params string) json.RawMessage {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+params+`}`))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	node.Handler().ServeHTTP(rec, req)
	var r wireResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil || r.Error != nil {
		t.Fatalf("node %s%s: %v %+v", method, params, err, r.Error)
	}
	return r.Result
}

// TestAppHistoryWithoutAHead starts a replica whose only remote is down
// and so knows no head, on a history store that holds blocks 10 to 20
// whole: blocks, receipts and logs by number in that range are answered
// from the store, byte for byte as the node answered them; anything else
// still fails as it does without a remote.
func TestAppHistoryWithoutAHead(t *testing.T) {
	direct := pgtest.New(t)
	node := fakenode.New(fakenode.Options{ChainID: 1337, Head: 100})
	defer node.Close()
	store, err := blockstore.Open(context.Background(), direct, blockstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var blocks []*evm.Block
	for n := uint64(10); n <= 20; n++ {
		raw := nodeResult(t, node, "eth_getBlockByNumber", `["`+evm.Quantity(n)+`",true]`)
		b, err := evm.ParseBlock(raw, nodeResult(t, node, "eth_getBlockReceipts", `["`+node.BlockHash(n)+`"]`))
		if err != nil {
			t.Fatalf("block %d: %v", n, err)
		}
		blocks = append(blocks, b)
	}
	if err := store.Chain(1337, "test").Put(context.Background(), blocks); err != nil {
		t.Fatal(err)
	}

	cfg := mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
log: {level: debug}
shutdown_timeout: 5s
postgres: {url: "`+direct+`"}
chains:
  - name: test
    chain_id: 1337
    call_deadline: 2s
    integrity: {stalker: false}
    remotes: [{name: down, url: "http://`+testkit.ClosedAddr(t)+`", timeout: 500ms}]
`)
	var s *servers
	app := fxtest.New(t, fx.Supply(cfg), Module, LogOutput(io.Discard), fx.Populate(&s))
	app.RequireStart()
	defer app.RequireStop()
	client := &http.Client{Timeout: time.Minute}
	defer client.CloseIdleConnections()
	rpc := "http://" + s.rpc.bound.String() + "/test"
	testkit.WaitFor(t, 10*time.Second, "the history store to be ready", func() bool {
		_, body := get(t, client, "http://"+s.metrics.bound.String()+"/readyz")
		var r readiness
		return json.Unmarshal([]byte(body), &r) == nil && r.History != nil && r.History.State == blockstore.StateUp
	})
	call := func(method, params string) wireResponse {
		return post(t, client, rpc, `{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":`+params+`}`)
	}
	if r := call("eth_blockNumber", `[]`); r.Error == nil {
		t.Fatalf("eth_blockNumber = %s: a head is known", r.Result)
	}

	stored := []struct{ method, params string }{
		{"eth_getBlockByNumber", `["` + evm.Quantity(12) + `",false]`},
		{"eth_getBlockByNumber", `["` + evm.Quantity(20) + `",true]`},
		{"eth_getBlockReceipts", `["` + evm.Quantity(15) + `"]`},
		{"eth_getLogs", `[{"fromBlock":"` + evm.Quantity(10) + `","toBlock":"` + evm.Quantity(20) + `"}]`},
		{"eth_getLogs", `[{"fromBlock":"` + evm.Quantity(11) + `","toBlock":"` + evm.Quantity(13) + `","address":"` + fakenode.Contracts()[0] + `"}]`},
	}
	for _, c := range stored {
		want := nodeResult(t, node, c.method, c.params)
		if r := call(c.method, c.params); r.Error != nil || !bytes.Equal(r.Result, want) {
			t.Errorf("%s%s = %.200s %+v; want the node's %.200s", c.method, c.params, r.Result, r.Error, want)
		}
	}
	for _, c := range []struct{ method, params string }{
		{"eth_getBlockByNumber", `["` + evm.Quantity(21) + `",false]`},
		{"eth_getBlockReceipts", `["` + evm.Quantity(9) + `"]`},
		{"eth_getLogs", `[{"fromBlock":"` + evm.Quantity(5) + `","toBlock":"` + evm.Quantity(20) + `"}]`},
		{"eth_getBlockByNumber", `["latest",false]`},
	} {
		if r := call(c.method, c.params); r.Error == nil {
			t.Errorf("%s%s = %.200s with no remote; the store does not hold it whole", c.method, c.params, r.Result)
		}
	}
}

// TestAppStartsOnAStalledHistoryStore: a Postgres that accepts connections
// and answers nothing at start holds the start up no longer than the
// store's first ping, and the service not at all; /readyz says the store is
// down (ready all the same: it is optional), and up once Postgres answers
// and the schema is migrated.
func TestAppStartsOnAStalledHistoryStore(t *testing.T) {
	proxy := pgtest.NewProxy(t, pgtest.Empty(t))
	proxy.Pause()
	defer proxy.Resume() // before the app stops
	node := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 100})
	cfg := mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
shutdown_timeout: 5s
postgres: {url: "`+proxy.URL()+`", required: false}
chains:
  - name: test
    chain_id: 1337
    block_time: 50ms
    integrity: {stalker: false}
    remotes: [{name: node, url: "`+node.URL()+`"}]
`)
	var s *servers
	app := fxtest.New(t, fx.Supply(cfg), Module, LogOutput(io.Discard), fx.Populate(&s))
	app.RequireStart()
	defer app.RequireStop()
	client := &http.Client{Timeout: time.Minute}
	defer client.CloseIdleConnections()
	historyIs := func(code int, state string) func() bool {
		return func() bool {
			got, body := get(t, client, "http://"+s.metrics.bound.String()+"/readyz")
			var r readiness
			return got == code && json.Unmarshal([]byte(body), &r) == nil && r.History != nil && r.History.State == state
		}
	}
	testkit.WaitFor(t, 10*time.Second, "readyz: ready, the history store down", historyIs(http.StatusOK, blockstore.StateDown))
	r := post(t, client, "http://"+s.rpc.bound.String()+"/test", `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x5",false]}`)
	if r.Error != nil || !strings.Contains(string(r.Result), node.BlockHash(5)) {
		t.Fatalf("block 5 with the store stalled = %.200s %+v", r.Result, r.Error)
	}

	proxy.Resume()
	deadline := time.Now().Add(blockstore.MaxMigrateBackoff + 10*time.Second) // the retry's backoff, then the migrations
	for !historyIs(http.StatusOK, blockstore.StateUp)() {
		if time.Now().After(deadline) {
			t.Fatal("the history store was not up after the stall ended")
		}
		time.Sleep(50 * time.Millisecond) // a poll interval, not a wait for state
	}
}
