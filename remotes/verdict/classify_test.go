package verdict

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/wire"
)

// Shorthands for the verdicts a row expects. Faults are spelled out, never
// taken from the package, so the tests pin them.
func wantCaller(r Reason) Verdict { return Verdict{Class: ClassCaller, Reason: r} }
func wantRetry(r Reason) Verdict  { return Verdict{Class: ClassRetry, Reason: r} }

// wantPruned is a pruned remote's error that names its earliest block.
func wantPruned(oldest uint64) Verdict {
	return Verdict{Class: ClassRetry, Reason: ReasonPruned, Oldest: oldest}
}
func wantFault(r Reason) Verdict     { return Verdict{Class: ClassRetry, Reason: r, Fault: true} }
func wantThrottled(r Reason) Verdict { return Verdict{Class: ClassThrottled, Reason: r} }
func wantTooLarge(r Reason, span uint64) Verdict {
	return Verdict{Class: ClassTooLarge, Reason: r, MaxSpan: span}
}

// classifyGive is one upstream JSON-RPC error: the method called, the HTTP status
// it came with (0 over WebSocket), and the error object. data is raw JSON.
type classifyGive struct {
	method string
	status int
	code   int
	msg    string
	data   string
}

func (g classifyGive) err() error {
	e := &jrpc.Error{Code: g.code, Message: g.msg}
	if g.data != "" {
		e.Data = json.RawMessage(g.data)
	}
	return &wire.UpstreamError{Remote: "r1", HTTPStatus: g.status, Err: e}
}

const (
	mCall    = "eth_call"
	mLogs    = "eth_getLogs"
	mSend    = "eth_sendRawTransaction"
	mBalance = "eth_getBalance"
	mReceipt = "eth_getTransactionReceipt"
)

// classifyRPCTests has a case (or more) for every row of PROVIDER-ERRORS.md, in its
// order: (a) caller, (b) retry, (c) throttled, (d) too large, then §3.
var classifyRPCTests = []struct {
	name string
	give classifyGive
	want Verdict
}{
	// (a) Caller's fault.
	{"geth revert, empty data", classifyGive{mCall, 200, 3, "execution reverted", `"0x"`}, wantCaller(ReasonRevert)},
	{"geth revert, Error(string)", classifyGive{mCall, 200, 3, "execution reverted: user error", `"0x08c379a00000000000000000000000000000000000000000000000000000000000000020000000000000000000000000000000000000000000000000000000000000000a75736572206572726f72"`}, wantCaller(ReasonRevert)},
	{"geth revert, Panic(uint256)", classifyGive{"eth_estimateGas", 200, 3, "execution reverted: assert(false)", `"0x4e487b710000000000000000000000000000000000000000000000000000000000000001"`}, wantCaller(ReasonRevert)},
	{"geth revert, custom error", classifyGive{mCall, 200, 3, "execution reverted", `"0x77726f6e672d63616c6c6461746173697a65"`}, wantCaller(ReasonRevert)},
	{"reth revert over ws", classifyGive{mCall, 0, 3, "execution reverted: Ownable: caller is not the owner", `"0x08c379a0"`}, wantCaller(ReasonRevert)},
	{"revert reason says rate limit", classifyGive{mCall, 200, 3, "execution reverted: rate limit exceeded", `"0x08c379a0"`}, wantCaller(ReasonRevert)},
	{"revert reason says block not found", classifyGive{mCall, 200, 3, "execution reverted: block not found", ""}, wantCaller(ReasonRevert)},
	{"revert reason says range too large", classifyGive{mCall, 200, -32000, "execution reverted: block range too large", ""}, wantCaller(ReasonRevert)},
	{"besu old revert -32000", classifyGive{mCall, 200, -32000, "Execution reverted", `"0x"`}, wantCaller(ReasonRevert)},
	{"besu new revert code 3", classifyGive{mCall, 200, 3, "Execution reverted: insufficient allowance", `"0x08c379a0"`}, wantCaller(ReasonRevert)},
	{"alchemy revert with Reverted prefix", classifyGive{mCall, 200, 3, "execution reverted", `"Reverted 0x08c379a0"`}, wantCaller(ReasonRevert)},
	{"geth out of gas", classifyGive{mCall, 200, -32000, "out of gas", ""}, wantCaller(ReasonExecution)},
	{"geth invalid jump destination", classifyGive{mCall, 200, -32000, "invalid jump destination", ""}, wantCaller(ReasonExecution)},
	{"geth invalid opcode", classifyGive{mCall, 200, -32000, "invalid opcode: INVALID", ""}, wantCaller(ReasonExecution)},
	{"geth stack underflow", classifyGive{mCall, 200, -32000, "stack underflow (0 <=> 2)", ""}, wantCaller(ReasonExecution)},
	{"geth max call depth", classifyGive{mCall, 200, -32000, "max call depth exceeded", ""}, wantCaller(ReasonExecution)},
	{"geth pre-execution wrap", classifyGive{mCall, 200, -32000, "err: intrinsic gas too low: have 0, want 21000 (supplied gas 0)", ""}, wantCaller(ReasonInvalidTx)},
	{"reth -32003 out of gas", classifyGive{mCall, 200, -32003, "out of gas: gas required exceeds: 50000", ""}, wantCaller(ReasonExecution)},
	{"reth evm error", classifyGive{mCall, 200, -32003, "evm error: OpcodeNotFound", ""}, wantCaller(ReasonExecution)},
	{"reth -32003 intrinsic gas", classifyGive{mSend, 200, -32003, "intrinsic gas too low", ""}, wantCaller(ReasonInvalidTx)},
	{"reth -32000 nonce too high", classifyGive{mSend, 200, -32000, "nonce too high", ""}, wantCaller(ReasonInvalidTx)},
	{"hardhat vm exception", classifyGive{mCall, 200, -32603, "VM Exception while processing transaction: reverted with reason string 'nope'", ""}, wantCaller(ReasonRevert)},
	{"ganache transaction: revert", classifyGive{mCall, 200, -32000, "Returned error: transaction: revert", ""}, wantCaller(ReasonRevert)},
	{"geth gas required exceeds allowance", classifyGive{"eth_estimateGas", 200, -32000, "gas required exceeds allowance (30000000)", ""}, wantCaller(ReasonExecution)},
	{"geth insufficient funds on eth_call", classifyGive{mCall, 200, -32000, "insufficient funds for gas * price + value: address 0xabc have 0 want 1", ""}, wantCaller(ReasonInsufficientFunds)},
	{"reth insufficient funds -32003", classifyGive{mSend, 200, -32003, "insufficient funds for gas * price + value", ""}, wantCaller(ReasonInsufficientFunds)},
	{"nethermind insufficient funds", classifyGive{mSend, 200, -32000, "InsufficientFunds, Account 0xabc balance is too low", ""}, wantCaller(ReasonInsufficientFunds)},
	{"insufficient funds on debug_ replay", classifyGive{"debug_traceTransaction", 200, -32000, "insufficient funds for gas * price + value", ""}, wantRetry(ReasonInsufficientFunds)},
	{"insufficient funds on trace_ replay", classifyGive{"trace_replayTransaction", 200, -32000, "insufficient funds for gas * price + value", ""}, wantRetry(ReasonInsufficientFunds)},
	{"geth fee cap below base fee", classifyGive{mSend, 200, -32000, "max fee per gas less than block base fee: address 0xabc, maxFeePerGas: 1, baseFee: 7", ""}, wantCaller(ReasonInvalidTx)},
	{"geth tx fee cap", classifyGive{mSend, 200, -32000, "tx fee (1.50 ether) exceeds the configured cap (1.00 ether)", ""}, wantRetry(ReasonTxPoolPolicy)},
	{"geth replay protection", classifyGive{mSend, 200, -32000, "only replay-protected (EIP-155) transactions allowed over RPC", ""}, wantRetry(ReasonTxPoolPolicy)},
	{"infura docs cannot unmarshal", classifyGive{mBalance, 200, -32602, "invalid argument 0: json: cannot unmarshal hex string without 0x prefix into Go value of type common.Address", ""}, wantCaller(ReasonInvalidParams)},
	{"quicknode cannot unmarshal", classifyGive{mBalance, 200, -32602, "cannot unmarshal hex string without 0x prefix", ""}, wantCaller(ReasonInvalidParams)},
	{"geth invalid argument", classifyGive{mBalance, 200, -32602, "invalid argument 0: hex string without 0x prefix", ""}, wantCaller(ReasonInvalidParams)},
	{"geth 1.17 invalid block range params", classifyGive{mLogs, 200, -32602, "invalid block range params", ""}, wantCaller(ReasonInvalidParams)},
	{"geth 1.16 invalid block range params", classifyGive{mLogs, 200, -32000, "invalid block range params", ""}, wantCaller(ReasonInvalidParams)},
	{"geth blockhash with range", classifyGive{mLogs, 200, -32602, "can't specify fromBlock/toBlock with blockHash", ""}, wantCaller(ReasonInvalidParams)},
	{"geth old blockhash with range", classifyGive{mLogs, 200, -32000, "can't specify fromBlock/toBlock with blockHash", ""}, wantCaller(ReasonInvalidParams)},
	{"geth pending logs", classifyGive{mLogs, 200, -32000, "pending logs are not supported", ""}, wantCaller(ReasonInvalidParams)},
	{"geth exceed max topics", classifyGive{mLogs, 200, -32000, "exceed max topics", ""}, wantCaller(ReasonInvalidParams)},
	{"parse error", classifyGive{mCall, 200, -32700, "parse error", ""}, wantCaller(ReasonInvalidRequest)},
	{"invalid request", classifyGive{mCall, 200, -32600, "invalid request", ""}, wantCaller(ReasonInvalidRequest)},
	{"empty batch", classifyGive{mCall, 200, -32600, "empty batch", ""}, wantCaller(ReasonInvalidRequest)},
	{"rlp expected input list", classifyGive{mSend, 200, -32000, "rlp: expected input list for types.LegacyTx", ""}, wantCaller(ReasonInvalidTx)},
	{"rlp input string too short", classifyGive{mSend, 200, -32000, "rlp: input string too short for common.Address, decoding into (types.DynamicFeeTx).To", ""}, wantCaller(ReasonInvalidTx)},
	{"rlp error sent as -32602", classifyGive{mSend, 200, -32602, "rlp: expected input list for types.LegacyTx", ""}, wantCaller(ReasonInvalidParams)},
	{"typed transaction too short", classifyGive{mSend, 200, -32000, "typed transaction too short", ""}, wantCaller(ReasonInvalidTx)},
	{"besu -32001 nonce too low", classifyGive{mSend, 200, -32001, "Nonce too low", ""}, wantCaller(ReasonNonceTooLow)},
	{"besu -32002 invalid signature", classifyGive{mSend, 200, -32002, "Invalid signature", ""}, wantCaller(ReasonInvalidTx)},
	{"besu -32003 intrinsic gas", classifyGive{mSend, 200, -32003, "Intrinsic gas exceeds gas limit", ""}, wantCaller(ReasonInvalidTx)},
	{"besu -32004 upfront cost", classifyGive{mSend, 200, -32004, "Upfront cost exceeds account balance", ""}, wantCaller(ReasonInsufficientFunds)},
	{"besu -32006 nonce too high", classifyGive{mSend, 200, -32006, "Nonce too high", ""}, wantCaller(ReasonInvalidTx)},
	{"besu -32005 tx gas limit (not a rate limit)", classifyGive{mSend, 200, -32005, "Transaction gas limit exceeds block gas limit", ""}, wantCaller(ReasonInvalidTx)},
	{"besu -32007 sender not authorized (not a rate limit)", classifyGive{mSend, 200, -32007, "Sender account not authorized to send transactions", ""}, wantRetry(ReasonTxPoolPolicy)},
	{"besu -32009 min gas price", classifyGive{mSend, 200, -32009, "Gas price below configured minimum gas price", ""}, wantRetry(ReasonTxPoolPolicy)},
	{"besu -32009 below base fee", classifyGive{mSend, 200, -32009, "Gas price below current base fee", ""}, wantCaller(ReasonInvalidTx)},
	{"nethermind revert", classifyGive{mCall, 200, 3, "execution reverted", `"0x"`}, wantCaller(ReasonRevert)},
	{"nethermind vm error", classifyGive{mCall, 200, -32015, "VM execution error.", `"stack underflow"`}, wantCaller(ReasonExecution)},
	{"nethermind invalid input", classifyGive{mCall, 200, -32000, "Invalid input", ""}, wantCaller(ReasonInvalidParams)},
	// [V1] would return any -32000 without "not found" to the caller; the
	// detailed rows (erpc's fallback) try another remote, without a fault.
	{"venn rule: unknown -32000", classifyGive{mCall, 200, -32000, "something odd happened", ""}, wantRetry(ReasonUnknown)},
	{"venn rule: -32000 not found", classifyGive{"eth_getFilterChanges", 200, -32000, "filter not found", ""}, wantRetry(ReasonMissingData)},
	{"venn rule: unknown vendor code", classifyGive{mCall, 200, -32042, "odd", ""}, wantRetry(ReasonUnknown)},

	// (b) Try another remote.
	{"geth header not found", classifyGive{mBalance, 200, -32000, "header not found", ""}, wantRetry(ReasonHeaderNotFound)},
	{"geth missing trie node", classifyGive{mBalance, 200, -32000, "missing trie node 5a3c (path ) state 0x1 is not available, not found", ""}, wantRetry(ReasonMissingState)},
	{"geth historical state", classifyGive{mBalance, 200, -32000, "historical state 0xabc is not available", ""}, wantRetry(ReasonMissingState)},
	{"geth path state not available", classifyGive{mBalance, 200, -32000, "state 0xabc is not available", ""}, wantRetry(ReasonMissingState)},
	{"geth 4444 pruned", classifyGive{"eth_getBlockByNumber", 200, 4444, "pruned history unavailable", ""}, wantRetry(ReasonPruned)},
	{"reth 4444 with range", classifyGive{"eth_getBlockByNumber", 200, 4444, "pruned history unavailable: requested 5, earliest available 100", ""}, wantPruned(100)},
	{"besu 4444 capitalised", classifyGive{"eth_getBlockByNumber", 200, 4444, "Pruned history unavailable", ""}, wantRetry(ReasonPruned)},
	{"4444 unknown text", classifyGive{"eth_getBlockByNumber", 200, 4444, "history expired", ""}, wantRetry(ReasonPruned)},
	{"geth unknown block", classifyGive{mLogs, 200, -32000, "unknown block", ""}, wantRetry(ReasonHeaderNotFound)},
	{"geth finalized block not found", classifyGive{"eth_getBlockByNumber", 200, -32000, "finalized block not found", ""}, wantRetry(ReasonTagUnsupported)},
	{"geth safe block not found", classifyGive{"eth_getBlockByNumber", 200, -32000, "safe block not found", ""}, wantRetry(ReasonTagUnsupported)},
	{"geth pending block not available", classifyGive{"eth_getBlockByNumber", 200, -32000, "pending block is not available", ""}, wantRetry(ReasonTagUnsupported)},
	{"geth finalized header not found", classifyGive{mLogs, 200, -32000, "finalized header not found", ""}, wantRetry(ReasonTagUnsupported)},
	{"geth 1.17 beyond head", classifyGive{mLogs, 200, -32602, "block range extends beyond current head block", ""}, wantRetry(ReasonLagging)},
	{"reth beyond head", classifyGive{mLogs, 200, -32602, "block range extends beyond current head block: requested 105, head 100", ""}, wantRetry(ReasonLagging)},
	{"reth request beyond head", classifyGive{mLogs, 200, -32602, "request beyond head block: requested 105, head 100", ""}, wantRetry(ReasonLagging)},
	{"reth -32001 block not found", classifyGive{"eth_getBlockReceipts", 200, -32001, "block not found: hash 0xabc", ""}, wantRetry(ReasonHeaderNotFound)},
	{"geth tx indexing", classifyGive{mReceipt, 200, -32000, "transaction indexing is in progress", `"transaction indexing is in progress"`}, wantRetry(ReasonMissingData)},
	{"erigon pruning", classifyGive{mBalance, 200, -32000, "old data not available due to pruning", ""}, wantRetry(ReasonPruned)},
	{"erigon indexing incomplete", classifyGive{mLogs, 200, -32000, "block 100 exists but transaction indexing is not yet complete", ""}, wantRetry(ReasonMissingData)},
	{"nethermind no state", classifyGive{mBalance, 200, -32000, "No state available for block 0xabc", ""}, wantRetry(ReasonMissingState)},
	{"besu -39001 unknown block", classifyGive{mBalance, 200, -39001, "Unknown block", ""}, wantRetry(ReasonHeaderNotFound)},
	{"-39001 unknown text", classifyGive{mBalance, 200, -39001, "nope", ""}, wantRetry(ReasonHeaderNotFound)},
	{"besu world state", classifyGive{mBalance, 200, -32000, "World state unavailable", ""}, wantRetry(ReasonMissingState)},
	{"besu initial sync", classifyGive{mBalance, 200, -32008, "Initial sync is still in progress", ""}, wantRetry(ReasonSyncing)},
	{"besu txpool disabled", classifyGive{"txpool_content", 200, -32002, "Transaction pool not enabled", ""}, wantRetry(ReasonMethodUnsupported)},
	{"op no historical rpc", classifyGive{mCall, 200, -32000, "no historical RPC is available for this historical (pre-bedrock) execution request", ""}, wantRetry(ReasonPruned)},
	{"op historical backend", classifyGive{mCall, 200, -32000, "historical backend error: timeout", ""}, wantRetry(ReasonPruned)},
	{"moonbeam state discarded", classifyGive{mBalance, 200, -32603, "state already discarded for BlockId::Hash(0xabc)", ""}, wantRetry(ReasonMissingState)},
	{"kava node state pruned", classifyGive{mBalance, 200, -32000, "node state is pruned", ""}, wantRetry(ReasonPruned)},
	{"zksync lowest height", classifyGive{mBalance, 200, -32000, "height 5 is not available, lowest height is 100", ""}, wantPruned(100)},
	{"purged for block", classifyGive{mBalance, 200, -32000, "data purged for block 5", ""}, wantRetry(ReasonPruned)},
	{"block with such an id is pruned", classifyGive{"eth_getBlockByHash", 200, -32000, "Block with such an ID is pruned", ""}, wantRetry(ReasonPruned)},
	{"unsupported block number", classifyGive{mBalance, 200, -32000, "unsupported block number 5", ""}, wantRetry(ReasonPruned)},
	{"arbitrum has been pruned", classifyGive{mBalance, 200, -32000, "block 5 has been pruned; earliest available is 100", ""}, wantPruned(100)},
	{"alchemy code 3 unknown block", classifyGive{mBalance, 400, 3, "Unknown block", ""}, wantRetry(ReasonHeaderNotFound)},
	{"alchemy code 3 block not found", classifyGive{mBalance, 200, 3, "block not found with number 0x1234", ""}, wantRetry(ReasonHeaderNotFound)},
	{"drpc code 40000", classifyGive{mLogs, 200, -32000, "ChainException: Unexpected error (code=40000)", ""}, wantRetry(ReasonMissingData)},
	{"drpc invalid block range", classifyGive{mLogs, 200, -32602, "invalid block range", ""}, wantRetry(ReasonMissingData)},
	{"geth method does not exist", classifyGive{"debug_traceBlockByNumber", 200, -32601, "the method debug_traceBlockByNumber does not exist/is not available", ""}, wantRetry(ReasonMethodUnsupported)},
	{"infura method not found", classifyGive{"trace_block", 200, -32601, "Method not found", ""}, wantRetry(ReasonMethodUnsupported)},
	// The Infura row calls -32001 unsupported; EIP-1898 uses it for a
	// missing block, so it is missing data (see codeVerdict).
	{"infura -32001 resource not found", classifyGive{"trace_block", 200, -32001, "resource not found", ""}, wantRetry(ReasonMissingData)},
	{"infura -32004 method not supported", classifyGive{"trace_block", 200, -32004, "method not supported", ""}, wantRetry(ReasonMethodUnsupported)},
	{"-32004 unknown text", classifyGive{"trace_block", 200, -32004, "nope", ""}, wantRetry(ReasonMethodUnsupported)},
	{"quicknode -32612", classifyGive{"trace_block", 200, -32612, "nope", ""}, wantRetry(ReasonMethodUnsupported)},
	{"quicknode -32613", classifyGive{"trace_block", 200, -32613, "nope", ""}, wantRetry(ReasonMethodUnsupported)},
	{"besu -32604 method not enabled", classifyGive{"debug_traceTransaction", 200, -32604, "Method not enabled", ""}, wantRetry(ReasonMethodUnsupported)},
	{"chainstack plan", classifyGive{"debug_traceTransaction", 200, -32000, "Access to archival, debug, or trace data is not included in your current plan", ""}, wantRetry(ReasonMethodUnsupported)},
	{"geth request timed out", classifyGive{mCall, 200, -32002, "request timed out", ""}, wantFault(ReasonTimeout)},
	{"geth evm timeout", classifyGive{mCall, 200, -32000, "execution aborted (timeout = 5s)", ""}, wantRetry(ReasonTimeout)},
	{"nethermind -32016 timeout", classifyGive{mCall, 200, -32016, "eth_call request was canceled due to enabled timeout.", ""}, wantFault(ReasonTimeout)},
	{"besu -32603 timeout expired", classifyGive{mCall, 200, -32603, "Timeout expired", ""}, wantFault(ReasonTimeout)},
	{"tracer execution timeout", classifyGive{"debug_traceTransaction", 200, -32000, "execution timeout", ""}, wantRetry(ReasonTimeout)},
	{"proxyd backend offline", classifyGive{mCall, 503, -32010, "backend offline", ""}, wantFault(ReasonServerError)},
	{"proxyd no healthy backend", classifyGive{mLogs, 503, -32011, "no backend is currently healthy to serve traffic", ""}, wantFault(ReasonServerError)},
	{"proxyd backend not healthy", classifyGive{mCall, 503, -32018, "backend is currently not healthy to serve traffic", ""}, wantFault(ReasonServerError)},
	{"proxyd gateway timeout", classifyGive{mCall, 504, -32015, "gateway timeout", ""}, wantFault(ReasonTimeout)},
	{"proxyd invalid response", classifyGive{mCall, 500, -32013, "backend returned an invalid response", ""}, wantFault(ReasonServerError)},
	{"proxyd block out of range", classifyGive{"eth_getBlockByNumber", 400, -32019, "block is out of range", ""}, wantRetry(ReasonLagging)},
	{"internal error", classifyGive{mCall, 200, -32603, "internal error", ""}, wantFault(ReasonServerError)},
	{"-32603 unknown text", classifyGive{mCall, 200, -32603, "boom", ""}, wantFault(ReasonServerError)},
	{"unknown text under 5xx", classifyGive{mCall, 502, -32000, "boom", ""}, wantFault(ReasonHTTP5xx)},
	{"alchemy -32600 must be authenticated", classifyGive{mCall, 200, -32600, "Must be authenticated!", ""}, wantFault(ReasonUnauthorized)},
	{"infura invalid project id", classifyGive{mCall, 401, -32002, "invalid project id", ""}, wantFault(ReasonUnauthorized)},
	{"infura -33100", classifyGive{mCall, 403, -33100, "nope", ""}, wantFault(ReasonUnauthorized)},
	{"drpc token invalid", classifyGive{mCall, 200, -32000, "token is invalid", ""}, wantFault(ReasonUnauthorized)},
	{"infura origin whitelist", classifyGive{mCall, 403, -32002, "rejected due to project ID settings: unspecified origin not on whitelist", ""}, wantFault(ReasonUnauthorized)},
	{"quicknode 401 json", classifyGive{mCall, 401, -32000, "unauthorized", ""}, wantFault(ReasonUnauthorized)},
	{"403 unknown text", classifyGive{mCall, 403, -32000, "go away", ""}, wantFault(ReasonUnauthorized)},

	// (c) Rate limited.
	{"alchemy 429 CU/s", classifyGive{mCall, 429, 429, "Your app has exceeded its compute units per second capacity. If you have retries enabled, you can safely ignore this message.", ""}, wantThrottled(ReasonRateLimited)},
	{"alchemy ws code 429", classifyGive{mCall, 0, 429, "Your app has exceeded its compute units per second capacity.", ""}, wantThrottled(ReasonRateLimited)},
	{"alchemy -32016 rate limit", classifyGive{mCall, 200, -32016, "rate limit exceeded for this IP", ""}, wantThrottled(ReasonRateLimited)},
	{"alchemy monthly capacity", classifyGive{mCall, 429, -32000, "Monthly capacity limit exceeded. Visit https://dashboard.alchemy.com/settings/billing to upgrade", ""}, wantThrottled(ReasonBilling)},
	{"infura project rate", classifyGive{mCall, 429, -32005, "project ID request rate exceeded", `{"see":"https://infura.io/dashboard","current_rps":13.333,"allowed_rps":10.0,"backoff_seconds":30.0}`}, wantThrottled(ReasonRateLimited)},
	{"infura daily count", classifyGive{mCall, 429, -32005, "daily request count exceeded, request rate limited", ""}, wantThrottled(ReasonRateLimited)},
	{"infura 402", classifyGive{mCall, 402, 402, "Payment Required", `{"event":-33000}`}, wantThrottled(ReasonBilling)},
	{"infura code 429", classifyGive{mCall, 429, 429, "Too Many Requests", `{"event":-33200}`}, wantThrottled(ReasonRateLimited)},
	{"quicknode plan", classifyGive{mCall, 429, 429, "Your request rate is higher than your plan allows", ""}, wantThrottled(ReasonRateLimited)},
	{"quicknode -32007 200", classifyGive{mCall, 200, -32007, "100/second request limit reached - reduce calls per second or upgrade your account at quicknode.com", ""}, wantThrottled(ReasonRateLimited)},
	{"quicknode -32007 429", classifyGive{mCall, 429, -32007, "100/second request limit reached - reduce calls per second or upgrade your account at quicknode.com", ""}, wantThrottled(ReasonRateLimited)},
	{"quicknode -32012 credits", classifyGive{mCall, 200, -32012, "credits limited to 6000/sec", ""}, wantThrottled(ReasonRateLimited)},
	{"quicknode -32009", classifyGive{mCall, 200, -32009, "nope", ""}, wantThrottled(ReasonRateLimited)},
	{"drpc code 30", classifyGive{mLogs, 200, 30, "Request timeout on the free tier, please upgrade your tier to the paid one", ""}, wantThrottled(ReasonRateLimited)},
	{"chainstack rps", classifyGive{mCall, 429, -32000, "You've exceeded the RPS limit available on the current plan.", ""}, wantThrottled(ReasonRateLimited)},
	{"tenderly -32005", classifyGive{mCall, 429, -32005, "rate limit exceeded", ""}, wantThrottled(ReasonRateLimited)},
	{"proxyd -32016", classifyGive{mCall, 429, -32016, "over rate limit", ""}, wantThrottled(ReasonRateLimited)},
	{"proxyd -32012", classifyGive{mCall, 429, -32012, "backend is over capacity", ""}, wantThrottled(ReasonRateLimited)},
	{"proxyd -32024", classifyGive{mCall, 429, -32024, "too many requests", ""}, wantThrottled(ReasonRateLimited)},
	{"proxyd wrapped in -32000", classifyGive{mCall, 200, -32000, `429 Too Many Requests: {"jsonrpc":"2.0","error":{"code":-32016,"message":"over rate limit"}}`, ""}, wantThrottled(ReasonRateLimited)},
	{"op sequencer sender limit", classifyGive{mSend, 429, -32017, "sender is over rate limit", ""}, wantCaller(ReasonSenderRateLimited)},
	{"nethermind -32005", classifyGive{mCall, 200, -32005, "Too many concurrent requests", ""}, wantThrottled(ReasonRateLimited)},
	{"jsonrpsee server busy", classifyGive{mCall, 200, -32009, "Server is busy, try again later", ""}, wantThrottled(ReasonRateLimited)},
	{"erigon overload", classifyGive{mCall, 503, -32005, "overloaded", ""}, wantThrottled(ReasonRateLimited)},
	{"bsc limit exceeded", classifyGive{mLogs, 200, -32005, "limit exceeded", ""}, wantThrottled(ReasonRateLimited)},
	{"heuristic exceeded the quota", classifyGive{mCall, 200, -32000, "Exceeded the quota usage", ""}, wantThrottled(ReasonRateLimited)},
	{"heuristic reached the free tier", classifyGive{mCall, 200, -32005, "You have reached the free tier limits", ""}, wantThrottled(ReasonBilling)},
	{"heuristic billing url", classifyGive{mCall, 200, -32000, "see https://example.com/billing", ""}, wantThrottled(ReasonBilling)},

	// (d) Too large.
	{"alchemy log response size", classifyGive{mLogs, 200, -32602, "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no limit on the response size, or you can request any block range with a cap of 10K logs in the response. Based on your parameters and the response size limit, this block range should work: [0x0, 0x1f3]", ""}, wantTooLarge(ReasonTooManyResults, 500)},
	{"alchemy free tier 500", classifyGive{mLogs, 400, -32600, "You can make eth_getLogs requests with up to a 500 block range. Based on your parameters, this block range should work: [0x123c9b2, 0x123cba5]", ""}, wantTooLarge(ReasonRangeTooLarge, 500)},
	{"geth max addresses", classifyGive{mLogs, 200, -32000, "exceed max addresses or topics per search position", ""}, wantTooLarge(ReasonTooManyAddresses, 0)},
	{"infura 10k results", classifyGive{mLogs, 200, -32005, "query returned more than 10000 results. Try with this block range [0xBDE5F8, 0x102DBCC].", `{"from":"0xBDE5F8","limit":10000,"to":"0x102DBCC"}`}, wantTooLarge(ReasonTooManyResults, 4519381)},
	{"infura 10k results, hint in data only", classifyGive{mLogs, 200, -32005, "query returned more than 10000 results", `{"from":"0x10","limit":10000,"to":"0x20"}`}, wantTooLarge(ReasonTooManyResults, 17)},
	{"infura live range cap", classifyGive{mLogs, 200, -32602, "range 1000000 exceeds limit of 10000", ""}, wantTooLarge(ReasonRangeTooLarge, 10000)},
	{"infura filters cap", classifyGive{mLogs, 200, -32000, "This query contains 5006 filters. The current limit is 5000.", ""}, wantTooLarge(ReasonTooManyAddresses, 0)},
	{"quicknode 413 -32614", classifyGive{mLogs, 413, -32614, "eth_getLogs is limited to a 10,000 range", ""}, wantTooLarge(ReasonRangeTooLarge, 10000)},
	{"quicknode -32614 unknown text", classifyGive{mLogs, 413, -32614, "nope", ""}, wantTooLarge(ReasonRangeTooLarge, 0)},
	{"quicknode 413 content too large", classifyGive{mCall, 413, -32000, "content too large", ""}, wantTooLarge(ReasonRequestTooLarge, 0)},
	{"content too large without a status", classifyGive{mCall, 0, -32000, "content too large", ""}, wantTooLarge(ReasonRequestTooLarge, 0)},
	{"quicknode 413 json body", classifyGive{mCall, 413, -32000, "request entity too large", ""}, wantTooLarge(ReasonRequestTooLarge, 0)},
	{"413 unknown text", classifyGive{mCall, 413, -32600, "nope", ""}, wantTooLarge(ReasonRequestTooLarge, 0)},
	{"ankr too wide", classifyGive{mLogs, 200, -32600, "block range is too wide", ""}, wantTooLarge(ReasonRangeTooLarge, 0)},
	{"ankr max results", classifyGive{mLogs, 200, -32000, "query exceeds max results", ""}, wantTooLarge(ReasonTooManyResults, 0)},
	{"ankr tac distance", classifyGive{mLogs, 200, -32000, "maximum [from, to] blocks distance: 10000", ""}, wantTooLarge(ReasonRangeTooLarge, 10000)},
	{"drpc code 35", classifyGive{mLogs, 200, 35, "ranges over 10000 blocks are not supported on freetier", ""}, wantTooLarge(ReasonRangeTooLarge, 10000)},
	{"reth max results with hint", classifyGive{mLogs, 200, -32602, "query exceeds max results 20000, retry with the range 18000000-18000499", ""}, wantTooLarge(ReasonTooManyResults, 500)},
	{"drpc retry with the range", classifyGive{mLogs, 200, -32602, "retry with the range 100-199", ""}, wantTooLarge(ReasonRangeTooLarge, 100)},
	{"reth max block range", classifyGive{mLogs, 200, -32602, "query exceeds max block range 100000", ""}, wantTooLarge(ReasonRangeTooLarge, 100000)},
	{"jsonrpsee response too big", classifyGive{"debug_traceBlockByNumber", 200, -32008, "Response is too big", `"Exceeded max limit of 167772160"`}, wantTooLarge(ReasonResponseTooLarge, 0)},
	{"jsonrpsee request too big", classifyGive{mCall, 200, -32007, "Request is too big", ""}, wantTooLarge(ReasonRequestTooLarge, 0)},
	{"jsonrpsee batch request", classifyGive{mCall, 200, -32010, "The batch request was too large", ""}, wantTooLarge(ReasonBatchTooLarge, 0)},
	{"jsonrpsee batch response", classifyGive{mCall, 200, -32011, "The batch response was too large", ""}, wantTooLarge(ReasonBatchTooLarge, 0)},
	{"chainstack range limit", classifyGive{mLogs, 200, -32602, "Block range limit exceeded.", ""}, wantTooLarge(ReasonRangeTooLarge, 0)},
	{"blastapi plan", classifyGive{mLogs, 400, -32602, "Invalid params", `{"range":"the range 55074203 - 55124202 exceeds the range allowed for your plan (49999 > 2000)."}`}, wantTooLarge(ReasonRangeTooLarge, 2000)},
	{"geth 1.17 rangelimit", classifyGive{mLogs, 200, -32602, "exceed maximum block range 1000", ""}, wantTooLarge(ReasonRangeTooLarge, 1000)},
	{"geth batch too large", classifyGive{mCall, 200, -32600, "batch too large", ""}, wantTooLarge(ReasonBatchTooLarge, 0)},
	{"geth response too large", classifyGive{mCall, 200, -32003, "response too large", ""}, wantTooLarge(ReasonResponseTooLarge, 0)},
	{"erigon batch limit", classifyGive{mCall, 200, -32600, "batch limit 100 exceeded (can increase by --rpc.batch.limit). Requested batch of size: 150", ""}, wantTooLarge(ReasonBatchTooLarge, 0)},
	{"erigon old batch limit", classifyGive{mCall, 200, -32000, "batch limit 100 exceeded", ""}, wantTooLarge(ReasonBatchTooLarge, 0)},
	{"besu range limit", classifyGive{mLogs, 200, -32005, "Requested range exceeds maximum RPC range limit", ""}, wantTooLarge(ReasonRangeTooLarge, 0)},
	{"besu batch size", classifyGive{mCall, 200, -32005, "Number of requests exceeds max batch size", ""}, wantTooLarge(ReasonBatchTooLarge, 0)},
	{"nethermind max logs", classifyGive{mLogs, 200, -32005, "Too many logs requested. Max logs per response is 20000.", ""}, wantTooLarge(ReasonTooManyResults, 0)},
	{"proxyd max block range", classifyGive{mLogs, 400, -32602, "block range greater than 10000 max", ""}, wantTooLarge(ReasonRangeTooLarge, 10000)},
	{"proxyd batch calls", classifyGive{mCall, 413, -32014, "too many RPC calls in batch request", ""}, wantTooLarge(ReasonBatchTooLarge, 0)},
	{"proxyd body too large", classifyGive{mCall, 413, -32021, "request body too large", ""}, wantTooLarge(ReasonRequestTooLarge, 0)},
	{"proxyd backend response too large", classifyGive{mLogs, 500, -32020, "backend response too large", ""}, wantTooLarge(ReasonResponseTooLarge, 0)},
	{"bsc maximum block range", classifyGive{mLogs, 200, -32000, "exceed maximum block range: 5000", ""}, wantTooLarge(ReasonRangeTooLarge, 5000)},
	{"publicnode maximum block range", classifyGive{mLogs, 200, -32000, "exceed maximum block range: 50,000", ""}, wantTooLarge(ReasonRangeTooLarge, 50000)},
	{"op block range is too large", classifyGive{mLogs, 200, -32000, "Block range is too large", ""}, wantTooLarge(ReasonRangeTooLarge, 0)},
	{"base block range too large", classifyGive{mLogs, 200, -32000, "block range too large", ""}, wantTooLarge(ReasonRangeTooLarge, 0)},
	{"arbitrum logs matched (a count, not a span)", classifyGive{mLogs, 200, -32000, "logs matched by query exceeds limit of 10000", ""}, wantTooLarge(ReasonTooManyResults, 0)},
	{"avalanche maximum is set to", classifyGive{mLogs, 200, -32000, "requested too many blocks from 0 to 27842567, maximum is set to 2048", ""}, wantTooLarge(ReasonRangeTooLarge, 2048)},
	{"thirdweb maximum allowed", classifyGive{mLogs, 200, -32005, "Maximum allowed number of requested blocks is 1000", ""}, wantTooLarge(ReasonRangeTooLarge, 1000)},
	{"coinbase at most", classifyGive{mLogs, 200, -32000, "please limit the query to at most 1000 blocks", ""}, wantTooLarge(ReasonRangeTooLarge, 1000)},
	{"cloudflare max range", classifyGive{mLogs, 200, -32000, "Max range: 800", ""}, wantTooLarge(ReasonRangeTooLarge, 800)},
	{"blockpi limited to", classifyGive{mLogs, 200, -32602, "eth_getLogs is limited to 1024 block range", ""}, wantTooLarge(ReasonRangeTooLarge, 1024)},
	{"merkle max is 1k", classifyGive{mLogs, 200, -32603, "eth_getLogs range is too large, max is 1k blocks", ""}, wantTooLarge(ReasonRangeTooLarge, 1000)},
	{"moonbeam maximum", classifyGive{mLogs, 200, -32000, "block range is too wide (maximum 1024)", ""}, wantTooLarge(ReasonRangeTooLarge, 1024)},
	{"cdk-erigon max range", classifyGive{mLogs, 200, -32005, "block range too large, max range: 1000", ""}, wantTooLarge(ReasonRangeTooLarge, 1000)},
	{"morph larger than max", classifyGive{mLogs, 200, -32000, "block range is larger than max block range", ""}, wantTooLarge(ReasonRangeTooLarge, 0)},
	{"sei maximum allowed is", classifyGive{mLogs, 200, -32000, "block range too large (2000), maximum allowed is 1000 blocks", ""}, wantTooLarge(ReasonRangeTooLarge, 1000)},
	{"tenderly payload only in data", classifyGive{mLogs, 200, -32602, "invalid params", `{"payload":"range 9009594 is bigger than range limit 2000"}`}, wantTooLarge(ReasonRangeTooLarge, 2000)},

	// §3.4 eth_sendRawTransaction outcomes.
	{"geth already known", classifyGive{mSend, 200, -32000, "already known", ""}, wantCaller(ReasonAlreadyKnown)},
	{"besu known transaction", classifyGive{mSend, 200, -32000, "Known transaction", ""}, wantCaller(ReasonAlreadyKnown)},
	{"nethermind AlreadyKnown", classifyGive{mSend, 200, -32010, "AlreadyKnown", ""}, wantCaller(ReasonAlreadyKnown)},
	{"geth nonce too low", classifyGive{mSend, 200, -32000, "nonce too low: next nonce 5, tx nonce 3", ""}, wantCaller(ReasonNonceTooLow)},
	{"nethermind OldNonce", classifyGive{mSend, 200, -32010, "OldNonce", ""}, wantCaller(ReasonNonceTooLow)},
	{"replacement underpriced", classifyGive{mSend, 200, -32000, "replacement transaction underpriced", ""}, wantCaller(ReasonReplacementUnderpriced)},
	{"transaction underpriced", classifyGive{mSend, 200, -32000, "transaction underpriced: tip needed 1, tip permitted 0", ""}, wantRetry(ReasonTxPoolPolicy)},
	{"reth txpool is full", classifyGive{mSend, 200, -32003, "txpool is full", ""}, wantRetry(ReasonTxPoolPolicy)},
	{"monad fee too low", classifyGive{mSend, 200, -32000, "transaction fee too low", ""}, wantRetry(ReasonTxPoolPolicy)},
	{"monad rejected", classifyGive{mSend, 200, -32000, "rejected", ""}, wantRetry(ReasonTxPoolPolicy)},
	{"eip-1474 transaction rejected stays the caller's", classifyGive{mSend, 200, -32003, "transaction rejected", ""}, wantCaller(ReasonInvalidTx)},
	{"geth account limit (not a rate limit)", classifyGive{mSend, 200, -32000, "account limit exceeded", ""}, wantRetry(ReasonTxPoolPolicy)},
	{"geth out of capacity (not a rate limit)", classifyGive{mSend, 200, -32000, "out of capacity", ""}, wantRetry(ReasonTxPoolPolicy)},

	// §3.5-3.7 and geth's own answers from the conformance suite.
	{"notifications over http", classifyGive{"eth_subscribe", 200, -32601, "notifications not supported", ""}, wantCaller(ReasonNotificationsUnsupported)},
	{"notifications old geth", classifyGive{"eth_subscribe", 200, -32001, "notifications not supported", ""}, wantCaller(ReasonNotificationsUnsupported)},
	{"simulate insufficient funds", classifyGive{"eth_simulateV1", 200, -38014, "err: insufficient funds for gas * price + value: address 0xc0 have 0 want 1000 (supplied gas 50000000)", ""}, wantCaller(ReasonInsufficientFunds)},
	{"simulate base fee", classifyGive{"eth_simulateV1", 200, -38012, "err: max fee per gas less than block base fee", ""}, wantCaller(ReasonInvalidTx)},
	{"simulate timestamps", classifyGive{"eth_simulateV1", 200, -38021, "block timestamps must be in order: 550 <= 588", ""}, wantCaller(ReasonInvalidParams)},
	{"simulate too many blocks (a client limit)", classifyGive{"eth_simulateV1", 200, -38026, "too many blocks", ""}, wantCaller(ReasonInvalidParams)},
	{"simulate nonce too low", classifyGive{"eth_simulateV1", 200, -38010, "err: nonce too low", ""}, wantCaller(ReasonNonceTooLow)},
	{"simulate out of gas -32015", classifyGive{"eth_simulateV1", 200, -32015, "out of gas", ""}, wantCaller(ReasonExecution)},
	{"geth nonce has max value", classifyGive{mCall, 200, -32603, "err: nonce has max value: address 0xc0, nonce: 18446744073709551615 (supplied gas 50000000)", ""}, wantCaller(ReasonInvalidTx)},
	{"geth genesis not traceable", classifyGive{"debug_traceBlockByNumber", 200, -32000, "genesis is not traceable", ""}, wantCaller(ReasonInvalidParams)},
	{"geth not a precompile", classifyGive{mCall, 200, -32000, "account 0xc100000000000000000000000000000000000000 is not a precompile", ""}, wantCaller(ReasonInvalidParams)},
	{"geth storage key too long", classifyGive{"eth_getProof", 200, -32602, `storage key too long (want at most 32 bytes): "0x00"`, ""}, wantCaller(ReasonInvalidParams)},
	{"geth empty request", classifyGive{"eth_getStorageValues", 200, -32602, "empty request", ""}, wantCaller(ReasonInvalidParams)},
	{"geth transaction not found", classifyGive{"debug_traceTransaction", 200, -32000, "transaction not found", ""}, wantRetry(ReasonMissingData)},
	{"geth block not found by hash", classifyGive{"debug_traceBlockByHash", 200, -32000, "block 0x0000000000000000000000000000000000000000000000000000000000000001 not found", ""}, wantRetry(ReasonHeaderNotFound)},
	{"-32602 naming a timeout field is no timeout", classifyGive{"debug_traceTransaction", 200, -32602, "invalid argument 1: json: cannot unmarshal number into Go struct field TraceConfig.timeout of type string", ""}, wantCaller(ReasonInvalidParams)},
	{"-32602 saying internal error", classifyGive{mCall, 200, -32602, "internal error decoding params", ""}, wantCaller(ReasonInvalidParams)},
	{"-32600 under 401", classifyGive{mCall, 401, -32600, "Invalid Request", ""}, wantFault(ReasonUnauthorized)},
	{"-32602 not-found text stays the caller's", classifyGive{mCall, 200, -32602, "invalid argument 1: tracer not found", ""}, wantCaller(ReasonInvalidParams)},
	{"uppercase data is matched", classifyGive{mLogs, 200, -32602, "Invalid params", `"BLOCK RANGE LIMIT EXCEEDED"`}, wantTooLarge(ReasonRangeTooLarge, 0)},
}

func TestClassifyRPC(t *testing.T) {
	for _, tt := range classifyRPCTests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.give.method, tt.give.err())
			if got != tt.want {
				t.Errorf("Classify(%s, %d/%d %q %s) = %+v, want %+v",
					tt.give.method, tt.give.status, tt.give.code, tt.give.msg, tt.give.data, got, tt.want)
			}
		})
	}
}

type classifyTimeoutErr struct{}

func (classifyTimeoutErr) Error() string   { return "i/o timeout" }
func (classifyTimeoutErr) Timeout() bool   { return true }
func (classifyTimeoutErr) Temporary() bool { return true }

// classifyErrTests: everything a transport returns other than a JSON-RPC error.
var classifyErrTests = []struct {
	name string
	give error
	want Verdict
}{
	{"nil", nil, Verdict{}},
	{"http 429", &wire.HTTPStatusError{Remote: "r1", Status: 429}, wantThrottled(ReasonRateLimited)},
	{"cloudflare 1015 as 429", &wire.HTTPStatusError{Remote: "r1", Status: 429, Body: "error code: 1015"}, wantThrottled(ReasonRateLimited)},
	{"cloudflare 1015 as 403", &wire.HTTPStatusError{Remote: "r1", Status: 403, Body: "<html>Error code: 1015 You are being rate limited</html>"}, wantThrottled(ReasonRateLimited)},
	{"drpc http 402", &wire.HTTPStatusError{Remote: "r1", Status: 402, Body: "Payment Required"}, wantThrottled(ReasonBilling)},
	{"alchemy monthly capacity body", &wire.HTTPStatusError{Remote: "r1", Status: 429, Body: `{"error":"Monthly capacity limit exceeded."}`}, wantThrottled(ReasonBilling)},
	{"chainstack 429 body", &wire.HTTPStatusError{Remote: "r1", Status: 429, Body: "You've exceeded the RPS limit available on the current plan."}, wantThrottled(ReasonRateLimited)},
	{"geth 413", &wire.HTTPStatusError{Remote: "r1", Status: 413, Body: "content length too large (6000000>5242880)"}, wantTooLarge(ReasonRequestTooLarge, 0)},
	{"quicknode 413 body", &wire.HTTPStatusError{Remote: "r1", Status: 413, Body: "content too large"}, wantTooLarge(ReasonRequestTooLarge, 0)},
	{"chainstack 413", &wire.HTTPStatusError{Remote: "r1", Status: 413, Body: "request entity too large"}, wantTooLarge(ReasonRequestTooLarge, 0)},
	{"geth 405", &wire.HTTPStatusError{Remote: "r1", Status: 405, Body: "method not allowed"}, wantRetry(ReasonMethodUnsupported)},
	{"geth 415", &wire.HTTPStatusError{Remote: "r1", Status: 415, Body: "invalid content type, only application/json is supported"}, wantRetry(ReasonMethodUnsupported)},
	{"alchemy 401 not json-rpc", &wire.HTTPStatusError{Remote: "r1", Status: 401, Body: `{"error":"Must be authenticated!"}`}, wantFault(ReasonUnauthorized)},
	{"infura 403", &wire.HTTPStatusError{Remote: "r1", Status: 403, Body: "invalid project id"}, wantFault(ReasonUnauthorized)},
	{"http 500", &wire.HTTPStatusError{Remote: "r1", Status: 500}, wantFault(ReasonHTTP5xx)},
	{"http 502", &wire.HTTPStatusError{Remote: "r1", Status: 502, Body: "<html>Bad Gateway</html>"}, wantFault(ReasonHTTP5xx)},
	{"http 503", &wire.HTTPStatusError{Remote: "r1", Status: 503, Body: "Service Unavailable"}, wantFault(ReasonHTTP5xx)},
	{"http 504", &wire.HTTPStatusError{Remote: "r1", Status: 504, Body: "Gateway Timeout"}, wantFault(ReasonHTTP5xx)},
	{"chainstack 499", &wire.HTTPStatusError{Remote: "r1", Status: 499, Body: "No Response From Node"}, wantFault(ReasonHTTP5xx)},
	{"http 408", &wire.HTTPStatusError{Remote: "r1", Status: 408}, wantFault(ReasonTimeout)},
	{"404 page is a broken remote, not missing data", &wire.HTTPStatusError{Remote: "r1", Status: 404, Body: "404 page not found"}, wantFault(ReasonHTTPStatus)},
	{"http 400 not json-rpc", &wire.HTTPStatusError{Remote: "r1", Status: 400, Body: "bad request"}, wantFault(ReasonHTTPStatus)},
	{"wrapped http status", fmt.Errorf("attempt 2: %w", &wire.HTTPStatusError{Remote: "r1", Status: 429}), wantThrottled(ReasonRateLimited)},
	{"wrapped upstream error", fmt.Errorf("attempt 2: %w", classifyGive{mCall, 200, 3, "execution reverted", `"0x"`}.err()), wantCaller(ReasonRevert)},
	{"bare jrpc error", &jrpc.Error{Code: -32000, Message: "header not found"}, wantRetry(ReasonHeaderNotFound)},
	{"upstream error without object", &wire.UpstreamError{Remote: "r1"}, wantFault(ReasonBadReply)},
	{"bad reply", fmt.Errorf("remote r1: not json: %w", wire.ErrBadReply), wantFault(ReasonBadReply)},
	{"transport refused", fmt.Errorf("remote r1: post: %w: %w", wire.ErrTransport, &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), wantFault(ReasonTransport)},
	{"transport eof", fmt.Errorf("remote r1: read: %w: %w", wire.ErrTransport, io.ErrUnexpectedEOF), wantFault(ReasonTransport)},
	{"transport i/o timeout", fmt.Errorf("remote r1: read: %w: %w", wire.ErrTransport, &net.OpError{Op: "read", Net: "tcp", Err: classifyTimeoutErr{}}), wantFault(ReasonTimeout)},
	{"bare net error", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("no route to host")}, wantFault(ReasonTransport)},
	{"our per-attempt deadline", fmt.Errorf("remote r1: post: %w", context.DeadlineExceeded), wantFault(ReasonTimeout)},
	{"caller went away", fmt.Errorf("remote r1: post: %w", context.Canceled), wantCaller(ReasonCanceled)},
	{"caller went away mid-transport", fmt.Errorf("%w: %w", wire.ErrTransport, context.Canceled), wantCaller(ReasonCanceled)},
	{"reply budget full: venn's overload, not the remote's", fmt.Errorf("remote r1: read: %w", wire.ErrReplyBudget), wantRetry(ReasonReplyBudget)},
	{"unknown go error", errors.New("boom"), wantFault(ReasonUnknown)},
}

func TestClassifyErrors(t *testing.T) {
	for _, tt := range classifyErrTests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(mCall, tt.give); got != tt.want {
				t.Errorf("Classify(%v) = %+v, want %+v", tt.give, got, tt.want)
			}
		})
	}
}

func TestClassifyCaseCount(t *testing.T) {
	// The catalogue has 120 rows; each has a case or more.
	if n := len(classifyRPCTests) + len(classifyErrTests); n < 120 {
		t.Errorf("%d table cases, want at least 120", n)
	}
}

// TestVerdictLacksBlock: the errors of a remote without the call's block
// (by hash above all: a near-head call the cache pinned) are told from
// those the same call by number would get too.
func TestVerdictLacksBlock(t *testing.T) {
	tests := []struct {
		give classifyGive
		want bool
	}{
		{classifyGive{method: mCall, code: -32000, msg: "header not found"}, true},
		{classifyGive{method: mBalance, code: -32000, msg: "header for hash not found"}, true}, // geth, EIP-1898 hash
		{classifyGive{method: mBalance, code: -32000, msg: "unknown block"}, true},
		{classifyGive{method: mBalance, code: -39001, msg: "Unknown block"}, true},                     // Besu
		{classifyGive{method: mBalance, code: -32001, msg: "Resource not found"}, true},                // EIP-1898
		{classifyGive{method: mCall, code: 3, msg: "unknown block"}, true},                             // Alchemy
		{classifyGive{method: mBalance, code: -32001, msg: "block not found: hash 0xab"}, true},        // reth
		{classifyGive{method: mCall, code: 3, msg: "execution reverted", data: `"0x08c379a0"`}, false}, // the call's own answer
		{classifyGive{method: mBalance, code: -32000, msg: "missing trie node 0xab (path )"}, false},   // the block's state: by number too
		{classifyGive{method: mBalance, code: 4444, msg: "pruned history unavailable"}, false},
		{classifyGive{method: mBalance, code: -32005, msg: "daily request count exceeded, request rate limited"}, false},
		{classifyGive{method: mBalance, status: 503, code: -32603, msg: "internal error"}, false},
	}
	for _, tt := range tests {
		if got := Classify(tt.give.method, tt.give.err()).LacksBlock(); got != tt.want {
			t.Errorf("%d %q: LacksBlock %v, want %v", tt.give.code, tt.give.msg, got, tt.want)
		}
		// As the pool hands it to the router: the remote's own error.
		if got := Classify(tt.give.method, tt.give.err().(*wire.UpstreamError).Err).LacksBlock(); got != tt.want {
			t.Errorf("%d %q unwrapped: LacksBlock %v, want %v", tt.give.code, tt.give.msg, got, tt.want)
		}
	}
}

func TestClassString(t *testing.T) {
	tests := []struct {
		give Class
		want string
	}{
		{ClassCaller, "caller"},
		{ClassRetry, "retry"},
		{ClassThrottled, "throttled"},
		{ClassTooLarge, "too_large"},
		{Class(9), "unknown"},
	}
	for _, tt := range tests {
		if got := tt.give.String(); got != tt.want {
			t.Errorf("Class(%d).String() = %q, want %q", tt.give, got, tt.want)
		}
	}
}

func TestSuggestedSpan(t *testing.T) {
	tests := []struct {
		give    string
		isRange bool
		want    uint64
	}{
		{"try with this block range [0x0, 0x64].", true, 101},
		{"try with this block range: [0x10, 0x20]", true, 17},
		{"this block range should work: [0x123c9b2, 0x123cba5]", true, 500},
		{"this block range should work: [0x20, 0x10]", true, 0}, // reversed: no hint
		{"retry with the range 1-1", false, 1},
		{"exceed maximum block range: 1,000,000", true, 1000000},
		{"max is 10k blocks", true, 10000},
		{"max is 10kb", true, 0},
		{"logs matched by query exceeds limit of 10000", false, 0},
		{"exceeds limit of 99999999999999999999999", true, 9999999999999999999}, // stops at 19 digits
		{"try with this block range [0xffffffffffffffffff, 0x1]", true, 0},
		{"block range limit exceeded", true, 0},
	}
	for _, tt := range tests {
		if got := suggestedSpan(tt.give, tt.isRange); got != tt.want {
			t.Errorf("suggestedSpan(%q, %t) = %d, want %d", tt.give, tt.isRange, got, tt.want)
		}
	}
}

// TestClassifyLongText: revert data and HTML pages are scanned only in part,
// and a long reply does not hide a verdict that its start decides.
func TestClassifyLongText(t *testing.T) {
	long := make([]byte, 0, 100_000)
	long = append(long, `"0x08c379a0`...)
	for len(long) < cap(long)-1 {
		long = append(long, 'A')
	}
	long = append(long, '"')
	g := classifyGive{mCall, 200, 3, "execution reverted: x", string(long)}
	if got := Classify(mCall, g.err()); got != wantCaller(ReasonRevert) {
		t.Errorf("long revert = %+v", got)
	}
	big := &wire.HTTPStatusError{Remote: "r1", Status: 503, Body: string(long)}
	if got := Classify(mCall, big); got != wantFault(ReasonHTTP5xx) {
		t.Errorf("long 503 = %+v", got)
	}
}

func BenchmarkClassify(b *testing.B) {
	benches := []struct {
		name string
		err  error
	}{
		{"revert", classifyGive{mCall, 200, 3, "execution reverted: Ownable: caller is not the owner", `"0x08c379a000000000000000000000000000000000000000000000000000000000000000200000000000000000000000000000000000000000000000000000000000000018"`}.err()},
		{"header_not_found", classifyGive{mBalance, 200, -32000, "header not found", ""}.err()},
		{"infura_results", classifyGive{mLogs, 200, -32005, "query returned more than 10000 results. Try with this block range [0xBDE5F8, 0x102DBCC].", `{"from":"0xBDE5F8","limit":10000,"to":"0x102DBCC"}`}.err()},
		{"rate_limited", classifyGive{mCall, 429, -32005, "project ID request rate exceeded", `{"see":"https://infura.io/dashboard","current_rps":13.333,"allowed_rps":10.0,"backoff_seconds":30.0}`}.err()},
		{"unknown_fallthrough", classifyGive{mCall, 200, -32000, "something odd happened on the way to the node", ""}.err()},
		{"transport", fmt.Errorf("remote r1: post: %w: %w", wire.ErrTransport, io.ErrUnexpectedEOF)},
	}
	for _, bb := range benches {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Classify(mCall, bb.err)
			}
		})
	}
}
