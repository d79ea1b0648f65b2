package remotes

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/evm"
	integ "github.com/venn-gateway/venn/integrity"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/misbehave"
)

// gethFixture reads a block or receipts of a real geth chain: the fixtures
// of package evm's own tests (block 0x3 holds seven transactions of four
// types, with logs).
func gethFixture(t *testing.T, name string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "integrity", "testdata", "geth", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serves makes a node answer the block methods with block and receipts,
// whatever the block asked for; every other call is the node's own.
func serves(block, receipts json.RawMessage) fakenode.Hook {
	return func(method string, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		switch method {
		case "eth_getBlockByNumber", "eth_getBlockByHash":
			return block, nil, true
		case "eth_getBlockReceipts":
			return receipts, nil, true
		}
		return nil, nil, false
	}
}

// blockHashOf is the fixture block's hash.
func blockHashOf(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b struct {
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatal(err)
	}
	return b.Hash
}

// blockCalls records the block calls a node gets once on is set, so that a
// count that is off says which calls they were.
type blockCalls struct {
	on     atomic.Bool
	mu     sync.Mutex
	params []string
}

func (b *blockCalls) hook(h fakenode.Hook) fakenode.Hook {
	return func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if strings.HasPrefix(method, "eth_getBlockBy") && b.on.Load() {
			b.mu.Lock()
			b.params = append(b.params, method+string(params)+" at "+time.Now().Format("15:04:05.000000"))
			b.mu.Unlock()
		}
		return h(method, params)
	}
}

func (b *blockCalls) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return "block calls " + strings.Join(b.params, ", ")
}

func TestCallVerified(t *testing.T) {
	block, receipts := gethFixture(t, "block-0x3"), gethFixture(t, "receipts-0x3")
	hash := blockHashOf(t, block)
	lyingBlock := testkit.EditJSON(t, block, func(m map[string]any) { m["stateRoot"] = "0x" + strings.Repeat("ab", 32) })
	lyingReceipts := testkit.EditJSON(t, receipts, func(rs []any) {
		rs[0].(map[string]any)["logs"].([]any)[0].(map[string]any)["data"] = "0x01"
	})
	l2Block := testkit.EditJSON(t, block, func(m map[string]any) { m["l1BlockNumber"] = "0x10" }) // an L2's extra member
	l2Lying := testkit.EditJSON(t, lyingBlock, func(m map[string]any) { m["l1BlockNumber"] = "0x10" })
	verifyBlock := func(res json.RawMessage) integ.Verdict {
		return integ.VerifyBlock(res, evm.BlockRef{Kind: evm.RefNumber, Number: 3})
	}
	blk := integ.VerifyBlock(block, evm.BlockRef{}).Block
	verifyReceipts := func(res json.RawMessage) integ.Verdict {
		return integ.VerifyReceipts(res, evm.BlockRef{Kind: evm.RefHash, Hash: hash}, func(common.Hash) *integ.BlockInfo { return blk })
	}

	type answers struct{ block, receipts json.RawMessage }
	tests := []struct {
		name    string
		give    []answers // per remote; n0 is primary, the others secondary
		method  string
		want    json.RawMessage // the answer served
		blamed  map[string]string
		skipped []string // check/reason counted
		wantN1  int64    // calls of method that reached n1
		again   bool     // a second call: the check is skipped at once
		againN1 int64
	}{
		{
			name: "liar refetched from an honest remote", method: "eth_getBlockByNumber",
			give: []answers{{lyingBlock, receipts}, {block, receipts}}, want: block,
			blamed: map[string]string{"n0": "block_hash"}, wantN1: 1,
		},
		{
			name: "lying receipts refetched", method: "eth_getBlockReceipts",
			give: []answers{{block, lyingReceipts}, {block, receipts}}, want: receipts,
			blamed: map[string]string{"n0": "receipts_root"}, wantN1: 1,
		},
		{
			name: "every remote fails alike: served, nobody blamed", method: "eth_getBlockByNumber",
			give: []answers{{lyingBlock, receipts}, {lyingBlock, receipts}}, want: lyingBlock,
			skipped: []string{"block_hash/unreproducible"}, wantN1: 1, again: true, againN1: 1,
		},
		{
			name: "a lone remote that fails is served", method: "eth_getBlockByNumber",
			give: []answers{{lyingBlock, receipts}}, want: lyingBlock,
			skipped: []string{"block_hash/unreproducible"},
		},
		{
			name: "unknown member skipped, not failed", method: "eth_getBlockByNumber",
			give: []answers{{l2Block, receipts}, {block, receipts}}, want: l2Block,
			skipped: []string{"block_hash/unknown_field"}, wantN1: 0,
		},
		{
			name: "no proof against a remote whose check the served answer skipped", method: "eth_getBlockByNumber",
			give: []answers{{lyingBlock, receipts}, {l2Block, receipts}}, want: l2Block,
			skipped: []string{"block_hash/unknown_field"}, wantN1: 1,
		},
		{
			name: "skips don't hide a failed root", method: "eth_getBlockByNumber",
			give: []answers{{testkit.EditJSON(t, l2Lying, func(m map[string]any) {
				m["transactions"].([]any)[0].(map[string]any)["value"] = "0x5"
			}), receipts}, {block, receipts}}, want: block,
			blamed: map[string]string{"n0": "transaction_hash"}, wantN1: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := make([]*fakenode.Node, len(tt.give))
			seen := make([]blockCalls, len(tt.give))
			for i, a := range tt.give {
				nodes[i] = fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 10})
				nodes[i].SetHook(seen[i].hook(serves(a.block, a.receipts)))
			}
			m := NewMetrics(prometheus.NewRegistry())
			urls := make([]string, len(nodes))
			for i, n := range nodes {
				urls[i] = n.URL()
			}
			p := startPool(t, PoolConfig{}, testConfigs(urls, func(i int, c *Config) {
				if i > 0 {
					c.Tier = TierSecondary
				}
			}), m)
			verify, params := verifyBlock, json.RawMessage(`["0x3",true]`)
			if tt.method == "eth_getBlockReceipts" {
				verify, params = verifyReceipts, json.RawMessage(`["`+hash+`"]`)
			}
			for i, n := range nodes {
				n.ResetCalls()
				seen[i].on.Store(true)
			}
			got, v, err := p.CallVerified(context.Background(), tt.method, params, verify, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, tt.want) {
				t.Fatalf("served %.120s..., want %.120s...", got, tt.want)
			}
			if len(v.Failed) > 0 {
				t.Errorf("served an answer with failures %v", v.Failed)
			}
			if len(nodes) > 1 {
				if n := servedCalls(nodes[1], tt.method); n != tt.wantN1 {
					t.Errorf("n1 got %d calls, want %d: %s", n, tt.wantN1, &seen[1])
				}
			}
			for i := range nodes {
				name := "n" + string(rune('0'+i))
				check, blamed := tt.blamed[name]
				mis := testutil.ToFloat64(m.mb.Misbehaviours("test", name, misbehave.Integrity))
				switch {
				case blamed && mis != 1:
					t.Errorf("%s: %v integrity misbehaviours, want 1", name, mis)
				case !blamed && mis != 0:
					t.Errorf("%s: blamed %v times", name, mis)
				}
				if blamed {
					if f := testutil.ToFloat64(m.ig.Failures("test", name, check)); f != 1 {
						t.Errorf("%s: venn_integrity_failures_total{check=%s} = %v", name, check, f)
					}
				}
			}
			for _, s := range tt.skipped {
				c, r, _ := strings.Cut(s, "/")
				if got := testutil.ToFloat64(m.ig.Skipped("test", c, r)); got != 1 {
					t.Errorf("skipped{%s} = %v, want 1", s, got)
				}
			}
			if !tt.again {
				return
			}
			if _, _, err := p.CallVerified(context.Background(), tt.method, params, verify, 0); err != nil {
				t.Fatal(err)
			}
			if n := servedCalls(nodes[1], tt.method); n != tt.againN1 {
				t.Errorf("after every remote failed alike, n1 got %d calls in all, want %d: the check is not skipped", n, tt.againN1)
			}
		})
	}
}

// fakeBlocks is a head window that holds one block.
type fakeBlocks struct {
	hash  string
	block json.RawMessage
}

func (f fakeBlocks) Answer(c evm.Call) (json.RawMessage, bool) {
	if c.Method == "eth_getBlockByHash" && strings.Contains(string(c.Params), f.hash) {
		return f.block, true
	}
	return nil, false
}

func TestVerifiedClient(t *testing.T) {
	block, receipts := gethFixture(t, "block-0x3"), gethFixture(t, "receipts-0x3")
	hash := blockHashOf(t, block)
	lyingBlock := testkit.EditJSON(t, block, func(m map[string]any) {
		m["transactions"].([]any)[1].(map[string]any)["value"] = "0x1"
	})
	lyingReceipts := testkit.EditJSON(t, receipts, func(rs []any) { rs[3].(map[string]any)["status"] = "0x0" })

	n0 := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 10})
	n1 := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 10})
	n0.SetHook(serves(lyingBlock, lyingReceipts))
	n1.SetHook(serves(block, receipts))
	m := NewMetrics(prometheus.NewRegistry())
	p := startPool(t, PoolConfig{}, testConfigs([]string{n0.URL(), n1.URL()}, func(i int, c *Config) {
		if i > 0 {
			c.Tier = TierSecondary
		}
	}), m)
	c := NewVerifiedClient(p, fakeBlocks{hash: hash, block: block})
	tests := []struct {
		method, params string
		want           json.RawMessage
		check          string // the failure n0 is charged with
	}{
		{method: "eth_getBlockByNumber", params: `["0x3",true]`, want: block, check: "transaction_hash"},
		{method: "eth_getBlockByHash", params: `["` + hash + `",true]`, want: block, check: "transaction_hash"},
		{method: "eth_getBlockReceipts", params: `["` + hash + `"]`, want: receipts, check: "receipts_root"},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			got, err := c.ServeCall(context.Background(), evm.ParseCall(tt.method, json.RawMessage(tt.params)))
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, tt.want) {
				t.Fatalf("served %.200s", got)
			}
			if f := testutil.ToFloat64(m.ig.Failures("test", "n0", tt.check)); f < 1 {
				t.Errorf("n0 not charged with %s", tt.check)
			}
		})
	}
	// n0 lied three times: it is cordoned.
	if !n0Cordoned(p) {
		t.Error("n0 not cordoned after three lies")
	}
	// Receipts of a block the window doesn't have: their root is skipped,
	// and counted.
	other := "0x" + strings.Repeat("cd", 32)
	orphan := testkit.EditJSON(t, lyingReceipts, func(rs []any) {
		for _, r := range rs {
			r.(map[string]any)["blockHash"] = other
		}
	})
	n1.SetHook(serves(lyingBlock, orphan))
	got, err := c.ServeCall(context.Background(), evm.ParseCall("eth_getBlockReceipts", json.RawMessage(`["`+other+`"]`)))
	if err != nil || !jsonEqual(t, got, orphan) {
		t.Fatalf("receipts outside the window: %v %.100s", err, got)
	}
	if s := testutil.ToFloat64(m.ig.Skipped("test", "receipts_root", "no_block")); s != 1 {
		t.Errorf("skipped{receipts_root/no_block} = %v", s)
	}
	// Other methods are the pool's.
	if _, err := c.ServeCall(context.Background(), evm.ParseCall("eth_chainId", json.RawMessage(`[]`))); err != nil {
		t.Fatal(err)
	}
}

func n0Cordoned(p *Pool) bool { return p.members()[0].cordoned(p.now()) }
