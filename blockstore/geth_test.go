package blockstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/gethtest"
)

// gethCase is one call put to geth and to the store.
type gethCase struct {
	method string
	params string // a JSON array
	// forward: the store must not answer (ok false).
	forward bool
}

func (c gethCase) String() string { return c.method + " " + c.params }

func hexq(n uint64) string { return strconv.Quote(evm.Quantity(n)) }

// gethCases is every call the store must answer as geth does, over a
// chain stored whole, and calls it must leave to the node.
func gethCases(c *gethtest.Chain) []gethCase {
	q := strconv.Quote
	var cs []gethCase
	add := func(method, params string) { cs = append(cs, gethCase{method: method, params: params}) }
	fwd := func(method, params string) { cs = append(cs, gethCase{method: method, params: params, forward: true}) }
	for _, b := range c.Blocks {
		n, h := hexq(b.Number), q(b.Hash)
		upper := q("0X" + strings.ToUpper(b.Hash[2:]))
		for _, full := range []string{"true", "false"} {
			add("eth_getBlockByNumber", `[`+n+`,`+full+`]`)
			add("eth_getBlockByHash", `[`+h+`,`+full+`]`)
		}
		add("eth_getBlockByHash", `[`+upper+`,true]`)
		add("eth_getBlockReceipts", `[`+n+`]`)
		add("eth_getBlockReceipts", `[`+h+`]`)
		add("eth_getBlockReceipts", `[{"blockHash":`+h+`}]`)
		add("eth_getBlockReceipts", `[{"blockNumber":`+n+`}]`)
		add("eth_getBlockTransactionCountByNumber", `[`+n+`]`)
		add("eth_getBlockTransactionCountByHash", `[`+h+`]`)
		add("eth_getUncleCountByBlockNumber", `[`+n+`]`)
		add("eth_getUncleCountByBlockHash", `[`+h+`]`)
		add("eth_getLogs", `[{"blockHash":`+h+`}]`)
		add("eth_getLogs", `[{"fromBlock":`+n+`,"toBlock":`+n+`}]`)
		for i, tx := range b.Txs {
			add("eth_getTransactionByHash", `[`+q(tx)+`]`)
			add("eth_getTransactionReceipt", `[`+q(tx)+`]`)
			add("eth_getTransactionByBlockNumberAndIndex", `[`+n+`,`+hexq(uint64(i))+`]`)
			add("eth_getTransactionByBlockHashAndIndex", `[`+h+`,`+hexq(uint64(i))+`]`)
		}
		// Past the last transaction: null.
		add("eth_getTransactionByBlockNumberAndIndex", `[`+n+`,`+hexq(uint64(len(b.Txs)))+`]`)
		add("eth_getTransactionByBlockHashAndIndex", `[`+h+`,"0x64"]`)
		add("eth_getTransactionByBlockHashAndIndex", `[`+h+`,"0xffffffffffffffff"]`)
	}
	mid := c.Blocks[len(c.Blocks)/2]
	add("eth_getBlockByNumber", `["0X`+strings.ToUpper(strconv.FormatUint(mid.Number, 16))+`",false]`)
	add("eth_getBlockReceipts", `[{"blockHash":`+q(mid.Hash)+`,"requireCanonical":true}]`)

	for _, f := range logFilters(c) {
		add("eth_getLogs", `[{"fromBlock":"0x0","toBlock":`+hexq(c.Head)+`,`+f+`}]`)
		add("eth_getLogs", `[{"fromBlock":"0x1","toBlock":`+hexq(c.Head/2)+`,`+f+`}]`)
		add("eth_getLogs", `[{"blockHash":`+q(c.Blocks[3].Hash)+`,`+f+`}]`)
	}
	add("eth_getLogs", `[{"fromBlock":"0x0","toBlock":`+hexq(c.Head)+`,"limit":10,"extra":{"x":[1]}}]`)
	add("eth_getLogs", `[{"blockHash":`+q(c.Blocks[3].Hash)+`,"fromBlock":null,"toBlock":null}]`)

	// What the store leaves to the node: tags (it does not know the head),
	// what it does not hold, and everything geth refuses.
	unknown := q(gethtest.Topic(0xdead))
	for _, tag := range []string{"latest", "safe", "finalized", "earliest", "pending"} {
		t := q(tag)
		fwd("eth_getBlockByNumber", `[`+t+`,false]`)
		fwd("eth_getBlockReceipts", `[`+t+`]`)
		fwd("eth_getBlockReceipts", `[{"blockNumber":`+t+`}]`)
		fwd("eth_getBlockTransactionCountByNumber", `[`+t+`]`)
		fwd("eth_getUncleCountByBlockNumber", `[`+t+`]`)
		fwd("eth_getTransactionByBlockNumberAndIndex", `[`+t+`,"0x0"]`)
		fwd("eth_getLogs", `[{"fromBlock":"0x0","toBlock":`+t+`}]`)
		fwd("eth_getLogs", `[{"fromBlock":`+t+`,"toBlock":`+hexq(c.Head)+`}]`)
	}
	for _, n := range []uint64{c.Head + 1, 1<<63 - 1} {
		fwd("eth_getBlockByNumber", `[`+hexq(n)+`,false]`)
		fwd("eth_getBlockReceipts", `[`+hexq(n)+`]`)
		fwd("eth_getTransactionByBlockNumberAndIndex", `[`+hexq(n)+`,"0x0"]`)
		fwd("eth_getBlockTransactionCountByNumber", `[`+hexq(n)+`]`)
		fwd("eth_getLogs", `[{"fromBlock":"0x1","toBlock":`+hexq(n)+`}]`)
	}
	fwd("eth_getLogs", `[{}]`)
	fwd("eth_getLogs", `[{"fromBlock":"0x1"}]`)
	fwd("eth_getLogs", `[{"toBlock":"0x1"}]`)
	fwd("eth_getBlockByNumber", `["0x01",false]`)
	fwd("eth_getBlockByNumber", `["0x1"]`)
	fwd("eth_getBlockByNumber", `["0x1",false,1]`)
	fwd("eth_getBlockByNumber", `["0x1",null]`)
	fwd("eth_getBlockByNumber", `["0x8000000000000000",false]`)
	fwd("eth_getBlockByHash", `[`+unknown+`,false]`)
	fwd("eth_getBlockReceipts", `[`+unknown+`]`)
	fwd("eth_getTransactionByHash", `[`+unknown+`]`)
	fwd("eth_getTransactionReceipt", `[`+unknown+`]`)
	fwd("eth_getTransactionByBlockNumberAndIndex", `["0x1","0x00"]`)
	fwd("eth_getBlockReceipts", `[{"blockNumber":"0x1","blockHash":`+q(c.Blocks[1].Hash)+`}]`)
	fwd("eth_getLogs", `[{"fromBlock":"0x2","toBlock":"0x1"}]`)
	fwd("eth_getLogs", `[{"blockHash":`+q(c.Blocks[1].Hash)+`,"fromBlock":"0x1"}]`)
	fwd("eth_getLogs", `[{"blockHash":`+unknown+`}]`)
	fwd("eth_getLogs", `[{"fromBlock":"0x0","toBlock":"0x1","topics":[null,null,null,null,null]}]`)
	fwd("eth_getLogs", `[{"fromBlock":"0x0","toBlock":"0x1","address":"0x1234"}]`)
	fwd("eth_getLogs", `[{"fromBlock":"0x0","toBlock":"0x1","topics":["0x01"]}]`)
	fwd("eth_getLogs", `[{"fromBlock":"0x01","toBlock":"0x1"}]`)
	fwd("eth_getLogs", `[{"fromBlock":"0x0","toBlock":"0x1","Address":"`+c.Emitters[0]+`"}]`)
	fwd("eth_chainId", `[]`)
	fwd("eth_getBalance", `[`+q(c.Dev)+`,"0x1"]`)
	return cs
}

// logFilters are eth_getLogs filter members of every shape: no address,
// one, a list; topics with null positions, OR lists, more positions than
// some logs have.
func logFilters(c *gethtest.Chain) []string {
	q := strconv.Quote
	e0, e1, auth := q(c.Emitters[0]), q(c.Emitters[1]), q(c.Authority)
	e0Upper := q("0x" + strings.ToUpper(c.Emitters[0][2:]))
	tp := func(n uint64) string { return q(gethtest.Topic(n)) }
	taa, tbb, t7, t1, t2, t4 := tp(0xaa), tp(0xbb), tp(7), tp(1), tp(2), tp(4)
	dev := q(gethtest.Topic(0)[:26] + c.Dev[2:])
	many := make([]string, 0, 8)
	for i := range 6 {
		many = append(many, q(fmt.Sprintf("0x%040x", i+1)))
	}
	many = append(many, e1)
	return []string{
		`"address":null`,
		`"address":` + e0,
		`"address":` + e0Upper,
		`"address":[` + e0 + `,` + e1 + `]`,
		`"address":[` + e1 + `,` + auth + `]`,
		`"address":[` + strings.Join(many, ",") + `]`,
		`"address":[]`,
		`"address":[` + e0 + `],"topics":[]`,
		`"topics":[` + taa + `]`,
		`"topics":[` + tbb + `,` + taa + `]`,
		`"topics":[null,` + taa + `]`,
		`"topics":[null,` + dev + `]`,
		`"topics":[[` + taa + `,` + tbb + `]]`,
		`"topics":[[` + t1 + `,` + tbb + `],null,[` + t7 + `,` + tp(0) + `,` + t2 + `]]`,
		`"topics":[null,null,null,` + t4 + `]`,
		`"topics":[null,null,null,null]`,
		`"topics":[null,null]`,
		`"topics":[null]`,
		`"topics":[[]]`,
		`"topics":[[` + taa + `,null]]`,
		`"topics":[[null,"0xzz"]]`,
		`"topics":[null,null,` + t7 + `]`,
		`"topics":["0X` + strings.ToUpper(tbb[3:]) + `]`,
		`"address":` + auth + `,"topics":[` + tbb + `]`,
		`"address":` + e1 + `,"topics":[` + tp(0x99) + `]`,
		`"address":[` + e0 + `,` + e1 + `],"topics":[[` + t1 + `,` + tbb + `],null,null]`,
	}
}

// TestAnswerMatchesGeth archives a real geth chain (every transaction
// type, logs with 0 to 4 topics) and puts the same calls to geth and to the
// store: every answer the store gives must be geth's, byte for byte, and
// it must leave to the node every call it cannot answer exactly.
func TestAnswerMatchesGeth(t *testing.T) {
	g := gethtest.Start(t, gethtest.Options{})
	c := gethtest.Produce(t, g)
	p, _ := open(t)
	store := p.Chain(gethtest.ChainID, "dev")
	ctx := context.Background()

	blocks := make([]*evm.Block, len(c.Blocks))
	for i, b := range c.Blocks {
		blocks[i] = parse(t, b.Raw, b.Receipts)
	}
	// Out of order and in pieces, so coverage merges.
	mid := len(blocks) / 2
	mustPut(t, store, blocks[mid+1:]...)
	mustPut(t, store, blocks[:mid-2]...)
	if got, want := mustCovered(t, store, 0, c.Head), []Range{{0, uint64(mid - 3)}, {uint64(mid + 1), c.Head}}; !slices.Equal(got, want) {
		t.Fatalf("Covered = %v, want %v", got, want)
	}
	gap := gethCase{method: "eth_getLogs", params: `[{"fromBlock":"0x0","toBlock":` + hexq(c.Head) + `}]`}
	if res, ok, err := store.Answer(ctx, evm.ParseCall(gap.method, json.RawMessage(gap.params))); ok || err != nil {
		t.Fatalf("%v over a gap: answered %.100s, %v", gap, res, err)
	}
	mustPut(t, store, blocks[mid-2:mid+1]...)
	mustPut(t, store, blocks[mid-5:mid+5]...) // again: a no-op
	if got, want := mustCovered(t, store, 0, c.Head), []Range{{0, c.Head}}; !slices.Equal(got, want) {
		t.Fatalf("Covered = %v, want %v", got, want)
	}
	if n, ok, err := store.Highest(ctx); n != c.Head || !ok || err != nil {
		t.Fatalf("Highest = %d, %v, %v; want %d", n, ok, err, c.Head)
	}

	cases := gethCases(c)
	answered := 0
	for _, tc := range cases {
		got, ok, err := store.Answer(ctx, evm.ParseCall(tc.method, json.RawMessage(tc.params)))
		if err != nil {
			t.Fatalf("%v: %v", tc, err)
		}
		if tc.forward {
			if ok {
				t.Errorf("%v: store answered %.200s, want it left to the node", tc, got)
			}
			continue
		}
		want, gethErr := g.CallJSON(ctx, tc.method, tc.params)
		if gethErr != nil {
			t.Errorf("%v: geth: %v", tc, gethErr)
			continue
		}
		if !ok {
			t.Errorf("%v: store did not answer; geth: %.200s", tc, want)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%v: store and geth differ\nstore %.600s\ngeth  %.600s", tc, got, want)
			continue
		}
		answered++
	}
	t.Logf("%d blocks (head %d): the store answered %d calls byte for byte as geth, left %d to it",
		len(c.Blocks), c.Head, answered, len(cases)-answered)

	// Logs, as the router calls it for covered parts of a range.
	for _, f := range logFilters(c) {
		for _, r := range []Range{{0, c.Head}, {2, 5}, {uint64(mid), uint64(mid)}} {
			filter := `{"fromBlock":` + hexq(r.From) + `,"toBlock":` + hexq(r.To) + `,` + f + `}`
			want, err := g.Call(ctx, "eth_getLogs", json.RawMessage(filter))
			var rpcErr *gethtest.RPCError
			if errors.As(err, &rpcErr) {
				continue // a filter geth refuses: Logs is not asked for it
			} else if err != nil {
				t.Fatalf("geth eth_getLogs %s: %v", filter, err)
			}
			got, err := store.Logs(ctx, parseFilter(t, `{`+f+`}`), r.From, r.To)
			if err != nil {
				t.Fatalf("Logs %s: %v", filter, err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Logs %s: store and geth differ\nstore %.600s\ngeth  %.600s", filter, got, want)
			}
		}
	}
}
