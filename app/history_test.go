package app

import (
	"context"
	"encoding/json"
	"net/http"
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
	var logBuf strings.Builder
	logs := &syncWriter{w: &logBuf}
	logged := func(s string) bool {
		logs.mu.Lock()
		defer logs.mu.Unlock()
		return strings.Contains(logBuf.String(), s)
	}
	var s *servers
	app := fxtest.New(t, fx.Supply(cfg), Module, LogOutput(logs), fx.Populate(&s))
	app.RequireStart()
	defer app.RequireStop()
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	rpc := "http://" + s.rpc.bound.String() + "/test"

	// Postgres is down: venn serves the head all the same.
	waitUntil(t, "the migrations to fail", func() bool { return logged("history store unavailable") })
	if r := post(t, client, rpc, `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`); r.Error != nil {
		t.Fatalf("eth_blockNumber with Postgres down: %+v", r.Error)
	}

	// Postgres comes up: the retry migrates, the leader archives.
	proxy.Start()
	waitUntil(t, "the history store to be ready", func() bool { return logged("history store ready") })
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
	waitUntil(t, "the window to move on", func() bool {
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
