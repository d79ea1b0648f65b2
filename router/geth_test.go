package router

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/pgtest"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
)

// call is one JSON-RPC call of a comparison.
type call struct{ method, params string }

// blockCalls are every block method over blocks from..to of the chain, and
// every transaction method over their transactions.
func (c *devChain) blockCalls(t *testing.T, from, to uint64) []call {
	t.Helper()
	var out []call
	for n := from; n <= to; n++ {
		num := `"` + evm.Quantity(n) + `"`
		raw := mustCall(t, c.g.HTTPURL(), "eth_getBlockByNumber", "["+num+",false]")
		var b struct {
			Hash string   `json:"hash"`
			Txs  []string `json:"transactions"`
		}
		if err := json.Unmarshal(raw, &b); err != nil {
			t.Fatal(err)
		}
		hash := `"` + b.Hash + `"`
		out = append(out,
			call{"eth_getBlockByNumber", "[" + num + ",false]"},
			call{"eth_getBlockByNumber", "[" + num + ",true]"},
			call{"eth_getBlockByHash", "[" + hash + ",false]"},
			call{"eth_getBlockByHash", "[" + strings.ToUpper(hash[:1]) + "0X" + strings.ToUpper(b.Hash[2:]) + `",true]`},
			call{"eth_getBlockReceipts", "[" + num + "]"},
			call{"eth_getBlockReceipts", "[" + hash + "]"},
			call{"eth_getBlockReceipts", `[{"blockHash":` + hash + `}]`},
			call{"eth_getBlockReceipts", `[{"blockNumber":` + num + `}]`},
			call{"eth_getBlockTransactionCountByNumber", "[" + num + "]"},
			call{"eth_getBlockTransactionCountByHash", "[" + hash + "]"},
			call{"eth_getUncleCountByBlockNumber", "[" + num + "]"},
			call{"eth_getUncleCountByBlockHash", "[" + hash + "]"},
			call{"eth_getHeaderByNumber", "[" + num + "]"},
			call{"eth_getHeaderByHash", "[" + hash + "]"},
			call{"eth_getUncleByBlockNumberAndIndex", "[" + num + `,"0x0"]`},
			call{"eth_getUncleByBlockHashAndIndex", "[" + hash + `,"0x0"]`},
			call{"eth_getLogs", `[{"blockHash":` + hash + `}]`},
		)
		for i := range len(b.Txs) + 1 { // one past the end: null
			idx := `"` + evm.Quantity(uint64(i)) + `"`
			out = append(out,
				call{"eth_getTransactionByBlockNumberAndIndex", "[" + num + "," + idx + "]"},
				call{"eth_getTransactionByBlockHashAndIndex", "[" + hash + "," + idx + "]"})
		}
		for _, tx := range b.Txs {
			out = append(out,
				call{"eth_getTransactionByHash", `["` + tx + `"]`},
				call{"eth_getTransactionReceipt", `["` + tx + `"]`})
		}
	}
	return out
}

// logCalls are eth_getLogs over [from, to] with every filter shape.
func (c *devChain) logCalls(from, to uint64) []call {
	q := func(s string) string { return `"` + s + `"` }
	rng := `"fromBlock":` + q(evm.Quantity(from)) + `,"toBlock":` + q(evm.Quantity(to))
	a0, a1, a2 := q(c.contracts[0]), q(c.contracts[1]), q(c.contracts[2])
	upper := q("0x" + strings.ToUpper(c.contracts[1][2:]))
	t0, t1 := topic0s, topic1s
	shapes := []string{
		``,
		`,"address":` + a0,
		`,"address":` + upper,
		`,"address":[` + a0 + `,` + a2 + `]`,
		`,"address":[]`,
		`,"address":"0x` + strings.Repeat("00", 19) + `01"`,
		`,"topics":[` + q(t0[0]) + `]`,
		`,"topics":[null,` + q(t1[1]) + `]`,
		`,"topics":[[` + q(t0[0]) + `,` + q(t0[2]) + `]]`,
		`,"topics":[[` + q(t0[0]) + `,` + q(t0[1]) + `],[` + q(t1[0]) + `]]`,
		`,"topics":[null,null]`,
		`,"topics":[]`,
		`,"topics":[[]]`,
		`,"address":[` + a1 + `,` + a2 + `],"topics":[` + q(t0[1]) + `,null]`,
		`,"address":` + a2 + `,"topics":[null,[` + q(t1[0]) + `,` + q(t1[1]) + `]]`,
		`,"topics":[[],[],[],[],[]]`, // five positions: geth's error
	}
	var out []call
	for _, s := range shapes {
		out = append(out, call{"eth_getLogs", `[{` + rng + s + `}]`})
	}
	return out
}

// compare calls geth and the router with each call and fails on any
// difference, of bytes or of error.
func compare(t *testing.T, c *devChain, rt *Router, calls []call) {
	t.Helper()
	ctx := context.Background()
	for _, cl := range calls {
		want, werr := rawCall(ctx, c.g.HTTPURL(), cl.method, cl.params)
		got, gerr := rt.ServeRPC(ctx, &jrpc.Request{Method: cl.method, Params: json.RawMessage(cl.params)})
		if werr != nil || gerr != nil {
			var we, ge *jrpc.Error
			if !errors.As(werr, &we) || !errors.As(gerr, &ge) || we.Code != ge.Code || we.Message != ge.Message {
				t.Errorf("%s%s: venn error %v, geth error %v", cl.method, cl.params, gerr, werr)
			}
			continue
		}
		if string(got) != string(want) {
			t.Errorf("%s%s:\nvenn %.600s\ngeth %.600s", cl.method, cl.params, got, want)
		}
	}
}

// answersFrom reads venn_answers_total for one source.
func answersFrom(m *Metrics, s string) float64 {
	return testutil.ToFloat64(m.answers.WithLabelValues("dev", s))
}

// TestHistoryServesAsGeth archives a geth dev chain into Postgres and
// checks that every history method and eth_getLogs filter shape answered
// through the router is byte for byte geth's answer: from the store, from
// the store and the remotes for a range half stored, from the remotes while
// Postgres is down, and after a write-through.
func TestHistoryServesAsGeth(t *testing.T) {
	c := buildChain(t, 10)
	if c.head < 8 {
		t.Fatalf("dev chain of %d blocks, want more", c.head)
	}
	pool := startPool(t, c.g.HTTPURL())

	t.Run("stored", func(t *testing.T) {
		store := openStore(t, pgtest.New(t))
		c.archive(t, store, 0, c.head)
		up := &counting{Upstream: upstreamOf(pool)}
		m := NewMetrics(nil)
		rt := New(Config{Chain: "dev", ChainID: 1337, History: store, Settled: settledAt(c.head)}, nil, up, m)
		calls := append(c.blockCalls(t, 0, c.head), c.logCalls(0, c.head)...)
		calls = append(calls, c.logCalls(2, c.head-3)...)
		compare(t, c, rt, calls)
		// Only what geth refuses (five topic positions, twice) reaches it.
		if up.total() != 2 {
			t.Errorf("remotes got %v, want only the two refused filters", up.calls)
		}
		// Headers and uncles are the forger's, from stored blocks.
		if h, f := answersFrom(m, "history"), answersFrom(m, "forger"); h+f != float64(len(calls)-2) || f == 0 {
			t.Errorf("%v answers from history and %v from the forger of %d calls", h, f, len(calls))
		}
		t.Logf("%d calls over %d blocks and %d transactions answered as geth does", len(calls), c.head+1, len(c.txs))
	})

	t.Run("half stored", func(t *testing.T) {
		store := openStore(t, pgtest.New(t))
		mid := c.head / 2
		c.archive(t, store, 0, mid)
		up := &counting{Upstream: upstreamOf(pool)}
		m := NewMetrics(nil)
		rt := New(Config{Chain: "dev", ChainID: 1337, History: store, Settled: settledAt(c.head)}, nil, up, m)
		compare(t, c, rt, c.logCalls(0, c.head))
		compare(t, c, rt, c.logCalls(mid-1, c.head))
		if up.calls["eth_getLogs"] == 0 || answersFrom(m, "history") == 0 {
			t.Errorf("remotes got %v and history answered %v: want both in each range", up.calls, answersFrom(m, "history"))
		}
		// A hole in the middle: stored, not, stored.
		c.archive(t, store, mid+3, c.head)
		compare(t, c, rt, c.logCalls(0, c.head))
	})

	t.Run("postgres down", func(t *testing.T) {
		url := pgtest.New(t)
		c.archive(t, openStore(t, url), 0, c.head)
		proxy := pgtest.NewProxy(t, url)
		store := openStore(t, proxy.URL())
		up := &counting{Upstream: upstreamOf(pool)}
		m := NewMetrics(nil)
		rt := New(Config{Chain: "dev", ChainID: 1337, History: store, Settled: settledAt(c.head)}, nil, up, m)
		calls := append(c.blockCalls(t, c.head-2, c.head), c.logCalls(0, c.head)...)
		compare(t, c, rt, calls)
		if up.total() > 2 {
			t.Fatalf("remotes got %v while Postgres is up", up.calls)
		}
		proxy.Stop()
		before := answersFrom(m, "history")
		compare(t, c, rt, calls)
		if answersFrom(m, "history") != before {
			t.Errorf("history answered while Postgres is down")
		}
		if up.total() < len(calls) {
			t.Errorf("remotes got %d calls of %d while Postgres is down", up.total(), len(calls))
		}
	})

	t.Run("write-through", func(t *testing.T) {
		store := openStore(t, pgtest.New(t))
		up := &counting{Upstream: upstreamOf(pool)}
		m := NewMetrics(nil)
		// No window and an empty store: each block is confirmed by two
		// remotes before it is stored.
		two := startPool(t, c.g.HTTPURL(), c.g.HTTPURL())
		// The pool starts once one remote is in rotation; a write waits for
		// two to confirm it, and is not tried again if only one could.
		var b2 struct {
			Hash string `json:"hash"`
		}
		if err := json.Unmarshal(mustCall(t, c.g.HTTPURL(), "eth_getBlockByNumber", `["0x2",false]`), &b2); err != nil {
			t.Fatal(err)
		}
		testkit.WaitFor(t, 10*time.Second, "both remotes in rotation", func() bool {
			agree, _ := two.Heads().ConfirmHash(context.Background(), 2, b2.Hash)
			return agree == 2
		})
		rt := New(Config{Chain: "dev", ChainID: 1337, History: store, Settled: settledAt(c.head - 1),
			Confirm: two.Heads().ConfirmHash}, nil, up, m)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { rt.Run(ctx) })
		t.Cleanup(func() { cancel(); wg.Wait() })

		var rc struct {
			BlockNumber string `json:"blockNumber"`
		}
		if err := json.Unmarshal(mustCall(t, c.g.HTTPURL(), "eth_getTransactionReceipt", `["`+c.txs[len(c.txs)/2]+`"]`), &rc); err != nil {
			t.Fatal(err)
		}
		txBlock, _ := evm.ParseQuantity(rc.BlockNumber)
		calls := []call{
			{"eth_getBlockByNumber", `["0x2",false]`},
			{"eth_getBlockReceipts", `["0x3"]`},
			{"eth_getTransactionReceipt", `["` + c.txs[len(c.txs)/2] + `"]`},
			{"eth_getBlockByNumber", `["` + evm.Quantity(c.head) + `",false]`}, // above the settled line
		}
		compare(t, c, rt, calls)
		for _, n := range []uint64{2, 3, txBlock} {
			waitCovered(t, store, n)
		}
		if got := testutil.ToFloat64(m.writeThrough.WithLabelValues("dev", wtStored)); got != 3 && txBlock > 3 {
			t.Errorf("%v blocks written through, want 3", got)
		}
		if cov, err := store.Covered(context.Background(), c.head, c.head); err != nil || len(cov) != 0 {
			t.Errorf("block above the settled line stored: %v (%v)", cov, err)
		}
		before := answersFrom(m, "history")
		compare(t, c, rt, append(calls[:3], c.blockCalls(t, 2, 3)...))
		if answersFrom(m, "history") == before {
			t.Error("written-through blocks not answered from history")
		}
	})

	t.Run("forger receipts", func(t *testing.T) {
		up := noBlockReceipts{&counting{Upstream: upstreamOf(pool)}}
		m := NewMetrics(nil)
		rt := New(Config{Chain: "dev", ChainID: 1337}, nil, up, m)
		var calls []call
		for n := uint64(0); n <= c.head+1; n++ {
			num := `"` + evm.Quantity(n) + `"`
			calls = append(calls, call{"eth_getBlockReceipts", "[" + num + "]"}, call{"eth_getBlockReceipts", `[{"blockNumber":` + num + `}]`})
			if n <= c.head {
				raw := mustCall(t, c.g.HTTPURL(), "eth_getBlockByNumber", "["+num+",false]")
				var b struct{ Hash string }
				if err := json.Unmarshal(raw, &b); err != nil {
					t.Fatal(err)
				}
				calls = append(calls, call{"eth_getBlockReceipts", `["` + b.Hash + `"]`},
					call{"eth_getBlockReceipts", `[{"blockHash":"` + b.Hash + `","requireCanonical":true}]`})
			}
		}
		calls = append(calls, call{"eth_getBlockReceipts", `["0x` + strings.Repeat("ab", 32) + `"]`},
			call{"eth_getBlockReceipts", `["latest"]`}, call{"eth_getBlockReceipts", `["earliest"]`})
		compare(t, c, rt, calls)
		if got := answersFrom(m, "forger"); got != float64(len(calls)) {
			t.Errorf("%v answers built by the forger, want %d", got, len(calls))
		}
	})
}

// waitCovered polls the store until block n is covered.
func waitCovered(t *testing.T, store History, n uint64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		cov, err := store.Covered(context.Background(), n, n)
		if err == nil && len(cov) == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("block %d not written through (covered %v, err %v)", n, cov, err)
		}
		time.Sleep(20 * time.Millisecond) // polling the store, with a deadline
	}
}

var _ = fmt.Sprint
