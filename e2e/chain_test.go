package e2e

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/gethtest"
	"github.com/venn-gateway/venn/internal/testkit"
)

// receiptTimeout bounds the wait for a dev transaction to be mined; with
// --dev.period 0 geth seals it at once.
const receiptTimeout = 15 * time.Second

// Contract bytecode, hand-assembled so eth_getLogs, eth_getStorageAt and a
// reverting eth_call all have something to find.
//
// Init code: SSTORE(0, 0x2a); LOG1(topic 0x01, no data); return the runtime.
//
//	602a 6000 55          SSTORE(0, 0x2a)
//	6001 6000 6000 a1     LOG1(offset 0, size 0, topic 1)
//	601e 80 6017 6000 39  CODECOPY(0, 0x17, 0x1e)
//	6000 f3               RETURN(0, 0x1e)
//
// Runtime: no calldata reverts with 32 bytes ending in 0xdead; any calldata
// is logged with LOG2(topic 0x02, topic CALLER).
//
//	36 600f 57                      JUMPI(0x0f, CALLDATASIZE)
//	61dead 6000 52 6020 6000 fd     MSTORE(0, 0xdead); REVERT(0, 32)
//	5b 36 6000 6000 37              JUMPDEST; CALLDATACOPY(0, 0, CALLDATASIZE)
//	33 6002 36 6000 a2 00           LOG2(0, CALLDATASIZE, 2, CALLER); STOP
const (
	contractInit    = "0x602a600055600160006000a1601e8060176000396000f3"
	contractRuntime = "36600f5761dead60005260206000fd5b366000600037336002366000a200"
	// callData is what the logging transaction sends.
	callData = "0xbeef"
	// queuedNonceGap puts the queued transaction far enough past the dev
	// account's nonce that geth keeps it in the pool, never mined, so
	// sending it again is always "already known".
	queuedNonceGap = 100
)

// devChain is what fixture put on a geth --dev chain.
type devChain struct {
	account  string // the funded, unlocked dev account
	contract string
	deployTx string // creates the contract, LOG1
	callTx   string // calls it, LOG2
	// The blocks holding them: geth --dev sometimes seals an empty block
	// first, so their numbers are read, not assumed.
	deployBlock, callBlock         uint64
	deployBlockHash, callBlockHash string
	head                           uint64 // block number after the fixture

	// queuedRaw is a signed transaction sent to geth once, queued behind a
	// nonce gap; queuedHash is geth's answer to that first send.
	queuedRaw  string
	queuedHash string
}

// fixture deploys the contract, calls it once and queues one transaction.
// Nothing is mined afterwards (the dev period is 0 and the queued
// transaction cannot be mined), so the chain stays still while the test
// compares answers.
func fixture(t *testing.T, g *gethtest.Geth) devChain {
	t.Helper()
	var c devChain
	var accounts []string
	mustUnmarshal(t, g.MustCall(t, "eth_accounts"), &accounts)
	if len(accounts) == 0 {
		t.Fatal("geth --dev has no dev account")
	}
	c.account = accounts[0]

	code := contractInit + contractRuntime
	var deploy string
	mustUnmarshal(t, g.MustCall(t, "eth_sendTransaction", map[string]any{"from": c.account, "data": code}), &deploy)
	rc := waitReceipt(t, g, deploy)
	c.deployTx, c.contract = deploy, rc.ContractAddress
	c.deployBlock, c.deployBlockHash = quantity(t, rc.BlockNumber), rc.BlockHash

	var callTx string
	mustUnmarshal(t, g.MustCall(t, "eth_sendTransaction", map[string]any{"from": c.account, "to": c.contract, "data": callData}), &callTx)
	rc = waitReceipt(t, g, callTx)
	c.callTx = callTx
	c.callBlock, c.callBlockHash = quantity(t, rc.BlockNumber), rc.BlockHash

	nonce := quantity(t, g.MustCall(t, "eth_getTransactionCount", c.account, "latest"))
	var signed struct {
		Raw string `json:"raw"`
	}
	mustUnmarshal(t, g.MustCall(t, "eth_signTransaction", map[string]any{
		"from": c.account, "to": c.contract, "data": callData,
		"nonce": hex(nonce + queuedNonceGap), "gas": "0x10000",
		"maxFeePerGas": "0x100000000", "maxPriorityFeePerGas": "0x1",
	}), &signed)
	c.queuedRaw = signed.Raw
	mustUnmarshal(t, g.MustCall(t, "eth_sendRawTransaction", c.queuedRaw), &c.queuedHash)
	c.head = quantity(t, g.MustCall(t, "eth_blockNumber"))
	return c
}

// receipt holds the fields fixture needs.
type receipt struct {
	BlockHash       string          `json:"blockHash"`
	BlockNumber     json.RawMessage `json:"blockNumber"`
	ContractAddress string          `json:"contractAddress"`
	Status          string          `json:"status"`
}

func waitReceipt(t *testing.T, g *gethtest.Geth, tx string) receipt {
	t.Helper()
	var rc receipt
	var last error
	ok := testkit.Poll(receiptTimeout, func() bool {
		raw, err := g.Call(context.Background(), "eth_getTransactionReceipt", tx)
		if err != nil {
			// "transaction indexing is in progress" until the dev chain's
			// first block is indexed.
			last = err
			return false
		}
		if string(raw) == "null" {
			return false
		}
		mustUnmarshal(t, raw, &rc)
		return true
	})
	if !ok {
		t.Fatalf("transaction %s not mined within %v (last error: %v)", tx, receiptTimeout, last)
	}
	if rc.Status != "0x1" {
		t.Fatalf("transaction %s failed: status %s", tx, rc.Status)
	}
	return rc
}

func mustUnmarshal(t *testing.T, raw json.RawMessage, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decode %.200s: %v", raw, err)
	}
}

func hex(n uint64) string { return "0x" + strconv.FormatUint(n, 16) }
