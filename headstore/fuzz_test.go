package headstore

import (
	"encoding/json"
	"testing"

	"github.com/venn-gateway/venn/evm"
)

// FuzzParseBlock feeds arbitrary remote replies to the block parser: it
// must never panic, and what it accepts must index into valid answers.
func FuzzParseBlock(f *testing.F) {
	c := newServeChain()
	for _, b := range serveMain(c) {
		f.Add([]byte(b.Raw), []byte(b.Receipts))
	}
	f.Add([]byte(`{"number":"0x1","hash":"0x`+zeros(64)+`","parentHash":"0x`+zeros(64)+`","transactions":[]}`), []byte(`[]`))
	f.Add([]byte(`{"transactions":[{"hash":1}]}`), []byte(`[{"logs":[{"topics":[null]}]}]`))
	f.Add([]byte(`{`), []byte(`[`))
	f.Fuzz(func(t *testing.T, raw, receipts []byte) {
		if !json.Valid(raw) || !json.Valid(receipts) {
			return // remotes' replies are checked before they get here
		}
		e, err := evm.Split(&evm.Block{Raw: raw, Receipts: receipts})
		if err != nil {
			return
		}
		if !json.Valid(e.HashOnly) {
			t.Fatalf("hash-only form is not JSON: %s", e.HashOnly)
		}
		for _, tx := range e.Txs {
			if !json.Valid(tx) {
				t.Fatalf("transaction is not JSON: %s", tx)
			}
		}
		for _, l := range e.Logs {
			if !json.Valid(l.Raw) {
				t.Fatalf("log is not JSON: %s", l.Raw)
			}
		}
	})
}

// FuzzAnswer sends arbitrary params (valid JSON, as the jrpc decoder
// guarantees) for every served method: no panic, and every answer is
// valid JSON.
func FuzzAnswer(f *testing.F) {
	c := newServeChain()
	w := NewWindow(8)
	if err := w.Reset(&Snapshot{Gen: "g", Seq: 1, Blocks: serveMain(c), Safe: 13, Finalized: 12}); err != nil {
		f.Fatal(err)
	}
	methods := []string{"eth_blockNumber", "eth_getBlockByNumber", "eth_getBlockByHash",
		"eth_getBlockReceipts", "eth_getTransactionReceipt", "eth_getTransactionByHash",
		"eth_getTransactionByBlockNumberAndIndex", "eth_getTransactionByBlockHashAndIndex",
		"eth_getBlockTransactionCountByNumber", "eth_getBlockTransactionCountByHash",
		"eth_getUncleCountByBlockNumber", "eth_getUncleCountByBlockHash", "eth_getLogs"}
	for i := range methods {
		f.Add(uint8(i), []byte(`["latest",true]`))
		f.Add(uint8(i), []byte(`["0xc","0x0"]`))
		f.Add(uint8(i), []byte(`["`+c.blocks["12"].Hash+`",false]`))
	}
	f.Add(uint8(12), []byte(`[{"fromBlock":"0xa","toBlock":"latest","address":["`+serveAddrA+`"],"topics":[null,["`+serveTopic2+`"]]}]`))
	f.Add(uint8(12), []byte(`[{"blockHash":"`+c.blocks["11"].Hash+`","topics":[[]]}]`))
	f.Fuzz(func(t *testing.T, m uint8, params []byte) {
		if !json.Valid(params) {
			return
		}
		method := methods[int(m)%len(methods)]
		res, ok := w.Answer(evm.ParseCall(method, params))
		if ok && !json.Valid(res) {
			t.Fatalf("%s %s answered invalid JSON: %.200s", method, params, res)
		}
	})
}

func zeros(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = '0'
	}
	return string(b)
}
