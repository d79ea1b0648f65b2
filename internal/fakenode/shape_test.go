package fakenode

import (
	"context"
	"encoding/json"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	gethrpc "github.com/ethereum/go-ethereum/rpc"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/integrity"
)

// TestShapeChain: the shape chain's blocks are real (go-ethereum's client
// reads them, venn's integrity checks pass on every root and hash), of
// the size the shape says, and released on schedule to newHeads
// subscribers with the hash the block has.
func TestShapeChain(t *testing.T) {
	n := Start(t, Options{ChainID: 10})
	shape := Shape{Name: "test", BlockTime: 100 * time.Millisecond, Txs: 50}
	c, err := NewShapeChain(n, shape)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() { stop(); <-done }()

	ws, err := ethclient.DialContext(ctx, n.WSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	heads := make(chan *types.Header, 16)
	sub, err := ws.SubscribeNewHead(ctx, heads)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	var h *types.Header
	select {
	case h = <-heads:
	case err := <-sub.Err():
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("no head released")
	}
	num := h.Number.Uint64()
	if num <= shapeHistory {
		t.Fatalf("head %d: not above the history", num)
	}
	if c.Released(num).IsZero() {
		t.Errorf("block %d: no release time", num)
	}

	hc, err := ethclient.DialContext(ctx, n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	blk, err := hc.BlockByNumber(ctx, new(big.Int).SetUint64(num))
	if err != nil {
		t.Fatal(err)
	}
	if blk.Hash() != h.Hash() || len(blk.Transactions()) != shape.Txs {
		t.Fatalf("block %d: hash %s (head says %s), %d txs", num, blk.Hash(), h.Hash(), len(blk.Transactions()))
	}
	parent, err := hc.HeaderByNumber(ctx, new(big.Int).SetUint64(num-1))
	if err != nil || parent.Hash() != h.ParentHash {
		t.Fatalf("parent of %d: %v, %v", num, parent, err)
	}
	rcpts, err := hc.BlockReceipts(ctx, gethrpc.BlockNumberOrHashWithNumber(gethrpc.BlockNumber(num)))
	if err != nil || len(rcpts) != shape.Txs || len(rcpts[0].Logs) != shapeLogsPerTx {
		t.Fatalf("receipts of %d: %d, %v", num, len(rcpts), err)
	}

	// The raw answers, as venn's stalker checks them.
	ref := evm.BlockRef{Kind: evm.RefNumber, Number: num}
	var raw, rawReceipts json.RawMessage
	if err := hc.Client().CallContext(ctx, &raw, "eth_getBlockByNumber", evm.Quantity(num), true); err != nil {
		t.Fatal(err)
	}
	if err := hc.Client().CallContext(ctx, &rawReceipts, "eth_getBlockReceipts", evm.Quantity(num)); err != nil {
		t.Fatal(err)
	}
	bv := integrity.VerifyBlock(raw, ref)
	rv := integrity.VerifyReceipts(rawReceipts, ref, func(common.Hash) *integrity.BlockInfo { return bv.Block })
	for _, v := range []integrity.Verdict{bv, rv} {
		if err := v.Err(); err != nil || len(v.Skipped) > 0 {
			t.Errorf("integrity: %v, skipped %v", err, v.Skipped)
		}
	}
	for _, check := range []integrity.Check{integrity.CheckBlockHash, integrity.CheckTxHash, integrity.CheckTxRoot, integrity.CheckWithdrawalsRoot} {
		if !bv.Passed.Has(check) {
			t.Errorf("block check %v not passed", check)
		}
	}
	for _, check := range []integrity.Check{integrity.CheckReceiptsRoot, integrity.CheckLogsBloom} {
		if !rv.Passed.Has(check) {
			t.Errorf("receipts check %v not passed", check)
		}
	}
	// About 1.1 KB of block and 2.3 KB of receipts per transaction.
	perTx := func(b []byte) int { return len(b) / shape.Txs }
	if got := perTx(raw); got < 900 || got > 1300 {
		t.Errorf("block: %d bytes per transaction", got)
	}
	if got := perTx(rawReceipts); got < 1900 || got > 2700 {
		t.Errorf("receipts: %d bytes per transaction", got)
	}
}
