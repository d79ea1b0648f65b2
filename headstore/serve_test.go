package headstore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/evm"
)

// The synthetic chain the serve tests answer from: blocks in geth's JSON
// shapes (keys sorted, full transactions, receipts with logs), built here
// so every expected answer is known byte for byte.

// serveLog is one log a synthetic transaction emits, named for the tests.
type serveLog struct {
	name   string
	addr   string
	topics []string
}

// serveTx is one synthetic transaction, named for the tests.
type serveTx struct {
	name string
	logs []serveLog
}

// serveChain collects every synthetic block and its parts by name.
type serveChain struct {
	blocks   map[string]*evm.Block // by fork+number: "12", "13b"
	hashOnly map[string]string
	txJSON   map[string]string // transaction objects by name
	rcJSON   map[string]string // receipts by transaction name
	txHash   map[string]string
	logJSON  map[string]string // log objects by name
}

func newServeChain() *serveChain {
	return &serveChain{
		blocks: map[string]*evm.Block{}, hashOnly: map[string]string{}, txJSON: map[string]string{},
		rcJSON: map[string]string{}, txHash: map[string]string{}, logJSON: map[string]string{},
	}
}

// serveHex is 2n lowercase hex digits derived from label.
func serveHex(label string, n int) string {
	sum := sha256.Sum256([]byte(label))
	return "0x" + hex.EncodeToString(sum[:])[:2*n]
}

func serveHash(label string) string { return serveHex(label, 32) }
func serveAddr(label string) string { return serveHex(label, 20) }
func serveQty(n uint64) string      { return `"0x` + strconv.FormatUint(n, 16) + `"` }

// Addresses and topics of the synthetic logs.
var (
	serveAddrA, serveAddrB, serveAddrC    = serveAddr("A"), serveAddr("B"), serveAddr("C")
	serveTopic1, serveTopic2, serveTopic3 = serveHash("T1"), serveHash("T2"), serveHash("T3")
	serveTopic4                           = serveHash("T4")
)

// block adds block n of fork (its name is n, plus the fork when not "").
func (c *serveChain) block(fork string, n uint64, parent string, uncles int, txs ...serveTx) *evm.Block {
	name := strconv.FormatUint(n, 10) + fork
	h := serveHash("block " + name)
	num, ts := serveQty(n), serveQty(1_700_000_000+12*n)
	var full, hashes, receipts []string
	logIndex := 0
	for i, tx := range txs {
		th := serveHash("tx " + tx.name)
		c.txHash[tx.name] = th
		idx := serveQty(uint64(i))
		txj := `{"blockHash":"` + h + `","blockNumber":` + num + `,"blockTimestamp":` + ts +
			`,"from":"` + serveAddr("sender") + `","gas":"0x5208","hash":"` + th + `","input":"0x","nonce":` + idx +
			`,"to":"` + serveAddrA + `","transactionIndex":` + idx + `,"type":"0x2","value":"0x1"}`
		var logs []string
		for _, l := range tx.logs {
			lj := `{"address":"` + l.addr + `","topics":[`
			for j, t := range l.topics {
				if j > 0 {
					lj += ","
				}
				lj += `"` + t + `"`
			}
			lj += `],"data":"0x","blockNumber":` + num + `,"transactionHash":"` + th + `","transactionIndex":` + idx +
				`,"blockHash":"` + h + `","blockTimestamp":` + ts + `,"logIndex":` + serveQty(uint64(logIndex)) + `,"removed":false}`
			logIndex++
			c.logJSON[l.name] = lj
			logs = append(logs, lj)
		}
		rc := `{"blockHash":"` + h + `","blockNumber":` + num + `,"contractAddress":null,"gasUsed":"0x5208","logs":[` +
			strings.Join(logs, ",") + `],"status":"0x1","transactionHash":"` + th + `","transactionIndex":` + idx + `,"type":"0x2"}`
		c.txJSON[tx.name], c.rcJSON[tx.name] = txj, rc
		full, hashes, receipts = append(full, txj), append(hashes, `"`+th+`"`), append(receipts, rc)
	}
	var uncleHashes []string
	for i := range uncles {
		uncleHashes = append(uncleHashes, `"`+serveHash(fmt.Sprintf("uncle %s %d", name, i))+`"`)
	}
	head := `{"baseFeePerGas":"0x7","hash":"` + h + `","number":` + num + `,"parentHash":"` + parent +
		`","timestamp":` + ts + `,"transactions":[`
	tail := `],"uncles":[` + strings.Join(uncleHashes, ",") + `]}`
	b := &evm.Block{
		Number: n, Hash: h, Parent: parent,
		Raw:      json.RawMessage(head + strings.Join(full, ",") + tail),
		Receipts: json.RawMessage(`[` + strings.Join(receipts, ",") + `]`),
	}
	c.blocks[name] = b
	c.hashOnly[name] = head + strings.Join(hashes, ",") + tail
	return b
}

// serveMain is blocks 10..14, safe 13, finalized 12:
//
//	10: no transactions, one uncle
//	11: ta: L0 (A, T1), L1 (B, T1 T2); tb: L2 (A, no topics)
//	12: tc: L3 (A, T2 T3 T1), L4 (B, T1 T3)
//	13: td: no logs; te: L5 (C, T3)
//	14: tf: L6 (A, T1 T2 T3 T4)
func serveMain(c *serveChain) []*evm.Block {
	parent := serveHash("block 9")
	var out []*evm.Block
	add := func(n uint64, uncles int, txs ...serveTx) {
		b := c.block("", n, parent, uncles, txs...)
		parent = b.Hash
		out = append(out, b)
	}
	add(10, 1)
	add(11, 0,
		serveTx{"ta", []serveLog{{"L0", serveAddrA, []string{serveTopic1}}, {"L1", serveAddrB, []string{serveTopic1, serveTopic2}}}},
		serveTx{"tb", []serveLog{{"L2", serveAddrA, nil}}})
	add(12, 0, serveTx{"tc", []serveLog{{"L3", serveAddrA, []string{serveTopic2, serveTopic3, serveTopic1}}, {"L4", serveAddrB, []string{serveTopic1, serveTopic3}}}})
	add(13, 0, serveTx{"td", nil}, serveTx{"te", []serveLog{{"L5", serveAddrC, []string{serveTopic3}}}})
	add(14, 0, serveTx{"tf", []serveLog{{"L6", serveAddrA, []string{serveTopic1, serveTopic2, serveTopic3, serveTopic4}}}})
	return out
}

func newServeWindow(t testing.TB, size int, blocks []*evm.Block, safe, finalized uint64) *Window {
	t.Helper()
	w := NewWindow(size)
	if err := w.Reset(&Snapshot{Gen: "g", Seq: 1, Blocks: blocks, Safe: safe, Finalized: finalized}); err != nil {
		t.Fatal(err)
	}
	return w
}

// serveCase is one call and the window's expected answer; forward means
// ok=false.
type serveCase struct {
	name    string
	method  string
	params  string
	want    string
	forward bool
}

func runServeCases(t *testing.T, w *Window, tests []serveCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var params json.RawMessage
			if tt.params != "" {
				params = json.RawMessage(tt.params)
			}
			got, ok := w.Answer(evm.ParseCall(tt.method, params))
			if tt.forward {
				if ok {
					t.Fatalf("%s %s answered %.200s, want forwarded", tt.method, tt.params, got)
				}
				return
			}
			if !ok {
				t.Fatalf("%s %s forwarded, want %.200s", tt.method, tt.params, tt.want)
			}
			if string(got) != tt.want {
				t.Fatalf("%s %s\n got %.400s\nwant %.400s", tt.method, tt.params, got, tt.want)
			}
		})
	}
}

func serveQ(s string) string { return `"` + s + `"` }

// logsOf is the eth_getLogs answer holding the named logs.
func (c *serveChain) logsOf(names ...string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = c.logJSON[n]
	}
	return "[" + strings.Join(parts, ",") + "]"
}

func TestServeBlocks(t *testing.T) {
	c := newServeChain()
	w := newServeWindow(t, 8, serveMain(c), 13, 12)
	b12, h12 := c.blocks["12"], c.blocks["12"].Hash
	upper12 := "0x" + strings.ToUpper(h12[2:])
	unknown := serveHash("nowhere")
	tests := []serveCase{
		{name: "blockNumber", method: "eth_blockNumber", params: `[]`, want: `"0xe"`},
		{name: "blockNumber absent params", method: "eth_blockNumber", want: `"0xe"`},
		{name: "blockNumber null params", method: "eth_blockNumber", params: `null`, want: `"0xe"`},
		{name: "blockNumber extra param", method: "eth_blockNumber", params: `[1]`, forward: true},
		{name: "blockNumber named params", method: "eth_blockNumber", params: `{}`, forward: true},

		{name: "by number full", method: "eth_getBlockByNumber", params: `["0xc",true]`, want: string(b12.Raw)},
		{name: "by number hashes", method: "eth_getBlockByNumber", params: `["0xc",false]`, want: c.hashOnly["12"]},
		{name: "by number spaced", method: "eth_getBlockByNumber", params: ` [ "0xc" , false ] `, want: c.hashOnly["12"]},
		{name: "by number 0X", method: "eth_getBlockByNumber", params: `["0XC",false]`, want: c.hashOnly["12"]},
		{name: "latest", method: "eth_getBlockByNumber", params: `["latest",false]`, want: c.hashOnly["14"]},
		{name: "latest full", method: "eth_getBlockByNumber", params: `["latest",true]`, want: string(c.blocks["14"].Raw)},
		{name: "safe", method: "eth_getBlockByNumber", params: `["safe",false]`, want: c.hashOnly["13"]},
		{name: "finalized", method: "eth_getBlockByNumber", params: `["finalized",false]`, want: c.hashOnly["12"]},
		{name: "low edge", method: "eth_getBlockByNumber", params: `["0xa",false]`, want: c.hashOnly["10"]},
		{name: "future", method: "eth_getBlockByNumber", params: `["0xf",false]`, want: `null`},
		{name: "far future", method: "eth_getBlockByNumber", params: `["0x7fffffffffffffff",true]`, want: `null`},
		{name: "past int64", method: "eth_getBlockByNumber", params: `["0x8000000000000000",true]`, forward: true},
		{name: "below window", method: "eth_getBlockByNumber", params: `["0x9",false]`, forward: true},
		{name: "earliest not in window", method: "eth_getBlockByNumber", params: `["earliest",false]`, forward: true},
		{name: "pending", method: "eth_getBlockByNumber", params: `["pending",false]`, forward: true},
		{name: "leading zero", method: "eth_getBlockByNumber", params: `["0x0c",false]`, forward: true},
		{name: "no prefix", method: "eth_getBlockByNumber", params: `["c",false]`, forward: true},
		{name: "empty number", method: "eth_getBlockByNumber", params: `["0x",false]`, forward: true},
		{name: "json number", method: "eth_getBlockByNumber", params: `[12,false]`, forward: true},
		{name: "escaped tag", method: "eth_getBlockByNumber", params: `["\u006catest",false]`, forward: true},
		{name: "upper tag", method: "eth_getBlockByNumber", params: `["LATEST",false]`, forward: true},
		{name: "object ref", method: "eth_getBlockByNumber", params: `[{"blockNumber":"0xc"},false]`, forward: true},
		{name: "hash as number", method: "eth_getBlockByNumber", params: `[` + serveQ(h12) + `,false]`, forward: true},
		{name: "missing full", method: "eth_getBlockByNumber", params: `["0xc"]`, forward: true},
		{name: "null full", method: "eth_getBlockByNumber", params: `["0xc",null]`, forward: true},
		{name: "extra param", method: "eth_getBlockByNumber", params: `["0xc",false,1]`, forward: true},
		{name: "no params", method: "eth_getBlockByNumber", forward: true},

		{name: "by hash full", method: "eth_getBlockByHash", params: `[` + serveQ(h12) + `,true]`, want: string(b12.Raw)},
		{name: "by hash hashes", method: "eth_getBlockByHash", params: `[` + serveQ(h12) + `,false]`, want: c.hashOnly["12"]},
		{name: "by hash upper case", method: "eth_getBlockByHash", params: `[` + serveQ(upper12) + `,false]`, want: c.hashOnly["12"]},
		{name: "by hash unknown", method: "eth_getBlockByHash", params: `[` + serveQ(unknown) + `,false]`, forward: true},
		{name: "by hash short", method: "eth_getBlockByHash", params: `[` + serveQ(h12[:64]) + `,false]`, forward: true},
		{name: "by hash not hex", method: "eth_getBlockByHash", params: `[` + serveQ("0x"+strings.Repeat("g", 64)) + `,false]`, forward: true},
		{name: "by hash tag", method: "eth_getBlockByHash", params: `["latest",false]`, forward: true},

		{name: "receipts by number", method: "eth_getBlockReceipts", params: `["0xc"]`, want: string(b12.Receipts)},
		{name: "receipts latest", method: "eth_getBlockReceipts", params: `["latest"]`, want: string(c.blocks["14"].Receipts)},
		{name: "receipts empty block", method: "eth_getBlockReceipts", params: `["0xa"]`, want: `[]`},
		{name: "receipts by hash", method: "eth_getBlockReceipts", params: `[` + serveQ(upper12) + `]`, want: string(b12.Receipts)},
		{name: "receipts by hash object", method: "eth_getBlockReceipts", params: `[{"blockHash":` + serveQ(h12) + `}]`, want: string(b12.Receipts)},
		{name: "receipts canonical object", method: "eth_getBlockReceipts", params: `[{"blockHash":` + serveQ(h12) + `,"requireCanonical":true}]`, want: string(b12.Receipts)},
		{name: "receipts number object", method: "eth_getBlockReceipts", params: `[{"blockNumber":"0xc"}]`, want: string(b12.Receipts)},
		{name: "receipts both in object", method: "eth_getBlockReceipts", params: `[{"blockNumber":"0xc","blockHash":` + serveQ(h12) + `}]`, forward: true},
		{name: "receipts empty object", method: "eth_getBlockReceipts", params: `[{}]`, forward: true},
		{name: "receipts future", method: "eth_getBlockReceipts", params: `["0x10"]`, want: `null`},
		{name: "receipts future object", method: "eth_getBlockReceipts", params: `[{"blockNumber":"0x10"}]`, want: `null`},
		{name: "receipts below", method: "eth_getBlockReceipts", params: `["0x1"]`, forward: true},
		{name: "receipts pending", method: "eth_getBlockReceipts", params: `["pending"]`, forward: true},
		{name: "receipts unknown hash", method: "eth_getBlockReceipts", params: `[` + serveQ(unknown) + `]`, forward: true},
		{name: "receipts no params", method: "eth_getBlockReceipts", params: `[]`, forward: true},

		{name: "tx by hash", method: "eth_getTransactionByHash", params: `[` + serveQ(c.txHash["tc"]) + `]`, want: c.txJSON["tc"]},
		{name: "tx by hash second", method: "eth_getTransactionByHash", params: `[` + serveQ(c.txHash["tb"]) + `]`, want: c.txJSON["tb"]},
		{name: "tx unknown", method: "eth_getTransactionByHash", params: `[` + serveQ(unknown) + `]`, forward: true},
		{name: "tx bad hash", method: "eth_getTransactionByHash", params: `["0x12"]`, forward: true},
		{name: "receipt", method: "eth_getTransactionReceipt", params: `[` + serveQ(c.txHash["te"]) + `]`, want: c.rcJSON["te"]},
		{name: "receipt upper case", method: "eth_getTransactionReceipt", params: `[` + serveQ("0X"+strings.ToUpper(c.txHash["te"][2:])) + `]`, want: c.rcJSON["te"]},
		{name: "receipt unknown", method: "eth_getTransactionReceipt", params: `[` + serveQ(unknown) + `]`, forward: true},

		{name: "tx by number and index", method: "eth_getTransactionByBlockNumberAndIndex", params: `["0xb","0x1"]`, want: c.txJSON["tb"]},
		{name: "tx by latest and index", method: "eth_getTransactionByBlockNumberAndIndex", params: `["latest","0x0"]`, want: c.txJSON["tf"]},
		{name: "tx index out of range", method: "eth_getTransactionByBlockNumberAndIndex", params: `["0xb","0x2"]`, want: `null`},
		{name: "tx index huge", method: "eth_getTransactionByBlockNumberAndIndex", params: `["0xb","0xffffffffffffffff"]`, want: `null`},
		{name: "tx index future block", method: "eth_getTransactionByBlockNumberAndIndex", params: `["0xf","0x0"]`, want: `null`},
		{name: "tx index empty block", method: "eth_getTransactionByBlockNumberAndIndex", params: `["0xa","0x0"]`, want: `null`},
		{name: "tx index leading zero", method: "eth_getTransactionByBlockNumberAndIndex", params: `["0xb","0x01"]`, forward: true},
		{name: "tx index empty string", method: "eth_getTransactionByBlockNumberAndIndex", params: `["0xb",""]`, forward: true},
		{name: "tx index number", method: "eth_getTransactionByBlockNumberAndIndex", params: `["0xb",1]`, forward: true},
		{name: "tx index below", method: "eth_getTransactionByBlockNumberAndIndex", params: `["0x9","0x0"]`, forward: true},
		{name: "tx by hash and index", method: "eth_getTransactionByBlockHashAndIndex", params: `[` + serveQ(c.blocks["11"].Hash) + `,"0x0"]`, want: c.txJSON["ta"]},
		{name: "tx by hash and index out of range", method: "eth_getTransactionByBlockHashAndIndex", params: `[` + serveQ(c.blocks["11"].Hash) + `,"0x2"]`, want: `null`},
		{name: "tx by unknown hash and index", method: "eth_getTransactionByBlockHashAndIndex", params: `[` + serveQ(unknown) + `,"0x0"]`, forward: true},

		{name: "tx count", method: "eth_getBlockTransactionCountByNumber", params: `["0xb"]`, want: `"0x2"`},
		{name: "tx count empty", method: "eth_getBlockTransactionCountByNumber", params: `["0xa"]`, want: `"0x0"`},
		{name: "tx count safe", method: "eth_getBlockTransactionCountByNumber", params: `["safe"]`, want: `"0x2"`},
		{name: "tx count future", method: "eth_getBlockTransactionCountByNumber", params: `["0xf"]`, want: `null`},
		{name: "tx count below", method: "eth_getBlockTransactionCountByNumber", params: `["0x9"]`, forward: true},
		{name: "tx count by hash", method: "eth_getBlockTransactionCountByHash", params: `[` + serveQ(h12) + `]`, want: `"0x1"`},
		{name: "tx count unknown hash", method: "eth_getBlockTransactionCountByHash", params: `[` + serveQ(unknown) + `]`, forward: true},
		{name: "uncle count", method: "eth_getUncleCountByBlockNumber", params: `["0xa"]`, want: `"0x1"`},
		{name: "uncle count none", method: "eth_getUncleCountByBlockNumber", params: `["latest"]`, want: `"0x0"`},
		{name: "uncle count future", method: "eth_getUncleCountByBlockNumber", params: `["0x100"]`, want: `null`},
		{name: "uncle count by hash", method: "eth_getUncleCountByBlockHash", params: `[` + serveQ(c.blocks["10"].Hash) + `]`, want: `"0x1"`},

		{name: "unknown method", method: "eth_getBalance", params: `["0x01","latest"]`, forward: true},
		{name: "uncle by index", method: "eth_getUncleByBlockNumberAndIndex", params: `["0xa","0x0"]`, forward: true},
	}
	runServeCases(t, w, tests)
}

func TestServeEarliest(t *testing.T) {
	c := newServeChain()
	genesis := c.block("", 0, serveHash("nothing"), 0)
	one := c.block("", 1, genesis.Hash, 0, serveTx{"t1", []serveLog{{"G0", serveAddrA, []string{serveTopic1}}}})
	w := newServeWindow(t, 4, []*evm.Block{genesis, one}, 0, 0)
	runServeCases(t, w, []serveCase{
		{name: "earliest", method: "eth_getBlockByNumber", params: `["earliest",false]`, want: c.hashOnly["0"]},
		{name: "zero", method: "eth_getBlockByNumber", params: `["0x0",true]`, want: string(genesis.Raw)},
		{name: "zero leading zeros", method: "eth_getBlockByNumber", params: `["0x00",true]`, forward: true},
		// Zero safe and finalized are unknown, not block 0.
		{name: "safe unknown", method: "eth_getBlockByNumber", params: `["safe",false]`, forward: true},
		{name: "finalized unknown", method: "eth_getBlockByNumber", params: `["finalized",false]`, forward: true},
		{name: "logs from earliest", method: "eth_getLogs", params: `[{"fromBlock":"earliest"}]`, want: c.logsOf("G0")},
		{name: "logs finalized unknown", method: "eth_getLogs", params: `[{"fromBlock":"finalized"}]`, forward: true},
	})
}

// A window of genesis alone has a head, block 0: a chain venn met before
// its first block is served as one that has a head.
func TestServeGenesisOnly(t *testing.T) {
	c := newServeChain()
	genesis := c.block("", 0, serveHash("nothing"), 0)
	w := newServeWindow(t, 4, []*evm.Block{genesis}, 0, 0)
	if n, ok := w.Latest(); n != 0 || ok {
		t.Fatalf("Latest before the feed is live: %d %v, want 0 false", n, ok)
	}
	w.SetLive(true)
	if n, ok := w.Latest(); n != 0 || !ok {
		t.Fatalf("Latest: %d %v, want 0 true", n, ok)
	}
	runServeCases(t, w, []serveCase{
		{name: "block number", method: "eth_blockNumber", params: `[]`, want: `"0x0"`},
		{name: "latest", method: "eth_getBlockByNumber", params: `["latest",false]`, want: c.hashOnly["0"]},
		{name: "future", method: "eth_getBlockByNumber", params: `["0x1",false]`, want: `null`},
	})
}

func TestServeEmptyWindow(t *testing.T) {
	w := NewWindow(4)
	for _, tt := range []serveCase{
		{method: "eth_blockNumber", params: `[]`},
		{method: "eth_getBlockByNumber", params: `["latest",false]`},
		{method: "eth_getBlockByNumber", params: `["0x5",false]`},
		{method: "eth_getBlockReceipts", params: `["latest"]`},
		{method: "eth_getBlockTransactionCountByNumber", params: `["0x5"]`},
		{method: "eth_getLogs", params: `[{}]`},
	} {
		if got, ok := w.Answer(evm.ParseCall(tt.method, json.RawMessage(tt.params))); ok {
			t.Errorf("empty window answered %s %s with %s", tt.method, tt.params, got)
		}
	}
}

func TestServeLogs(t *testing.T) {
	c := newServeChain()
	w := newServeWindow(t, 8, serveMain(c), 13, 12)
	all := c.logsOf("L0", "L1", "L2", "L3", "L4", "L5", "L6")
	withTopics := c.logsOf("L0", "L1", "L3", "L4", "L5", "L6")
	rng := `"fromBlock":"0xa","toBlock":"0xe"`
	upperAddrA := "0x" + strings.ToUpper(serveAddrA[2:])
	h12 := c.blocks["12"].Hash
	tests := []serveCase{
		{name: "default is latest", params: `[{}]`, want: c.logsOf("L6")},
		{name: "latest to latest", params: `[{"fromBlock":"latest","toBlock":"latest"}]`, want: c.logsOf("L6")},
		{name: "null range", params: `[{"fromBlock":null,"toBlock":null,"address":null,"topics":null}]`, want: c.logsOf("L6")},
		{name: "whole window", params: `[{` + rng + `}]`, want: all},
		{name: "one block", params: `[{"fromBlock":"0xc","toBlock":"0xc"}]`, want: c.logsOf("L3", "L4")},
		{name: "to latest", params: `[{"fromBlock":"0xd"}]`, want: c.logsOf("L5", "L6")},
		{name: "block without logs", params: `[{"fromBlock":"0xa","toBlock":"0xa"}]`, want: `[]`},
		{name: "finalized to safe", params: `[{"fromBlock":"finalized","toBlock":"safe"}]`, want: c.logsOf("L3", "L4", "L5")},
		{name: "unknown member ignored", params: `[{` + rng + `,"limit":5,"x":{"y":[1]}}]`, want: all},

		{name: "address", params: `[{` + rng + `,"address":` + serveQ(serveAddrA) + `}]`, want: c.logsOf("L0", "L2", "L3", "L6")},
		{name: "address upper case", params: `[{` + rng + `,"address":` + serveQ(upperAddrA) + `}]`, want: c.logsOf("L0", "L2", "L3", "L6")},
		{name: "address list", params: `[{` + rng + `,"address":[` + serveQ(serveAddrA) + `,` + serveQ(serveAddrC) + `]}]`, want: c.logsOf("L0", "L2", "L3", "L5", "L6")},
		{name: "address list of one", params: `[{` + rng + `,"address":[` + serveQ(serveAddrB) + `]}]`, want: c.logsOf("L1", "L4")},
		{name: "address empty list", params: `[{` + rng + `,"address":[]}]`, want: all},
		{name: "address unknown", params: `[{` + rng + `,"address":` + serveQ(serveAddr("Z")) + `}]`, want: `[]`},

		{name: "topic", params: `[{` + rng + `,"topics":[` + serveQ(serveTopic1) + `]}]`, want: c.logsOf("L0", "L1", "L4", "L6")},
		{name: "topic second position", params: `[{` + rng + `,"topics":[null,` + serveQ(serveTopic2) + `]}]`, want: c.logsOf("L1", "L6")},
		{name: "topic one wildcard", params: `[{` + rng + `,"topics":[null]}]`, want: withTopics},
		{name: "topic empty alternatives", params: `[{` + rng + `,"topics":[[]]}]`, want: withTopics},
		{name: "topics empty", params: `[{` + rng + `,"topics":[]}]`, want: all},
		{name: "topic alternatives", params: `[{` + rng + `,"topics":[[` + serveQ(serveTopic1) + `,` + serveQ(serveTopic3) + `]]}]`, want: c.logsOf("L0", "L1", "L4", "L5", "L6")},
		{name: "topic alternatives with null", params: `[{` + rng + `,"topics":[[` + serveQ(serveTopic2) + `,null]]}]`, want: withTopics},
		// geth stops reading alternatives at a null: what follows is not checked.
		{name: "topic null then garbage", params: `[{` + rng + `,"topics":[[null,"0xzz"]]}]`, want: withTopics},
		{name: "four wildcards", params: `[{` + rng + `,"topics":[null,null,null,null]}]`, want: c.logsOf("L6")},
		{name: "three positions", params: `[{` + rng + `,"topics":[null,null,` + serveQ(serveTopic1) + `]}]`, want: c.logsOf("L3")},
		{name: "topic and alternatives", params: `[{` + rng + `,"topics":[` + serveQ(serveTopic1) + `,[` + serveQ(serveTopic2) + `,` + serveQ(serveTopic3) + `]]}]`, want: c.logsOf("L1", "L4", "L6")},
		{name: "topic many alternatives", params: `[{` + rng + `,"topics":[[` + serveQ(serveHash("x")) + `,` + serveQ(serveHash("y")) + `,` + serveQ(serveHash("z")) + `,` + serveQ(serveHash("w")) + `,"0x` + strings.ToUpper(serveTopic3[2:]) + `",` + serveQ(serveTopic1) + `]]}]`, want: c.logsOf("L0", "L1", "L4", "L5", "L6")},
		{name: "address many", params: `[{` + rng + `,"address":[` + serveQ(serveAddr("x")) + `,` + serveQ(serveAddr("y")) + `,` + serveQ(serveAddr("z")) + `,` + serveQ(serveAddr("w")) + `,` + serveQ(serveAddrC) + `]}]`, want: c.logsOf("L5")},
		{name: "topic upper case", params: `[{` + rng + `,"topics":["0X` + strings.ToUpper(serveTopic3[2:]) + `"]}]`, want: c.logsOf("L5")},
		{name: "address and topic", params: `[{` + rng + `,"address":` + serveQ(serveAddrA) + `,"topics":[` + serveQ(serveTopic2) + `]}]`, want: c.logsOf("L3")},
		{name: "no match", params: `[{` + rng + `,"topics":[` + serveQ(serveTopic4) + `]}]`, want: `[]`},

		{name: "block hash", params: `[{"blockHash":` + serveQ(h12) + `}]`, want: c.logsOf("L3", "L4")},
		{name: "block hash null range", params: `[{"blockHash":` + serveQ(h12) + `,"fromBlock":null}]`, want: c.logsOf("L3", "L4")},
		{name: "block hash filtered", params: `[{"blockHash":` + serveQ(h12) + `,"topics":[null,` + serveQ(serveTopic3) + `]}]`, want: c.logsOf("L3", "L4")},
		{name: "block hash address", params: `[{"blockHash":` + serveQ(h12) + `,"address":` + serveQ(serveAddrB) + `}]`, want: c.logsOf("L4")},
		{name: "block hash no logs", params: `[{"blockHash":` + serveQ(c.blocks["10"].Hash) + `}]`, want: `[]`},

		{name: "block hash unknown", params: `[{"blockHash":` + serveQ(serveHash("nowhere")) + `}]`, forward: true},
		{name: "block hash with range", params: `[{"blockHash":` + serveQ(h12) + `,"fromBlock":"0xc"}]`, forward: true},
		{name: "below window", params: `[{"fromBlock":"0x9","toBlock":"0xb"}]`, forward: true},
		{name: "earliest below window", params: `[{"fromBlock":"earliest"}]`, forward: true},
		{name: "beyond head", params: `[{"fromBlock":"0xd","toBlock":"0xf"}]`, forward: true},
		{name: "future from", params: `[{"fromBlock":"0xf"}]`, forward: true},
		{name: "from after to", params: `[{"fromBlock":"0xd","toBlock":"0xc"}]`, forward: true},
		{name: "latest after to", params: `[{"fromBlock":"latest","toBlock":"0xc"}]`, forward: true},
		{name: "pending", params: `[{"fromBlock":"0xd","toBlock":"pending"}]`, forward: true},
		{name: "leading zero", params: `[{"fromBlock":"0x0d"}]`, forward: true},
		{name: "number not string", params: `[{"fromBlock":13}]`, forward: true},
		{name: "hash as from", params: `[{"fromBlock":` + serveQ(h12) + `}]`, forward: true},
		{name: "address short", params: `[{"address":"0x1234"}]`, forward: true},
		{name: "address no prefix", params: `[{"address":` + serveQ(serveAddrA[2:]+"00") + `}]`, forward: true},
		{name: "address null in list", params: `[{"address":[null]}]`, forward: true},
		{name: "address number", params: `[{"address":5}]`, forward: true},
		{name: "topic short", params: `[{"topics":["0x01"]}]`, forward: true},
		{name: "topic number", params: `[{"topics":[1]}]`, forward: true},
		{name: "topics not a list", params: `[{"topics":` + serveQ(serveTopic1) + `}]`, forward: true},
		{name: "five positions", params: `[{"topics":[null,null,null,null,null]}]`, forward: true},
		{name: "nested alternatives", params: `[{"topics":[[[` + serveQ(serveTopic1) + `]]]}]`, forward: true},
		{name: "folded key", params: `[{"FromBlock":"0xa"}]`, forward: true},
		{name: "escaped key", params: `[{"from\u0042lock":"0xa"}]`, forward: true},
		{name: "unicode key", params: `[{"addreſſ":"0x01"}]`, forward: true},
		{name: "duplicate key", params: `[{"fromBlock":"0xa","fromBlock":"0xb"}]`, forward: true},
		{name: "null filter", params: `[null]`, forward: true},
		{name: "no filter", params: `[]`, forward: true},
		{name: "two filters", params: `[{},{}]`, forward: true},
	}
	for i := range tests {
		tests[i].method = "eth_getLogs"
	}
	runServeCases(t, w, tests)

	t.Run("address limit", func(t *testing.T) {
		list := strings.Repeat(serveQ(serveAddrB)+",", evm.LogQueryLimit) + serveQ(serveAddrA)
		if got, ok := w.Answer(evm.ParseCall("eth_getLogs", json.RawMessage(`[{"address":[`+list+`]}]`))); ok {
			t.Fatalf("answered %d addresses with %.100s; geth refuses more than %d", evm.LogQueryLimit+1, got, evm.LogQueryLimit)
		}
		list = strings.Repeat(serveQ(serveAddrB)+",", evm.LogQueryLimit-1) + serveQ(serveAddrA)
		if got, ok := w.Answer(evm.ParseCall("eth_getLogs", json.RawMessage(`[{"address":[`+list+`]}]`))); !ok || string(got) != c.logsOf("L6") {
			t.Fatalf("%d addresses: got %.100s, %v", evm.LogQueryLimit, got, ok)
		}
	})
}

func TestServeReorg(t *testing.T) {
	c := newServeChain()
	w := newServeWindow(t, 8, serveMain(c), 13, 12)
	if got, _ := w.Answer(evm.ParseCall("eth_blockNumber", nil)); string(got) != `"0xe"` {
		t.Fatalf("blockNumber = %s", got)
	}
	// 13 and 14 are orphaned by a shorter branch: 13b holds tx "tg" with
	// log R0.
	b13b := c.block("b", 13, c.blocks["12"].Hash, 0,
		serveTx{"tg", []serveLog{{"R0", serveAddrC, []string{serveTopic1}}}})
	old13, old14 := c.blocks["13"], c.blocks["14"]
	oldTe, oldTf := c.txHash["te"], c.txHash["tf"]
	err := w.Apply(&Event{Seq: 2, Dropped: []Ref{{14, old14.Hash}, {13, old13.Hash}}, Added: []*evm.Block{b13b}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []serveCase{
		// eth_blockNumber never goes back for a client.
		{name: "blockNumber holds", method: "eth_blockNumber", params: `[]`, want: `"0xe"`},
		{name: "latest is the new head", method: "eth_getBlockByNumber", params: `["latest",false]`, want: c.hashOnly["13b"]},
		{name: "13 is the new block", method: "eth_getBlockByNumber", params: `["0xd",true]`, want: string(b13b.Raw)},
		{name: "14 is gone", method: "eth_getBlockByNumber", params: `["0xe",true]`, want: `null`},
		{name: "old 13 by hash", method: "eth_getBlockByHash", params: `[` + serveQ(old13.Hash) + `,false]`, forward: true},
		{name: "old 14 by hash", method: "eth_getBlockByHash", params: `[` + serveQ(old14.Hash) + `,true]`, forward: true},
		{name: "old 13 receipts by hash", method: "eth_getBlockReceipts", params: `[` + serveQ(old13.Hash) + `]`, forward: true},
		{name: "new 13 receipts", method: "eth_getBlockReceipts", params: `["0xd"]`, want: string(b13b.Receipts)},
		{name: "orphan tx", method: "eth_getTransactionByHash", params: `[` + serveQ(oldTe) + `]`, forward: true},
		{name: "orphan receipt", method: "eth_getTransactionReceipt", params: `[` + serveQ(oldTf) + `]`, forward: true},
		{name: "orphan tx count by hash", method: "eth_getBlockTransactionCountByHash", params: `[` + serveQ(old13.Hash) + `]`, forward: true},
		{name: "orphan logs by hash", method: "eth_getLogs", params: `[{"blockHash":` + serveQ(old14.Hash) + `}]`, forward: true},
		{name: "new tx", method: "eth_getTransactionReceipt", params: `[` + serveQ(c.txHash["tg"]) + `]`, want: c.rcJSON["tg"]},
		{name: "logs over the reorg", method: "eth_getLogs", params: `[{"fromBlock":"0xc","toBlock":"0xd"}]`, want: c.logsOf("L3", "L4", "R0")},
		{name: "logs of latest", method: "eth_getLogs", params: `[{"address":` + serveQ(serveAddrC) + `}]`, want: c.logsOf("R0")},
		{name: "logs to the old head", method: "eth_getLogs", params: `[{"fromBlock":"0xc","toBlock":"0xe"}]`, forward: true},
	}
	runServeCases(t, w, tests)

	b14b := c.block("b", 14, b13b.Hash, 0)
	b15b := c.block("b", 15, b14b.Hash, 0)
	if err := w.Apply(&Event{Seq: 3, Added: []*evm.Block{b14b, b15b}}); err != nil {
		t.Fatal(err)
	}
	runServeCases(t, w, []serveCase{
		{name: "blockNumber moves on", method: "eth_blockNumber", want: `"0xf"`},
		{name: "14 is the new branch", method: "eth_getBlockByNumber", params: `["0xe",false]`, want: c.hashOnly["14b"]},
		{name: "old 14 still gone", method: "eth_getBlockByHash", params: `[` + serveQ(old14.Hash) + `,false]`, forward: true},
	})
}

// TestServeBlockNumberConcurrent: concurrent readers never see
// eth_blockNumber go back while the window grows and reorgs.
func TestServeBlockNumberConcurrent(t *testing.T) {
	c := newServeChain()
	blocks := serveMain(c)
	w := newServeWindow(t, 8, blocks, 0, 0)
	done := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			var last uint64
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				got, ok := w.Answer(evm.ParseCall("eth_blockNumber", nil))
				var s string
				if !ok || json.Unmarshal(got, &s) != nil {
					errs <- fmt.Errorf("blockNumber = %s, %v", got, ok)
					return
				}
				n, _ := strconv.ParseUint(s[2:], 16, 64)
				if n < last {
					errs <- fmt.Errorf("blockNumber went back from %d to %d", last, n)
					return
				}
				last = n
			}
		}()
	}
	canon := blocks
	for i := range 60 {
		// Growth, with every third event a reorg that drops the head.
		ev := &Event{Seq: uint64(i) + 2}
		if tip := canon[len(canon)-1]; i%3 == 2 {
			ev.Dropped = []Ref{{tip.Number, tip.Hash}}
			canon = canon[:len(canon)-1]
		} else {
			b := c.block("c"+strconv.Itoa(i), tip.Number+1, tip.Hash, 0)
			ev.Added = []*evm.Block{b}
			canon = append(canon[:len(canon):len(canon)], b)
		}
		if err := w.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

// TestServeAnswersParse: every answer is valid JSON.
func TestServeAnswersParse(t *testing.T) {
	c := newServeChain()
	w := newServeWindow(t, 8, serveMain(c), 13, 12)
	for _, call := range [][2]string{
		{"eth_getBlockByNumber", `["0xb",false]`},
		{"eth_getBlockByNumber", `["0xb",true]`},
		{"eth_getLogs", `[{"fromBlock":"0xa","toBlock":"0xe","topics":[null]}]`},
		{"eth_getBlockReceipts", `["0xb"]`},
	} {
		got, ok := w.Answer(evm.ParseCall(call[0], json.RawMessage(call[1])))
		if !ok || !json.Valid(got) {
			t.Errorf("%s %s = %.200s, %v: not JSON", call[0], call[1], got, ok)
		}
	}
}

// serveBench is a mainnet-sized head: 150 transactions, 2 logs each.
func serveBench(b *testing.B) (*Window, *serveChain) {
	c := newServeChain()
	parent := serveHash("block 99")
	var blocks []*evm.Block
	for n := uint64(100); n < 104; n++ {
		txs := make([]serveTx, 150)
		for i := range txs {
			name := fmt.Sprintf("b%d-%d", n, i)
			txs[i] = serveTx{name, []serveLog{
				{name + "a", serveAddr(fmt.Sprint("token", i%20)), []string{serveTopic1, serveHash(name + "from"), serveHash(name + "to")}},
				{name + "b", serveAddr(fmt.Sprint("pool", i%7)), []string{serveTopic2}},
			}}
		}
		blk := c.block("", n, parent, 0, txs...)
		parent = blk.Hash
		blocks = append(blocks, blk)
	}
	return newServeWindow(b, 8, blocks, 0, 0), c
}

func benchAnswer(b *testing.B, method, params string) {
	w, _ := serveBench(b)
	p := json.RawMessage(params)
	if _, ok := w.Answer(evm.ParseCall(method, p)); !ok {
		b.Fatalf("%s %s not answered", method, params)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok := w.Answer(evm.ParseCall(method, p)); !ok {
				b.Error("not answered")
				return
			}
		}
	})
}

func BenchmarkAnswerBlockNumber(b *testing.B) {
	benchAnswer(b, "eth_blockNumber", `[]`)
}

func BenchmarkAnswerLatestBlock(b *testing.B) {
	benchAnswer(b, "eth_getBlockByNumber", `["latest",false]`)
}

func BenchmarkAnswerLatestBlockFull(b *testing.B) {
	benchAnswer(b, "eth_getBlockByNumber", `["latest",true]`)
}

func BenchmarkAnswerReceipt(b *testing.B) {
	_, c := serveBench(b)
	benchAnswer(b, "eth_getTransactionReceipt", `[`+serveQ(c.txHash["b102-7"])+`]`)
}

func BenchmarkAnswerLogsLatestAll(b *testing.B) {
	benchAnswer(b, "eth_getLogs", `[{"fromBlock":"latest","toBlock":"latest"}]`)
}

func BenchmarkAnswerLogsLatestAddress(b *testing.B) {
	benchAnswer(b, "eth_getLogs", `[{"fromBlock":"latest","toBlock":"latest","address":`+serveQ(serveAddr("token3"))+`,"topics":[`+serveQ(serveTopic1)+`]}]`)
}

func BenchmarkAnswerLogsLatestNone(b *testing.B) {
	benchAnswer(b, "eth_getLogs", `[{"address":[`+serveQ(serveAddr("nobody"))+`,`+serveQ(serveAddr("noone"))+`]}]`)
}

func BenchmarkAnswerLogsRange(b *testing.B) {
	benchAnswer(b, "eth_getLogs", `[{"fromBlock":"0x64","toBlock":"0x67","topics":[null,null,`+serveQ(serveHash("b101-9to"))+`]}]`)
}

// CanonicalHash knows the blocks the window holds and the parent of the
// lowest, and nothing else.
func TestCanonicalHash(t *testing.T) {
	c := newServeChain()
	blocks := serveMain(c) // 10..14
	below := blocks[0].Parent
	w := newServeWindow(t, 8, blocks, 0, 0)
	for _, tt := range []struct {
		give   uint64
		want   string
		wantOK bool
	}{
		{10, blocks[0].Hash, true},
		{14, blocks[4].Hash, true},
		{9, below, true},
		{8, "", false},
		{15, "", false},
	} {
		if got, ok := w.CanonicalHash(tt.give); got != tt.want || ok != tt.wantOK {
			t.Errorf("CanonicalHash(%d) = %q, %v; want %q, %v", tt.give, got, ok, tt.want, tt.wantOK)
		}
	}
}

// A floor far above the cluster's corroborated head heals down to it; a
// floor a reorg to a shorter chain left, a few blocks above, holds.
func TestMonotonicHeals(t *testing.T) {
	tests := []struct {
		name           string
		floor, n, ceil uint64
		want           uint64
	}{
		{name: "raised", floor: 100, n: 101, ceil: 101, want: 101},
		{name: "holds above n", floor: 100, n: 98, ceil: 98, want: 100},
		{name: "a reorg's few blocks hold", floor: 100, n: 90, ceil: 90, want: 100},
		{name: "a lie heals", floor: 1_000_000_000, n: 100, ceil: 101, want: 101},
		{name: "ceiling unknown", floor: 1_000_000_000, n: 100, ceil: 0, want: 1_000_000_000},
		{name: "at the edge", floor: 100 + maxFloorLead, n: 99, ceil: 100, want: 100 + maxFloorLead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWindow(8)
			w.Monotonic(tt.floor, 0)
			if got := w.Monotonic(tt.n, tt.ceil); got != tt.want {
				t.Errorf("Monotonic(%d, %d) over floor %d = %d, want %d", tt.n, tt.ceil, tt.floor, got, tt.want)
			}
			if got := w.Monotonic(0, 0); got != tt.want {
				t.Errorf("floor after = %d, want %d", got, tt.want)
			}
		})
	}
}
