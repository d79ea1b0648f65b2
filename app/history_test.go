package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
)

const pgAdminURL = "postgres://root@127.0.0.1:5432/postgres?sslmode=disable"

var testDBSeq atomic.Int64

// testDatabase creates an empty database for one test, dropped when it
// ends, and returns its name.
func testDatabase(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, pgAdminURL)
	if err != nil {
		t.Fatalf("Postgres at 127.0.0.1:5432 is unreachable; the history wiring tests need a real server there: %v", err)
	}
	name := fmt.Sprintf("venn_app_test_%d_%d", os.Getpid(), testDBSeq.Add(1))
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close(ctx)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database: %v", err)
		}
		admin.Close(ctx)
	})
	return name
}

// pgProxy stands for a Postgres that can go away: a TCP relay on a fixed
// port to the real one, refusing connections while down.
type pgProxy struct {
	addr string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// newPGProxy returns a proxy that is down; it is stopped when the test ends.
func newPGProxy(t *testing.T) *pgProxy {
	p := &pgProxy{addr: closedPort(t), conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() {
		p.down()
		p.wg.Wait()
	})
	return p
}

func (p *pgProxy) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Go(func() { p.relay(c) })
		}
	})
}

func (p *pgProxy) relay(c net.Conn) {
	u, err := net.Dial("tcp", "127.0.0.1:5432")
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[u] = struct{}{}, struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(u, c); u.Close() })
	wg.Go(func() { _, _ = io.Copy(c, u); c.Close() })
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, u)
	p.mu.Unlock()
}

func (p *pgProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}

// TestAppHistory runs venn with a history store that is down at start: it
// starts and serves, migrates once Postgres comes up, then archives the
// settled blocks its leader publishes and serves them from the store.
func TestAppHistory(t *testing.T) {
	db := testDatabase(t)
	proxy := newPGProxy(t)
	node := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 100, FinalizedDepth: 1 << 20, SafeDepth: 1 << 20})
	var asked90 atomic.Int64 // calls for block 90 that reached the node
	node.SetHook(func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if strings.Contains(string(params), `"`+evm.Quantity(90)+`"`) {
			asked90.Add(1)
		}
		return nil, nil, false
	})

	url := "postgres://root:SECRETPW@" + proxy.addr + "/" + db + "?sslmode=disable&connect_timeout=2"
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
	proxy.up(t)
	waitUntil(t, "the history store to be ready", func() bool { return logged("history store ready") })
	direct, err := blockstore.Open(context.Background(), "postgres://root@127.0.0.1:5432/"+db+"?sslmode=disable", blockstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	hist := direct.Chain(1337, "test")
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
