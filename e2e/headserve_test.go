package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/internal/gethtest"
)

// hsWindow loads blocks from..head of c into a fresh window.
func hsWindow(t *testing.T, c *gethtest.Chain, from uint64) *headstore.Window {
	t.Helper()
	var blocks []*evm.Block
	for _, b := range c.Blocks[from:] {
		blk, err := evm.ParseBlock(b.Raw, b.Receipts)
		if err != nil {
			t.Fatalf("block %d: %v", b.Number, err)
		}
		blocks = append(blocks, blk)
	}
	w := headstore.NewWindow(len(c.Blocks) + 1)
	if err := w.Reset(&headstore.Snapshot{Gen: "e2e", Seq: 1, Blocks: blocks, Safe: c.Safe, Finalized: c.Finalized}); err != nil {
		t.Fatal(err)
	}
	return w
}

// hsCase is one call put to geth and to the window.
type hsCase struct {
	method string
	params string // a JSON array
	// future: a block above the head; geth must answer null.
	future bool
	// forward: the window must not answer; gethErr: and geth answers
	// with an error (the reason the window leaves it to the node).
	forward, gethErr bool
}

func (c hsCase) String() string { return c.method + " " + truncate(c.params) }

// hsCases is every call the window must answer as geth does.
func hsCases(c *gethtest.Chain) []hsCase {
	q := strconv.Quote
	var cs []hsCase
	add := func(method, params string) { cs = append(cs, hsCase{method: method, params: params}) }
	add("eth_blockNumber", `[]`)
	for _, b := range c.Blocks {
		n, h := q(hex(b.Number)), q(b.Hash)
		upper := q("0x" + strings.ToUpper(b.Hash[2:]))
		for _, full := range []string{"true", "false"} {
			add("eth_getBlockByNumber", `[`+n+`,`+full+`]`)
			add("eth_getBlockByHash", `[`+h+`,`+full+`]`)
		}
		add("eth_getBlockByHash", `[`+upper+`,false]`)
		add("eth_getBlockReceipts", `[`+n+`]`)
		add("eth_getBlockReceipts", `[`+h+`]`)
		add("eth_getBlockTransactionCountByNumber", `[`+n+`]`)
		add("eth_getBlockTransactionCountByHash", `[`+h+`]`)
		add("eth_getUncleCountByBlockNumber", `[`+n+`]`)
		add("eth_getUncleCountByBlockHash", `[`+h+`]`)
		add("eth_getLogs", `[{"blockHash":`+h+`}]`)
		for i, tx := range b.Txs {
			add("eth_getTransactionByHash", `[`+q(tx)+`]`)
			add("eth_getTransactionReceipt", `[`+q(tx)+`]`)
			add("eth_getTransactionByBlockNumberAndIndex", `[`+n+`,`+q(hex(uint64(i)))+`]`)
			add("eth_getTransactionByBlockHashAndIndex", `[`+h+`,`+q(hex(uint64(i)))+`]`)
		}
		// Past the last transaction: null.
		add("eth_getTransactionByBlockNumberAndIndex", `[`+n+`,`+q(hex(uint64(len(b.Txs))))+`]`)
		add("eth_getTransactionByBlockHashAndIndex", `[`+h+`,"0x64"]`)
	}
	mid := c.Blocks[len(c.Blocks)/2]
	for _, tag := range []string{"latest", "safe", "finalized", "earliest"} {
		t := q(tag)
		add("eth_getBlockByNumber", `[`+t+`,false]`)
		add("eth_getBlockByNumber", `[`+t+`,true]`)
		add("eth_getBlockReceipts", `[`+t+`]`)
		add("eth_getBlockTransactionCountByNumber", `[`+t+`]`)
		add("eth_getUncleCountByBlockNumber", `[`+t+`]`)
		add("eth_getTransactionByBlockNumberAndIndex", `[`+t+`,"0x0"]`)
		add("eth_getLogs", `[{"fromBlock":`+t+`,"toBlock":"latest"}]`)
	}
	add("eth_getBlockByNumber", `["0X`+strings.ToUpper(strconv.FormatUint(mid.Number, 16))+`",false]`)
	add("eth_getBlockReceipts", `[{"blockHash":`+q(mid.Hash)+`}]`)
	add("eth_getBlockReceipts", `[{"blockHash":`+q(mid.Hash)+`,"requireCanonical":true}]`)
	add("eth_getBlockReceipts", `[{"blockNumber":`+q(hex(mid.Number))+`}]`)
	add("eth_getBlockReceipts", `[{"blockNumber":"latest"}]`)

	// Blocks above the head: geth answers null.
	for _, n := range []uint64{c.Head + 1, c.Head + 1000, 1<<63 - 1} {
		fn := q(hex(n))
		for _, fc := range []hsCase{
			{method: "eth_getBlockByNumber", params: `[` + fn + `,false]`},
			{method: "eth_getBlockByNumber", params: `[` + fn + `,true]`},
			{method: "eth_getBlockReceipts", params: `[` + fn + `]`},
			{method: "eth_getBlockReceipts", params: `[{"blockNumber":` + fn + `}]`},
			{method: "eth_getTransactionByBlockNumberAndIndex", params: `[` + fn + `,"0x0"]`},
			{method: "eth_getBlockTransactionCountByNumber", params: `[` + fn + `]`},
			{method: "eth_getUncleCountByBlockNumber", params: `[` + fn + `]`},
		} {
			fc.future = true
			cs = append(cs, fc)
		}
	}

	// eth_getLogs filter shapes.
	e0, e1, auth := q(c.Emitters[0]), q(c.Emitters[1]), q(c.Authority)
	e0Upper := q("0x" + strings.ToUpper(c.Emitters[0][2:]))
	taa, tbb, t7, t1, t2, t4 := q(gethtest.Topic(0xaa)), q(gethtest.Topic(0xbb)), q(gethtest.Topic(7)), q(gethtest.Topic(1)), q(gethtest.Topic(2)), q(gethtest.Topic(4))
	dev := q(gethtest.Topic(0)[:26] + c.Dev[2:])
	all := `"fromBlock":"0x0","toBlock":"latest"`
	for _, f := range []string{
		`{}`,
		`{"fromBlock":"latest"}`,
		`{"toBlock":"latest"}`,
		`{` + all + `}`,
		`{"fromBlock":"earliest","toBlock":` + q(hex(c.Head)) + `}`,
		`{"fromBlock":"0x1","toBlock":` + q(hex(c.Head/2)) + `}`,
		`{"fromBlock":"finalized","toBlock":"safe"}`,
		`{"fromBlock":` + q(hex(mid.Number)) + `,"toBlock":` + q(hex(mid.Number)) + `}`,
		`{` + all + `,"address":` + e0 + `}`,
		`{` + all + `,"address":` + e0Upper + `}`,
		`{` + all + `,"address":[` + e0 + `,` + e1 + `]}`,
		`{` + all + `,"address":[` + e1 + `,` + auth + `]}`,
		`{` + all + `,"address":[]}`,
		`{` + all + `,"address":[` + e0 + `],"topics":[]}`,
		`{` + all + `,"topics":[` + taa + `]}`,
		`{` + all + `,"topics":[` + tbb + `,` + taa + `]}`,
		`{` + all + `,"topics":[null,` + taa + `]}`,
		`{` + all + `,"topics":[null,` + dev + `]}`,
		`{` + all + `,"topics":[[` + taa + `,` + tbb + `]]}`,
		`{` + all + `,"topics":[[` + t1 + `,` + tbb + `],null,[` + t7 + `,` + q(gethtest.Topic(0)) + `,` + t2 + `]]}`,
		`{` + all + `,"topics":[null,null,null,` + t4 + `]}`,
		`{` + all + `,"topics":[null,null,null,null]}`,
		`{` + all + `,"topics":[null]}`,
		`{` + all + `,"topics":[[]]}`,
		`{` + all + `,"topics":[[` + taa + `,null]]}`,
		`{` + all + `,"topics":[[null,"0xzz"]]}`,
		`{` + all + `,"topics":[null,null,` + t7 + `]}`,
		`{` + all + `,"address":` + auth + `,"topics":[` + tbb + `]}`,
		`{` + all + `,"address":` + e1 + `,"topics":[` + q(gethtest.Topic(0x99)) + `]}`,
		`{` + all + `,"limit":10,"extra":{"x":[1]}}`,
		`{"blockHash":` + q(c.Blocks[3].Hash) + `,"address":` + e0 + `,"topics":[null,` + taa + `]}`,
		`{"blockHash":` + q(c.Blocks[3].Hash) + `,"fromBlock":null,"toBlock":null}`,
	} {
		add("eth_getLogs", `[`+f+`]`)
	}

	// What the window leaves to the node.
	fwd := func(method, params string, gethErr bool) {
		cs = append(cs, hsCase{method: method, params: params, forward: true, gethErr: gethErr})
	}
	unknown := q(gethtest.Topic(0xdead))
	fwd("eth_getBlockByNumber", `["0x01",false]`, true)
	fwd("eth_getBlockByNumber", `["pending",false]`, false)
	fwd("eth_getBlockByNumber", `["latest"]`, true)
	fwd("eth_getBlockByNumber", `["latest",false,1]`, true)
	fwd("eth_getBlockByNumber", `["0x8000000000000000",false]`, true)
	fwd("eth_getBlockByHash", `[`+unknown+`,false]`, false)
	fwd("eth_getTransactionByHash", `[`+unknown+`]`, false)
	fwd("eth_getTransactionReceipt", `[`+unknown+`]`, false)
	fwd("eth_getTransactionByBlockNumberAndIndex", `["0x1","0x00"]`, true)
	fwd("eth_getBlockReceipts", `[{"blockNumber":"0x1","blockHash":`+q(c.Blocks[1].Hash)+`}]`, true)
	fwd("eth_getLogs", `[{"fromBlock":"0x2","toBlock":"0x1"}]`, true)
	fwd("eth_getLogs", `[{"fromBlock":"latest","toBlock":"0x1"}]`, true)
	fwd("eth_getLogs", `[{"fromBlock":"0x1","toBlock":`+q(hex(c.Head+1))+`}]`, true)
	fwd("eth_getLogs", `[{"fromBlock":`+q(hex(c.Head+1))+`}]`, true)
	fwd("eth_getLogs", `[{"fromBlock":"pending"}]`, true)
	fwd("eth_getLogs", `[{"blockHash":`+q(c.Blocks[1].Hash)+`,"fromBlock":"0x1"}]`, true)
	fwd("eth_getLogs", `[{"blockHash":`+unknown+`}]`, true)
	fwd("eth_getLogs", `[{"topics":[null,null,null,null,null]}]`, true)
	fwd("eth_getLogs", `[{"address":"0x1234"}]`, true)
	fwd("eth_getLogs", `[{"topics":["0x01"]}]`, true)
	fwd("eth_getLogs", `[{"fromBlock":"0x01"}]`, true)
	return cs
}

// TestHeadServeMatchesGeth loads a real geth chain into a window and puts
// the same calls to both: every answer the window gives must be geth's.
// geth --dev may seal an empty block of its own meanwhile, which changes
// the answers about the head: then the chain is read again and the whole
// comparison runs again.
func TestHeadServeMatchesGeth(t *testing.T) {
	g := gethtest.Start(t, gethtest.Options{})
	c := gethtest.Produce(t, g)
	for attempt := 1; ; attempt++ {
		var r errorList
		hsMatchGeth(t, &r, g, c)
		if len(r) == 0 {
			return
		}
		if attempt == 3 || !c.Moved(t, g) {
			for _, e := range r {
				t.Error(e)
			}
			return
		}
		t.Logf("geth's head moved past %d during comparison %d (%d differences, the first: %s): reading the chain again",
			c.Head, attempt, len(r), r[0])
		c.Read(t, g)
	}
}

// errorList collects a comparison's differences, for the caller to report
// or to discard when geth's chain moved under them.
type errorList []string

func (l *errorList) Errorf(format string, args ...any) { *l = append(*l, fmt.Sprintf(format, args...)) }

// hsMatchGeth is one comparison of c's windows with g, its differences in r.
func hsMatchGeth(t *testing.T, r *errorList, g *gethtest.Geth, c *gethtest.Chain) {
	w := hsWindow(t, c, 0)

	cases := hsCases(c)
	answered := 0
	for _, tc := range cases {
		want, gethErr := g.CallJSON(context.Background(), tc.method, tc.params)
		got, ok := w.Answer(evm.ParseCall(tc.method, json.RawMessage(tc.params)))
		if tc.forward {
			if ok {
				r.Errorf("%v: window answered %s, want it forwarded (geth: %s, %v)", tc, truncate(string(got)), truncate(string(want)), gethErr)
			}
			if tc.gethErr && gethErr == nil {
				r.Errorf("%v: geth answered %s, want an error", tc, truncate(string(want)))
			}
			continue
		}
		if gethErr != nil {
			r.Errorf("%v: geth: %v", tc, gethErr)
			continue
		}
		if tc.future && string(want) != "null" {
			r.Errorf("%v: geth answered %s for a block above the head, want null", tc, truncate(string(want)))
		}
		if !ok {
			r.Errorf("%v: window forwarded, want geth's %s", tc, truncate(string(want)))
			continue
		}
		hsCompare(r, tc, want, got)
		answered++
	}
	t.Logf("%d blocks (head %d, safe %d, finalized %d): window answered %d calls as geth did, forwarded %d",
		len(c.Blocks), c.Head, c.Safe, c.Finalized, answered, len(cases)-answered)

	// A window that starts above block 0 and the finalized block leaves
	// older blocks to the node.
	low := c.Finalized + 1
	small := hsWindow(t, c, low)
	for _, tc := range []hsCase{
		{method: "eth_getBlockByNumber", params: `["0x0",false]`},
		{method: "eth_getBlockByNumber", params: `["earliest",true]`},
		{method: "eth_getBlockByNumber", params: `["finalized",true]`},
		{method: "eth_getBlockReceipts", params: `[` + strconv.Quote(hex(low-1)) + `]`},
		{method: "eth_getBlockByHash", params: `[` + strconv.Quote(c.Blocks[1].Hash) + `,false]`},
		{method: "eth_getTransactionReceipt", params: `[` + strconv.Quote(c.Blocks[1].Txs[0]) + `]`},
		{method: "eth_getLogs", params: `[{"fromBlock":"0x0"}]`},
		{method: "eth_getLogs", params: `[{"fromBlock":` + strconv.Quote(hex(low-1)) + `,"toBlock":"latest"}]`},
		{method: "eth_getLogs", params: `[{"blockHash":` + strconv.Quote(c.Blocks[1].Hash) + `}]`},
	} {
		if got, ok := small.Answer(evm.ParseCall(tc.method, json.RawMessage(tc.params))); ok {
			r.Errorf("window from %d answered %v with %s, want it forwarded", low, tc, truncate(string(got)))
		}
	}
	for _, tc := range []hsCase{
		{method: "eth_getBlockByNumber", params: `[` + strconv.Quote(hex(low)) + `,true]`},
		{method: "eth_getLogs", params: `[{"fromBlock":` + strconv.Quote(hex(low)) + `,"toBlock":"latest"}]`},
		{method: "eth_blockNumber", params: `[]`},
	} {
		want, err := g.CallJSON(context.Background(), tc.method, tc.params)
		if err != nil {
			r.Errorf("%v: geth: %v", tc, err)
			continue
		}
		got, ok := small.Answer(evm.ParseCall(tc.method, json.RawMessage(tc.params)))
		if !ok {
			r.Errorf("window from %d forwarded %v", low, tc)
			continue
		}
		hsCompare(r, tc, want, got)
	}
}

// hsCompare holds the window's answer against geth's as JSON documents.
func hsCompare(r *errorList, tc hsCase, want, got json.RawMessage) {
	w, err := normalize(want)
	if err != nil {
		r.Errorf("%v: geth: %v", tc, err)
		return
	}
	g, err := normalize(got)
	if err != nil {
		r.Errorf("%v: window: %v", tc, err)
		return
	}
	if w != g {
		r.Errorf("%v: window and geth differ\nwindow %s\ngeth   %s", tc, truncate(g), truncate(w))
	}
}
