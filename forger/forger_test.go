package forger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/integrity"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes"
)

const testChainID = 1337

// errNoBlockReceipts is geth's answer for a method it does not have.
var errNoBlockReceipts = &jrpc.Error{Code: jrpc.CodeMethodNotFound,
	Message: "the method eth_getBlockReceipts does not exist/is not available"}

// nodes starts a fake node without eth_getBlockReceipts (the remote) and
// one with it (the reference: the same chain, as geth serves it), and a
// pool over the first.
func nodes(t *testing.T) (without, reference *fakenode.Node, up Calls) {
	t.Helper()
	without = fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 30})
	without.SetHook(func(method string, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method == "eth_getBlockReceipts" {
			return nil, errNoBlockReceipts, true
		}
		return nil, nil, false
	})
	reference = fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 30})
	pool, err := remotes.NewPool(remotes.PoolConfig{Chain: "test", ChainID: testChainID,
		BlockTime: 50 * time.Millisecond, CallDeadline: 3 * time.Second},
		[]remotes.Config{{Name: "n0", URL: without.URL(), Timeout: time.Second}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Stop(context.Background()) })
	return without, reference, pool
}

// call makes one JSON-RPC call over HTTP and returns the raw result or
// error object.
func call(t *testing.T, url, method, params string) (json.RawMessage, *jrpc.Error) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var reply struct {
		Result json.RawMessage `json:"result"`
		Error  *jrpc.Error     `json:"error"`
	}
	if err := json.Unmarshal(raw, &reply); err != nil {
		t.Fatalf("%s: %s: %v", method, raw, err)
	}
	return reply.Result, reply.Error
}

func TestBlockReceiptsBuiltPerTransactionEqualTheNodes(t *testing.T) {
	without, ref, up := nodes(t)
	f := New(up, nil)
	hash := without.BlockHash(7)
	tests := []struct{ name, give string }{
		{"number", `["0x7"]`},
		{"hash", `["` + hash + `"]`},
		{"upper-case hash", `["0x` + strings.ToUpper(hash[2:]) + `"]`},
		{"eip-1898 hash", `[{"blockHash":"` + hash + `"}]`},
		{"eip-1898 canonical hash", `[{"blockHash":"` + hash + `","requireCanonical":true}]`},
		{"eip-1898 number", `[{"blockNumber":"0x8"}]`},
		{"latest", `["latest"]`},
		{"genesis: no transactions", `["0x0"]`},
		{"above the head: null", `["0x3e8"]`},
		{"unknown hash: null", `["0x` + strings.Repeat("ab", 32) + `"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, werr := call(t, ref.URL(), "eth_getBlockReceipts", tt.give)
			if werr != nil {
				t.Fatalf("reference node: %v", werr)
			}
			got, built, err := f.BlockReceipts(context.Background(), receiptsCall(tt.give))
			if err != nil {
				t.Fatal(err)
			}
			if !built {
				t.Fatal("not built per transaction")
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("built\n%s\nnode\n%s", got, want)
			}
		})
	}
	if without.Calls("eth_getTransactionReceipt") == 0 {
		t.Fatal("no eth_getTransactionReceipt calls")
	}
}

// direct is an Upstream straight to one node, without a pool (which keeps
// its own memory of unsupported methods).
func direct(t *testing.T, url string) Upstream {
	return func(ctx context.Context, method string, params json.RawMessage, _ func(json.RawMessage) integrity.Verdict) (json.RawMessage, error) {
		res, rerr := call(t, url, method, string(params))
		if rerr != nil {
			return nil, rerr
		}
		return res, nil
	}
}

func TestBlockReceiptsLearnsAndRechecks(t *testing.T) {
	without, _, _ := nodes(t)
	f := New(upstreamCalls(direct(t, without.URL())), nil)
	now := time.Unix(1_000_000, 0)
	f.receipts.now = func() time.Time { return now }
	ctx := context.Background()
	for range 3 {
		if _, built, err := f.BlockReceipts(ctx, receiptsCall(`["0x5"]`)); err != nil || !built {
			t.Fatalf("built %v, err %v", built, err)
		}
	}
	if got := without.Calls("eth_getBlockReceipts"); got != 1 {
		t.Fatalf("eth_getBlockReceipts asked %d times within the recheck interval, want once", got)
	}
	// A remote enables the method: found at the next recheck.
	without.SetHook(nil)
	now = now.Add(BlockReceiptsRecheck + time.Second)
	if _, built, err := f.BlockReceipts(ctx, receiptsCall(`["0x5"]`)); err != nil || built {
		t.Fatalf("after the recheck: built %v, err %v; want the remote's own answer", built, err)
	}
	if got := without.Calls("eth_getBlockReceipts"); got != 2 {
		t.Fatalf("eth_getBlockReceipts asked %d times, want 2", got)
	}
}

func TestBlockReceiptsForwardedWhileARemoteHasThem(t *testing.T) {
	_, ref, _ := nodes(t)
	pool, err := remotes.NewPool(remotes.PoolConfig{Chain: "test", ChainID: testChainID,
		BlockTime: 50 * time.Millisecond, CallDeadline: 3 * time.Second},
		[]remotes.Config{{Name: "ref", URL: ref.URL(), Timeout: time.Second}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Stop(context.Background()) })
	f := New(pool, nil)
	if _, built, err := f.BlockReceipts(context.Background(), receiptsCall(`["0x5"]`)); err != nil || built {
		t.Fatalf("built %v, err %v", built, err)
	}
	if ref.Calls("eth_getTransactionReceipt") != 0 {
		t.Fatal("receipts fetched one by one though the remote has eth_getBlockReceipts")
	}
}

func TestBlockReceiptsLeavesWhatItCannotBuildToTheNode(t *testing.T) {
	_, _, up := nodes(t)
	f := New(up, nil)
	for _, give := range []string{`["pending"]`, `[]`, `["0x1","0x2"]`, `[true]`} {
		_, built, err := f.BlockReceipts(context.Background(), receiptsCall(give))
		if built || !Unsupported("eth_getBlockReceipts", err) {
			t.Errorf("%s: built %v, err %v; want the remotes' own answer", give, built, err)
		}
	}
}

func TestBlockFetchesWholeBlocks(t *testing.T) {
	_, ref, up := nodes(t)
	f := New(up, nil)
	b, err := f.Block(context.Background(), 9)
	if err != nil {
		t.Fatal(err)
	}
	wantRaw, _ := call(t, ref.URL(), "eth_getBlockByNumber", `["0x9",true]`)
	wantRcs, _ := call(t, ref.URL(), "eth_getBlockReceipts", `["0x9"]`)
	if b.Number != 9 || b.Hash != ref.BlockHash(9) || !bytes.Equal(b.Raw, wantRaw) || !bytes.Equal(b.Receipts, wantRcs) {
		t.Fatalf("block %d %s: raw equal %v, receipts equal %v", b.Number, b.Hash,
			bytes.Equal(b.Raw, wantRaw), bytes.Equal(b.Receipts, wantRcs))
	}
	if _, err := f.Block(context.Background(), 1000); !errors.Is(err, ErrNoBlock) {
		t.Fatalf("block above the head: err %v, want ErrNoBlock", err)
	}
}

// fakeChain is an Upstream over one block of n transactions whose receipt
// calls take a moment, counting how many are in flight at once.
type fakeChain struct {
	txs       int
	blockHash func(call int64) string // the block a receipt names, by receipt call number
	calls     atomic.Int64
	mu        sync.Mutex
	inFlight  int
	maxFlight int
}

func (c *fakeChain) up(ctx context.Context, method string, params json.RawMessage, _ func(json.RawMessage) integrity.Verdict) (json.RawMessage, error) {
	hash := "0x" + strings.Repeat("11", 32)
	switch method {
	case "eth_getBlockReceipts":
		return nil, errNoBlockReceipts
	case "eth_getBlockByNumber", "eth_getBlockByHash":
		txs := make([]string, c.txs)
		for i := range txs {
			txs[i] = fmt.Sprintf(`"0x%064x"`, i+1)
		}
		return json.RawMessage(`{"hash":"` + hash + `","number":"0x5","transactions":[` + strings.Join(txs, ",") + `]}`), nil
	case "eth_getTransactionReceipt":
		n := c.calls.Add(1)
		c.mu.Lock()
		c.inFlight++
		c.maxFlight = max(c.maxFlight, c.inFlight)
		c.mu.Unlock()
		select {
		case <-time.After(2 * time.Millisecond): // hold the call open so others overlap it
		case <-ctx.Done():
		}
		c.mu.Lock()
		c.inFlight--
		c.mu.Unlock()
		var tx []string
		_ = json.Unmarshal(params, &tx)
		bh := hash
		if c.blockHash != nil {
			bh = c.blockHash(n)
		}
		return json.RawMessage(`{"blockHash":"` + bh + `","transactionHash":"` + tx[0] + `"}`), nil
	}
	return nil, fmt.Errorf("unexpected %s", method)
}

func TestBlockReceiptsBoundsConcurrentCalls(t *testing.T) {
	c := &fakeChain{txs: 60}
	f := New(upstreamCalls(c.up), nil)
	res, built, err := f.BlockReceipts(context.Background(), receiptsCall(`["0x5"]`))
	if err != nil || !built {
		t.Fatalf("built %v, err %v", built, err)
	}
	var rs []struct {
		TransactionHash string `json:"transactionHash"`
	}
	if err := json.Unmarshal(res, &rs); err != nil || len(rs) != 60 {
		t.Fatalf("%d receipts (%v), want 60", len(rs), err)
	}
	for i, r := range rs {
		if r.TransactionHash != fmt.Sprintf("0x%064x", i+1) {
			t.Fatalf("receipt %d is %s: out of order", i, r.TransactionHash)
		}
	}
	if c.maxFlight > ReceiptConcurrency || c.maxFlight < 2 {
		t.Fatalf("%d receipt calls in flight at most, want 2..%d", c.maxFlight, ReceiptConcurrency)
	}
}

func TestBlockReceiptsRefusesReceiptsOfAnotherBlock(t *testing.T) {
	// The remote reorged between the calls: its receipts name a sibling.
	other := "0x" + strings.Repeat("22", 32)
	c := &fakeChain{txs: 3, blockHash: func(int64) string { return other }}
	f := New(upstreamCalls(c.up), nil)
	if _, _, err := f.BlockReceipts(context.Background(), receiptsCall(`["0x5"]`)); err == nil {
		t.Fatal("receipts of another block served as the block's")
	}
	if got := c.calls.Load(); got != 3*buildAttempts {
		t.Fatalf("%d receipt calls, want %d (every attempt)", got, 3*buildAttempts)
	}
	// A reorg seen once heals on the next attempt.
	c = &fakeChain{txs: 3, blockHash: func(n int64) string {
		if n == 1 {
			return other
		}
		return "0x" + strings.Repeat("11", 32)
	}}
	f = New(upstreamCalls(c.up), nil)
	if _, built, err := f.BlockReceipts(context.Background(), receiptsCall(`["0x5"]`)); err != nil || !built {
		t.Fatalf("built %v, err %v", built, err)
	}
}

func TestDerive(t *testing.T) {
	block := `{"difficulty":"0x0","hash":"0xaa","number":"0x5","size":"0x10","transactions":["0x01"],"uncles":[],"withdrawals":[],"withdrawalsRoot":"0xbb"}`
	src := func(c evm.Call) (json.RawMessage, bool) {
		switch string(c.Params) {
		case `["0x5",false]`, `["0x` + strings.Repeat("aa", 32) + `",false]`:
			return json.RawMessage(block), true
		case `["0x9",false]`:
			return json.RawMessage(`null`), true
		}
		return nil, false
	}
	h := `"0x` + strings.Repeat("aa", 32) + `"`
	tests := []struct {
		method, give, want string
		ok                 bool
	}{
		{"eth_getHeaderByNumber", `["0x5"]`, `{"difficulty":"0x0","hash":"0xaa","number":"0x5","withdrawalsRoot":"0xbb"}`, true},
		{"eth_getHeaderByHash", `[` + h + `]`, `{"difficulty":"0x0","hash":"0xaa","number":"0x5","withdrawalsRoot":"0xbb"}`, true},
		{"eth_getHeaderByNumber", `["0x9"]`, `null`, true},
		{"eth_getHeaderByNumber", `["0x6"]`, ``, false},
		{"eth_getHeaderByNumber", `["0x5",true]`, ``, false},
		{"eth_getUncleByBlockNumberAndIndex", `["0x5","0x0"]`, `null`, true},
		{"eth_getUncleByBlockHashAndIndex", `[` + h + `,"0x1"]`, `null`, true},
		{"eth_getUncleByBlockNumberAndIndex", `["0x9","0x0"]`, `null`, true},
		{"eth_getUncleByBlockNumberAndIndex", `["0x5","0x00"]`, ``, false},
		{"eth_getUncleByBlockNumberAndIndex", `["0x5"]`, ``, false},
		{"eth_getBalance", `["0x5"]`, ``, false},
	}
	for _, tt := range tests {
		c := evm.ParseCall(tt.method, json.RawMessage(tt.give))
		got, ok := Derive(&c, src)
		if ok != tt.ok || string(got) != tt.want {
			t.Errorf("%s%s = %s, %v; want %s, %v", tt.method, tt.give, got, ok, tt.want, tt.ok)
		}
	}
	// A block with uncles: an index within them is the node's to answer.
	withUncles := func(evm.Call) (json.RawMessage, bool) {
		return json.RawMessage(`{"uncles":["0x01","0x02"]}`), true
	}
	one := evm.ParseCall("eth_getUncleByBlockNumberAndIndex", json.RawMessage(`["0x5","0x1"]`))
	if _, ok := Derive(&one, withUncles); ok {
		t.Error("an uncle the block has was answered without its header")
	}
	two := evm.ParseCall("eth_getUncleByBlockNumberAndIndex", json.RawMessage(`["0x5","0x2"]`))
	if got, ok := Derive(&two, withUncles); !ok || string(got) != "null" {
		t.Errorf("index past the uncles = %s, %v; want null", got, ok)
	}
}

// receiptsCall is an eth_getBlockReceipts call as the router parses it.
func receiptsCall(params string) *evm.Call {
	c := evm.ParseCall("eth_getBlockReceipts", json.RawMessage(params))
	return &c
}

// upstreamCalls is an Upstream as Calls, verify left out.
type upstreamCalls Upstream

func (u upstreamCalls) ServeCall(ctx context.Context, c evm.Call) (json.RawMessage, error) {
	return u(ctx, c.Method, c.Params, nil)
}

// callRecorder is remotes that take parsed calls: it records each call's
// method.
type callRecorder struct{ parsed []string }

func (r *callRecorder) ServeCall(_ context.Context, c evm.Call) (json.RawMessage, error) {
	r.parsed = append(r.parsed, c.Method)
	return json.RawMessage(`[]`), nil
}

// The client's own eth_getBlockReceipts reaches the remotes as the router
// parsed it.
func TestForwardsTheParsedCall(t *testing.T) {
	rec := &callRecorder{}
	f := New(rec, nil)
	res, built, err := f.BlockReceipts(context.Background(), receiptsCall(`["0x5"]`))
	if err != nil || built || string(res) != `[]` {
		t.Fatalf("= %s, %v, %v", res, built, err)
	}
	if len(rec.parsed) != 1 || rec.parsed[0] != "eth_getBlockReceipts" {
		t.Fatalf("parsed %v", rec.parsed)
	}
}

// shapeNode is a fake node serving real blocks (their roots and hashes
// go-ethereum's), whose receipts verify against them.
func shapeNode(t *testing.T) *fakenode.Node {
	t.Helper()
	n := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	if _, err := fakenode.NewShapeChain(n, fakenode.Shape{Name: "test", BlockTime: time.Hour, Txs: 20}); err != nil {
		t.Fatal(err)
	}
	return n
}

// post is one call to url, for the upstreams of these tests (they run off
// the test's goroutine).
func post(ctx context.Context, url, method string, params json.RawMessage) (json.RawMessage, error) {
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + string(params) + `}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var reply struct {
		Result json.RawMessage `json:"result"`
		Error  *jrpc.Error     `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
		return nil, err
	}
	if reply.Error != nil {
		return nil, reply.Error
	}
	return reply.Result, nil
}

// A block fetched by number has its receipts asked for while the block is
// on its way, not after: the leader's fetch of a new head waits for one
// large answer, not two in a row. The receipts are still checked against
// the block, root and bloom.
func TestFetchBlockAsksReceiptsWithTheBlock(t *testing.T) {
	node := shapeNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	receiptsAsked := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var receiptChecks []integrity.Verdict
	up := func(ctx context.Context, method string, params json.RawMessage, verify func(json.RawMessage) integrity.Verdict) (json.RawMessage, error) {
		if method == "eth_getBlockReceipts" {
			once.Do(func() { close(receiptsAsked) })
		}
		res, err := post(ctx, node.URL(), method, params)
		if err != nil || verify == nil {
			return res, err
		}
		v := verify(res)
		if method == "eth_getBlockReceipts" {
			mu.Lock()
			receiptChecks = append(receiptChecks, v)
			mu.Unlock()
		}
		return res, v.Err()
	}
	blockFirst := false
	fetch := func(ctx context.Context, method string, params json.RawMessage,
		verify func(json.RawMessage) integrity.Verdict) (json.RawMessage, integrity.Verdict, error) {
		if method == "eth_getBlockByNumber" {
			// The block answers only once its receipts are asked for (or
			// the test's bound passes).
			select {
			case <-receiptsAsked:
			case <-ctx.Done():
				blockFirst = true
			}
		}
		res, err := post(context.Background(), node.URL(), method, params)
		if err != nil {
			return nil, integrity.Verdict{}, err
		}
		v := verify(res)
		return res, v, v.Err()
	}
	b, err := FetchBlock(ctx, fetch, NewReceipts(up, nil), "eth_getBlockByNumber", `"0x32"`)
	if blockFirst {
		t.Fatal("the receipts were asked for only after the block came")
	}
	if err != nil {
		t.Fatal(err)
	}
	if b.Number != 50 || len(b.Receipts) == 0 {
		t.Fatalf("block %d, %d bytes of receipts", b.Number, len(b.Receipts))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(receiptChecks) != 1 || !receiptChecks[0].Passed.Has(integrity.CheckReceiptsRoot) ||
		!receiptChecks[0].Passed.Has(integrity.CheckLogsBloom) {
		t.Fatalf("receipts checked %d times: %+v; want once, root and bloom passed", len(receiptChecks), receiptChecks)
	}
}

// Receipts asked for by number that turn out to be a sibling's (a reorg
// between the two answers) are asked for again by the block's hash.
func TestFetchBlockAsksASiblingsReceiptsAgainByHash(t *testing.T) {
	node := shapeNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var byHash atomic.Int64
	up := func(ctx context.Context, method string, params json.RawMessage, _ func(json.RawMessage) integrity.Verdict) (json.RawMessage, error) {
		if method == "eth_getBlockReceipts" {
			if strings.Contains(string(params), `"0x32"`) {
				params = json.RawMessage(`["0x31"]`) // another block's
			} else {
				byHash.Add(1)
			}
		}
		return post(ctx, node.URL(), method, params)
	}
	fetch := func(ctx context.Context, method string, params json.RawMessage,
		_ func(json.RawMessage) integrity.Verdict) (json.RawMessage, integrity.Verdict, error) {
		res, err := post(ctx, node.URL(), method, params)
		return res, integrity.Verdict{}, err
	}
	b, err := FetchBlock(ctx, fetch, NewReceipts(up, nil), "eth_getBlockByNumber", `"0x32"`)
	if err != nil {
		t.Fatal(err)
	}
	want, err := post(ctx, node.URL(), "eth_getBlockReceipts", json.RawMessage(`["0x32"]`))
	if err != nil {
		t.Fatal(err)
	}
	if b.Number != 50 || !bytes.Equal(b.Receipts, want) || byHash.Load() != 1 {
		t.Fatalf("block %d: receipts equal %v, %d asked by hash", b.Number, bytes.Equal(b.Receipts, want), byHash.Load())
	}
}
