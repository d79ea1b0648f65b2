package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/internal/gethtest"
)

// The emitter contract: every call emits one log of each size, from LOG0
// to LOG4, so eth_getLogs has topics to match at every position.
//
// Runtime:
//
//	36 6000 6000 37                   CALLDATACOPY(0, 0, CALLDATASIZE)
//	36 6000 a0                        LOG0(0, CALLDATASIZE)
//	60aa 6000 6000 a1                 LOG1(0, 0, 0xaa)
//	33 60aa 6020 6000 a2              LOG2(0, 32, 0xaa, CALLER)
//	6000 35 60aa 60bb 6000 6000 a3    LOG3(0, 0, 0xbb, 0xaa, CALLDATALOAD(0))
//	6004 6003 6002 6001 6000 6000 a4  LOG4(0, 0, 1, 2, 3, 4)
//	00                                STOP
//
// Init code: CODECOPY the 0x33-byte runtime from offset 0x0b and return it.
//
//	6033 80 600b 6000 39 6000 f3
const emitterRuntime = "366000600037" + "366000a0" + "60aa60006000a1" + "3360aa60206000a2" +
	"60003560aa60bb60006000a3" + "600460036002600160006000a4" + "00"

// emitterCode is the deploy code: the init prefix, then the runtime.
func emitterCode() string {
	n := len(emitterRuntime) / 2
	return fmt.Sprintf("0x60%02x80600b6000396000f3", n) + emitterRuntime
}

// Gas settings for the hand-built transactions; the dev account's balance
// covers them many times over.
const (
	hsGasPrice  = "0x174876e800" // 100 gwei
	hsCallGas   = "0x40000"
	hsBlobFee   = "0x3b9aca00"
	hsBlobBytes = 131072
)

// hsTopic is the 32-byte topic holding n.
func hsTopic(n uint64) string { return fmt.Sprintf("0x%064x", n) }

// hsChain is what hsProduce put on the chain.
type hsChain struct {
	dev         string
	emitters    [2]string // two deployments of the emitter
	authority   string    // an EOA delegated to the emitter (EIP-7702)
	head        uint64
	safe, final uint64
	blocks      []hsBlock
}

type hsBlock struct {
	number uint64
	hash   string
	txs    []string
	raw    json.RawMessage
	rcs    json.RawMessage
}

// hsSend sends a transaction from the dev account and returns its hash.
func hsSend(t *testing.T, g *gethtest.Geth, tx map[string]any) string {
	t.Helper()
	var h string
	mustUnmarshal(t, g.MustCall(t, "eth_sendTransaction", tx), &h)
	return h
}

// hsWaitMined waits for tx's receipt, whatever its status.
func hsWaitMined(t *testing.T, g *gethtest.Geth, tx string) map[string]any {
	t.Helper()
	var rc map[string]any
	ok := pollUntil(receiptTimeout, func() bool {
		raw, err := g.Call(context.Background(), "eth_getTransactionReceipt", tx)
		if err != nil || string(raw) == "null" {
			return false
		}
		mustUnmarshal(t, raw, &rc)
		return true
	})
	if !ok {
		t.Fatalf("transaction %s not mined within %v", tx, receiptTimeout)
	}
	return rc
}

// hsProduce builds the test chain: two emitter deployments; one block
// holding a legacy, an access-list, a dynamic-fee and a set-code
// transaction, calls that emit logs with 0 to 4 topics, a transfer and a
// transaction that runs out of gas; a blob transaction; then plain
// transfers until the dev chain's finalized block (every 32nd) is past 0.
func hsProduce(t *testing.T, g *gethtest.Geth) hsChain {
	t.Helper()
	var c hsChain
	var accounts []string
	mustUnmarshal(t, g.MustCall(t, "eth_accounts"), &accounts)
	if len(accounts) == 0 {
		t.Fatal("geth --dev has no dev account")
	}
	c.dev = accounts[0]
	for i := range c.emitters {
		rc := hsWaitMined(t, g, hsSend(t, g, map[string]any{"from": c.dev, "data": emitterCode()}))
		c.emitters[i], _ = rc["contractAddress"].(string)
		if rc["status"] != "0x1" || c.emitters[i] == "" {
			t.Fatalf("deploy emitter: %v", rc)
		}
	}

	// The authority signs a delegation to the first emitter; calls to it
	// then emit logs from an EOA's address.
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	auth, err := types.SignSetCode(key, types.SetCodeAuthorization{
		ChainID: *uint256.NewInt(gethtest.ChainID), Address: common.HexToAddress(c.emitters[0]), Nonce: 0,
	})
	if err != nil {
		t.Fatal(err)
	}
	c.authority = strings.ToLower(crypto.PubkeyToAddress(key.PublicKey).Hex())

	// One block with many transactions: send nonces n+1.. first (geth
	// queues them behind the gap), then n, which releases them all at once.
	nonce := quantity(t, g.MustCall(t, "eth_getTransactionCount", c.dev, "pending"))
	call := func(to string, data string) map[string]any {
		return map[string]any{"from": c.dev, "to": to, "data": data, "gas": hsCallGas, "maxFeePerGas": hsGasPrice, "maxPriorityFeePerGas": "0x1"}
	}
	batch := []map[string]any{
		// legacy (type 0)
		{"from": c.dev, "to": c.emitters[0], "data": hsTopic(7), "gas": hsCallGas, "gasPrice": hsGasPrice},
		// access list (type 1)
		{"from": c.dev, "to": c.emitters[1], "data": hsTopic(8), "gas": hsCallGas, "gasPrice": hsGasPrice,
			"accessList": []any{map[string]any{"address": c.emitters[1], "storageKeys": []string{hsTopic(0)}}}},
		// dynamic fee (type 2), no calldata: LOG3's last topic is zero
		call(c.emitters[0], "0x"),
		// set code (type 4): the call runs the emitter as the authority
		{"from": c.dev, "to": c.authority, "data": hsTopic(9), "gas": hsCallGas, "maxFeePerGas": hsGasPrice,
			"maxPriorityFeePerGas": "0x1", "authorizationList": []any{auth}},
		// a plain transfer
		{"from": c.dev, "to": c.authority, "value": "0x1", "gas": "0x5208", "maxFeePerGas": hsGasPrice, "maxPriorityFeePerGas": "0x1"},
		// out of gas: mined with status 0 and no logs
		{"from": c.dev, "to": c.emitters[1], "data": hsTopic(10), "gas": "0x5800", "maxFeePerGas": hsGasPrice, "maxPriorityFeePerGas": "0x1"},
		call(c.emitters[1], hsTopic(7)),
	}
	hashes := make([]string, len(batch))
	for i := len(batch) - 1; i >= 0; i-- {
		batch[i]["nonce"] = hex(nonce + uint64(i))
		hashes[i] = hsSend(t, g, batch[i])
	}
	for _, h := range hashes {
		hsWaitMined(t, g, h)
	}
	nonce += uint64(len(batch))

	// A blob transaction (type 3): geth signs it and builds the sidecar.
	var signed struct {
		Raw string `json:"raw"`
	}
	mustUnmarshal(t, g.MustCall(t, "eth_signTransaction", map[string]any{
		"from": c.dev, "to": c.emitters[1], "data": hsTopic(11), "nonce": hex(nonce), "gas": hsCallGas,
		"maxFeePerGas": hsGasPrice, "maxPriorityFeePerGas": "0x1", "maxFeePerBlobGas": hsBlobFee,
		"blobs": []string{"0x" + strings.Repeat("00", hsBlobBytes)},
	}), &signed)
	var blobTx string
	mustUnmarshal(t, g.MustCall(t, "eth_sendRawTransaction", signed.Raw), &blobTx)
	hsWaitMined(t, g, blobTx)

	for quantity(t, g.MustCall(t, "eth_blockNumber")) < 34 {
		hsWaitMined(t, g, hsSend(t, g, map[string]any{"from": c.dev, "to": c.dev, "value": "0x1"}))
	}

	c.head = quantity(t, g.MustCall(t, "eth_blockNumber"))
	c.safe = hsTagNumber(t, g, "safe")
	c.final = hsTagNumber(t, g, "finalized")
	for n := uint64(0); n <= c.head; n++ {
		raw := g.MustCall(t, "eth_getBlockByNumber", hex(n), true)
		var b struct {
			Hash         string `json:"hash"`
			Transactions []struct {
				Hash string `json:"hash"`
			} `json:"transactions"`
		}
		mustUnmarshal(t, raw, &b)
		blk := hsBlock{number: n, hash: b.Hash, raw: raw, rcs: g.MustCall(t, "eth_getBlockReceipts", b.Hash)}
		for _, tx := range b.Transactions {
			blk.txs = append(blk.txs, tx.Hash)
		}
		c.blocks = append(c.blocks, blk)
	}
	if got := quantity(t, g.MustCall(t, "eth_blockNumber")); got != c.head {
		t.Fatalf("the chain moved while it was read: head %d, then %d", c.head, got)
	}
	return c
}

func hsTagNumber(t *testing.T, g *gethtest.Geth, tag string) uint64 {
	t.Helper()
	var b struct {
		Number json.RawMessage `json:"number"`
	}
	mustUnmarshal(t, g.MustCall(t, "eth_getBlockByNumber", tag, false), &b)
	return quantity(t, b.Number)
}

// hsWindow loads blocks from..head of c into a fresh window.
func hsWindow(t *testing.T, c hsChain, from uint64) *headstore.Window {
	t.Helper()
	var blocks []*headstore.Block
	for _, b := range c.blocks[from:] {
		blk, err := headstore.ParseBlock(b.raw, b.rcs)
		if err != nil {
			t.Fatalf("block %d: %v", b.number, err)
		}
		blocks = append(blocks, blk)
	}
	w := headstore.NewWindow(len(c.blocks) + 1)
	if err := w.Reset(&headstore.Snapshot{Gen: "e2e", Seq: 1, Blocks: blocks, Safe: c.safe, Finalized: c.final}); err != nil {
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
func hsCases(c hsChain) []hsCase {
	q := strconv.Quote
	var cs []hsCase
	add := func(method, params string) { cs = append(cs, hsCase{method: method, params: params}) }
	add("eth_blockNumber", `[]`)
	for _, b := range c.blocks {
		n, h := q(hex(b.number)), q(b.hash)
		upper := q("0x" + strings.ToUpper(b.hash[2:]))
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
		for i, tx := range b.txs {
			add("eth_getTransactionByHash", `[`+q(tx)+`]`)
			add("eth_getTransactionReceipt", `[`+q(tx)+`]`)
			add("eth_getTransactionByBlockNumberAndIndex", `[`+n+`,`+q(hex(uint64(i)))+`]`)
			add("eth_getTransactionByBlockHashAndIndex", `[`+h+`,`+q(hex(uint64(i)))+`]`)
		}
		// Past the last transaction: null.
		add("eth_getTransactionByBlockNumberAndIndex", `[`+n+`,`+q(hex(uint64(len(b.txs))))+`]`)
		add("eth_getTransactionByBlockHashAndIndex", `[`+h+`,"0x64"]`)
	}
	mid := c.blocks[len(c.blocks)/2]
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
	add("eth_getBlockByNumber", `["0X`+strings.ToUpper(strconv.FormatUint(mid.number, 16))+`",false]`)
	add("eth_getBlockReceipts", `[{"blockHash":`+q(mid.hash)+`}]`)
	add("eth_getBlockReceipts", `[{"blockHash":`+q(mid.hash)+`,"requireCanonical":true}]`)
	add("eth_getBlockReceipts", `[{"blockNumber":`+q(hex(mid.number))+`}]`)
	add("eth_getBlockReceipts", `[{"blockNumber":"latest"}]`)

	// Blocks above the head: geth answers null.
	for _, n := range []uint64{c.head + 1, c.head + 1000, 1<<63 - 1} {
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
	e0, e1, auth := q(c.emitters[0]), q(c.emitters[1]), q(c.authority)
	e0Upper := q("0x" + strings.ToUpper(c.emitters[0][2:]))
	taa, tbb, t7, t1, t2, t4 := q(hsTopic(0xaa)), q(hsTopic(0xbb)), q(hsTopic(7)), q(hsTopic(1)), q(hsTopic(2)), q(hsTopic(4))
	dev := q(hsTopic(0)[:26] + c.dev[2:])
	all := `"fromBlock":"0x0","toBlock":"latest"`
	for _, f := range []string{
		`{}`,
		`{"fromBlock":"latest"}`,
		`{"toBlock":"latest"}`,
		`{` + all + `}`,
		`{"fromBlock":"earliest","toBlock":` + q(hex(c.head)) + `}`,
		`{"fromBlock":"0x1","toBlock":` + q(hex(c.head/2)) + `}`,
		`{"fromBlock":"finalized","toBlock":"safe"}`,
		`{"fromBlock":` + q(hex(mid.number)) + `,"toBlock":` + q(hex(mid.number)) + `}`,
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
		`{` + all + `,"topics":[[` + t1 + `,` + tbb + `],null,[` + t7 + `,` + q(hsTopic(0)) + `,` + t2 + `]]}`,
		`{` + all + `,"topics":[null,null,null,` + t4 + `]}`,
		`{` + all + `,"topics":[null,null,null,null]}`,
		`{` + all + `,"topics":[null]}`,
		`{` + all + `,"topics":[[]]}`,
		`{` + all + `,"topics":[[` + taa + `,null]]}`,
		`{` + all + `,"topics":[[null,"0xzz"]]}`,
		`{` + all + `,"topics":[null,null,` + t7 + `]}`,
		`{` + all + `,"address":` + auth + `,"topics":[` + tbb + `]}`,
		`{` + all + `,"address":` + e1 + `,"topics":[` + q(hsTopic(0x99)) + `]}`,
		`{` + all + `,"limit":10,"extra":{"x":[1]}}`,
		`{"blockHash":` + q(c.blocks[3].hash) + `,"address":` + e0 + `,"topics":[null,` + taa + `]}`,
		`{"blockHash":` + q(c.blocks[3].hash) + `,"fromBlock":null,"toBlock":null}`,
	} {
		add("eth_getLogs", `[`+f+`]`)
	}

	// What the window leaves to the node.
	fwd := func(method, params string, gethErr bool) {
		cs = append(cs, hsCase{method: method, params: params, forward: true, gethErr: gethErr})
	}
	unknown := q(hsTopic(0xdead))
	fwd("eth_getBlockByNumber", `["0x01",false]`, true)
	fwd("eth_getBlockByNumber", `["pending",false]`, false)
	fwd("eth_getBlockByNumber", `["latest"]`, true)
	fwd("eth_getBlockByNumber", `["latest",false,1]`, true)
	fwd("eth_getBlockByNumber", `["0x8000000000000000",false]`, true)
	fwd("eth_getBlockByHash", `[`+unknown+`,false]`, false)
	fwd("eth_getTransactionByHash", `[`+unknown+`]`, false)
	fwd("eth_getTransactionReceipt", `[`+unknown+`]`, false)
	fwd("eth_getTransactionByBlockNumberAndIndex", `["0x1","0x00"]`, true)
	fwd("eth_getBlockReceipts", `[{"blockNumber":"0x1","blockHash":`+q(c.blocks[1].hash)+`}]`, true)
	fwd("eth_getLogs", `[{"fromBlock":"0x2","toBlock":"0x1"}]`, true)
	fwd("eth_getLogs", `[{"fromBlock":"latest","toBlock":"0x1"}]`, true)
	fwd("eth_getLogs", `[{"fromBlock":"0x1","toBlock":`+q(hex(c.head+1))+`}]`, true)
	fwd("eth_getLogs", `[{"fromBlock":`+q(hex(c.head+1))+`}]`, true)
	fwd("eth_getLogs", `[{"fromBlock":"pending"}]`, true)
	fwd("eth_getLogs", `[{"blockHash":`+q(c.blocks[1].hash)+`,"fromBlock":"0x1"}]`, true)
	fwd("eth_getLogs", `[{"blockHash":`+unknown+`}]`, true)
	fwd("eth_getLogs", `[{"topics":[null,null,null,null,null]}]`, true)
	fwd("eth_getLogs", `[{"address":"0x1234"}]`, true)
	fwd("eth_getLogs", `[{"topics":["0x01"]}]`, true)
	fwd("eth_getLogs", `[{"fromBlock":"0x01"}]`, true)
	return cs
}

// TestHeadServeMatchesGeth loads a real geth chain into a window and puts
// the same calls to both: every answer the window gives must be geth's.
func TestHeadServeMatchesGeth(t *testing.T) {
	g := gethtest.Start(t, gethtest.Options{})
	warmBlobSigning(t, g)
	c := hsProduce(t, g)
	hsCheckChain(t, c)
	w := hsWindow(t, c, 0)

	cases := hsCases(c)
	answered := 0
	for _, tc := range cases {
		want, gethErr := hsCallGeth(g, tc)
		got, ok := w.Answer(tc.method, json.RawMessage(tc.params))
		if tc.forward {
			if ok {
				t.Errorf("%v: window answered %s, want it forwarded (geth: %s, %v)", tc, truncate(string(got)), truncate(string(want)), gethErr)
			}
			if tc.gethErr && gethErr == nil {
				t.Errorf("%v: geth answered %s, want an error", tc, truncate(string(want)))
			}
			continue
		}
		if gethErr != nil {
			t.Errorf("%v: geth: %v", tc, gethErr)
			continue
		}
		if tc.future && string(want) != "null" {
			t.Errorf("%v: geth answered %s for a block above the head, want null", tc, truncate(string(want)))
		}
		if !ok {
			t.Errorf("%v: window forwarded, want geth's %s", tc, truncate(string(want)))
			continue
		}
		hsCompare(t, tc, want, got)
		answered++
	}
	t.Logf("%d blocks (head %d, safe %d, finalized %d): window answered %d calls as geth did, forwarded %d",
		len(c.blocks), c.head, c.safe, c.final, answered, len(cases)-answered)

	// A window that starts above block 0 and the finalized block leaves
	// older blocks to the node.
	low := c.final + 1
	small := hsWindow(t, c, low)
	for _, tc := range []hsCase{
		{method: "eth_getBlockByNumber", params: `["0x0",false]`},
		{method: "eth_getBlockByNumber", params: `["earliest",true]`},
		{method: "eth_getBlockByNumber", params: `["finalized",true]`},
		{method: "eth_getBlockReceipts", params: `[` + strconv.Quote(hex(low-1)) + `]`},
		{method: "eth_getBlockByHash", params: `[` + strconv.Quote(c.blocks[1].hash) + `,false]`},
		{method: "eth_getTransactionReceipt", params: `[` + strconv.Quote(c.blocks[1].txs[0]) + `]`},
		{method: "eth_getLogs", params: `[{"fromBlock":"0x0"}]`},
		{method: "eth_getLogs", params: `[{"fromBlock":` + strconv.Quote(hex(low-1)) + `,"toBlock":"latest"}]`},
		{method: "eth_getLogs", params: `[{"blockHash":` + strconv.Quote(c.blocks[1].hash) + `}]`},
	} {
		if got, ok := small.Answer(tc.method, json.RawMessage(tc.params)); ok {
			t.Errorf("window from %d answered %v with %s, want it forwarded", low, tc, truncate(string(got)))
		}
	}
	for _, tc := range []hsCase{
		{method: "eth_getBlockByNumber", params: `[` + strconv.Quote(hex(low)) + `,true]`},
		{method: "eth_getLogs", params: `[{"fromBlock":` + strconv.Quote(hex(low)) + `,"toBlock":"latest"}]`},
		{method: "eth_blockNumber", params: `[]`},
	} {
		want, err := hsCallGeth(g, tc)
		if err != nil {
			t.Fatalf("%v: geth: %v", tc, err)
		}
		got, ok := small.Answer(tc.method, json.RawMessage(tc.params))
		if !ok {
			t.Errorf("window from %d forwarded %v", low, tc)
			continue
		}
		hsCompare(t, tc, want, got)
	}
}

// hsCheckChain makes sure hsProduce made what the cases rely on.
func hsCheckChain(t *testing.T, c hsChain) {
	t.Helper()
	txTypes := map[string]bool{}
	topicCounts := map[int]bool{}
	multi := false
	for _, b := range c.blocks {
		var txs struct {
			Transactions []struct {
				Type string `json:"type"`
			} `json:"transactions"`
		}
		mustUnmarshal(t, b.raw, &txs)
		for _, tx := range txs.Transactions {
			txTypes[tx.Type] = true
		}
		var rcs []struct {
			Logs []struct {
				Topics []string `json:"topics"`
			} `json:"logs"`
		}
		mustUnmarshal(t, b.rcs, &rcs)
		logs := 0
		for _, rc := range rcs {
			for _, l := range rc.Logs {
				topicCounts[len(l.Topics)] = true
				logs++
			}
		}
		if len(rcs) > 1 && logs > 5 {
			multi = true
		}
	}
	for _, typ := range []string{"0x0", "0x1", "0x2", "0x3", "0x4"} {
		if !txTypes[typ] {
			t.Errorf("no transaction of type %s on the chain", typ)
		}
	}
	for n := range 5 {
		if !topicCounts[n] {
			t.Errorf("no log with %d topics on the chain", n)
		}
	}
	if !multi {
		t.Error("no block with several transactions and logs")
	}
	if c.final == 0 || c.safe != c.head {
		t.Errorf("safe %d, finalized %d at head %d: want safe at the head and finalized past 0", c.safe, c.final, c.head)
	}
}

// hsCallGeth puts tc to geth.
func hsCallGeth(g *gethtest.Geth, tc hsCase) (json.RawMessage, error) {
	var params []json.RawMessage
	if err := json.Unmarshal([]byte(tc.params), &params); err != nil {
		return nil, fmt.Errorf("case params %s: %w", tc.params, err)
	}
	args := make([]any, len(params))
	for i, p := range params {
		args[i] = p
	}
	return g.Call(context.Background(), tc.method, args...)
}

// hsCompare holds the window's answer against geth's as JSON documents.
func hsCompare(t *testing.T, tc hsCase, want, got json.RawMessage) {
	t.Helper()
	w, err := normalize(want)
	if err != nil {
		t.Errorf("%v: geth: %v", tc, err)
		return
	}
	g, err := normalize(got)
	if err != nil {
		t.Errorf("%v: window: %v", tc, err)
		return
	}
	if w != g {
		t.Errorf("%v: window and geth differ\nwindow %s\ngeth   %s", tc, truncate(g), truncate(w))
	}
}
