package blockstore

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jsonscan"
)

// fuzzMethods are the methods the store answers, and one it does not.
var fuzzMethods = []string{"eth_getBlockByNumber", "eth_getBlockByHash", "eth_getBlockReceipts",
	"eth_getTransactionByHash", "eth_getTransactionReceipt", "eth_getTransactionByBlockNumberAndIndex",
	"eth_getTransactionByBlockHashAndIndex", "eth_getBlockTransactionCountByNumber",
	"eth_getBlockTransactionCountByHash", "eth_getUncleCountByBlockNumber",
	"eth_getUncleCountByBlockHash", "eth_getLogs", "eth_chainId"}

// FuzzAnswer sends arbitrary params (valid JSON, as the jrpc decoder
// guarantees) for every method to a store holding a small chain: nothing
// panics, no Postgres error, every answer is valid JSON, and a request is
// read only when its params are what geth reads (checked here by
// properties geth's reader has).
func FuzzAnswer(f *testing.F) {
	p, _ := open(f)
	c := p.Chain(1, "one")
	blocks := synthChain(f, "a", 0, 5, 4)
	mustPut(f, c, blocks...)
	b2 := blocks[2]
	tx := jsonscan.Member(jsonscan.Member(b2.Raw, "transactions")[1:], "hash")
	for i := range fuzzMethods {
		m := uint8(i)
		f.Add(m, []byte(`["0x2",true]`))
		f.Add(m, []byte(`["0x2","0x1"]`))
		f.Add(m, []byte(`["`+b2.Hash+`",false]`))
		f.Add(m, []byte(`["`+b2.Hash+`"]`))
		f.Add(m, []byte(`[`+string(tx)+`]`))
		f.Add(m, []byte(`[{"blockHash":"`+b2.Hash+`"}]`))
		f.Add(m, []byte(`[{"blockNumber":"0x2"}]`))
		f.Add(m, []byte(`["latest"]`))
	}
	f.Add(uint8(11), []byte(`[{"fromBlock":"0x0","toBlock":"0x5","address":["`+synthAddr(1)+`"],"topics":[null,["`+synthTopic(101)+`"]]}]`))
	f.Add(uint8(11), []byte(`[{"fromBlock":"0x0","toBlock":"0x5","topics":[[],null,null]}]`))
	f.Add(uint8(11), []byte(`[{"blockHash":"`+b2.Hash+`","topics":[["`+synthTopic(1)+`",null]]}]`))
	f.Add(uint8(11), []byte(`[{"fromBlock":"0x5","toBlock":"0x0"}]`))
	f.Fuzz(func(t *testing.T, m uint8, params []byte) {
		if !json.Valid(params) {
			return
		}
		method := fuzzMethods[int(m)%len(fuzzMethods)]
		res, ok, err := c.Answer(context.Background(), evm.ParseCall(method, params))
		if err != nil {
			t.Fatalf("%s %s: %v", method, params, err)
		}
		if ok && !json.Valid(res) {
			t.Fatalf("%s %s answered invalid JSON: %.300s", method, params, res)
		}
		if !ok {
			return
		}
		// Whatever was read, geth reads from a params array with no
		// escapes in the values the store keys on.
		if bytes.IndexByte(params, '[') < 0 {
			t.Fatalf("%s %s: answered params that are not an array", method, params)
		}
		if strings.Contains(method, "Number") && bytes.Contains(params, []byte(`"latest"`)) && !bytes.Contains(params, []byte(`"0x`)) {
			t.Fatalf("%s %s: answered a tag", method, params)
		}
	})
}

// FuzzCodec: every JSON value squeezed with a dict of its own strings
// expands back to the same bytes, and squeezing only ever shortens it;
// expanding damaged bytes fails without panicking.
func FuzzCodec(f *testing.F) {
	for _, b := range synthChain(f, "a", 0, 1, 3) {
		f.Add([]byte(b.Raw), uint8(3))
		f.Add([]byte(b.Receipts), uint8(7))
	}
	f.Add([]byte(`{"a":"x","x":"a","b":["a","\"a",1]}`), uint8(0))
	f.Add([]byte("{\"a\" :\t\"b\"}"), uint8(1))
	f.Add([]byte("{\"logsBloom\":\"0x"+strings.Repeat("00", 100)+"01"+strings.Repeat("00", 155)+"\"}"), uint8(2))
	f.Add([]byte("\x0e\xff\xff\xff\xff\x0f"), uint8(0))
	f.Fuzz(func(t *testing.T, raw []byte, pick uint8) {
		var none dict
		_, _ = expand(nil, raw, &none)
		if !json.Valid(raw) {
			return
		}
		// The dict: string values found in raw, and some that are not.
		var d dict
		s := 0
		for i := 0; i < len(raw) && s < nSlots; i++ {
			if raw[i] != '"' {
				continue
			}
			end := jsonscan.String(raw, i)
			if (i+int(pick))%3 != 0 {
				d[s] = raw[i:end]
				s++
			}
			i = end - 1
		}
		if s < nSlots {
			d[s] = []byte(`"` + evm.Quantity(uint64(pick)) + `"`)
		}
		sq, err := squeeze(nil, raw, &d)
		if err != nil {
			t.Fatalf("squeeze(%q): %v", raw, err)
		}
		if len(sq) > len(raw) {
			t.Fatalf("squeeze grew %q to %q", raw, sq)
		}
		if got, err := expand(nil, sq, &d); err != nil || !bytes.Equal(got, raw) {
			t.Fatalf("expand(squeeze(%q)) = %q, %v", raw, got, err)
		}
	})
}
