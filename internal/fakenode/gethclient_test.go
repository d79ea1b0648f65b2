package fakenode

import (
	"context"
	"errors"
	"math/big"
	"testing"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	gethrpc "github.com/ethereum/go-ethereum/rpc"
)

// TestGethClient drives the node with go-ethereum's own client, which
// rejects answers that lack fields geth always sends.
func TestGethClient(t *testing.T) {
	n := Start(t, Options{ChainID: 10})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()

	for _, url := range []string{n.URL(), n.WSURL()} {
		t.Run(url[:2], func(t *testing.T) {
			ec, err := ethclient.DialContext(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer ec.Close()

			if id, err := ec.ChainID(ctx); err != nil || id.Uint64() != 10 {
				t.Errorf("chain id = %v, %v", id, err)
			}
			if num, err := ec.BlockNumber(ctx); err != nil || num != 100 {
				t.Errorf("block number = %d, %v", num, err)
			}
			blk, err := ec.BlockByNumber(ctx, big.NewInt(42))
			if err != nil {
				t.Fatalf("block 42: %v", err)
			}
			if len(blk.Transactions()) != txsPerBlock || blk.ParentHash().Hex() != n.BlockHash(41) {
				t.Errorf("block 42: %d txs, parent %s", len(blk.Transactions()), blk.ParentHash().Hex())
			}
			if blk.Transactions()[0].ChainId().Uint64() != 10 {
				t.Errorf("tx chain id = %v", blk.Transactions()[0].ChainId())
			}
			hdr, err := ec.HeaderByHash(ctx, common.HexToHash(n.BlockHash(42)))
			if err != nil || hdr.Number.Uint64() != 42 {
				t.Errorf("header by hash: %v, %v", hdr, err)
			}
			if _, err := ec.BlockByNumber(ctx, big.NewInt(101)); !errors.Is(err, ethereum.NotFound) {
				t.Errorf("block above head: %v, want NotFound", err)
			}

			rcpt, err := ec.TransactionReceipt(ctx, common.HexToHash(n.TxHash(42, 1)))
			if err != nil {
				t.Fatalf("receipt: %v", err)
			}
			if rcpt.Status != types.ReceiptStatusSuccessful || len(rcpt.Logs) != 1 || rcpt.BlockNumber.Uint64() != 42 {
				t.Errorf("receipt = %+v", rcpt)
			}
			if !types.BloomLookup(rcpt.Bloom, rcpt.Logs[0].Address) || !types.BloomLookup(blk.Bloom(), rcpt.Logs[0].Topics[0]) {
				t.Errorf("bloom misses the log")
			}
			tx, pending, err := ec.TransactionByHash(ctx, common.HexToHash(n.TxHash(42, 0)))
			if err != nil || pending || tx.Type() != types.DynamicFeeTxType {
				t.Errorf("tx by hash: %v pending=%v err=%v", tx, pending, err)
			}

			logs, err := ec.FilterLogs(ctx, ethereum.FilterQuery{
				FromBlock: big.NewInt(1), ToBlock: big.NewInt(30),
				Addresses: []common.Address{common.HexToAddress(Contracts()[0])},
			})
			if err != nil || len(logs) != 20 {
				t.Errorf("filter logs: %d logs, %v", len(logs), err)
			}

			addr := common.HexToAddress(Contracts()[1])
			_, err = ec.CallContract(ctx, ethereum.CallMsg{To: &addr, Data: []byte{0xde, 0xad, 0xbe, 0xef}}, nil)
			var de gethrpc.DataError
			if !errors.As(err, &de) || de.ErrorData() == nil {
				t.Errorf("revert: %v, want a DataError", err)
			}
		})
	}
}

// TestGethClientNewHeads subscribes the way geth's client does.
func TestGethClientNewHeads(t *testing.T) {
	n := Start(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	ec, err := ethclient.DialContext(ctx, n.WSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer ec.Close()
	heads := make(chan *types.Header, 8)
	sub, err := ec.SubscribeNewHead(ctx, heads)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()

	n.Mine(3)
	for want := uint64(101); want <= 103; want++ {
		select {
		case h := <-heads:
			if h.Number.Uint64() != want || h.ParentHash.Hex() != n.BlockHash(want-1) {
				t.Errorf("head %d: parent %s, want %s", h.Number, h.ParentHash.Hex(), n.BlockHash(want-1))
			}
		case err := <-sub.Err():
			t.Fatalf("subscription: %v", err)
		case <-ctx.Done():
			t.Fatalf("no head %d", want)
		}
	}
}
