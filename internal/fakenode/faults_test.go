package fakenode

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
)

const chainIDCall = `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`

// TestFaults sets one fault, sends one request, and checks what a client
// sees.
func TestFaults(t *testing.T) {
	n := Start(t, Options{})
	head := `"0x64"`
	tests := []struct {
		name       string
		set        func(*Node)
		give       string
		wantStatus int
		wantBody   string // exact, unless wantErr
		wantErr    bool   // the transport fails (no HTTP answer)
	}{
		{
			name:       "fail status",
			set:        func(n *Node) { n.SetFailStatus(http.StatusServiceUnavailable) },
			give:       chainIDCall,
			wantStatus: http.StatusServiceUnavailable,
			wantBody:   "503 Service Unavailable\n",
		},
		{
			name: "fail body",
			set: func(n *Node) {
				n.SetFailBody(http.StatusTooManyRequests, `{"code":-32007,"message":"100/second request limit reached"}`)
			},
			give:       chainIDCall,
			wantStatus: http.StatusTooManyRequests,
			wantBody:   `{"code":-32007,"message":"100/second request limit reached"}`,
		},
		{
			name:       "rpc error on every batch item",
			set:        func(n *Node) { n.SetRPCError(-32005, "limit exceeded") },
			give:       `[` + chainIDCall + `,{"jsonrpc":"2.0","id":2,"method":"eth_blockNumber"}]`,
			wantStatus: http.StatusOK,
			wantBody:   `[{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"limit exceeded"}},{"jsonrpc":"2.0","id":2,"error":{"code":-32005,"message":"limit exceeded"}}]`,
		},
		{
			name:       "garbage",
			set:        func(n *Node) { n.SetGarbage(true) },
			give:       chainIDCall,
			wantStatus: http.StatusOK,
			wantBody:   garbageBody,
		},
		{
			name: "echo",
			set: func(n *Node) {
				n.SetEcho(func(r *http.Request) *jrpc.Error {
					return &jrpc.Error{Code: -32000, Message: "bad key in " + r.Method + " " + r.URL.Path + " (" + r.Header.Get("Content-Type") + ")"}
				})
			},
			give:       chainIDCall,
			wantStatus: http.StatusOK,
			wantBody:   `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"bad key in POST / (application/json)"}}`,
		},
		{
			name:    "drop",
			set:     func(n *Node) { n.SetDrop(true) },
			give:    chainIDCall,
			wantErr: true,
		},
		{
			name:       "chain id lie",
			set:        func(n *Node) { n.SetChainID(5) },
			give:       `[` + chainIDCall + `,{"jsonrpc":"2.0","id":2,"method":"net_version"}]`,
			wantStatus: http.StatusOK,
			wantBody:   `[{"jsonrpc":"2.0","id":1,"result":"0x5"},{"jsonrpc":"2.0","id":2,"result":"5"}]`,
		},
		{
			name:       "lag: head",
			set:        func(n *Node) { n.SetLag(10) },
			give:       `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`,
			wantStatus: http.StatusOK,
			wantBody:   `{"jsonrpc":"2.0","id":1,"result":"0x5a"}`,
		},
		{
			name:       "lag: block above",
			set:        func(n *Node) { n.SetLag(10) },
			give:       `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x5b",false]}`,
			wantStatus: http.StatusOK,
			wantBody:   `{"jsonrpc":"2.0","id":1,"result":null}`,
		},
		{
			name:       "lag: logs beyond",
			set:        func(n *Node) { n.SetLag(10) },
			give:       `{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{"fromBlock":"0x50","toBlock":"0x64"}]}`,
			wantStatus: http.StatusOK,
			wantBody:   `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"block range extends beyond current head block"}}`,
		},
		{
			name:       "lag: state above",
			set:        func(n *Node) { n.SetLag(10) },
			give:       `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x7435ed30a8b4aeb0877cef0c6e8cffe834eb865f","0x64"]}`,
			wantStatus: http.StatusOK,
			wantBody:   `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"header not found"}}`,
		},
		{
			name:       "max logs range: over",
			set:        func(n *Node) { n.SetMaxLogsRange(5) },
			give:       `{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{"fromBlock":"0x1","toBlock":"0x6"}]}`,
			wantStatus: http.StatusOK,
			wantBody:   `{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"requested range exceeds maximum RPC range limit"}}`,
		},
		{
			name:       "state window: pruned",
			set:        func(n *Node) { n.SetStateWindow(10) },
			give:       `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x7435ed30a8b4aeb0877cef0c6e8cffe834eb865f","0x59"]}`,
			wantStatus: http.StatusOK,
			wantBody:   `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"missing trie node 0x3bb4e97a3795e0181c114c3985fe7e9b8d6742af222064002c491ff42108e85e (path )"}}`,
		},
		{
			name:       "state window: kept",
			set:        func(n *Node) { n.SetStateWindow(10) },
			give:       `{"jsonrpc":"2.0","id":1,"method":"eth_getCode","params":["0x7435ed30a8b4aeb0877cef0c6e8cffe834eb865f","0x5a"]}`,
			wantStatus: http.StatusOK,
			wantBody:   `{"jsonrpc":"2.0","id":1,"result":"0x"}`,
		},
		{
			name: "hook",
			set: func(n *Node) {
				n.SetHook(func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
					if method == "eth_blockNumber" {
						return nil, &jrpc.Error{Code: -32000, Message: "hooked"}, true
					}
					return nil, nil, false
				})
			},
			give:       `[{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"},{"jsonrpc":"2.0","id":2,"method":"eth_blockNumber","params":[]},` + chainIDCall + `]`,
			wantStatus: http.StatusOK,
			wantBody:   `[{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"hooked"}},{"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"hooked"}},{"jsonrpc":"2.0","id":1,"result":"0x539"}]`,
		},
		{
			name:    "drop beats fail status",
			set:     func(n *Node) { n.SetDrop(true); n.SetFailStatus(http.StatusBadGateway) },
			give:    chainIDCall,
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Cleanup(n.Reset)
			n.ResetCalls()
			tt.set(n)
			hc := httpClient(t)
			resp, err := hc.Post(n.URL(), "application/json", strings.NewReader(tt.give))
			if tt.wantErr {
				if err == nil {
					resp.Body.Close()
					t.Fatalf("got status %d, want a transport error", resp.StatusCode)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, err := io.ReadAll(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				if resp.StatusCode != tt.wantStatus || string(body) != tt.wantBody {
					t.Errorf("got %d %s\nwant %d %s", resp.StatusCode, body, tt.wantStatus, tt.wantBody)
				}
			}
			// Every call that reached the node counts, failed or not.
			if got := n.TotalCalls(); got != int64(strings.Count(tt.give, `"method"`)) {
				t.Errorf("TotalCalls = %d", got)
			}
		})
	}
	// After Reset the node answers plainly again.
	hc := httpClient(t)
	if got := mustRPC(t, hc, n.URL(), "eth_blockNumber"); string(got) != head {
		t.Errorf("after reset: head %s", got)
	}
}

func TestLatency(t *testing.T) {
	n := Start(t, Options{})
	hc := httpClient(t)
	const d = 80 * time.Millisecond
	n.SetLatency(d)
	start := time.Now()
	mustRPC(t, hc, n.URL(), "eth_chainId")
	if took := time.Since(start); took < d {
		t.Errorf("answer took %v, want at least %v", took, d)
	}
}

func TestLatencyEndsOnClose(t *testing.T) {
	n := New(Options{})
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	n.SetLatency(time.Hour)
	hc := httpClient(t)
	errc := make(chan error, 1)
	go func() {
		resp, err := hc.Post(n.URL(), "application/json", strings.NewReader(chainIDCall))
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	// Close must not wait for the hour; wait for the request to arrive first.
	testkit.WaitFor(t, testTimeout, "one call", func() bool { return n.TotalCalls() == 1 })
	n.Close()
	if err := <-errc; err == nil {
		t.Errorf("request answered after Close, want a transport error")
	}
}

// TestSlowTail counts the waits through Options.Sleep, which sees each
// one: timing the answers would count a call a busy machine stalled as
// slow.
func TestSlowTail(t *testing.T) {
	const (
		calls   = 8
		latency = 5 * time.Millisecond
		extra   = 300 * time.Millisecond
	)
	var (
		mu    sync.Mutex
		waits []time.Duration
	)
	n := Start(t, Options{Sleep: func(ctx context.Context, d time.Duration) bool {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, d)
		return ctx.Err() == nil
	}})
	hc := httpClient(t)
	n.SetLatency(latency)
	n.SetSlowTail(0.25, extra)
	for range calls {
		mustRPC(t, hc, n.URL(), "eth_chainId")
	}
	mu.Lock()
	defer mu.Unlock()
	slow := 0
	for _, d := range waits {
		switch d {
		case latency + extra:
			slow++
		case latency:
		default:
			t.Errorf("a wait of %v, want %v or %v", d, latency, latency+extra)
		}
	}
	if len(waits) != calls || slow != calls/4 {
		t.Errorf("%d of %d waits slow, want %d of %d", slow, len(waits), calls/4, calls)
	}
}

func TestDown(t *testing.T) {
	n := Start(t, Options{})
	hc := httpClient(t)
	ws := dialWS(t, n.WSURL())
	url := n.URL()

	n.SetDown(true)
	_, err := hc.Post(url, "application/json", strings.NewReader(chainIDCall))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("while down: %v, want connection refused", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, _, err := ws.c.Read(ctx); err == nil {
		t.Errorf("websocket survived SetDown")
	}

	n.SetDown(false)
	if n.URL() != url {
		t.Fatalf("URL changed to %s", n.URL())
	}
	if got := mustRPC(t, hc, url, "eth_chainId"); string(got) != `"0x539"` {
		t.Errorf("after up: %s", got)
	}
}

func TestDropClosesWebSocket(t *testing.T) {
	n := Start(t, Options{})
	ws := dialWS(t, n.WSURL())
	n.SetDrop(true)
	ws.send(chainIDCall)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, msg, err := ws.c.Read(ctx); err == nil {
		t.Errorf("got %s, want the connection closed", msg)
	}
}

func TestFailStatusRefusesWebSocket(t *testing.T) {
	n := Start(t, Options{})
	n.SetFailStatus(http.StatusServiceUnavailable)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	hc := httpClient(t)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("handshake status %d, want 503", resp.StatusCode)
	}
}

// TestFaultsUnderLoad flips every fault while clients call, for the race
// detector; every answer must be one of the configured behaviours.
func TestFaultsUnderLoad(t *testing.T) {
	n := Start(t, Options{})
	hc := httpClient(t)
	const (
		workers = 4
		calls   = 50
	)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				resp, err := hc.Post(n.URL(), "application/json", strings.NewReader(chainIDCall))
				if err != nil {
					continue // drop
				}
				resp.Body.Close()
			}
		}()
	}
	for i := 0; i < calls; i++ {
		n.SetDrop(i%5 == 1)
		n.SetGarbage(i%5 == 2)
		n.SetRPCError(-32000*(i%2), "x")
		n.SetLag(uint64(i % 3))
		n.Mine(1)
		n.SetChainID(uint64(i))
	}
	wg.Wait()
	if n.TotalCalls() != workers*calls {
		t.Errorf("TotalCalls = %d, want %d", n.TotalCalls(), workers*calls)
	}
}

// A node switched to another chain serves that chain as a node built for it
// does, byte for byte, and switched back serves its own again.
func TestSwitchChain(t *testing.T) {
	own := Start(t, Options{ChainID: 1337, Head: 20})
	other := Start(t, Options{ChainID: 5, Head: 20})
	hc := httpClient(t)
	calls := []struct {
		method string
		params []any
	}{
		{"eth_chainId", nil},
		{"eth_getBlockByNumber", []any{"0xa", true}},
		{"eth_getBlockReceipts", []any{"0xa"}},
		{"eth_getBlockByHash", []any{other.BlockHash(7), false}},
	}
	ownBlock := string(mustRPC(t, hc, own.URL(), "eth_getBlockByNumber", "0xa", true))
	own.SwitchChain(5)
	for _, c := range calls {
		got := string(mustRPC(t, hc, own.URL(), c.method, c.params...))
		if want := string(mustRPC(t, hc, other.URL(), c.method, c.params...)); got != want {
			t.Errorf("%s switched: %.120s, want the other chain's %.120s", c.method, got, want)
		}
	}
	if own.BlockHash(10) != other.BlockHash(10) {
		t.Error("BlockHash does not follow the switch")
	}
	own.SwitchChain(0)
	if got := string(mustRPC(t, hc, own.URL(), "eth_getBlockByNumber", "0xa", true)); got != ownBlock {
		t.Errorf("switched back: %.120s, want its own block %.120s", got, ownBlock)
	}
	if got := string(mustRPC(t, hc, own.URL(), "eth_chainId")); got != `"0x539"` {
		t.Errorf("switched back: chain id %s", got)
	}
}

// SetBogusHead claims a head the node does not have: the claim is visible
// where a head tracker looks (eth_blockNumber, latest, newHeads), the
// blocks are not, and the claimed block links to nothing the node serves.
func TestBogusHead(t *testing.T) {
	n := Start(t, Options{})
	hc := httpClient(t)
	ws := dialWS(t, n.WSURL())
	ws.subscribe(`["newHeads"]`)
	realTime := n.blockTime(100)

	n.SetBogusHead(1_000_000_000)
	var h header
	if err := json.Unmarshal(ws.readNote().Params.Result, &h); err != nil || hexNum(t, h.Number) != 1_000_000_000 {
		t.Fatalf("newHeads after SetBogusHead: %+v %v", h, err)
	}
	if got := hexNum(t, mustRPC(t, hc, n.URL(), "eth_blockNumber")); got != 1_000_000_000 {
		t.Errorf("eth_blockNumber = %d, want the bogus head", got)
	}
	var latest struct {
		Number     json.RawMessage `json:"number"`
		Hash       string          `json:"hash"`
		ParentHash string          `json:"parentHash"`
		Timestamp  json.RawMessage `json:"timestamp"`
	}
	if err := json.Unmarshal(mustRPC(t, hc, n.URL(), "eth_getBlockByNumber", "latest", false), &latest); err != nil {
		t.Fatal(err)
	}
	if hexNum(t, latest.Number) != 1_000_000_000 || latest.Hash != h.Hash || hexNum(t, latest.Timestamp) != realTime {
		t.Errorf("latest = %+v, want the bogus block %s with the real head's timestamp %d", latest, h.Hash, realTime)
	}
	for _, q := range []struct {
		method string
		arg    any
	}{{"eth_getBlockByHash", latest.ParentHash}, {"eth_getBlockByHash", latest.Hash}, {"eth_getBlockByNumber", "0x65"}} {
		if got := mustRPC(t, hc, n.URL(), q.method, q.arg, false); string(got) != "null" {
			t.Errorf("%s(%v) = %.60s, want null", q.method, q.arg, got)
		}
	}

	n.Mine(1) // the lie goes on over newHeads
	if err := json.Unmarshal(ws.readNote().Params.Result, &h); err != nil || hexNum(t, h.Number) != 1_000_000_000 {
		t.Errorf("newHeads after Mine while lying: %+v %v", h, err)
	}

	n.SetBogusHead(0)
	if got := hexNum(t, mustRPC(t, hc, n.URL(), "eth_blockNumber")); got != 101 {
		t.Errorf("eth_blockNumber after SetBogusHead(0) = %d, want 101", got)
	}
}

// BlockTime spaces timestamps in whole seconds, rounding down.
func TestBlockTimeOption(t *testing.T) {
	tests := []struct {
		give time.Duration
		num  uint64
		want uint64 // seconds after genesis
	}{
		{give: 0, num: 100, want: 1200},
		{give: time.Second, num: 100, want: 100},
		{give: 250 * time.Millisecond, num: 7, want: 1},
		{give: 250 * time.Millisecond, num: 8, want: 2},
		{give: 2 * time.Second, num: 1 << 40, want: 2 << 40},
	}
	for _, tt := range tests {
		n := New(Options{BlockTime: tt.give})
		if got := n.blockTime(tt.num) - DefaultGenesisTime; got != tt.want {
			t.Errorf("BlockTime %v: block %d at +%d s, want +%d", tt.give, tt.num, got, tt.want)
		}
		n.Close()
	}
}

// CallsAt tells calls for a tag apart from calls for numbered blocks.
func TestCallsAt(t *testing.T) {
	n := Start(t, Options{})
	hc := httpClient(t)
	mustRPC(t, hc, n.URL(), "eth_getBlockByNumber", "latest", false)
	mustRPC(t, hc, n.URL(), "eth_getBlockByNumber", "0x5", false)
	mustRPC(t, hc, n.URL(), "eth_getBlockByNumber", "latest", false)
	if got := n.CallsAt("eth_getBlockByNumber", "latest"); got != 2 {
		t.Errorf("CallsAt latest = %d, want 2", got)
	}
	if got, total := n.Calls("eth_getBlockByNumber"), n.TotalCalls(); got != 3 || total != 3 {
		t.Errorf("Calls = %d, TotalCalls = %d, want 3 and 3", got, total)
	}
	if got := n.CallCounts(); len(got) != 1 || got["eth_getBlockByNumber"] != 3 {
		t.Errorf("CallCounts = %v", got)
	}
}
