package gethtest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/holiman/uint256"
)

// EmitterRuntime is a contract whose every call emits one log of each
// size, LOG0 to LOG4, so eth_getLogs has topics to match at every position:
//
//	36 6000 6000 37                   CALLDATACOPY(0, 0, CALLDATASIZE)
//	36 6000 a0                        LOG0(0, CALLDATASIZE)
//	60aa 6000 6000 a1                 LOG1(0, 0, 0xaa)
//	33 60aa 6020 6000 a2              LOG2(0, 32, 0xaa, CALLER)
//	6000 35 60aa 60bb 6000 6000 a3    LOG3(0, 0, 0xbb, 0xaa, CALLDATALOAD(0))
//	6004 6003 6002 6001 6000 6000 a4  LOG4(0, 0, 1, 2, 3, 4)
//	00                                STOP
const EmitterRuntime = "366000600037" + "366000a0" + "60aa60006000a1" + "3360aa60206000a2" +
	"60003560aa60bb60006000a3" + "600460036002600160006000a4" + "00"

// EmitterCode is the emitter's deploy code.
func EmitterCode() string { return DeployCode(EmitterRuntime) }

// DeployCode is the deploy code of a contract whose runtime, in hex
// without 0x and under 256 bytes, is runtime: CODECOPY the runtime from
// offset 0x0b and return it (60<len> 80 600b 6000 39 6000 f3), then the
// runtime.
func DeployCode(runtime string) string {
	return fmt.Sprintf("0x60%02x80600b6000396000f3", len(runtime)/2) + runtime
}

// Topic is the 32-byte topic holding n.
func Topic(n uint64) string { return fmt.Sprintf("0x%064x", n) }

// Gas settings of Produce's transactions; the dev account's balance covers
// them many times over.
const (
	gasPrice  = "0x174876e800" // 100 gwei
	callGas   = "0x40000"
	blobFee   = "0x3b9aca00"
	blobBytes = 131072
)

// Bounds of Produce.
const (
	minedTimeout = 15 * time.Second
	minedPoll    = 20 * time.Millisecond
	// blobSignTimeout: geth loads its KZG setup on the first blob
	// transaction it signs, which takes long on a busy machine (4 s on a
	// quiet one).
	blobSignTimeout = 2 * time.Minute
	// producedHead is the head Produce reaches: past the dev chain's first
	// finalized block (every 32nd).
	producedHead = 34
)

// Chain is what Produce put on a dev chain.
type Chain struct {
	Dev       string    // the funded dev account
	Emitters  [2]string // two deployments of the emitter
	Authority string    // an EOA delegated to the first emitter (EIP-7702)
	Head      uint64
	Safe      uint64
	Finalized uint64
	Blocks    []Block // 0 to Head
}

// Block is one block of the chain as geth serves it.
type Block struct {
	Number   uint64
	Hash     string
	Txs      []string        // transaction hashes, by index
	Raw      json.RawMessage // eth_getBlockByNumber(n, true)
	Receipts json.RawMessage // eth_getBlockReceipts
}

// Produce builds a chain with every kind of transaction and log: two
// emitter deployments; one block holding a legacy, an access-list, a
// dynamic-fee and a set-code transaction, calls that emit logs with 0 to 4
// topics, a transfer and a transaction that runs out of gas; a blob
// transaction; then plain transfers until the dev chain's finalized block
// is past 0. It reads every block back (Read) and fails the test if the
// chain lacks any of that. g must have been started with
// Period 0.
func Produce(t testing.TB, g *Geth) *Chain {
	t.Helper()
	c := &Chain{}
	var accounts []string
	decode(t, g.MustCall(t, "eth_accounts"), &accounts)
	if len(accounts) == 0 {
		t.Fatal("gethtest: geth --dev has no dev account")
	}
	c.Dev = accounts[0]
	for i := range c.Emitters {
		rc := waitMined(t, g, Send(t, g, map[string]any{"from": c.Dev, "data": EmitterCode()}))
		c.Emitters[i], _ = rc["contractAddress"].(string)
		if rc["status"] != "0x1" || c.Emitters[i] == "" {
			t.Fatalf("gethtest: deploy emitter: %v", rc)
		}
	}

	// The authority signs a delegation to the first emitter; calls to it
	// then emit logs from an EOA's address.
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	auth, err := types.SignSetCode(key, types.SetCodeAuthorization{
		ChainID: *uint256.NewInt(ChainID), Address: common.HexToAddress(c.Emitters[0]), Nonce: 0,
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Authority = strings.ToLower(crypto.PubkeyToAddress(key.PublicKey).Hex())

	// One block with many transactions: send nonces n+1.. first (geth
	// queues them behind the gap), then n, which releases them all at once.
	nonce := quantity(t, g.MustCall(t, "eth_getTransactionCount", c.Dev, "pending"))
	call := func(to, data string) map[string]any {
		return map[string]any{"from": c.Dev, "to": to, "data": data, "gas": callGas, "maxFeePerGas": gasPrice, "maxPriorityFeePerGas": "0x1"}
	}
	batch := []map[string]any{
		// legacy (type 0)
		{"from": c.Dev, "to": c.Emitters[0], "data": Topic(7), "gas": callGas, "gasPrice": gasPrice},
		// access list (type 1)
		{"from": c.Dev, "to": c.Emitters[1], "data": Topic(8), "gas": callGas, "gasPrice": gasPrice,
			"accessList": []any{map[string]any{"address": c.Emitters[1], "storageKeys": []string{Topic(0)}}}},
		// dynamic fee (type 2), no calldata: LOG3's last topic is zero
		call(c.Emitters[0], "0x"),
		// set code (type 4): the call runs the emitter as the authority
		{"from": c.Dev, "to": c.Authority, "data": Topic(9), "gas": callGas, "maxFeePerGas": gasPrice,
			"maxPriorityFeePerGas": "0x1", "authorizationList": []any{auth}},
		// a plain transfer
		{"from": c.Dev, "to": c.Authority, "value": "0x1", "gas": "0x5208", "maxFeePerGas": gasPrice, "maxPriorityFeePerGas": "0x1"},
		// out of gas: mined with status 0 and no logs
		{"from": c.Dev, "to": c.Emitters[1], "data": Topic(10), "gas": "0x5800", "maxFeePerGas": gasPrice, "maxPriorityFeePerGas": "0x1"},
		call(c.Emitters[1], Topic(7)),
	}
	hashes := make([]string, len(batch))
	for i := len(batch) - 1; i >= 0; i-- {
		batch[i]["nonce"] = "0x" + strconv.FormatUint(nonce+uint64(i), 16)
		hashes[i] = Send(t, g, batch[i])
	}
	for _, h := range hashes {
		waitMined(t, g, h)
	}
	nonce += uint64(len(batch))

	// A blob transaction (type 3): geth signs it and builds the sidecar.
	var signed struct {
		Raw string `json:"raw"`
	}
	decode(t, signBlob(t, g, blobTx(c.Dev, c.Emitters[1], nonce)), &signed)
	var blob string
	decode(t, g.MustCall(t, "eth_sendRawTransaction", signed.Raw), &blob)
	waitMined(t, g, blob)
	// The blob pool reserves the sender until its own reset after the
	// block, which can come after the receipt: a transaction sent before
	// it gets "address already reserved".
	waitPoolEmpty(t, g)

	for quantity(t, g.MustCall(t, "eth_blockNumber")) < producedHead {
		waitMined(t, g, Send(t, g, map[string]any{"from": c.Dev, "to": c.Dev, "value": "0x1"}))
	}

	c.Read(t, g)
	check(t, c)
	return c
}

// readAttempts bounds Read's reads of a chain that keeps moving.
const readAttempts = 5

// Read reads c's head, safe and finalized blocks and every block from 0 to
// the head from g again, until one read finds the head where it started:
// geth --dev seals an empty block of its own now and then, a little after
// a transaction's. A test that compares live answers with c calls it
// again when it finds geth's head past c.Head.
func (c *Chain) Read(t testing.TB, g *Geth) {
	t.Helper()
	for range readAttempts {
		head := quantity(t, g.MustCall(t, "eth_blockNumber"))
		c.Head = head
		c.Safe = tagNumber(t, g, "safe")
		c.Finalized = tagNumber(t, g, "finalized")
		c.Blocks = c.Blocks[:0]
		for n := uint64(0); n <= head; n++ {
			raw := g.MustCall(t, "eth_getBlockByNumber", "0x"+strconv.FormatUint(n, 16), true)
			var b struct {
				Hash         string `json:"hash"`
				Transactions []struct {
					Hash string `json:"hash"`
				} `json:"transactions"`
			}
			decode(t, raw, &b)
			blk := Block{Number: n, Hash: b.Hash, Raw: raw, Receipts: g.MustCall(t, "eth_getBlockReceipts", b.Hash)}
			for _, tx := range b.Transactions {
				blk.Txs = append(blk.Txs, tx.Hash)
			}
			c.Blocks = append(c.Blocks, blk)
		}
		if quantity(t, g.MustCall(t, "eth_blockNumber")) == head {
			return
		}
	}
	t.Fatalf("gethtest: the chain moved during each of %d reads of it", readAttempts)
}

// Moved reports whether g's head is no longer c.Head.
func (c *Chain) Moved(t testing.TB, g *Geth) bool {
	t.Helper()
	return quantity(t, g.MustCall(t, "eth_blockNumber")) != c.Head
}

// check makes sure c holds what Produce promises: transactions of types 0
// to 4, logs with 0 to 4 topics, a block with several transactions and
// logs, the safe block at the head and the finalized one past 0.
func check(t testing.TB, c *Chain) {
	t.Helper()
	txTypes := map[string]bool{}
	topicCounts := map[int]bool{}
	multi := false
	for _, b := range c.Blocks {
		var txs struct {
			Transactions []struct {
				Type string `json:"type"`
			} `json:"transactions"`
		}
		decode(t, b.Raw, &txs)
		for _, tx := range txs.Transactions {
			txTypes[tx.Type] = true
		}
		var rcs []struct {
			Logs []struct {
				Topics []string `json:"topics"`
			} `json:"logs"`
		}
		decode(t, b.Receipts, &rcs)
		logs := 0
		for _, rc := range rcs {
			for _, l := range rc.Logs {
				topicCounts[len(l.Topics)] = true
				logs++
			}
		}
		if len(rcs) > 1 && logs > 5 {
			multi = true
		}
	}
	for _, typ := range []string{"0x0", "0x1", "0x2", "0x3", "0x4"} {
		if !txTypes[typ] {
			t.Errorf("gethtest: no transaction of type %s on the chain", typ)
		}
	}
	for n := range 5 {
		if !topicCounts[n] {
			t.Errorf("gethtest: no log with %d topics on the chain", n)
		}
	}
	if !multi {
		t.Error("gethtest: no block with several transactions and logs")
	}
	if c.Finalized == 0 || c.Safe != c.Head {
		t.Errorf("gethtest: safe %d, finalized %d at head %d: want safe at the head and finalized past 0", c.Safe, c.Finalized, c.Head)
	}
}

func blobTx(from, to string, nonce uint64) map[string]any {
	return map[string]any{
		"from": from, "to": to, "data": Topic(11), "nonce": "0x" + strconv.FormatUint(nonce, 16), "gas": callGas,
		"maxFeePerGas": gasPrice, "maxPriorityFeePerGas": "0x1", "maxFeePerBlobGas": blobFee,
		"blobs": []string{"0x" + strings.Repeat("00", blobBytes)},
	}
}

// signBlob has geth sign a blob transaction and build its sidecar. The
// first one geth signs loads its KZG setup, which on a loaded machine takes
// longer than geth lets a call over HTTP run: the call goes over
// WebSocket, bounded by blobSignTimeout alone.
func signBlob(t testing.TB, g *Geth, tx map[string]any) json.RawMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), blobSignTimeout)
	defer cancel()
	res, err := g.CallWS(ctx, "eth_signTransaction", tx)
	if err != nil {
		t.Fatalf("gethtest: sign a blob transaction: %v", err)
	}
	return res
}

// Send sends tx with eth_sendTransaction (geth signs it with the dev
// account) and returns its hash.
//
// geth --dev fills in the nonce from its pool, which for a moment after a
// block is sealed may not yet count the transactions sealed in it: the
// transaction then reuses a nonce ("replacement transaction underpriced",
// "nonce too low"), and is sent again once the pool has caught up.
func Send(t testing.TB, g *Geth, tx map[string]any) string {
	t.Helper()
	const tries = 50
	for try := 1; ; try++ {
		raw, err := g.Call(context.Background(), "eth_sendTransaction", tx)
		if err == nil {
			var h string
			decode(t, raw, &h)
			return h
		}
		stale := strings.Contains(err.Error(), "replacement transaction underpriced") || strings.Contains(err.Error(), "nonce too low")
		if !stale || try == tries {
			t.Fatalf("geth eth_sendTransaction: %v", err)
		}
		time.Sleep(minedPoll) // a poll interval: the pool catches up on its own
	}
}

// waitMined waits for tx's receipt, whatever its status.
func waitMined(t testing.TB, g *Geth, tx string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(minedTimeout)
	for {
		raw, err := g.Call(context.Background(), "eth_getTransactionReceipt", tx)
		if err == nil && string(raw) != "null" {
			var rc map[string]any
			decode(t, raw, &rc)
			return rc
		}
		if time.Now().After(deadline) {
			t.Fatalf("gethtest: transaction %s not mined within %v (last error %v)", tx, minedTimeout, err)
		}
		time.Sleep(minedPoll) // a poll interval, not a wait for state
	}
}

// waitPoolEmpty waits until geth's transaction pools, the blob pool
// included, hold nothing pending or queued.
func waitPoolEmpty(t testing.TB, g *Geth) {
	t.Helper()
	deadline := time.Now().Add(minedTimeout)
	for {
		var st struct {
			Pending, Queued string
		}
		decode(t, g.MustCall(t, "txpool_status"), &st)
		if st.Pending == "0x0" && st.Queued == "0x0" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gethtest: the transaction pool still holds %s pending, %s queued after %v", st.Pending, st.Queued, minedTimeout)
		}
		time.Sleep(minedPoll) // a poll interval, not a wait for state
	}
}

func tagNumber(t testing.TB, g *Geth, tag string) uint64 {
	t.Helper()
	var b struct {
		Number json.RawMessage `json:"number"`
	}
	decode(t, g.MustCall(t, "eth_getBlockByNumber", tag, false), &b)
	return quantity(t, b.Number)
}

func quantity(t testing.TB, raw json.RawMessage) uint64 {
	t.Helper()
	var s string
	decode(t, raw, &s)
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
	if err != nil || !strings.HasPrefix(s, "0x") {
		t.Fatalf("gethtest: quantity %q: not a 0x hex number", s)
	}
	return n
}

func decode(t testing.TB, raw json.RawMessage, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("gethtest: decode %.200s: %v", raw, err)
	}
}
