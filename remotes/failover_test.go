package remotes

import (
	"encoding/json"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
)

// failMethod makes the node answer method, and only method, with e: polls
// and chain id checks still succeed, so only the call under test fails.
func failMethod(method string, code int, msg string) func(*front) {
	return func(f *front) {
		f.node.SetHook(func(m string, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
			if m != method {
				return nil, nil, false
			}
			return nil, &jrpc.Error{Code: code, Message: msg}, true
		})
	}
}

// signedTx is a valid signed type-2 transaction: its eth_sendRawTransaction
// params and its quoted hash.
func signedTx(t *testing.T) (params, hash string) {
	t.Helper()
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	to := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	tx := types.MustSignNewTx(key, types.LatestSignerForChainID(big.NewInt(testChainID)), &types.DynamicFeeTx{
		ChainID: big.NewInt(testChainID), Nonce: 7, GasTipCap: big.NewInt(1), GasFeeCap: big.NewInt(2_000_000_000),
		Gas: 21000, To: &to, Value: big.NewInt(1),
	})
	raw, err := tx.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return `["` + hexutil.Encode(raw) + `"]`, `"` + tx.Hash().Hex() + `"`
}

// TestFailoverRules runs one call through a pool of n0 (primary, faulty) and
// n1 (secondary, healthy): n0 is always asked first, so the calls that reach
// n1 show whether venn failed over.
func TestFailoverRules(t *testing.T) {
	const (
		balance = `["0x00000000000000000000000000000000000000aa","latest"]`
		revert  = `[{"to":"0x0000000000000000000000000000000000000001","data":"0xdeadbeef"},"latest"]`
		skip    = -1 // call count not checked: the front answered, not the node
	)
	sendTx, txHash := signedTx(t)
	// Polls are kept out of the counts and the breaker: the first one gives
	// the head, the next would come in an hour.
	slowBlocks := PoolConfig{BlockTime: time.Hour}
	oneSend := PoolConfig{BlockTime: time.Hour, BroadcastFanout: 1}

	tests := []struct {
		name    string
		pool    PoolConfig
		tweak   func(c *Config) // n0's config
		fault   func(f *front)  // applied to n0 once the pool is up
		method  string
		params  string
		wantErr int    // wire code; 0 is success
		want    string // the result, when it matters
		wantN0  int64  // calls of method that reached n0, or skip
		wantN1  int64
		// within bounds the whole call: a fault must not cost the deadline.
		within time.Duration
		check  func(t *testing.T, p *Pool, n0 *front, n1 *fakenode.Node)
	}{
		// Upstream faults: n1 answers.
		{name: "attempt timeout below the remote's latency", pool: slowBlocks,
			tweak:  func(c *Config) { c.Timeout = 150 * time.Millisecond },
			fault:  func(f *front) { f.node.SetLatency(3 * time.Second) },
			method: "eth_getBalance", params: balance, wantN0: 1, wantN1: 1, within: time.Second},
		{name: "connection refused", pool: slowBlocks, fault: (*front).stop,
			method: "eth_getBalance", params: balance, wantN0: 0, wantN1: 1},
		// A read on a keep-alive connection n0 closed as it arrived is sent
		// again on a new one (remotes/wire): no failover, no fault for n0.
		{name: "keep-alive connection closed under a read", pool: slowBlocks,
			fault:  func(f *front) { f.closeNext.Store(true) },
			method: "eth_getBalance", params: balance, wantN0: 1, wantN1: 0,
			check: func(t *testing.T, p *Pool, _ *front, _ *fakenode.Node) {
				if e := math.Float64frombits(p.members()[0].errorEWMA.Load()); e != 0 {
					t.Errorf("n0's error rate %v, want 0", e)
				}
			}},
		// The read lands on the keep-alive connection the pool's start left
		// idle, so the transport sends it once more, on a new one, before
		// the pool fails over (wire's httpMaxResends).
		{name: "dropped connection", pool: slowBlocks, fault: func(f *front) { f.node.SetDrop(true) },
			method: "eth_getBalance", params: balance, wantN0: 2, wantN1: 1},
		{name: "empty 200 reply", pool: slowBlocks, fault: func(f *front) { f.empty.Store(true) },
			method: "eth_getBalance", params: balance, wantN0: skip, wantN1: 1},
		{name: "garbled 200 reply", pool: slowBlocks, fault: func(f *front) { f.node.SetGarbage(true) },
			method: "eth_getBalance", params: balance, wantN0: 1, wantN1: 1},
		{name: "header not found", pool: slowBlocks, fault: failMethod("eth_getBalance", -32000, "header not found"),
			method: "eth_getBalance", params: balance, wantN0: 1, wantN1: 1},
		{name: "unknown block", pool: slowBlocks, fault: failMethod("eth_getBalance", -32000, "unknown block"),
			method: "eth_getBalance", params: balance, wantN0: 1, wantN1: 1},
		{name: "unknown block as code 3 (Alchemy)", pool: slowBlocks, fault: failMethod("eth_call", 3, "unknown block"),
			method: "eth_call", params: `[{"to":"0x00000000000000000000000000000000000000aa"},"latest"]`, wantN0: 1, wantN1: 1},
		{name: "response size limit on eth_getBlockReceipts", pool: slowBlocks,
			fault:  failMethod("eth_getBlockReceipts", -32008, "response is too big"),
			method: "eth_getBlockReceipts", params: `["0x10"]`, wantN0: 1, wantN1: 1},
		{name: "range limit on a method other than eth_getLogs", pool: slowBlocks,
			fault:  failMethod("eth_getBlockByNumber", -32005, "requested range exceeds maximum RPC range limit"),
			method: "eth_getBlockByNumber", params: `["0x10",false]`, wantN0: 1, wantN1: 1},
		{name: "http 413", pool: slowBlocks, fault: func(f *front) { f.node.SetFailStatus(413) },
			method: "eth_getBalance", params: balance, wantN0: 1, wantN1: 1},
		{name: "http 503", pool: slowBlocks, fault: func(f *front) { f.node.SetFailStatus(503) },
			method: "eth_getBalance", params: balance, wantN0: 1, wantN1: 1},
		{name: "http 502 with a JSON-RPC error body", pool: slowBlocks,
			fault: func(f *front) {
				f.node.SetFailBody(502, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"upstream connect error"}}`)
			},
			method: "eth_getBalance", params: balance, wantN0: 1, wantN1: 1},
		{name: "internal error", pool: slowBlocks, fault: failMethod("eth_getBalance", -32603, "internal error"),
			method: "eth_getBalance", params: balance, wantN0: 1, wantN1: 1},
		{name: "method not found", pool: slowBlocks,
			fault:  failMethod("eth_getBalance", -32601, "the method eth_getBalance does not exist/is not available"),
			method: "eth_getBalance", params: balance, wantN0: 1, wantN1: 1},
		{name: "rate-limit error", pool: slowBlocks, fault: failMethod("eth_getBalance", -32005, "rate limit exceeded"),
			method: "eth_getBalance", params: balance, wantN0: 1, wantN1: 1},
		{name: "http 429 backs the remote off", pool: slowBlocks, fault: func(f *front) { f.node.SetFailStatus(429) },
			method: "eth_getBalance", params: balance, wantN0: 1, wantN1: 1, check: backedOff},
		{name: "http 429 with a JSON-RPC error body backs the remote off", pool: slowBlocks,
			fault: func(f *front) {
				f.node.SetFailBody(429, `{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"project ID request rate exceeded"}}`)
			},
			method: "eth_getBalance", params: balance, wantN0: 1, wantN1: 1, check: backedOff},

		// The caller's errors: returned at once, n1 never asked.
		{name: "execution reverted", pool: slowBlocks, fault: func(*front) {},
			method: "eth_call", params: revert, wantErr: 3, wantN0: 1, wantN1: 0},
		{name: "http 400 with an invalid params body", pool: slowBlocks,
			fault: func(f *front) {
				f.node.SetFailBody(400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"invalid argument 1: hex number > 64 bits"}}`)
			},
			method: "eth_getBalance", params: balance, wantErr: -32602, wantN0: 1, wantN1: 0},
		{name: "invalid params", pool: slowBlocks,
			fault:  failMethod("eth_getBalance", -32602, "invalid argument 0: hex string without 0x prefix"),
			method: "eth_getBalance", params: balance, wantErr: -32602, wantN0: 1, wantN1: 0},

		// Raw transactions: sent once per remote, never retried on the caller's error.
		{name: "send: insufficient funds", pool: oneSend,
			fault:  failMethod("eth_sendRawTransaction", -32000, "insufficient funds for gas * price + value: balance 0, tx cost 42000000000001, overshot 42000000000001"),
			method: "eth_sendRawTransaction", params: sendTx, wantErr: -32000, wantN0: 1, wantN1: 0},
		{name: "send: nonce too low, transaction already mined", pool: oneSend,
			fault: func(f *front) {
				f.node.SetHook(func(m string, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
					switch m {
					case "eth_sendRawTransaction":
						return nil, &jrpc.Error{Code: -32000, Message: "nonce too low: next nonce 8, tx nonce 7"}, true
					case "eth_getTransactionByHash":
						return json.RawMessage(`{"hash":` + txHash + `,"nonce":"0x7","blockNumber":"0x63"}`), nil, true
					}
					return nil, nil, false
				})
			},
			method: "eth_sendRawTransaction", params: sendTx, want: txHash, wantN0: 1, wantN1: 0},
		{name: "send: nonce too low, transaction unknown", pool: oneSend,
			fault: func(f *front) {
				f.node.SetHook(func(m string, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
					switch m {
					case "eth_sendRawTransaction":
						return nil, &jrpc.Error{Code: -32000, Message: "nonce too low: next nonce 8, tx nonce 7"}, true
					case "eth_getTransactionByHash":
						return nil, nil, true // null: not known
					}
					return nil, nil, false
				})
			},
			method: "eth_sendRawTransaction", params: sendTx, wantErr: -32000, wantN0: 1, wantN1: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n0 := newFront(t, fakenode.Options{ChainID: testChainID})
			n1 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
			rs := testConfigs([]string{n0.URL(), n1.URL()}, func(i int, c *Config) {
				if i == 0 && tt.tweak != nil {
					tt.tweak(c)
				}
				if i == 1 {
					c.Tier = TierSecondary
				}
			})
			p := startPool(t, tt.pool, rs, nil)
			tt.fault(n0)
			n0.node.ResetCalls()
			n1.ResetCalls()

			within := tt.within
			if within == 0 {
				within = time.Second
			}
			start := time.Now()
			res, err := call(t, p, tt.method, tt.params)
			if took := time.Since(start); took > within {
				t.Errorf("call took %v, want under %v", took, within)
			}
			if got := wireCode(err); got != tt.wantErr || (tt.wantErr == 0 && err != nil) {
				t.Fatalf("err = %v (code %d), want code %d", err, got, tt.wantErr)
			}
			if tt.want != "" && string(res) != tt.want {
				t.Errorf("result %s, want %s", res, tt.want)
			}
			if got := servedCalls(n0.node, tt.method); tt.wantN0 != skip && got != tt.wantN0 {
				t.Errorf("n0 got %d calls, want %d", got, tt.wantN0)
			}
			if got := servedCalls(n1, tt.method); got != tt.wantN1 {
				t.Errorf("n1 got %d calls, want %d", got, tt.wantN1)
			}
			if tt.check != nil {
				tt.check(t, p, n0, n1)
			}
		})
	}
}

// backedOff checks that n0, which just rate-limited venn, sits out its
// backoff: the next call goes straight to n1, and the chain stays ready.
func backedOff(t *testing.T, p *Pool, n0 *front, n1 *fakenode.Node) {
	t.Helper()
	if p.members()[0].available(time.Now()) == 0 {
		t.Error("n0 still available right after a 429")
	}
	if !p.Ready() {
		t.Error("pool not ready while its only faulty remote is merely backed off")
	}
	if _, err := call(t, p, "eth_getBalance", `["0x00000000000000000000000000000000000000bb","latest"]`); err != nil {
		t.Fatal(err)
	}
	if got := n0.node.Calls("eth_getBalance"); got != 1 {
		t.Errorf("n0 asked %d times during its backoff, want only the 1 call it refused", got)
	}
	if got := n1.Calls("eth_getBalance"); got != 2 {
		t.Errorf("n1 got %d calls, want 2", got)
	}
}
