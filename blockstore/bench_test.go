package blockstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/gethtest"
)

// A token contract whose every call logs an ERC-20 Transfer: LOG3(topic0
// Transfer(address,address,uint256), topic1 CALLER, topic2 calldata[0:32])
// with calldata[32:64] as data.
//
//	6020 35 6000 52                 MSTORE(0, CALLDATALOAD(32))
//	6000 35 33 7f<sig>              topic2, topic1, topic0
//	6020 6000 a3 00                 LOG3(0, 32, ...); STOP
const (
	transferSig     = "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
	tokenRuntime    = "602035600052" + "600035" + "33" + "7f" + transferSig + "6020" + "6000" + "a3" + "00"
	busyTokenTxs    = 110 // Transfer calls per block: one log each
	busyEmitterTxs  = 30  // emitter calls: five logs each
	busyTransferTxs = 40  // plain value transfers
)

// busyBlocks has geth (started with Period 1s) mine n blocks shaped like a
// busy mainnet block: 180 transactions, 260 logs, mostly ERC-20 Transfers.
func busyBlocks(tb testing.TB, g *gethtest.Geth, n int) []*evm.Block {
	tb.Helper()
	ctx := context.Background()
	call := func(method string, params ...any) json.RawMessage {
		tb.Helper()
		res, err := g.Call(ctx, method, params...)
		if err != nil {
			tb.Fatalf("%s: %v", method, err)
		}
		return res
	}
	var accounts []string
	mustJSON(tb, call("eth_accounts"), &accounts)
	dev := accounts[0]
	deploy := func(runtime string) string {
		rc := waitReceipt(tb, g, gethtest.Send(tb, g, map[string]any{"from": dev, "data": gethtest.DeployCode(runtime)}))
		return rc.ContractAddress
	}
	token, emitter := deploy(tokenRuntime), deploy(gethtest.EmitterRuntime)

	var blocks []*evm.Block
	for b := 0; len(blocks) < n; b++ {
		if b > 2*n {
			tb.Fatalf("busy blocks: only %d of %d attempts were mined in one block", len(blocks), b)
		}
		var nonce string
		mustJSON(tb, call("eth_getTransactionCount", dev, "pending"), &nonce)
		first, err := strconv.ParseUint(nonce[2:], 16, 64)
		if err != nil {
			tb.Fatal(err)
		}
		var txs []map[string]any
		for i := range busyTokenTxs {
			to := fmt.Sprintf("%064x", 0x1000+b*1000+i)
			amount := fmt.Sprintf("%064x", 1_000_000*(i+1))
			txs = append(txs, map[string]any{"to": token, "data": "0x" + to + amount, "gas": "0x10000"})
		}
		for i := range busyEmitterTxs {
			txs = append(txs, map[string]any{"to": emitter, "data": gethtest.Topic(uint64(b*100 + i)), "gas": "0x20000"})
		}
		for i := range busyTransferTxs {
			txs = append(txs, map[string]any{"to": fmt.Sprintf("0x%040x", 0xbeef00+i), "value": "0x2386f26fc10000", "gas": "0x5208"})
		}
		// Send right after a block is sealed, so that all of them make the
		// next one (geth --dev.period 1); an attempt split across two
		// blocks is not kept.
		var head string
		mustJSON(tb, call("eth_blockNumber"), &head)
		for deadline := time.Now().Add(5 * time.Second); ; {
			var now string
			mustJSON(tb, call("eth_blockNumber"), &now)
			if now != head || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond) // a poll interval, not a wait for state
		}
		hashes := make([]string, len(txs))
		for i, tx := range txs {
			tx["from"], tx["nonce"] = dev, "0x"+strconv.FormatUint(first+uint64(i), 16)
			tx["maxFeePerGas"], tx["maxPriorityFeePerGas"] = "0x174876e800", "0x3b9aca00"
			hashes[i] = gethtest.Send(tb, g, tx)
		}
		rc := waitReceipt(tb, g, hashes[0])
		if last := waitReceipt(tb, g, hashes[len(hashes)-1]); rc.BlockHash != last.BlockHash {
			continue
		}
		raw := call("eth_getBlockByHash", rc.BlockHash, true)
		blocks = append(blocks, parse(tb, raw, call("eth_getBlockReceipts", rc.BlockHash)))
	}
	return blocks
}

type minedReceipt struct {
	BlockHash       string `json:"blockHash"`
	ContractAddress string `json:"contractAddress"`
}

func waitReceipt(tb testing.TB, g *gethtest.Geth, tx string) minedReceipt {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := g.Call(context.Background(), "eth_getTransactionReceipt", tx)
		if err == nil && string(res) != "null" {
			var rc minedReceipt
			mustJSON(tb, res, &rc)
			return rc
		}
		if time.Now().After(deadline) {
			tb.Fatalf("transaction %s not mined: %v", tx, err)
		}
		time.Sleep(20 * time.Millisecond) // a poll interval, not a wait for state
	}
}

func mustJSON(tb testing.TB, raw json.RawMessage, v any) {
	tb.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		tb.Fatalf("decode %.200s: %v", raw, err)
	}
}

// storedBytes is the size of every table of the database at u, with its
// indexes and TOAST.
func storedBytes(tb testing.TB, u string) (total int64, detail string) {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, table := range []string{"blocks", "transactions", "logs", "coverage"} {
		var all, heap, idx int64
		if err := conn.QueryRow(ctx, `SELECT pg_total_relation_size($1), pg_table_size($1), pg_indexes_size($1)`, table).
			Scan(&all, &heap, &idx); err != nil {
			tb.Fatal(err)
		}
		total += all
		detail += fmt.Sprintf(" %s=%d(heap+toast %d, indexes %d)", table, all, heap, idx)
	}
	return total, detail
}

// BenchmarkStorage stores busy geth blocks (180 transactions, 260 logs,
// see busyBlocks) and reports what Put costs and what a block takes in
// Postgres: bytes/block is every table's size with indexes and TOAST over
// all blocks stored, json-bytes/block what geth sent for them (the block
// with transactions plus its receipts).
//
//	go test -run XXX -bench Storage -benchtime 5x ./blockstore
func BenchmarkStorage(b *testing.B) {
	const perIteration = 20
	// A block every second: the held-back transactions all go in the
	// next one.
	g := gethtest.Start(b, gethtest.Options{Period: time.Second})
	blocks := busyBlocks(b, g, perIteration)
	p, u := open(b)
	var jsonBytes, txs, logs int
	for _, blk := range blocks {
		parts, err := evm.Split(blk)
		if err != nil {
			b.Fatal(err)
		}
		jsonBytes += len(blk.Raw) + len(blk.Receipts)
		txs += len(parts.Txs)
		logs += len(parts.Logs)
	}
	base, _ := storedBytes(b, u)
	chain := uint64(0)
	b.ResetTimer()
	for b.Loop() {
		chain++
		if err := p.Chain(chain, "bench").Put(context.Background(), blocks); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	total, detail := storedBytes(b, u)
	n := float64(chain) * perIteration
	b.ReportMetric(float64(total-base)/n, "bytes/block")
	b.ReportMetric(float64(jsonBytes)/perIteration, "json-bytes/block")
	b.ReportMetric(float64(txs)/perIteration, "txs/block")
	b.ReportMetric(float64(logs)/perIteration, "logs/block")
	b.Logf("%d blocks stored:%s", int(n), detail)
}
