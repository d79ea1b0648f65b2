package e2e

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/integrity"
	"github.com/venn-gateway/venn/internal/gethtest"
)

// TestIntegrityGethChain checks every block and its receipts of a fresh
// geth --dev chain (transactions of types 0 to 4, logs with 0 to 4 topics,
// a failed transaction, withdrawals lists, Prague headers): each passes
// every check and skips none. Then it changes one field at a time and the
// check that covers it must fail, and name itself.
func TestIntegrityGethChain(t *testing.T) {
	g := gethtest.Start(t, gethtest.Options{})
	c := gethtest.Produce(t, g)

	infos := map[common.Hash]*integrity.BlockInfo{}
	lookup := func(h common.Hash) *integrity.BlockInfo { return infos[h] }
	counts := map[string]int{}
	for _, b := range c.Blocks {
		for _, want := range []evm.BlockRef{{Kind: evm.RefNumber, Number: b.Number}, {Kind: evm.RefHash, Hash: b.Hash}} {
			v := integrity.VerifyBlock(b.Raw, want)
			if len(v.Failed) > 0 || len(v.Skipped) > 0 {
				t.Fatalf("block %d: failed %v, skipped %v", b.Number, v.Failed, v.Skipped)
			}
			for _, ch := range []integrity.Check{integrity.CheckBlockRef, integrity.CheckBlockHash, integrity.CheckTxRoot, integrity.CheckWithdrawalsRoot} {
				if !v.Passed.Has(ch) {
					t.Errorf("block %d: %v not checked", b.Number, ch)
				}
			}
			infos[v.Block.Hash] = v.Block
		}
		// The same block with transaction hashes only: the header still.
		hashOnly := g.MustCall(t, "eth_getBlockByNumber", hex(b.Number), false)
		if v := integrity.VerifyBlock(hashOnly, evm.BlockRef{}); len(v.Failed) > 0 || !v.Passed.Has(integrity.CheckBlockHash) {
			t.Errorf("block %d without transactions: %+v", b.Number, v)
		}
		rv := integrity.VerifyReceipts(b.Receipts, evm.BlockRef{Kind: evm.RefHash, Hash: b.Hash}, lookup)
		if len(rv.Failed) > 0 || len(rv.Skipped) > 0 || !rv.Passed.Has(integrity.CheckReceiptsRoot) {
			t.Fatalf("receipts of %d: %+v", b.Number, rv)
		}
		for _, tx := range b.Txs {
			one := g.MustCall(t, "eth_getTransactionReceipt", tx)
			if v := integrity.VerifyReceipt(one); len(v.Failed) > 0 || !v.Passed.Has(integrity.CheckLogsBloom) {
				t.Errorf("receipt of %s: %+v", tx, v)
			}
		}
		var txs []struct {
			Type string `json:"type"`
		}
		mustUnmarshal(t, member(t, b.Raw, "transactions"), &txs)
		for _, tx := range txs {
			counts[tx.Type]++
		}
	}
	t.Logf("%d blocks verified, transactions by type %v", len(c.Blocks), counts)

	// The block with the most transactions, and the blob transaction's.
	var busy, blob gethtest.Block
	for _, b := range c.Blocks {
		if len(b.Txs) > len(busy.Txs) {
			busy = b
		}
		if strings.Contains(string(b.Raw), `"type":"0x3"`) {
			blob = b
		}
	}
	if len(busy.Txs) < 5 || blob.Raw == nil {
		t.Fatalf("no block with many transactions (%d) or no blob block", len(busy.Txs))
	}

	type m = map[string]any
	tx := func(b m, i int) m { return b["transactions"].([]any)[i].(m) }
	txOfType := func(b m, typ string) m {
		for _, x := range b["transactions"].([]any) {
			if x.(m)["type"] == typ {
				return x.(m)
			}
		}
		t.Fatalf("no transaction of type %s", typ)
		return nil
	}
	other := "0x" + strings.Repeat("5a", 32)
	blockCases := []struct {
		name  string
		block gethtest.Block
		give  func(b m)
		want  []string
	}{
		{"stateRoot", busy, func(b m) { b["stateRoot"] = other }, []string{"block_hash"}},
		{"hash", busy, func(b m) { b["hash"] = other }, []string{"block_hash"}},
		{"timestamp", busy, func(b m) { b["timestamp"] = "0x1" }, []string{"block_hash"}},
		{"requestsHash", busy, func(b m) { b["requestsHash"] = other }, []string{"block_hash"}},
		{"parentBeaconBlockRoot", busy, func(b m) { b["parentBeaconBlockRoot"] = other }, []string{"block_hash"}},
		{"legacy tx value", busy, func(b m) { txOfType(b, "0x0")["value"] = "0x7" }, []string{"transaction_hash", "transactions_root"}},
		{"access list tx gas price", busy, func(b m) { txOfType(b, "0x1")["gasPrice"] = "0x7" }, []string{"transaction_hash", "transactions_root"}},
		{"dynamic fee tx to", busy, func(b m) { txOfType(b, "0x2")["to"] = "0x" + strings.Repeat("01", 20) }, []string{"transaction_hash", "transactions_root"}},
		{"set code tx authority", busy, func(b m) {
			txOfType(b, "0x4")["authorizationList"].([]any)[0].(m)["address"] = "0x" + strings.Repeat("02", 20)
		}, []string{"transaction_hash", "transactions_root"}},
		{"blob tx blob fee", blob, func(b m) { txOfType(b, "0x3")["maxFeePerBlobGas"] = "0x1" }, []string{"transaction_hash", "transactions_root"}},
		{"tx dropped", busy, func(b m) { b["transactions"] = b["transactions"].([]any)[1:] }, []string{"transactions_root"}},
		{"tx hash", busy, func(b m) { tx(b, 0)["hash"] = other }, []string{"transaction_hash"}},
		{"withdrawal added", busy, func(b m) {
			b["withdrawals"] = []any{m{"index": "0x0", "validatorIndex": "0x0", "address": "0x" + strings.Repeat("03", 20), "amount": "0x1"}}
		}, []string{"withdrawals_root"}},
	}
	for _, tc := range blockCases {
		t.Run("block "+tc.name, func(t *testing.T) {
			raw := retouch(t, tc.block.Raw, tc.give)
			v := integrity.VerifyBlock(raw, evm.BlockRef{Kind: evm.RefNumber, Number: tc.block.Number})
			if got := failedChecks(v); !slices.Equal(got, tc.want) {
				t.Fatalf("failed %v, want %v", got, tc.want)
			}
		})
	}

	rc := func(rs []any, i int) m { return rs[i].(m) }
	firstWithLogs := func(rs []any) m {
		for _, r := range rs {
			if len(r.(m)["logs"].([]any)) > 0 {
				return r.(m)
			}
		}
		t.Fatal("no receipt with logs")
		return nil
	}
	receiptCases := []struct {
		name string
		give func(rs []any)
		want []string
	}{
		{"log data", func(rs []any) { firstWithLogs(rs)["logs"].([]any)[0].(m)["data"] = "0x01" }, []string{"receipts_root"}},
		{"log topic", func(rs []any) {
			l := firstWithLogs(rs)["logs"].([]any)[4].(m) // LOG4: four topics
			l["topics"].([]any)[3] = other
		}, []string{"logs_bloom", "receipts_root"}},
		{"status", func(rs []any) { rc(rs, 0)["status"] = "0x0" }, []string{"receipts_root"}},
		{"cumulativeGasUsed", func(rs []any) { rc(rs, len(rs)-1)["cumulativeGasUsed"] = "0x5208" }, []string{"receipts_root"}},
		{"receipt logsBloom", func(rs []any) { rc(rs, 0)["logsBloom"] = "0x" + strings.Repeat("00", 256) }, []string{"logs_bloom"}},
	}
	for _, tc := range receiptCases {
		t.Run("receipts "+tc.name, func(t *testing.T) {
			var rs []any
			if err := json.Unmarshal(busy.Receipts, &rs); err != nil {
				t.Fatal(err)
			}
			tc.give(rs)
			raw, err := json.Marshal(rs)
			if err != nil {
				t.Fatal(err)
			}
			v := integrity.VerifyReceipts(raw, evm.BlockRef{Kind: evm.RefHash, Hash: busy.Hash}, lookup)
			if got := failedChecks(v); !slices.Equal(got, tc.want) {
				t.Fatalf("failed %v, want %v", got, tc.want)
			}
		})
	}
}

// retouch decodes a block, lets fn change it and encodes it again.
func retouch(t *testing.T, raw json.RawMessage, fn func(map[string]any)) json.RawMessage {
	t.Helper()
	var b map[string]any
	mustUnmarshal(t, raw, &b)
	fn(b)
	out, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func failedChecks(v integrity.Verdict) []string {
	var out []string
	for _, f := range v.Failed {
		out = append(out, f.Check.String())
	}
	slices.Sort(out)
	return out
}

// member is one member of a JSON object.
func member(t *testing.T, raw json.RawMessage, key string) json.RawMessage {
	t.Helper()
	var obj map[string]json.RawMessage
	mustUnmarshal(t, raw, &obj)
	return obj[key]
}
