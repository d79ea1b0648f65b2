package app

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/pgtest"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
)

// cachedCall posts eth_getBalance at block n and returns the answer and
// its X-Venn-Cache word.
func cachedCall(t *testing.T, c *http.Client, url string, n uint64) (wireResponse, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x7435ed30a8b4aeb0877cef0c6e8cffe834eb865f","` +
		evm.Quantity(n) + `"]}`
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r wireResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	return r, resp.Header.Get("X-Venn-Cache")
}

// probeBlock is the settled block startCached asks for until the cache
// keys it.
const probeBlock = 70

// nearHeadBlock is a block above the settled line of the nodes the tests
// start (head 100, finalized 92), below their head.
const nearHeadBlock = 99

// startCached starts venn on cfg and returns once its cache keys a call at
// a settled block (a replica does once its window knows the head).
func startCached(t *testing.T, cfg *Config, logs *testkit.Buffer, client *http.Client) (*fxtest.App, *servers) {
	t.Helper()
	var s *servers
	app := fxtest.New(t, fx.Supply(cfg), Module, LogOutput(logs), fx.Populate(&s))
	app.RequireStart()
	rpc := "http://" + s.rpc.bound.String() + "/test"
	testkit.WaitFor(t, 10*time.Second, "the cache to key a settled call", func() bool {
		_, word := cachedCall(t, client, rpc, probeBlock)
		return word != "none"
	})
	// And a near-head one: the window has caught up with the node's head,
	// so every settled number the tests ask is below its settled line (a
	// window still filling has a lower one, above which it keys nothing).
	testkit.WaitFor(t, 10*time.Second, "the cache to key a near-head call", func() bool {
		_, word := cachedCall(t, client, rpc, nearHeadBlock)
		return word != "none"
	})
	return app, s
}

// TestAppCacheClaim: two replicas on one Redis get the same settled call
// at once: the first claims the miss and asks upstream, the second waits
// for its answer in Redis instead of asking too. One upstream call in all.
func TestAppCacheClaim(t *testing.T) {
	rs := testkit.StartRedisServer(t)
	node := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 100, FinalizedDepth: 8, SafeDepth: 4})
	var asked atomic.Int64 // eth_getBalance calls for block 80 that reached the node
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	t.Cleanup(unblock)
	node.SetHook(func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		// By number, or pinned to block 80's hash (settled calls are).
		if method == "eth_getBalance" && (strings.Contains(string(params), `"`+evm.Quantity(80)+`"`) ||
			strings.Contains(strings.ToLower(string(params)), strings.ToLower(node.BlockHash(80)))) {
			asked.Add(1)
			<-release // the upstream is slow: the claim is held meanwhile
		}
		return nil, nil, false
	})
	cfg := mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
shutdown_timeout: 5s
redis: {url: "redis://`+rs.Addr+`"}
chains:
  - name: test
    chain_id: 1337
    block_time: 50ms
    head: {window: 16}
    integrity: {stalker: false}
    remotes: [{name: node, url: "`+node.URL()+`"}]
`)
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	logs := &testkit.Buffer{}
	appA, a := startCached(t, cfg, logs, client)
	defer appA.RequireStop()
	appB, b := startCached(t, cfg, logs, client)
	defer appB.RequireStop()

	type reply struct {
		r    wireResponse
		word string
	}
	call := func(s *servers) <-chan reply {
		ch := make(chan reply, 1)
		go func() {
			r, word := cachedCall(t, client, "http://"+s.rpc.bound.String()+"/test", 80)
			ch <- reply{r, word}
		}()
		return ch
	}
	fromA := call(a)
	testkit.WaitFor(t, 10*time.Second, "replica A to claim the miss and ask upstream", func() bool { return asked.Load() == 1 })
	claims := monitorClaims(t, rs.Addr)
	fromB := call(b)
	testkit.WaitFor(t, 10*time.Second, "replica B to try to claim it", func() bool { return claims.Load() >= 1 })
	unblock()
	ra, rb := <-fromA, <-fromB
	if ra.r.Error != nil || rb.r.Error != nil || string(ra.r.Result) != string(rb.r.Result) {
		t.Fatalf("answers differ: A %s %+v, B %s %+v", ra.r.Result, ra.r.Error, rb.r.Result, rb.r.Error)
	}
	if ra.word != "miss" || rb.word != "hit" || asked.Load() != 1 {
		t.Fatalf("A %q, B %q, %d upstream calls; want miss, hit (A's answer), 1", ra.word, rb.word, asked.Load())
	}
}

// monitorClaims counts the cache claims (the claim script on a claim key) Redis at
// addr runs from now on, through MONITOR on a connection of its own that
// the test's end closes.
func monitorClaims(t *testing.T, addr string) *atomic.Int64 {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(conn)
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	if ok, err := rd.ReadString('\n'); err != nil || ok != "+OK\r\n" {
		t.Fatalf("MONITOR: %q, %v", ok, err)
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				return
			}
			// The claim script (keyspace.CacheClaim) on a claim key.
			if l := strings.ToLower(line); (strings.Contains(l, `"evalsha"`) || strings.Contains(l, `"eval"`)) && strings.Contains(line, `"venn:{test}:cc:`) {
				n.Add(1)
			}
		}
	})
	t.Cleanup(func() { conn.Close(); wg.Wait() })
	return &n
}

// TestAppCacheTiers runs venn with the Redis and Postgres tiers on: a
// settled answer is asked upstream once, outlives a Redis restart (and
// the process's own) through Postgres, and with both stores down the
// cache is a miss, never the client's error, counted, and logged once per
// tier.
func TestAppCacheTiers(t *testing.T) {
	// With the stores up every operation must succeed, on a machine loaded
	// with -race too: the default 250 ms is a production bound, and such a
	// machine takes longer now and then (a false outage: the answer not
	// stored, the outage logged). With them down, a call still waits at
	// most this per tier (Redis's client retries a refused dial for about
	// 2 s, which the bound cuts).
	const tierTimeout = 2 * time.Second
	rs := testkit.StartRedisServer(t)
	direct := pgtest.New(t)
	proxy := pgtest.NewProxy(t, direct)
	node := fakenode.Start(t, fakenode.Options{ChainID: 1337, Head: 100, FinalizedDepth: 8, SafeDepth: 4})
	var asked atomic.Int64 // eth_getBalance calls that reached the node
	node.SetHook(func(method string, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method == "eth_getBalance" {
			asked.Add(1)
		}
		return nil, nil, false
	})
	cfg := mustParse(t, `
listen: 127.0.0.1:0
metrics_listen: 127.0.0.1:0
shutdown_timeout: 5s
redis: {url: "redis://`+rs.Addr+`"}
postgres: {url: "`+proxy.URL()+`"}
chains:
  - name: test
    chain_id: 1337
    block_time: 50ms
    head: {window: 16}
    integrity: {stalker: false}
    cache: {postgres: true, postgres_methods: [eth_getBalance], tier_timeout: `+tierTimeout.String()+`}
    remotes: [{name: node, url: "`+node.URL()+`"}]
`)
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	logs := &testkit.Buffer{}
	started := 0
	start := func() (*fxtest.App, *servers) {
		started++
		app, s := startCached(t, cfg, logs, client)
		testkit.WaitFor(t, 10*time.Second, "the history store (and cache_entries) to be ready", func() bool {
			return logs.Count("history store ready") == started
		})
		// Its pool's first connection too: the tier is asked only then.
		testkit.WaitFor(t, 10*time.Second, "the Postgres tier to connect", func() bool {
			return logs.Count("cache tier connected") == started
		})
		asked.Store(0)
		return app, s
	}
	app, s := start()
	rpc := "http://" + s.rpc.bound.String() + "/test"
	r, word := cachedCall(t, client, rpc, 80)
	if r.Error != nil || word != "miss" || asked.Load() != 1 {
		t.Fatalf("first call: %s %+v, X-Venn-Cache %q, %d upstream; want a miss asked once", r.Result, r.Error, word, asked.Load())
	}
	want := string(r.Result)
	if r, word := cachedCall(t, client, rpc, 80); string(r.Result) != want || word != "hit" || asked.Load() != 1 {
		t.Fatalf("second call: %s, %q, %d upstream; want a hit", r.Result, word, asked.Load())
	}
	app.RequireStop()

	// Redis comes back empty, and the process is new (its memory empty):
	// Postgres still has the answer.
	rs.Stop()
	rs.Start()
	app, s = start()
	defer func() { app.RequireStop() }()
	rpc = "http://" + s.rpc.bound.String() + "/test"
	if r, word := cachedCall(t, client, rpc, 80); string(r.Result) != want || word != "hit" || asked.Load() != 0 {
		t.Fatalf("after the restarts: %s %+v, %q, %d upstream; want a hit from Postgres\n%s", r.Result, r.Error, word, asked.Load(), logs)
	}
	if n := rowCount(t, direct, 80); n != 1 {
		t.Fatalf("cache_entries holds %d rows at block 80; want 1", n)
	}

	if _, body := get(t, client, "http://"+s.metrics.bound.String()+"/metrics"); strings.Contains(body, "venn_cache_store_errors_total{") {
		t.Fatalf("store errors with both stores up:\n%s\n%s", grepLines(body, "venn_cache_store_errors_total"), logs)
	}

	// Both stores down: answers from upstream, misses, each within the
	// bound of its two lookups (Redis, Postgres) and a second for the rest.
	rs.Stop()
	proxy.Stop()
	for i, n := range []uint64{81, 82, 83} {
		began := time.Now()
		r, word := cachedCall(t, client, rpc, n)
		if r.Error != nil || word != "miss" || time.Since(began) > 2*tierTimeout+time.Second {
			t.Fatalf("call %d with the stores down: %s %+v, %q after %v; want a miss, answered", i, r.Result, r.Error, word, time.Since(began))
		}
	}
	if got := asked.Load(); got != 3 {
		t.Errorf("%d upstream calls; want 3", got)
	}
	_, body := get(t, client, "http://"+s.metrics.bound.String()+"/metrics")
	for _, tier := range []string{"redis", "postgres"} {
		if !strings.Contains(body, `venn_cache_store_errors_total{chain="test",op="get",tier="`+tier+`"}`) {
			t.Errorf("metrics lack the %s tier's get errors", tier)
		}
	}
	if n := logs.Count("cache tier unavailable"); n != 2 {
		t.Errorf("%d outage log lines; want 2, one per tier:\n%s", n, logs)
	}
}

// rowCount counts the rows of cache_entries at block n in the database
// at u.
func rowCount(t *testing.T, u string, n uint64) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM cache_entries WHERE block = $1`, int64(n)).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	return rows
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
