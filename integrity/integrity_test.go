package integrity

import (
	"crypto/ecdsa"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/testkit"
)

// The fixtures in testdata/geth are blocks and receipts of a geth v1.17.10
// --dev chain (Prague), as its RPC wrote them: genesis, a block of a
// legacy, an access-list, a set-code and four dynamic-fee transactions
// (logs with 0 to 4 topics, a failed transaction), a blob transaction's
// block and an empty block. e2e/integrity_test.go checks a whole fresh chain.
var gethBlocks = []string{"0x0", "0x3", "0x4", "0x1e"}

func fixture(t *testing.T, name string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "geth", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// byHash is a block lookup that knows one block.
func byHash(b *BlockInfo) func(common.Hash) *BlockInfo {
	return func(h common.Hash) *BlockInfo {
		if b != nil && h == b.Hash {
			return b
		}
		return nil
	}
}

func failed(v Verdict) []string {
	var out []string
	for _, f := range v.Failed {
		out = append(out, f.Check.String())
	}
	slices.Sort(out)
	return out
}

func skipped(v Verdict) []string {
	var out []string
	for _, s := range v.Skipped {
		out = append(out, s.Check.String()+"/"+string(s.Reason))
	}
	slices.Sort(out)
	return out
}

func passed(v Verdict) []string {
	var out []string
	for _, c := range AllChecks() {
		if v.Passed.Has(c) {
			out = append(out, c.String())
		}
	}
	return out
}

type obj = map[string]any

func txOf(m obj, i int) obj        { return m["transactions"].([]any)[i].(obj) }
func logOf(rs []any, r, l int) obj { return rs[r].(obj)["logs"].([]any)[l].(obj) }

func TestVerifyGethBlocks(t *testing.T) {
	for _, n := range gethBlocks {
		t.Run(n, func(t *testing.T) {
			raw := fixture(t, "block-"+n)
			var b struct {
				Hash   string `json:"hash"`
				Number string `json:"number"`
				Txs    []any  `json:"transactions"`
			}
			if err := json.Unmarshal(raw, &b); err != nil {
				t.Fatal(err)
			}
			for _, want := range []evm.BlockRef{{}, {Kind: evm.RefHash, Hash: b.Hash}, {Kind: evm.RefNumber, Number: hexutil.MustDecodeUint64(b.Number)}} {
				v := VerifyBlock(raw, want)
				if len(v.Failed) > 0 || len(v.Skipped) > 0 {
					t.Fatalf("want %+v: failed %v, skipped %v", want, v.Failed, v.Skipped)
				}
				for _, c := range []Check{CheckBlockHash, CheckTxRoot, CheckWithdrawalsRoot} {
					if !v.Passed.Has(c) {
						t.Errorf("%v not passed: %v", c, passed(v))
					}
				}
				if len(b.Txs) > 0 && !v.Passed.Has(CheckTxHash) {
					t.Errorf("transaction hashes not checked: %v", passed(v))
				}
				if want.Kind != evm.RefNone && !v.Passed.Has(CheckBlockRef) {
					t.Errorf("want %+v: block ref not checked", want)
				}
			}
			blk := VerifyBlock(raw, evm.BlockRef{}).Block
			rv := VerifyReceipts(fixture(t, "receipts-"+n), evm.BlockRef{Kind: evm.RefHash, Hash: b.Hash}, byHash(blk))
			if len(rv.Failed) > 0 || len(rv.Skipped) > 0 {
				t.Fatalf("receipts: failed %v, skipped %v", rv.Failed, rv.Skipped)
			}
			if !rv.Passed.Has(CheckReceiptsRoot) || !rv.Passed.Has(CheckBlockRef) {
				t.Errorf("receipts passed %v", passed(rv))
			}
		})
	}
}

func TestVerifyBlockTampered(t *testing.T) {
	otherHash := "0x" + strings.Repeat("ab", 32)
	tests := []struct {
		name  string
		block string
		want  evm.BlockRef
		give  func(m obj)
		fails []string
	}{
		{name: "stateRoot", block: "0x3", give: func(m obj) { m["stateRoot"] = otherHash }, fails: []string{"block_hash"}},
		{name: "hash", block: "0x3", give: func(m obj) { m["hash"] = otherHash }, fails: []string{"block_hash"}},
		{name: "gasUsed", block: "0x3", give: func(m obj) { m["gasUsed"] = "0x1" }, fails: []string{"block_hash"}},
		{name: "transactionsRoot", block: "0x3", give: func(m obj) { m["transactionsRoot"] = otherHash },
			fails: []string{"block_hash", "transactions_root"}},
		{name: "legacy tx value", block: "0x3", give: func(m obj) { txOf(m, 0)["value"] = "0x1" },
			fails: []string{"transaction_hash", "transactions_root"}},
		{name: "access list tx storage key", block: "0x3", give: func(m obj) {
			al := txOf(m, 1)["accessList"].([]any)[0].(obj)
			al["storageKeys"] = []any{otherHash}
		}, fails: []string{"transaction_hash", "transactions_root"}},
		{name: "dynamic fee tx input", block: "0x3", give: func(m obj) { txOf(m, 2)["input"] = "0x01" },
			fails: []string{"transaction_hash", "transactions_root"}},
		{name: "set code tx authorization", block: "0x3", give: func(m obj) {
			txOf(m, 3)["authorizationList"].([]any)[0].(obj)["nonce"] = "0x5"
		}, fails: []string{"transaction_hash", "transactions_root"}},
		{name: "tx hash", block: "0x3", give: func(m obj) { txOf(m, 4)["hash"] = otherHash }, fails: []string{"transaction_hash"}},
		{name: "tx dropped", block: "0x3", give: func(m obj) {
			m["transactions"] = m["transactions"].([]any)[1:]
		}, fails: []string{"transactions_root"}},
		{name: "txs reordered", block: "0x3", give: func(m obj) {
			txs := m["transactions"].([]any)
			txs[0], txs[1] = txs[1], txs[0]
		}, fails: []string{"transactions_root"}},
		{name: "blob tx versioned hash", block: "0x4", give: func(m obj) {
			txOf(m, 0)["blobVersionedHashes"] = []any{"0x01" + strings.Repeat("00", 31)}
		}, fails: []string{"transaction_hash", "transactions_root"}},
		{name: "blob tx fee cap", block: "0x4", give: func(m obj) { txOf(m, 0)["maxFeePerBlobGas"] = "0x2" },
			fails: []string{"transaction_hash", "transactions_root"}},
		{name: "withdrawal added", block: "0x3", give: func(m obj) {
			m["withdrawals"] = []any{obj{"index": "0x0", "validatorIndex": "0x1", "address": "0x" + strings.Repeat("11", 20), "amount": "0x64"}}
		}, fails: []string{"withdrawals_root"}},
		{name: "other number", block: "0x3", want: evm.BlockRef{Kind: evm.RefNumber, Number: 4}, give: func(obj) {},
			fails: []string{"block_ref"}},
		{name: "other hash", block: "0x3", want: evm.BlockRef{Kind: evm.RefHash, Hash: otherHash}, give: func(obj) {},
			fails: []string{"block_ref"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := VerifyBlock(testkit.EditJSON(t, fixture(t, "block-"+tt.block), tt.give), tt.want)
			if got := failed(v); !slices.Equal(got, tt.fails) {
				t.Fatalf("failed %v, want %v (%v)", got, tt.fails, v.Failed)
			}
			if len(v.Skipped) > 0 {
				t.Errorf("skipped %v", v.Skipped)
			}
			if v.Err() == nil {
				t.Error("Err() is nil")
			}
		})
	}
}

// Every header member is covered by the hash: a remote can't change one
// unseen.
func TestVerifyBlockEveryHeaderField(t *testing.T) {
	raw := fixture(t, "block-0x3")
	var m obj
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for key := range headerKeys {
		val, ok := m[key].(string)
		if !ok {
			continue // a fork geth's dev chain does not run (Amsterdam's)
		}
		seen++
		b, err := hexutil.Decode(val)
		var changed string
		switch {
		case err == nil && len(b) > 0 && key != "difficulty":
			b[len(b)-1] ^= 1 // the same length: hashes, addresses, nonce, bloom
			changed = hexutil.Encode(b)
		default:
			n, err := hexutil.DecodeBig(val)
			if err != nil {
				t.Fatalf("%s: %q", key, val)
			}
			changed = hexutil.EncodeBig(n.Add(n, big.NewInt(1)))
		}
		v := VerifyBlock(testkit.EditJSON(t, raw, func(m obj) { m[key] = changed }), evm.BlockRef{})
		if !slices.Contains(failed(v), "block_hash") {
			t.Errorf("%s %s -> %s: block_hash not failed: %v", key, val, changed, failed(v))
		}
		// And a member dropped: the hash can't be rebuilt, or is another.
		// (A zero fork field between two others encodes as if absent: the
		// same header.)
		v = VerifyBlock(testkit.EditJSON(t, raw, func(m obj) { delete(m, key) }), evm.BlockRef{})
		if v.Passed.Has(CheckBlockHash) && val != "0x0" {
			t.Errorf("%s dropped: block_hash passed", key)
		}
	}
	if seen < 21 {
		t.Errorf("only %d header members in a Prague block", seen)
	}
}

func TestVerifyReceiptsTampered(t *testing.T) {
	block := VerifyBlock(fixture(t, "block-0x3"), evm.BlockRef{}).Block
	otherHash := "0x" + strings.Repeat("ab", 32)
	tests := []struct {
		name  string
		want  evm.BlockRef
		give  func(rs []any)
		fails []string
	}{
		{name: "log data", give: func(rs []any) { logOf(rs, 0, 0)["data"] = "0x01" }, fails: []string{"receipts_root"}},
		{name: "log topic", give: func(rs []any) { logOf(rs, 0, 1)["topics"].([]any)[0] = otherHash },
			fails: []string{"logs_bloom", "receipts_root"}},
		{name: "log address", give: func(rs []any) { logOf(rs, 1, 0)["address"] = "0x" + strings.Repeat("22", 20) },
			fails: []string{"logs_bloom", "receipts_root"}},
		{name: "log dropped", give: func(rs []any) {
			rc := rs[0].(obj)
			rc["logs"] = rc["logs"].([]any)[:1]
		}, fails: []string{"logs_bloom", "receipts_root"}},
		{name: "status", give: func(rs []any) { rs[5].(obj)["status"] = "0x1" }, fails: []string{"receipts_root"}},
		{name: "cumulativeGasUsed", give: func(rs []any) { rs[2].(obj)["cumulativeGasUsed"] = "0x1" }, fails: []string{"receipts_root"}},
		{name: "type", give: func(rs []any) { rs[2].(obj)["type"] = "0x1" }, fails: []string{"receipts_root"}},
		{name: "receipt logsBloom", give: func(rs []any) { rs[4].(obj)["logsBloom"] = "0x" + strings.Repeat("ff", 256) },
			fails: []string{"logs_bloom"}},
		{name: "receipts swapped", give: func(rs []any) { rs[5], rs[6] = rs[6], rs[5] }, fails: []string{"receipts_root"}},
		{name: "other block", want: evm.BlockRef{Kind: evm.RefHash, Hash: otherHash}, give: func([]any) {},
			fails: []string{"block_ref"}},
		{name: "other number", want: evm.BlockRef{Kind: evm.RefNumber, Number: 9}, give: func([]any) {},
			fails: []string{"block_ref"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := testkit.EditJSON(t, fixture(t, "receipts-0x3"), tt.give)
			v := VerifyReceipts(raw, tt.want, byHash(block))
			if got := failed(v); !slices.Equal(got, tt.fails) {
				t.Fatalf("failed %v, want %v (%v)", got, tt.fails, v.Failed)
			}
		})
	}
}

// A receipts list that lost a receipt: the root, and when it had logs the
// bloom, no longer match.
func TestVerifyReceiptsShort(t *testing.T) {
	block := VerifyBlock(fixture(t, "block-0x3"), evm.BlockRef{}).Block
	var rs []json.RawMessage
	if err := json.Unmarshal(fixture(t, "receipts-0x3"), &rs); err != nil {
		t.Fatal(err)
	}
	short, _ := json.Marshal(rs[:len(rs)-1])
	v := VerifyReceipts(short, evm.BlockRef{}, byHash(block))
	if !slices.Contains(failed(v), "receipts_root") {
		t.Fatalf("failed %v", failed(v))
	}
	// None at all, for a block with transactions, asked for by hash.
	v = VerifyReceipts(json.RawMessage(`[]`), evm.BlockRef{Kind: evm.RefHash, Hash: block.Hash.Hex()}, byHash(block))
	if !slices.Contains(failed(v), "receipts_root") {
		t.Fatalf("empty list: failed %v", failed(v))
	}
}

// What can't be encoded is skipped and counted, and the rest still checked.
func TestVerifySkipsWhatItCannotEncode(t *testing.T) {
	deposit := obj{ // an OP Stack deposit transaction, as op-geth writes it
		"type": "0x7e", "sourceHash": "0x" + strings.Repeat("01", 32), "from": "0x" + strings.Repeat("de", 20),
		"to": "0x" + strings.Repeat("42", 20), "mint": "0x0", "value": "0x0", "gas": "0xf4240",
		"isSystemTx": false, "input": "0x098999be", "nonce": "0x1", "hash": "0x" + strings.Repeat("77", 32),
		"depositReceiptVersion": "0x1", "v": "0x0", "r": "0x0", "s": "0x0", "gasPrice": "0x0",
	}
	unsigned := obj{ // Polygon's state-sync transaction: legacy, unsigned
		"type": "0x0", "nonce": "0x0", "gasPrice": "0x0", "gas": "0x0", "to": "0x" + strings.Repeat("00", 20),
		"value": "0x0", "input": "0x", "v": "0x0", "r": "0x0", "s": "0x0", "hash": "0x" + strings.Repeat("55", 32),
	}
	tests := []struct {
		name    string
		block   string
		give    func(m obj)
		skipped []string
		passed  []string
	}{
		{name: "unknown header member", block: "0x3", give: func(m obj) { m["l1BlockNumber"] = "0x10" },
			skipped: []string{"block_hash/unknown_field"},
			passed:  []string{"transaction_hash", "transactions_root", "withdrawals_root"}},
		{name: "header member missing", block: "0x3", give: func(m obj) { delete(m, "mixHash") },
			skipped: []string{"block_hash/missing_field"},
			passed:  []string{"transaction_hash", "transactions_root", "withdrawals_root"}},
		{name: "header member undecodable", block: "0x3", give: func(m obj) { m["gasUsed"] = "0x0001" },
			skipped: []string{"block_hash/undecodable"},
			passed:  []string{"transaction_hash", "transactions_root", "withdrawals_root"}},
		{name: "deposit transaction", block: "0x3", give: func(m obj) {
			m["transactions"] = append([]any{deposit}, m["transactions"].([]any)...)
		}, skipped: []string{"transaction_hash/unknown_type", "transactions_root/unknown_type"},
			passed: []string{"block_hash", "withdrawals_root"}},
		{name: "unsigned transaction", block: "0x3", give: func(m obj) {
			m["transactions"] = append(m["transactions"].([]any), unsigned)
		}, skipped: []string{"transaction_hash/unsigned", "transactions_root/unsigned"},
			passed: []string{"block_hash", "withdrawals_root"}},
		{name: "unknown transaction member", block: "0x3", give: func(m obj) { txOf(m, 0)["feeCurrency"] = "0x" + strings.Repeat("cc", 20) },
			skipped: []string{"transaction_hash/unknown_field", "transactions_root/unknown_field"},
			passed:  []string{"block_hash", "withdrawals_root"}},
		{name: "transaction undecodable", block: "0x3", give: func(m obj) { delete(txOf(m, 2), "maxFeePerGas") },
			skipped: []string{"transaction_hash/undecodable", "transactions_root/undecodable"},
			passed:  []string{"block_hash", "withdrawals_root"}},
		{name: "hashes only", block: "0x3", give: func(m obj) {
			txs := m["transactions"].([]any)
			for i := range txs {
				txs[i] = txs[i].(obj)["hash"]
			}
		}, skipped: []string{"transaction_hash/hash_only", "transactions_root/hash_only"},
			passed: []string{"block_hash", "withdrawals_root"}},
		{name: "no transactions member", block: "0x3", give: func(m obj) { delete(m, "transactions") },
			skipped: []string{"transactions_root/missing_field"},
			passed:  []string{"block_hash", "withdrawals_root"}},
		{name: "withdrawal member missing", block: "0x3", give: func(m obj) { m["withdrawals"] = []any{obj{"index": "0x0"}} },
			skipped: []string{"withdrawals_root/missing_field"},
			passed:  []string{"block_hash", "transaction_hash", "transactions_root"}},
		{name: "forks written as null", block: "0x3", give: func(m obj) {
			m["blockAccessListHash"], m["slotNumber"] = nil, nil
		}, passed: []string{"block_hash", "transaction_hash", "transactions_root", "withdrawals_root"}},
		{name: "node extras", block: "0x3", give: func(m obj) {
			m["totalDifficulty"], m["author"] = "0x1", m["miner"]
			txOf(m, 0)["publicKey"] = "0x" + strings.Repeat("04", 64)
		}, passed: []string{"block_hash", "transaction_hash", "transactions_root", "withdrawals_root"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := VerifyBlock(testkit.EditJSON(t, fixture(t, "block-"+tt.block), tt.give), evm.BlockRef{})
			if len(v.Failed) > 0 {
				t.Fatalf("failed %v", v.Failed)
			}
			if got := skipped(v); !slices.Equal(got, tt.skipped) {
				t.Errorf("skipped %v, want %v", got, tt.skipped)
			}
			if got := passed(v); !slices.Equal(got, tt.passed) {
				t.Errorf("passed %v, want %v", got, tt.passed)
			}
		})
	}

	t.Run("nothing to check", func(t *testing.T) {
		for _, raw := range []string{`null`, `"0x1"`, `[]`, ``} {
			if v := VerifyBlock(json.RawMessage(raw), evm.BlockRef{Kind: evm.RefNumber, Number: 1}); len(v.Failed)+len(v.Skipped) > 0 || v.Passed != 0 || v.Block != nil {
				t.Errorf("%s: %+v", raw, v)
			}
			if v := VerifyReceipts(json.RawMessage(raw), evm.BlockRef{}, nil); len(v.Failed)+len(v.Skipped) > 0 || v.Passed != 0 {
				t.Errorf("receipts %s: %+v", raw, v)
			}
		}
	})
}

func TestVerifyReceiptsSkips(t *testing.T) {
	raw := fixture(t, "receipts-0x3")
	block := VerifyBlock(fixture(t, "block-0x3"), evm.BlockRef{}).Block
	untrusted := VerifyBlock(testkit.EditJSON(t, fixture(t, "block-0x3"), func(m obj) { m["l1BlockNumber"] = "0x1" }), evm.BlockRef{}).Block
	polygon := VerifyBlock(testkit.EditJSON(t, fixture(t, "block-0x3"), func(m obj) {
		m["transactions"] = append(m["transactions"].([]any), obj{"type": "0x0", "nonce": "0x0", "gasPrice": "0x0",
			"gas": "0x0", "to": "0x" + strings.Repeat("00", 20), "value": "0x0", "input": "0x", "v": "0x0", "r": "0x0", "s": "0x0"})
	}), evm.BlockRef{}).Block
	depositReceipt := obj{"type": "0x7e", "status": "0x1", "cumulativeGasUsed": "0x1", "logs": []any{},
		"logsBloom": "0x" + strings.Repeat("00", 256), "blockHash": block.Hash.Hex(), "depositNonce": "0x1"}
	tests := []struct {
		name    string
		raw     json.RawMessage
		block   *BlockInfo
		skipped []string
		passed  []string
	}{
		{name: "block unknown", raw: raw, block: nil, skipped: []string{"receipts_root/no_block"}, passed: []string{"logs_bloom"}},
		{name: "header unverified", raw: raw, block: untrusted, skipped: []string{"receipts_root/header_unverified"}, passed: []string{"logs_bloom"}},
		{name: "unsigned transaction in block", raw: raw, block: polygon, skipped: []string{"receipts_root/unsigned"}, passed: []string{"logs_bloom"}},
		// Its logs (none) still count in the block's bloom.
		{name: "deposit receipt", raw: testkit.EditJSON(t, raw, func(rs []any) { rs[0] = depositReceipt }), block: block,
			skipped: []string{"receipts_root/unknown_type"}, passed: []string{"logs_bloom"}},
		{name: "receipt without status", raw: testkit.EditJSON(t, raw, func(rs []any) { delete(rs[1].(obj), "status") }), block: block,
			skipped: []string{"logs_bloom/missing_field", "receipts_root/missing_field"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lookup := func(common.Hash) *BlockInfo { return tt.block }
			v := VerifyReceipts(tt.raw, evm.BlockRef{}, lookup)
			if len(v.Failed) > 0 {
				t.Fatalf("failed %v", v.Failed)
			}
			if got := skipped(v); !slices.Equal(got, tt.skipped) {
				t.Errorf("skipped %v, want %v", got, tt.skipped)
			}
			if got := passed(v); !slices.Equal(got, tt.passed) {
				t.Errorf("passed %v, want %v", got, tt.passed)
			}
		})
	}
}

func TestVerifyReceipt(t *testing.T) {
	var rs []json.RawMessage
	if err := json.Unmarshal(fixture(t, "receipts-0x3"), &rs); err != nil {
		t.Fatal(err)
	}
	v := VerifyReceipt(rs[0])
	if len(v.Failed) > 0 || !v.Passed.Has(CheckLogsBloom) || !slices.Equal(skipped(v), []string{"receipts_root/single_receipt"}) {
		t.Fatalf("%+v", v)
	}
	bad := testkit.EditJSON(t, rs[0], func(m obj) { m["logs"].([]any)[1].(obj)["address"] = "0x" + strings.Repeat("33", 20) })
	if v := VerifyReceipt(bad); !slices.Equal(failed(v), []string{"logs_bloom"}) {
		t.Fatalf("tampered: %+v", v)
	}
}

// Headers and receipts of every fork go-ethereum v1.17.10 knows, built with
// its own types and written as its RPC writes them (absent members for
// forks a header lacks) and as newHeads does (null).
func TestVerifyEveryFork(t *testing.T) {
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	u64 := func(n uint64) *uint64 { return &n }
	h := func(b byte) *common.Hash { x := common.Hash{b}; return &x }
	forks := []struct {
		name string
		set  func(h *types.Header)
	}{
		{name: "frontier", set: func(*types.Header) {}},
		{name: "london", set: func(hd *types.Header) { hd.BaseFee = big.NewInt(7) }},
		{name: "shanghai", set: func(hd *types.Header) { hd.BaseFee = big.NewInt(7); hd.WithdrawalsHash = h(1) }},
		{name: "cancun", set: func(hd *types.Header) {
			hd.BaseFee, hd.WithdrawalsHash, hd.BlobGasUsed, hd.ExcessBlobGas, hd.ParentBeaconRoot = big.NewInt(7), h(1), u64(131072), u64(0), h(2)
		}},
		{name: "prague", set: func(hd *types.Header) {
			hd.BaseFee, hd.WithdrawalsHash, hd.BlobGasUsed, hd.ExcessBlobGas, hd.ParentBeaconRoot = big.NewInt(7), h(1), u64(0), u64(5), h(2)
			hd.RequestsHash = &types.EmptyRequestsHash
		}},
		{name: "amsterdam", set: func(hd *types.Header) {
			hd.BaseFee, hd.WithdrawalsHash, hd.BlobGasUsed, hd.ExcessBlobGas, hd.ParentBeaconRoot = big.NewInt(7), h(1), u64(0), u64(5), h(2)
			hd.RequestsHash, hd.BlockAccessListHash, hd.SlotNumber = &types.EmptyRequestsHash, h(3), u64(99)
		}},
	}
	for _, f := range forks {
		t.Run(f.name, func(t *testing.T) {
			txs, receipts := everyTxType(t, key, f.name == "frontier")
			hd := &types.Header{ParentHash: common.Hash{9}, Coinbase: common.Address{8}, Root: common.Hash{7},
				Difficulty: big.NewInt(131072), Number: big.NewInt(1_000_000), GasLimit: 30_000_000, GasUsed: 21000 * uint64(len(txs)),
				Time: 1_700_000_000, Extra: []byte("venn"), MixDigest: common.Hash{6}, Nonce: types.EncodeNonce(42)}
			f.set(hd)
			var ws []*types.Withdrawal
			if hd.WithdrawalsHash != nil {
				ws = []*types.Withdrawal{{Index: 1, Validator: 2, Address: common.Address{5}, Amount: 3}, {Index: 2, Validator: 7, Amount: 1}}
			}
			if hd.BlobGasUsed == nil {
				txs, receipts = txs[:3], receipts[:3] // no blob or set-code transactions before Cancun/Prague
			}
			blk := types.NewBlock(hd, &types.Body{Transactions: txs, Withdrawals: ws}, receipts, &listHasher{})
			for _, style := range []string{"rpc", "newHeads"} {
				raw := rpcBlock(t, blk, style == "newHeads")
				v := VerifyBlock(raw, evm.BlockRef{Kind: evm.RefNumber, Number: 1_000_000})
				if len(v.Failed) > 0 || len(v.Skipped) > 0 {
					t.Fatalf("%s: failed %v, skipped %v", style, v.Failed, v.Skipped)
				}
				want := []string{"block_ref", "block_hash", "transaction_hash", "transactions_root"}
				if ws != nil {
					want = append(want, "withdrawals_root")
				}
				if got := passed(v); !slices.Equal(got, want) {
					t.Errorf("%s: passed %v, want %v", style, got, want)
				}
				rraw, err := json.Marshal(withBlock(receipts, blk.Hash()))
				if err != nil {
					t.Fatal(err)
				}
				rv := VerifyReceipts(rraw, evm.BlockRef{Kind: evm.RefHash, Hash: blk.Hash().Hex()}, byHash(v.Block))
				if len(rv.Failed) > 0 || len(rv.Skipped) > 0 || !rv.Passed.Has(CheckReceiptsRoot) || !rv.Passed.Has(CheckLogsBloom) {
					t.Fatalf("receipts: %+v", rv)
				}
			}
		})
	}
}

// everyTxType signs one transaction of each type (legacy, access list,
// dynamic fee, blob, set code) with receipts that carry logs; preByzantium
// receipts carry a state root instead of a status.
func everyTxType(t *testing.T, key *ecdsa.PrivateKey, preByzantium bool) ([]*types.Transaction, []*types.Receipt) {
	t.Helper()
	chainID := big.NewInt(1)
	signer := types.NewPragueSigner(chainID)
	to := common.Address{0x42}
	auth, err := types.SignSetCode(key, types.SetCodeAuthorization{ChainID: *uint256.NewInt(1), Address: to, Nonce: 9})
	if err != nil {
		t.Fatal(err)
	}
	data := []types.TxData{
		&types.LegacyTx{Nonce: 0, GasPrice: big.NewInt(10), Gas: 21000, To: &to, Value: big.NewInt(1), Data: []byte{1}},
		&types.AccessListTx{ChainID: chainID, Nonce: 1, GasPrice: big.NewInt(10), Gas: 30000, To: &to,
			AccessList: types.AccessList{{Address: to, StorageKeys: []common.Hash{{1}}}}},
		&types.DynamicFeeTx{ChainID: chainID, Nonce: 2, GasTipCap: big.NewInt(1), GasFeeCap: big.NewInt(10), Gas: 40000, Value: big.NewInt(5), Data: []byte("create")},
		&types.BlobTx{ChainID: uint256.NewInt(1), Nonce: 3, GasTipCap: uint256.NewInt(1), GasFeeCap: uint256.NewInt(10), Gas: 50000,
			To: to, BlobFeeCap: uint256.NewInt(3), BlobHashes: []common.Hash{{0x01, 2}}},
		&types.SetCodeTx{ChainID: uint256.NewInt(1), Nonce: 4, GasTipCap: uint256.NewInt(1), GasFeeCap: uint256.NewInt(10), Gas: 60000,
			To: to, AuthList: []types.SetCodeAuthorization{auth}},
	}
	var (
		txs []*types.Transaction
		rs  []*types.Receipt
		cum uint64
	)
	for i, d := range data {
		tx, err := types.SignNewTx(key, signer, d)
		if err != nil {
			t.Fatal(err)
		}
		cum += 21000
		r := &types.Receipt{Type: tx.Type(), Status: uint64(i % 2), CumulativeGasUsed: cum, TxHash: tx.Hash(),
			Logs: []*types.Log{{Address: common.Address{byte(i)}, Topics: []common.Hash{{byte(i)}, {0xee}}[:i%3], Data: []byte{byte(i)}}}}
		if preByzantium {
			r.PostState = common.Hash{byte(i), 1}.Bytes()
		}
		r.Bloom = types.CreateBloom(r)
		txs, rs = append(txs, tx), append(rs, r)
	}
	return txs, rs
}

// rpcBlock writes blk as geth's RPCMarshalBlock does with full
// transactions; nulls writes forks the header lacks as null.
func rpcBlock(t *testing.T, blk *types.Block, nulls bool) json.RawMessage {
	t.Helper()
	hdr, err := json.Marshal(blk.Header()) // the generated marshaller: nulls for absent forks, and the hash
	if err != nil {
		t.Fatal(err)
	}
	var m obj
	if err := json.Unmarshal(hdr, &m); err != nil {
		t.Fatal(err)
	}
	if !nulls {
		for k, v := range m {
			if v == nil {
				delete(m, k)
			}
		}
	}
	m["size"] = hexutil.Uint64(blk.Size())
	m["uncles"] = []common.Hash{}
	txs := make([]any, len(blk.Transactions()))
	for i, tx := range blk.Transactions() {
		b, err := tx.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var tm obj
		if err := json.Unmarshal(b, &tm); err != nil {
			t.Fatal(err)
		}
		tm["blockHash"], tm["blockNumber"], tm["transactionIndex"] = blk.Hash(), (*hexutil.Big)(blk.Number()), hexutil.Uint64(i)
		txs[i] = tm
	}
	m["transactions"] = txs
	if blk.Withdrawals() != nil {
		m["withdrawals"] = blk.Withdrawals()
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// withBlock is receipts as eth_getBlockReceipts writes them: each names
// its block.
func withBlock(rs []*types.Receipt, hash common.Hash) []obj {
	out := make([]obj, len(rs))
	for i, r := range rs {
		b, _ := json.Marshal(r)
		var m obj
		_ = json.Unmarshal(b, &m)
		m["blockHash"] = hash
		if len(r.PostState) == 0 {
			delete(m, "root")
		} else {
			delete(m, "status")
		}
		out[i] = m
	}
	return out
}

func TestCheckNames(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range AllChecks() {
		name := c.String()
		if name == "unknown" || seen[name] {
			t.Errorf("check %d: name %q", c, name)
		}
		seen[name] = true
	}
	if len(seen) != 7 || Check(0).String() != "unknown" || Check(200).String() != "unknown" {
		t.Errorf("names %v", seen)
	}
}

func BenchmarkVerifyBlock(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join("testdata", "geth", "block-0x3.json"))
	if err != nil {
		b.Fatal(err)
	}
	rs, err := os.ReadFile(filepath.Join("testdata", "geth", "receipts-0x3.json"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		v := VerifyBlock(raw, evm.BlockRef{})
		VerifyReceipts(rs, evm.BlockRef{}, byHash(v.Block))
	}
}
