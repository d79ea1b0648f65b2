package verdict

// The rule table: what the text of an upstream error says, by the steps of
// Classify (classify.go) that consult each part, each row citing who sends
// it. A row comes from the catalogue ../shared/PROVIDER-ERRORS.md, and
// classify_test.go has a case for it.

// rule maps a substring of the lower-cased text (and optionally a second one
// that must also occur) to a verdict.
type rule struct {
	pat, also string
	v         Verdict
}

// tooLargeRules: table (d). Batch, size and result caps before range caps,
// because result caps often suggest a range too.
var tooLargeRules = []rule{
	{pat: "batch too large", v: vBatch},                                   // geth -32600
	{pat: "batch request was too large", v: vBatch},                       // jsonrpsee -32010
	{pat: "batch response was too large", v: vBatch},                      // jsonrpsee -32011
	{pat: "too many rpc calls in batch", v: vBatch},                       // proxyd -32014
	{pat: "max batch size", v: vBatch},                                    // Besu -32005
	{pat: "batch limit", also: "exceeded", v: vBatch},                     // Erigon
	{pat: "request is too big", v: vReqSize},                              // jsonrpsee -32007
	{pat: "request body too large", v: vReqSize},                          // proxyd -32021
	{pat: "content too large", v: vReqSize},                               // QuickNode 413
	{pat: "request entity too large", v: vReqSize},                        // QuickNode, Chainstack 413
	{pat: "content length too large", v: vReqSize},                        // geth 413
	{pat: "payload too large", v: vReqSize},                               // generic 413 text
	{pat: "log response size exceeded", v: vResults},                      // Alchemy -32602
	{pat: "query returned more than", v: vResults},                        // Infura -32005
	{pat: "exceeds max results", v: vResults},                             // reth, Ankr
	{pat: "logs matched by query exceeds limit", v: vResults},             // Arbitrum
	{pat: "too many logs requested", v: vResults},                         // Nethermind
	{pat: "max logs per response", v: vResults},                           // Nethermind
	{pat: "response is too big", v: vResponse},                            // jsonrpsee -32008
	{pat: "response too large", v: vResponse},                             // geth -32003, proxyd -32020
	{pat: "response size should not", v: vResponse},                       // 1rpc
	{pat: "exceed max addresses", v: vAddresses},                          // geth --rpc.logquerylimit
	{pat: "this query contains", also: "current limit is", v: vAddresses}, // Infura
	{pat: "specify less number of address", v: vAddresses},
	{pat: "try with this block range", v: vRange},    // Infura hint
	{pat: "this block range should work", v: vRange}, // Alchemy hint
	{pat: "retry with the range", v: vRange},         // dRPC (reth's wording without a result cap)
	{pat: "block range is too wide", v: vRange},      // Ankr, Moonbeam
	{pat: "range is too large", v: vRange},           // OP, Merkle
	{pat: "range too large", v: vRange},              // Base, cdk-erigon
	{pat: "exceeds the range allowed", v: vRange},    // BlastAPI
	{pat: "maximum block range", v: vRange},          // geth --rpc.rangelimit, BSC
	{pat: "max block range", v: vRange},              // reth, Morph
	{pat: "range limit", v: vRange},                  // Chainstack, Besu, Tenderly
	{pat: "block range greater than", v: vRange},     // proxyd
	{pat: "block range exceeds", v: vRange},
	{pat: "requested too many blocks", v: vRange},                  // Avalanche
	{pat: "maximum allowed number of requested blocks", v: vRange}, // thirdweb
	{pat: "maximum allowed is", also: "block", v: vRange},          // Sei
	{pat: "limit the query to at most", v: vRange},                 // Coinbase
	{pat: "max range", v: vRange},                                  // Cloudflare
	{pat: "ranges over", v: vRange},                                // dRPC code 35
	{pat: "blocks distance", v: vRange},                            // Ankr TAC
	{pat: "is limited to", also: "range", v: vRange},               // QuickNode -32614, BlockPI
	{pat: "exceeds limit of", also: "range", v: vRange},            // Infura live -32602
	{pat: "up to a", also: "block range", v: vRange},               // Alchemy free tier
}

// billingRules and rateRules: table (c). Billing first: "monthly capacity
// limit" must not read as a per-second capacity.
var billingRules = []rule{
	{pat: "payment required", v: vBilling},
	{pat: "monthly capacity limit", v: vBilling},
	{pat: "billing", v: vBilling},
	{pat: "reached the free tier", v: vBilling},
}

// rateRules are phrases, not words: "limit" alone is in range caps and gas
// errors, "capacity" alone in geth's "out of capacity" txpool error.
// "limit exceeded" alone counts only with code -32005 (see codeVerdict).
var rateRules = []rule{
	{pat: "rate limit", v: vRateLimited},    // "rate limited", "over rate limit", "rate limit exceeded"
	{pat: "rate exceeded", v: vRateLimited}, // Infura "project id request rate exceeded"
	{pat: "too many requests", v: vRateLimited},
	{pat: "credits limited", v: vRateLimited}, // QuickNode -32012
	{pat: "requests limited to", v: vRateLimited},
	{pat: "per second capacity", v: vRateLimited}, // Alchemy CU/s
	{pat: "over capacity", v: vRateLimited},       // proxyd -32012
	{pat: "throughput", v: vRateLimited},
	{pat: "request limit reached", v: vRateLimited}, // QuickNode -32007
	{pat: "higher than your plan allows", v: vRateLimited},
	{pat: "rps limit", v: vRateLimited}, // Chainstack
	{pat: "quota", v: vRateLimited},
	{pat: "server is busy", v: vRateLimited}, // jsonrpsee -32009
	{pat: "too much load", v: vRateLimited},
	{pat: "error code: 1015", v: vRateLimited}, // Cloudflare
	{pat: "free tier", v: vRateLimited},        // dRPC code 30
	{pat: "upgrade your tier", v: vRateLimited},
	{pat: "request count exceeded", v: vRateLimited},
}

// missingRules: table (b), block tags, lagging and missing data. Specific
// before general: "finalized block not found" is a tag, "block not found" a
// header; geth's "invalid block range params" (the caller's, see Classify)
// before dRPC's "invalid block range" (missing data).
var missingRules = []rule{
	{pat: "finalized block not found", v: vTag},
	{pat: "safe block not found", v: vTag},
	{pat: "pending block not found", v: vTag},
	{pat: "pending block is not available", v: vTag},
	{pat: "finalized header not found", v: vTag},
	{pat: "earliest header not found", v: vTag},
	{pat: "safe header not found", v: vTag},
	{pat: "beyond current head", v: vLagging},   // geth >=1.17, reth -32602
	{pat: "beyond head block", v: vLagging},     // reth
	{pat: "block is out of range", v: vLagging}, // proxyd -32019
	{pat: "invalid block range params", v: vParams},
	{pat: "pruned", v: vPruned},  // 4444 text, "node state is pruned", "has been pruned"
	{pat: "pruning", v: vPruned}, // Erigon
	{pat: "purged for block", v: vPruned},
	{pat: "lowest height is", v: vPruned},
	{pat: "unsupported block number", v: vPruned},
	{pat: "no historical rpc", v: vPruned}, // OP Stack pre-Bedrock
	{pat: "historical backend error", v: vPruned},
	{pat: "missing trie node", v: vState},
	{pat: "historical state", v: vState},
	{pat: "state", also: "is not available", v: vState},
	{pat: "no state available", v: vState}, // Nethermind
	{pat: "world state unavailable", v: vState},
	{pat: "state already discarded", v: vState},
	{pat: "header not found", v: vHeader},
	{pat: "unknown block", v: vHeader},
	{pat: "block not found", v: vHeader},
	{pat: "could not find block", v: vHeader},
	{pat: "indexing is", v: vMissing}, // geth "in progress", Erigon "not yet complete"
	{pat: "initial sync", v: vSyncing},
	{pat: "code=40000", v: vMissing}, // dRPC
	{pat: "invalid block range", v: vMissing},
}

// outcomeRules: proxyd's backend failures, timeouts, reverts and transaction
// outcomes (§3.4), EVM and validation errors, unsupported methods.
var outcomeRules = []rule{
	{pat: "backend offline", v: vServer}, // proxyd -32010/-32011/-32018/-32013
	{pat: "no backend", v: vServer},
	{pat: "backend is currently not healthy", v: vServer},
	{pat: "backend returned an invalid response", v: vServer},
	{pat: "execution aborted (timeout", v: vEVMTimeout}, // geth/reth eth_call
	{pat: "execution timeout", v: vEVMTimeout},          // tracers
	{pat: "timed out", v: vTimeout},                     // geth -32002 "request timed out"
	{pat: "timeout expired", v: vTimeout},               // Besu
	{pat: "enabled timeout", v: vTimeout},               // Nethermind -32016
	{pat: "deadline exceeded", v: vTimeout},
	{pat: "reverted", v: vRevert},
	{pat: "vm exception", v: vRevert},
	{pat: "transaction: revert", v: vRevert},
	{pat: "already known", v: vKnown},
	{pat: "known transaction", v: vKnown}, // Besu
	{pat: "alreadyknown", v: vKnown},      // old Nethermind
	{pat: "already imported", v: vKnown},
	{pat: "already in mempool", v: vKnown},
	{pat: "nonce too low", v: vNonceLow},
	{pat: "nonce is too low", v: vNonceLow},
	{pat: "oldnonce", v: vNonceLow}, // old Nethermind
	{pat: "replacement transaction underpriced", v: vReplacement},
	{pat: "transaction underpriced", v: vPool},
	{pat: "pool is full", v: vPool},                       // geth/reth "txpool is full"
	{pat: "gas price below configured minimum", v: vPool}, // Besu -32009
	{pat: "gas price below minimum", v: vPool},            // geth
	{pat: "exceeds the configured cap", v: vPool},         // geth --rpc.txfeecap
	{pat: "only replay-protected", v: vPool},
	{pat: "transaction fee too low", v: vPool},
	{pat: "feetoolow", v: vPool},
	{pat: "account limit exceeded", v: vPool},
	{pat: "out of capacity", v: vPool},
	{pat: "already reserved", v: vPool},
	{pat: "in-flight transaction limit", v: vPool},
	{pat: "not authorized to send transactions", v: vPool}, // Besu -32007: a node's account permissioning, not a rate limit
	{pat: "insufficient funds", v: vFunds},
	{pat: "insufficient balance", v: vFunds},
	{pat: "insufficientfunds", v: vFunds},
	{pat: "upfront cost exceeds account balance", v: vFunds}, // Besu -32004
	{pat: "out of gas", v: vExecution},
	{pat: "evm error", v: vExecution}, // reth
	{pat: "gas required exceeds allowance", v: vExecution},
	{pat: "invalid jump destination", v: vExecution},
	{pat: "invalid opcode", v: vExecution},
	{pat: "stack underflow", v: vExecution},
	{pat: "stack limit reached", v: vExecution},
	{pat: "max call depth exceeded", v: vExecution},
	{pat: "write protection", v: vExecution},
	{pat: "return data out of bounds", v: vExecution},
	{pat: "contract address collision", v: vExecution},
	{pat: "max code size exceeded", v: vExecution},
	{pat: "vm execution error", v: vExecution}, // Nethermind -32015
	{pat: "intrinsic gas", v: vInvalidTx},
	{pat: "floor data gas", v: vInvalidTx},
	{pat: "gas too low", v: vInvalidTx},
	{pat: "less than block base fee", v: vInvalidTx},
	{pat: "below current base fee", v: vInvalidTx}, // Besu -32009
	{pat: "less than block blob gas fee", v: vInvalidTx},
	{pat: "higher than max fee per gas", v: vInvalidTx},
	{pat: "higher than 2^256-1", v: vInvalidTx},
	{pat: "tip above fee cap", v: vInvalidTx},
	{pat: "nonce too high", v: vInvalidTx},
	{pat: "nonce has max value", v: vInvalidTx},
	{pat: "exceeds block gas limit", v: vInvalidTx},
	{pat: "gas limit reached", v: vInvalidTx},
	{pat: "gas limit too high", v: vInvalidTx},
	{pat: "gas limit overflow", v: vInvalidTx},
	{pat: "gas uint64 overflow", v: vInvalidTx},
	{pat: "max initcode size exceeded", v: vInvalidTx},
	{pat: "sender not an eoa", v: vInvalidTx},
	{pat: "negative value", v: vInvalidTx},
	{pat: "oversized data", v: vInvalidTx},
	{pat: "invalid signature", v: vInvalidTx},
	{pat: "invalid sender", v: vInvalidTx},
	{pat: "invalid transaction v, r, s", v: vInvalidTx},
	{pat: "invalid chain id", v: vInvalidTx},
	{pat: "transaction type not supported", v: vInvalidTx},
	{pat: "blob transaction", v: vInvalidTx},
	{pat: "blob limit exceeded", v: vInvalidTx},
	{pat: "eip-7702", v: vInvalidTx},
	{pat: "rlp:", v: vInvalidTx},
	{pat: "typed transaction too short", v: vInvalidTx},
	{pat: "method not found", v: vUnsupported},
	{pat: "does not exist/is not available", v: vUnsupported}, // geth -32601
	{pat: "method not supported", v: vUnsupported},
	{pat: "unsupported method", v: vUnsupported},
	{pat: "method not enabled", v: vUnsupported}, // Besu -32604
	{pat: "method not available", v: vUnsupported},
	{pat: "method not allowed", v: vUnsupported},
	{pat: "is not whitelisted", v: vUnsupported},
	{pat: "not included in your current plan", v: vUnsupported}, // Chainstack
	{pat: "transaction pool not enabled", v: vUnsupported},      // Besu
	{pat: "timeout", v: vTimeout},                               // proxyd "gateway timeout", others; last: a revert may mention one
	{pat: "internal error", v: vServer},
}

// authRules: the remote refuses us (key, plan, origin); not the caller's
// fault, and the remote is unusable until fixed.
var authRules = []rule{
	{pat: "must be authenticated", v: vUnauthorized}, // Alchemy -32600
	{pat: "invalid project id", v: vUnauthorized},    // Infura
	{pat: "token is invalid", v: vUnauthorized},
	{pat: "invalid token", v: vUnauthorized},
	{pat: "not on whitelist", v: vUnauthorized},
	{pat: "unauthorized", v: vUnauthorized},
	{pat: "not allowed to access", v: vUnauthorized},
	{pat: "api key", v: vUnauthorized},
}

// paramsRules: the caller's malformed request, after everything else so a
// provider's "invalid params" wrapper around a range cap is seen as the cap.
var paramsRules = []rule{
	{pat: "invalid argument", v: vParams},
	{pat: "cannot unmarshal", v: vParams},
	{pat: "invalid params", v: vParams},
	{pat: "invalid input", v: vParams}, // Nethermind -32000
	{pat: "param is required", v: vParams},
	{pat: "missing value for required argument", v: vParams},
	{pat: "too many arguments", v: vParams},
	{pat: "fromblock/toblock", v: vParams}, // geth "can't specify fromBlock/toBlock with blockHash"
	{pat: "pending logs are not supported", v: vParams},
	{pat: "exceed max topics", v: vParams},
	{pat: "exceed max number", v: vParams},   // geth receipts subscription
	{pat: "is not traceable", v: vParams},    // geth tracers: genesis
	{pat: "is not a precompile", v: vParams}, // geth state overrides
	{pat: "not allowed after the merge", v: vParams},
	{pat: "parse error", v: vRequest},
	{pat: "invalid request", v: vRequest},
	{pat: "empty batch", v: vRequest},
	{pat: "invalid json", v: vRequest},
}
