// Package simnode serves go-ethereum's simulated backend
// (ethclient/simulated, v1.17.10) over JSON-RPC on 127.0.0.1, HTTP and
// WebSocket on one port, for end-to-end tests that need a real node they
// can reorg at will: Fork moves the head back to an ancestor, Commit seals
// the next block on top of it. Blocks are sealed only by Commit, so a test
// decides what each block holds.
//
// It owns no production code. The node is closed by a t.Cleanup; nothing
// outlives the test.
package simnode

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/log"
	"github.com/ethereum/go-ethereum/node"
)

// ChainID is the simulated backend's chain id, always.
const ChainID = 1337

// Transaction settings; the funded key's balance covers them many times
// over.
var (
	balance   = new(big.Int).Mul(big.NewInt(1e18), big.NewInt(1e6))
	gasTipCap = big.NewInt(2e9)   // 2 gwei
	gasFeeCap = big.NewInt(200e9) // 200 gwei
)

// Gas limits of the transactions Send and Deploy make.
const (
	callGas   = 300_000
	deployGas = 1_000_000
)

// callTimeout bounds one call to the node.
const callTimeout = 10 * time.Second

// Node is one simulated chain served on 127.0.0.1.
type Node struct {
	t      testing.TB
	b      *simulated.Backend
	addr   string // host:port of the JSON-RPC server
	key    *ecdsa.PrivateKey
	from   common.Address
	signer types.Signer

	mu    sync.Mutex
	nonce uint64 // the next one from's transactions take
}

// Start starts a simulated chain whose genesis funds one key, serving
// JSON-RPC (eth, net, web3) over HTTP and WebSocket on a free 127.0.0.1
// port. The node is closed when the test ends.
func Start(t testing.TB) *Node {
	t.Helper()
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	from := crypto.PubkeyToAddress(key.PublicKey)
	ep := &endpointHandler{}
	b := simulated.NewBackend(types.GenesisAlloc{from: {Balance: balance}},
		func(nc *node.Config, _ *ethconfig.Config) {
			// Port 0: the kernel picks a free one, so no test races another
			// for it. The WebSocket shares the HTTP server (same host and
			// port), and the node's log says where that is.
			nc.HTTPHost, nc.HTTPPort = "127.0.0.1", 0
			nc.WSHost, nc.WSPort = "127.0.0.1", 0
			nc.HTTPModules = []string{"eth", "net", "web3"}
			nc.WSModules = nc.HTTPModules
			nc.AuthAddr, nc.AuthPort = "127.0.0.1", 0
			nc.Logger = log.NewLogger(ep)
		})
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("simnode: close: %v", err)
		}
	})
	addr := ep.get()
	if addr == "" {
		t.Fatal("simnode: the node started no HTTP server")
	}
	return &Node{t: t, b: b, addr: addr, key: key, from: from, signer: types.LatestSignerForChainID(big.NewInt(ChainID))}
}

// HTTPURL is the node's JSON-RPC over HTTP endpoint.
func (n *Node) HTTPURL() string { return "http://" + n.addr }

// WSURL is the node's JSON-RPC over WebSocket endpoint.
func (n *Node) WSURL() string { return "ws://" + n.addr }

// Client is an in-process client of the node.
func (n *Node) Client() simulated.Client { return n.b.Client() }

// From is the funded account that signs Send's and Deploy's transactions.
func (n *Node) From() common.Address { return n.from }

// Commit seals a block holding every pending transaction, on top of the
// current head, and returns its hash. On a busy machine the backend's
// payload builder can seal a block without some of them, or fail to seal
// (it only logs that): Commit then seals again, at most commitTries
// times, until the sender's nonce at the head counts every transaction
// sent, and fails the test if it never does.
func (n *Node) Commit() common.Hash {
	n.t.Helper()
	for range commitTries {
		h := n.b.Commit()
		mined, sent := n.mined()
		if mined == sent {
			return h
		}
	}
	mined, sent := n.mined()
	n.t.Fatalf("simnode: %d of %d transactions sent are mined after %d seals", mined, sent, commitTries)
	return common.Hash{}
}

// commitTries bounds the seals of one Commit.
const commitTries = 5

// mined is how many of from's transactions the head holds, and how many
// were sent.
func (n *Node) mined() (mined, sent uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	mined, err := n.b.Client().NonceAt(ctx, n.from, nil)
	if err != nil {
		n.t.Fatalf("simnode: nonce at the head: %v", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return mined, n.nonce
}

// Fork moves the head back to parent, an ancestor of it: the blocks above
// leave the chain at once, and their transactions return to the pool, so
// the next Commit includes them again. The new branch becomes the chain
// block by block as Commit seals it.
func (n *Node) Fork(t testing.TB, parent common.Hash) {
	t.Helper()
	if err := n.b.Fork(parent); err != nil {
		t.Fatalf("simnode: fork at %s: %v", parent, err)
	}
}

// Head is the current head's header.
func (n *Node) Head(t testing.TB) *types.Header {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	h, err := n.b.Client().HeaderByNumber(ctx, nil)
	if err != nil {
		t.Fatalf("simnode: head: %v", err)
	}
	return h
}

// Send signs a call of to with data and sends it to the pool; the next
// Commit includes it.
func (n *Node) Send(t testing.TB, to common.Address, data []byte) common.Hash {
	t.Helper()
	return n.send(t, &to, data, callGas)
}

// Deploy sends a contract creation with code, commits it, and returns the
// contract's address once the receipt says it succeeded.
func (n *Node) Deploy(t testing.TB, code []byte) common.Address {
	t.Helper()
	h := n.send(t, nil, code, deployGas)
	n.Commit()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	rc, err := n.b.Client().TransactionReceipt(ctx, h)
	if err != nil {
		t.Fatalf("simnode: deploy receipt: %v", err)
	}
	if rc.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("simnode: deploy failed in block %v", rc.BlockNumber)
	}
	return rc.ContractAddress
}

func (n *Node) send(t testing.TB, to *common.Address, data []byte, gas uint64) common.Hash {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	// Counted here, not asked of the pool: the pool's answer lags while
	// it resets to a new head. Every transaction sent is mined, or given
	// back to the pool by a Fork and mined again, so the count never goes
	// back.
	n.mu.Lock()
	defer n.mu.Unlock()
	tx, err := types.SignNewTx(n.key, n.signer, &types.DynamicFeeTx{
		ChainID: big.NewInt(ChainID), Nonce: n.nonce, GasTipCap: gasTipCap, GasFeeCap: gasFeeCap,
		Gas: gas, To: to, Data: data,
	})
	if err != nil {
		t.Fatalf("simnode: sign: %v", err)
	}
	if err := n.b.Client().SendTransaction(ctx, tx); err != nil {
		t.Fatalf("simnode: send nonce %d: %v", n.nonce, err)
	}
	n.nonce++
	return tx.Hash()
}

// endpointHandler is the node's log: it keeps the address the node's
// HTTP server listens on and discards the rest.
type endpointHandler struct {
	mu   sync.Mutex
	addr string
}

const httpStarted = "HTTP server started" // go-ethereum node/rpcstack.go

func (h *endpointHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *endpointHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message != httpStarted {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "endpoint" {
			return true
		}
		h.mu.Lock()
		h.addr = fmt.Sprint(a.Value.Any())
		h.mu.Unlock()
		return false
	})
	return nil
}

func (h *endpointHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *endpointHandler) WithGroup(string) slog.Handler      { return h }

func (h *endpointHandler) get() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.addr
}
