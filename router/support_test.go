package router

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/venn-gateway/venn/blockstore"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/gethtest"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes"
)

// openStore opens the history store at url for the dev chain.
func openStore(t *testing.T, url string) *blockstore.Chain {
	t.Helper()
	p, err := blockstore.Open(context.Background(), url, blockstore.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p.Chain(gethtest.ChainID, "dev")
}

// rawCall makes one JSON-RPC call and returns the result or the error.
func rawCall(ctx context.Context, url, method, params string) (json.RawMessage, error) {
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
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
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var reply struct {
		Result json.RawMessage `json:"result"`
		Error  *jrpc.Error     `json:"error"`
	}
	if err := json.Unmarshal(raw, &reply); err != nil {
		return nil, fmt.Errorf("%s: %.200s: %w", method, raw, err)
	}
	if reply.Error != nil {
		return nil, reply.Error
	}
	return reply.Result, nil
}

// mustCall is rawCall that fails the test on an error.
func mustCall(t *testing.T, url, method, params string) json.RawMessage {
	t.Helper()
	res, err := rawCall(context.Background(), url, method, params)
	if err != nil {
		t.Fatalf("%s%s: %v", method, params, err)
	}
	return res
}

// Contracts of the dev chain, hand-assembled. Each logs what its calldata
// says, so that transactions choose their topics:
//
//	two:  LOG2(topic0 = calldata[0:32], topic1 = calldata[32:64])
//	one:  LOG1(topic0 = calldata[0:32])
//	pair: LOG2(calldata[0:32], calldata[32:64]); LOG1(calldata[32:64])
//
// Init code copies the runtime and returns it:
// PUSH1 len DUP1 PUSH1 0x0b PUSH1 0 CODECOPY PUSH1 0 RETURN.
var runtimes = []string{
	"60203560003560006000a200",
	"60003560006000a100",
	"60203560003560006000a260203560006000a100",
}

// Topics the transactions log; each is 32 bytes.
var (
	topic0s = []string{gethtest.Topic(0xa1), gethtest.Topic(0xa2), gethtest.Topic(0xa3)}
	topic1s = []string{gethtest.Topic(0xb1), gethtest.Topic(0xb2)}
)

// devChain is what buildChain put on geth --dev.
type devChain struct {
	g         *gethtest.Geth
	account   string
	contracts []string
	txs       []string // every transaction sent, in order
	head      uint64
}

// buildChain deploys the contracts and sends rounds of transactions (log
// calls with varied topics, transfers), several at once so that blocks hold
// several, then waits for all of them. With --dev.period 0 nothing more is
// sent, but geth may still seal an empty block of its own above head: the
// tests name the blocks they compare (at most head), or ask both sides
// live.
func buildChain(t *testing.T, rounds int) *devChain {
	t.Helper()
	g := gethtest.Start(t, gethtest.Options{})
	c := &devChain{g: g}
	var accounts []string
	if err := json.Unmarshal(g.MustCall(t, "eth_accounts"), &accounts); err != nil || len(accounts) == 0 {
		t.Fatalf("geth --dev accounts: %v", err)
	}
	c.account = accounts[0]
	var deploys []map[string]any
	for _, r := range runtimes {
		deploys = append(deploys, map[string]any{"from": c.account, "data": gethtest.DeployCode(r)})
	}
	for _, rc := range c.send(t, deploys) {
		var r struct {
			ContractAddress string `json:"contractAddress"`
		}
		if err := json.Unmarshal(rc, &r); err != nil || r.ContractAddress == "" {
			t.Fatalf("deploy receipt %s: %v", rc, err)
		}
		c.contracts = append(c.contracts, r.ContractAddress)
	}
	for r := range rounds {
		var txs []map[string]any
		for i := range 1 + r%4 {
			k := r*4 + i
			if k%5 == 4 {
				txs = append(txs, map[string]any{"from": c.account, "to": c.account, "value": "0x1"})
				continue
			}
			data := topic0s[k%len(topic0s)] + topic1s[(k/3)%len(topic1s)][2:]
			txs = append(txs, map[string]any{"from": c.account, "to": c.contracts[k%len(c.contracts)], "data": data})
		}
		c.send(t, txs)
	}
	var head string
	if err := json.Unmarshal(g.MustCall(t, "eth_blockNumber"), &head); err != nil {
		t.Fatal(err)
	}
	n, err := evm.ParseQuantity(head)
	if err != nil {
		t.Fatal(err)
	}
	c.head = n
	return c
}

// send sends the transactions in one batch and returns their receipts.
func (c *devChain) send(t *testing.T, txs []map[string]any) []json.RawMessage {
	t.Helper()
	// geth may run a batch's calls at once: nonces are set here, in order.
	var pending string
	if err := json.Unmarshal(mustCall(t, c.g.HTTPURL(), "eth_getTransactionCount", `["`+c.account+`","pending"]`), &pending); err != nil {
		t.Fatal(err)
	}
	nonce, err := evm.ParseQuantity(pending)
	if err != nil {
		t.Fatal(err)
	}
	batch := make([]map[string]any, len(txs))
	for i, tx := range txs {
		tx["nonce"] = evm.Quantity(nonce + uint64(i))
		batch[i] = map[string]any{"jsonrpc": "2.0", "id": i, "method": "eth_sendTransaction", "params": []any{tx}}
	}
	body, _ := json.Marshal(batch)
	resp, err := http.Post(c.g.HTTPURL(), "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var replies []struct {
		ID     int             `json:"id"`
		Result string          `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &replies); err != nil || len(replies) != len(txs) {
		t.Fatalf("send batch: %s (%v)", raw, err)
	}
	hashes := make([]string, len(txs))
	for _, r := range replies {
		if r.Result == "" {
			t.Fatalf("send: %s", r.Error)
		}
		hashes[r.ID] = r.Result
	}
	c.txs = append(c.txs, hashes...)
	out := make([]json.RawMessage, len(hashes))
	deadline := time.Now().Add(30 * time.Second)
	for i, h := range hashes {
		for {
			rc, err := rawCall(context.Background(), c.g.HTTPURL(), "eth_getTransactionReceipt", `["`+h+`"]`)
			if err == nil && string(rc) != "null" {
				out[i] = rc
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("transaction %s not mined (last error %v)", h, err)
			}
			time.Sleep(20 * time.Millisecond) // polling geth for the receipt, with a deadline
		}
	}
	return out
}

// block fetches block n from geth as the stalker does: with full
// transactions, and its receipts.
func (c *devChain) block(t *testing.T, n uint64) *evm.Block {
	t.Helper()
	url := c.g.HTTPURL()
	raw := mustCall(t, url, "eth_getBlockByNumber", `["`+evm.Quantity(n)+`",true]`)
	var h struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	b, err := evm.ParseBlock(raw, mustCall(t, url, "eth_getBlockReceipts", `["`+h.Hash+`"]`))
	if err != nil {
		t.Fatalf("block %d: %v", n, err)
	}
	return b
}

// archive stores blocks from..to (inclusive) of the dev chain.
func (c *devChain) archive(t *testing.T, store *blockstore.Chain, from, to uint64) {
	t.Helper()
	var blocks []*evm.Block
	for n := from; n <= to; n++ {
		blocks = append(blocks, c.block(t, n))
	}
	if err := store.Put(context.Background(), blocks); err != nil {
		t.Fatalf("archive %d-%d: %v", from, to, err)
	}
}

// startPool starts a remotes pool over one URL, as remotes geth, geth2...
// (one node behind two names is two providers of one network).
func startPool(t *testing.T, url string, more ...string) *remotes.Pool {
	t.Helper()
	rs := []remotes.Config{{Name: "geth", URL: url, Timeout: 5 * time.Second}}
	for i, u := range more {
		rs = append(rs, remotes.Config{Name: fmt.Sprintf("geth%d", i+2), URL: u, Timeout: 5 * time.Second})
	}
	return startChainPool(t, gethtest.ChainID, rs...)
}

// startChainPool is a started pool of chain chainID ("dev") on rs,
// stopped at cleanup.
func startChainPool(t *testing.T, chainID uint64, rs ...remotes.Config) *remotes.Pool {
	t.Helper()
	pool, err := remotes.NewPool(remotes.PoolConfig{Chain: "dev", ChainID: chainID,
		BlockTime: 100 * time.Millisecond, CallDeadline: 10 * time.Second}, rs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Stop(context.Background()) })
	return pool
}

// counting counts the calls that reach the remotes, by method.
type counting struct {
	Upstream
	mu    sync.Mutex
	calls map[string]int
}

// upstreamOf is a pool as app hands it to the router: its calls, and its
// heads.
func upstreamOf(p *remotes.Pool) Upstream { return UpstreamOf(p, p.Heads()) }

func (c *counting) ServeCall(ctx context.Context, call evm.Call) (json.RawMessage, error) {
	c.mu.Lock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[call.Method]++
	c.mu.Unlock()
	return c.Upstream.ServeCall(ctx, call)
}

func (c *counting) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.calls {
		n += v
	}
	return n
}

// noBlockReceipts is the remotes as a provider without eth_getBlockReceipts.
type noBlockReceipts struct{ *counting }

func (n noBlockReceipts) ServeCall(ctx context.Context, c evm.Call) (json.RawMessage, error) {
	if c.Method == "eth_getBlockReceipts" {
		return nil, &jrpc.Error{Code: jrpc.CodeMethodNotFound, Message: "the method eth_getBlockReceipts does not exist/is not available"}
	}
	return n.counting.ServeCall(ctx, c)
}
