package remotes

// Upstream error classification.
//
// The patterns, codes and statuses come from the provider and client
// catalogue ../shared/PROVIDER-ERRORS.md (tables (a)-(d), §2, §3);
// classify_test.go has a case or more for every row. Patterns are substrings
// of the lower-cased message + " " + data; the first match wins, in erpc's
// order (§2), with the changes the catalogue's facts force:
//
//  1. Reverts (code 3, or a message starting "execution reverted"): a revert
//     reason is the contract's text and may say anything ("rate limit", "not
//     found"), so it never reaches the heuristics. Alchemy's code 3 "unknown
//     block" is missing data. Then eth_simulateV1's -380xx codes and geth's
//     "notifications not supported" (both the caller's).
//  2. Range, result, size and batch caps: many say "limit" or "exceeds".
//  3. OP's per-sender limit (caller), billing, rate limits.
//  4. Block tags, a lagging remote, missing data.
//  5. -32602/-32600/-32700: the caller's, unless auth (their text describes
//     the caller's input and may name a "timeout" field, say).
//  6. Remote timeouts, reverts, tx outcomes (already known, nonce too low,
//     pool policy, insufficient funds, EVM and validation errors),
//     unsupported methods, auth, "not found" phrases, invalid params.
//  7. HTTP status, then the code alone, then the default.
//
// Text decides while it can: most codes mean different things at different
// providers (§3.2: -32005 is Infura's rate limit and Besu's range cap).
// Where the original venn's rule [V1] conflicts with the detailed rows, the
// rows win: [V1] backs off on any "limit" or "rate", but range caps and gas
// errors say "limit" too; and it returns an unrecognised -32000 to the caller,
// where erpc (and venn now) tries another remote, since providers differ.

import (
	"context"
	"errors"
	"net"
	"strings"
	"unsafe"

	"github.com/venn-gateway/venn/jrpc"
)

// Class says what the pool should do with a failed call.
type Class uint8

const (
	// ClassCaller is the caller's own fault or a definitive answer: return it
	// at once, no failover.
	ClassCaller Class = iota
	// ClassRetry: this remote cannot serve it now; try another remote.
	ClassRetry
	// ClassThrottled: rate-limited, over capacity or out of credit; back this
	// remote off and try another.
	ClassThrottled
	// ClassTooLarge: a range, result, size or batch cap; split the request, or
	// try a remote with larger limits.
	ClassTooLarge
)

func (c Class) String() string {
	switch c {
	case ClassCaller:
		return "caller"
	case ClassRetry:
		return "retry"
	case ClassThrottled:
		return "throttled"
	case ClassTooLarge:
		return "too_large"
	}
	return "unknown"
}

// Reason is a short label for metrics and logs; the set is fixed here.
type Reason string

const (
	// ClassCaller.
	ReasonRevert                   Reason = "revert"
	ReasonExecution                Reason = "execution_error" // EVM halt other than revert, gas estimate
	ReasonInvalidTx                Reason = "invalid_tx"      // tx fails validation: fee, gas, nonce too high, encoding
	ReasonInsufficientFunds        Reason = "insufficient_funds"
	ReasonInvalidParams            Reason = "invalid_params"
	ReasonInvalidRequest           Reason = "invalid_request"
	ReasonAlreadyKnown             Reason = "already_known"
	ReasonNonceTooLow              Reason = "nonce_too_low"
	ReasonReplacementUnderpriced   Reason = "replacement_underpriced"
	ReasonSenderRateLimited        Reason = "sender_rate_limited"
	ReasonNotificationsUnsupported Reason = "notifications_unsupported"
	ReasonCanceled                 Reason = "canceled"

	// ClassRetry, not a fault.
	ReasonHeaderNotFound    Reason = "header_not_found"
	ReasonMissingState      Reason = "missing_state"
	ReasonPruned            Reason = "pruned"
	ReasonMissingData       Reason = "missing_data"
	ReasonSyncing           Reason = "syncing"
	ReasonTagUnsupported    Reason = "tag_unsupported"
	ReasonLagging           Reason = "lagging"
	ReasonMethodUnsupported Reason = "method_unsupported"
	ReasonTxPoolPolicy      Reason = "tx_pool_policy"
	// ReasonReplyBudget: venn's own budget of reply bytes in flight was
	// full; the remote did nothing wrong.
	ReasonReplyBudget Reason = "reply_budget"
	// ReasonUnknown is a fault only for a Go error we cannot place (did the
	// remote even answer?), not for a JSON-RPC error object.
	ReasonUnknown Reason = "unknown"

	// ClassRetry, a fault; ReasonTimeout is not one for an EVM execution
	// timeout, which says the call is heavy, not that the node is sick.
	ReasonTimeout      Reason = "timeout"
	ReasonServerError  Reason = "server_error"
	ReasonHTTP5xx      Reason = "http_5xx"
	ReasonHTTPStatus   Reason = "http_status"
	ReasonTransport    Reason = "transport"
	ReasonBadReply     Reason = "bad_reply"
	ReasonUnauthorized Reason = "unauthorized"

	// ClassThrottled.
	ReasonRateLimited Reason = "rate_limited"
	ReasonBilling     Reason = "billing"

	// ClassTooLarge.
	ReasonRangeTooLarge    Reason = "range_too_large"
	ReasonTooManyResults   Reason = "too_many_results"
	ReasonTooManyAddresses Reason = "too_many_addresses"
	ReasonResponseTooLarge Reason = "response_too_large"
	ReasonRequestTooLarge  Reason = "request_too_large"
	ReasonBatchTooLarge    Reason = "batch_too_large"
)

// Verdict is Classify's answer.
type Verdict struct {
	Class  Class
	Reason Reason
	// Fault: the remote misbehaved or is unhealthy (feeds breaker and score).
	// False for caller errors, missing data, unsupported methods, too-large,
	// rate limits (tracked separately), EVM execution timeouts and JSON-RPC
	// errors we do not recognise.
	Fault bool
	// MaxSpan is the block span a range error says works (a suggested range,
	// or the cap it names), else 0.
	MaxSpan uint64
}

// Scan limits: the useful text of an error is short and comes first; revert
// data and HTML pages can be long.
const (
	maxScanMessage = 2048
	maxScanData    = 1024
)

// Classify says what to do with err, the failure of one call of method to one
// remote. err is what a transport returns: *UpstreamError, *HTTPStatusError,
// an error wrapping ErrBadReply or ErrTransport, a context error, or a net
// error. A nil err gives the zero Verdict.
//
// Two verdicts need the pool's help:
//   - ReasonInvalidParams for eth_getLogs may be geth's "invalid block range
//     params", which geth also sends when fromBlock is past *its* head with
//     toBlock "latest"; only the pool knows the head, so it must compare
//     fromBlock with the remote's head and treat it as lagging if so.
//   - ReasonNonceTooLow on eth_sendRawTransaction may follow an earlier
//     broadcast of the same tx; the pool checks by hash.
func Classify(method string, err error) Verdict {
	switch e := err.(type) {
	case nil:
		return Verdict{}
	case *UpstreamError:
		return classifyUpstream(method, e)
	case *HTTPStatusError:
		return classifyHTTPStatus(e.Status, e.Body)
	case *jrpc.Error:
		return classifyRPC(method, 0, e)
	}
	// The caller leaving wins over whatever the transport made of it.
	if errors.Is(err, context.Canceled) {
		return Verdict{Class: ClassCaller, Reason: ReasonCanceled}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Verdict{Class: ClassRetry, Reason: ReasonTimeout, Fault: true}
	}
	if _, ok := errors.AsType[*ReplyTooLargeError](err); ok {
		return vResponse // the answer's size: another remote's is as large
	}
	if errors.Is(err, ErrReplyBudget) {
		return vBudget
	}
	if errors.Is(err, ErrBadReply) {
		return Verdict{Class: ClassRetry, Reason: ReasonBadReply, Fault: true}
	}
	if ue, ok := errors.AsType[*UpstreamError](err); ok {
		return classifyUpstream(method, ue)
	}
	if he, ok := errors.AsType[*HTTPStatusError](err); ok {
		return classifyHTTPStatus(he.Status, he.Body)
	}
	if je, ok := errors.AsType[*jrpc.Error](err); ok {
		return classifyRPC(method, 0, je)
	}
	ne, isNet := errors.AsType[net.Error](err)
	if isNet && ne.Timeout() {
		return Verdict{Class: ClassRetry, Reason: ReasonTimeout, Fault: true}
	}
	if isNet || errors.Is(err, ErrTransport) {
		return Verdict{Class: ClassRetry, Reason: ReasonTransport, Fault: true}
	}
	// We cannot tell whether the remote even answered: count it.
	return Verdict{Class: ClassRetry, Reason: ReasonUnknown, Fault: true}
}

func classifyUpstream(method string, e *UpstreamError) Verdict {
	if e.Err == nil {
		return Verdict{Class: ClassRetry, Reason: ReasonBadReply, Fault: true}
	}
	return classifyRPC(method, e.HTTPStatus, e.Err)
}

// rule maps a substring of the lower-cased text (and optionally a second one
// that must also occur) to a verdict.
type rule struct {
	pat, also string
	v         Verdict
}

func match(t *scanText, rules []rule) (Verdict, bool) {
	for i := range rules {
		r := &rules[i]
		if t.contains(r.pat) && (r.also == "" || t.contains(r.also)) {
			return r.v, true
		}
	}
	return Verdict{}, false
}

// scanText is the lower-cased text with a Bloom-style set of its byte pairs:
// a pattern one of whose pairs is missing cannot occur, so most of the ~200
// rules are rejected with three bit tests instead of a substring search.
type scanText struct {
	s     string
	pairs [pairBits / 64]uint64
}

const pairBits = 4096

func newScanText(s string) *scanText {
	t := &scanText{s: s}
	for i := 0; i+1 < len(s); i++ {
		h := pairHash(s[i], s[i+1])
		t.pairs[h/64] |= 1 << (h % 64)
	}
	return t
}

func pairHash(a, b byte) uint {
	return (uint(a)*131 + uint(b)) % pairBits
}

func (t *scanText) hasPair(a, b byte) bool {
	h := pairHash(a, b)
	return t.pairs[h/64]&(1<<(h%64)) != 0
}

func (t *scanText) contains(pat string) bool {
	if n := len(pat); n >= 2 {
		if !t.hasPair(pat[0], pat[1]) || !t.hasPair(pat[n-2], pat[n-1]) ||
			!t.hasPair(pat[n/2-1], pat[n/2]) {
			return false
		}
	}
	return strings.Contains(t.s, pat)
}

var (
	vRevert       = Verdict{Class: ClassCaller, Reason: ReasonRevert}
	vExecution    = Verdict{Class: ClassCaller, Reason: ReasonExecution}
	vInvalidTx    = Verdict{Class: ClassCaller, Reason: ReasonInvalidTx}
	vFunds        = Verdict{Class: ClassCaller, Reason: ReasonInsufficientFunds}
	vParams       = Verdict{Class: ClassCaller, Reason: ReasonInvalidParams}
	vRequest      = Verdict{Class: ClassCaller, Reason: ReasonInvalidRequest}
	vKnown        = Verdict{Class: ClassCaller, Reason: ReasonAlreadyKnown}
	vNonceLow     = Verdict{Class: ClassCaller, Reason: ReasonNonceTooLow}
	vReplacement  = Verdict{Class: ClassCaller, Reason: ReasonReplacementUnderpriced}
	vSenderLimit  = Verdict{Class: ClassCaller, Reason: ReasonSenderRateLimited}
	vNotifyUnsup  = Verdict{Class: ClassCaller, Reason: ReasonNotificationsUnsupported}
	vHeader       = Verdict{Class: ClassRetry, Reason: ReasonHeaderNotFound}
	vState        = Verdict{Class: ClassRetry, Reason: ReasonMissingState}
	vPruned       = Verdict{Class: ClassRetry, Reason: ReasonPruned}
	vMissing      = Verdict{Class: ClassRetry, Reason: ReasonMissingData}
	vSyncing      = Verdict{Class: ClassRetry, Reason: ReasonSyncing}
	vTag          = Verdict{Class: ClassRetry, Reason: ReasonTagUnsupported}
	vLagging      = Verdict{Class: ClassRetry, Reason: ReasonLagging}
	vUnsupported  = Verdict{Class: ClassRetry, Reason: ReasonMethodUnsupported}
	vPool         = Verdict{Class: ClassRetry, Reason: ReasonTxPoolPolicy}
	vUnknown      = Verdict{Class: ClassRetry, Reason: ReasonUnknown}
	vBudget       = Verdict{Class: ClassRetry, Reason: ReasonReplyBudget}
	vTimeout      = Verdict{Class: ClassRetry, Reason: ReasonTimeout, Fault: true}
	vEVMTimeout   = Verdict{Class: ClassRetry, Reason: ReasonTimeout} // the call is heavy; the node is fine
	vServer       = Verdict{Class: ClassRetry, Reason: ReasonServerError, Fault: true}
	vHTTP5xx      = Verdict{Class: ClassRetry, Reason: ReasonHTTP5xx, Fault: true}
	vHTTPStatus   = Verdict{Class: ClassRetry, Reason: ReasonHTTPStatus, Fault: true}
	vUnauthorized = Verdict{Class: ClassRetry, Reason: ReasonUnauthorized, Fault: true}
	vRateLimited  = Verdict{Class: ClassThrottled, Reason: ReasonRateLimited}
	vBilling      = Verdict{Class: ClassThrottled, Reason: ReasonBilling}
	vRange        = Verdict{Class: ClassTooLarge, Reason: ReasonRangeTooLarge}
	vResults      = Verdict{Class: ClassTooLarge, Reason: ReasonTooManyResults}
	vAddresses    = Verdict{Class: ClassTooLarge, Reason: ReasonTooManyAddresses}
	vResponse     = Verdict{Class: ClassTooLarge, Reason: ReasonResponseTooLarge}
	vReqSize      = Verdict{Class: ClassTooLarge, Reason: ReasonRequestTooLarge}
	vBatch        = Verdict{Class: ClassTooLarge, Reason: ReasonBatchTooLarge}
)

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

// classifyRPC classifies a JSON-RPC error object that came with HTTP status
// status (0 over WebSocket).
func classifyRPC(method string, status int, e *jrpc.Error) Verdict {
	code := e.Code
	// 1. Reverts: definitive, and their reason text is the contract's. The
	// most common error, decided on the message alone: revert data can be
	// long and is never lower-cased.
	if hasPrefixFold(e.Message, "execution reverted") || hasPrefixFold(e.Message, "vm exception") {
		return vRevert
	}
	if code == 3 {
		if containsFold(e.Message, "unknown block") || containsFold(e.Message, "block not found with number") {
			return vHeader // Alchemy reuses code 3 for a block near the tip
		}
		return vRevert
	}
	t := newScanText(lowerText(e.Message, e.Data))

	// eth_simulateV1 validation (geth internal/ethapi/errors.go).
	if code <= -38000 && code > -38100 {
		switch code {
		case -38010:
			return vNonceLow
		case -38014:
			return vFunds
		case -38011, -38012, -38013, -38015, -38024, -38025:
			return vInvalidTx
		}
		return vParams
	}
	if t.contains("notifications not supported") {
		return vNotifyUnsup // geth over HTTP, -32601 (or -32001 before v1.12.1)
	}
	// 2. Caps.
	if v, ok := match(t, tooLargeRules); ok {
		if v.Reason == ReasonRangeTooLarge || v.Reason == ReasonTooManyResults {
			v.MaxSpan = suggestedSpan(t.s, v.Reason == ReasonRangeTooLarge)
		}
		return v
	}
	switch {
	case code == -32614 || code == 35: // QuickNode, dRPC range codes
		return vRange
	case status == 413:
		return vReqSize
	}
	// 3. Sender limit, billing, rate limits.
	if code == -32017 || t.contains("sender is over rate limit") {
		return vSenderLimit // every remote reaches the same sequencer
	}
	if v, ok := match(t, billingRules); ok {
		return v
	}
	if status == 402 || code == 402 {
		return vBilling
	}
	if v, ok := match(t, rateRules); ok {
		return v
	}
	if status == 429 || code == 429 {
		return vRateLimited
	}
	// 4. Tags, lagging, missing data.
	if v, ok := match(t, missingRules); ok {
		return v
	}
	switch code {
	case 4444:
		return vPruned
	case -39001:
		return vHeader
	case -32019:
		return vLagging
	}
	// 5. The code itself says the request is malformed. The text then
	// describes the caller's input and may name anything (a tracer config's
	// "timeout" field, say), so only auth dressed as -32600 overrides it.
	if code == jrpc.CodeInvalidParams || code == jrpc.CodeInvalidRequest || code == jrpc.CodeParseError {
		if v, ok := match(t, authRules); ok {
			return v
		}
		if status == 401 || status == 403 {
			return vUnauthorized
		}
		if v, ok := match(t, paramsRules); ok {
			return v
		}
		v, _ := codeVerdict(code)
		return v
	}
	// 6. Outcomes, unsupported methods, auth, "not found", invalid params.
	if v, ok := match(t, outcomeRules); ok {
		if v.Reason == ReasonInsufficientFunds && isReplay(method) {
			// A trace/debug replay that runs out of funds is an artefact of
			// the remote's state reconstruction: another may do better.
			return Verdict{Class: ClassRetry, Reason: ReasonInsufficientFunds}
		}
		return v
	}
	if v, ok := match(t, authRules); ok {
		return v
	}
	if v, ok := notFound(t); ok {
		return v
	}
	if v, ok := match(t, paramsRules); ok {
		return v
	}
	// 7. Status, code, default.
	switch status {
	case 401, 403:
		return vUnauthorized
	case 405, 415:
		return vUnsupported
	}
	if v, ok := codeVerdict(code); ok {
		return v
	}
	if status == 499 || status >= 500 {
		return vHTTP5xx
	}
	// A well-formed answer we do not recognise says little about the remote's
	// health, and geth sends most caller errors as -32000: another remote is
	// tried (as erpc does), but no fault is counted, so that a client cannot
	// open every breaker with calls that fail everywhere.
	return vUnknown
}

// codeVerdict decides by the code alone, once no text has matched.
func codeVerdict(code int) (Verdict, bool) {
	switch code {
	case jrpc.CodeParseError, jrpc.CodeInvalidRequest:
		return vRequest, true
	case jrpc.CodeInvalidParams:
		return vParams, true
	case jrpc.CodeMethodNotFound, -32004, -32604, -32612, -32613:
		return vUnsupported, true
	case -32001:
		// EIP-1474 "resource not found", and EIP-1898's code for a missing
		// block. The catalogue's Infura row calls it unsupported, but marking
		// a method unsupported for a missing block would take the remote out
		// for that method; missing data still moves on to another remote.
		return vMissing, true
	case -32003:
		return vInvalidTx, true // EIP-1474 "transaction rejected"; reth's invalid tx
	case -32005, -32007, -32009, -32012, -32016, -32024, 30:
		// Limit exceeded (EIP-1474), QuickNode, jsonrpsee busy, proxyd,
		// Alchemy, dRPC free tier; texts that mean something else matched
		// before this.
		return vRateLimited, true
	case -33100:
		return vUnauthorized, true // Infura
	case jrpc.CodeInternal:
		return vServer, true
	}
	return Verdict{}, false
}

// notFound follows erpc: a method or module that is not there is
// unsupported, a block or header is missing data, a transaction or receipt
// too. Anything else not found is still tried elsewhere ([V1]: -32000 with
// "not found" is not the caller's), but counts no fault.
func notFound(t *scanText) (Verdict, bool) {
	if !t.contains("not found") && !t.contains("does not exist") &&
		!t.contains("not available") && !t.contains("is disabled") &&
		!t.contains("not enabled") {
		return Verdict{}, false
	}
	switch {
	case t.contains("resource not found"):
		return vMissing, true // see codeVerdict -32001
	case t.contains("method") || t.contains("module") ||
		t.contains("namespace"):
		return vUnsupported, true
	case t.contains("block") || t.contains("header"):
		return vHeader, true
	}
	return vMissing, true
}

// classifyHTTPStatus classifies a non-2xx reply whose body is not JSON-RPC
// (§3.1): the status decides, the body only for a rate limit or a cap. A 404
// page saying "not found" is a misconfigured remote, not missing data.
func classifyHTTPStatus(status int, body string) Verdict {
	t := newScanText(lowerText(body, nil))
	if v, ok := match(t, billingRules); ok {
		return v
	}
	if v, ok := match(t, rateRules); ok {
		return v
	}
	switch {
	case status == 429:
		return vRateLimited
	case status == 402:
		return vBilling
	case status == 413:
		return vReqSize
	case status == 401 || status == 403:
		return vUnauthorized
	case status == 405 || status == 415:
		return vUnsupported // geth's plain-text answers; erpc treats them as unsupported
	case status == 408:
		return vTimeout
	case status == 499 || status >= 500:
		return vHTTP5xx
	}
	return vHTTPStatus
}

func isReplay(method string) bool {
	return strings.HasPrefix(method, "trace_") || strings.HasPrefix(method, "debug_")
}

// lowerText returns msg + " " + data lower-cased (ASCII only: every pattern
// is ASCII, and UTF-8 continuation bytes never look like ASCII), in one
// allocation. A JSON string in data loses its quotes; an object stays JSON.
func lowerText(msg string, data []byte) string {
	if len(msg) > maxScanMessage {
		msg = msg[:maxScanMessage]
	}
	if len(data) >= 2 && data[0] == '"' && data[len(data)-1] == '"' {
		data = data[1 : len(data)-1]
	} else if string(data) == "null" {
		data = nil
	}
	if len(data) > maxScanData {
		data = data[:maxScanData]
	}
	n := len(msg)
	if len(data) > 0 {
		n += 1 + len(data)
	}
	if n == 0 {
		return ""
	}
	b := make([]byte, n)
	for i := 0; i < len(msg); i++ {
		b[i] = lower(msg[i])
	}
	if len(data) > 0 {
		b[len(msg)] = ' '
		for i, c := range data {
			b[len(msg)+1+i] = lower(c)
		}
	}
	// b is never written again: share it, as strings.Builder does.
	return unsafe.String(&b[0], len(b))
}

// hasPrefixFold and containsFold compare ASCII case-insensitively without
// allocating; want must be lower case.
func hasPrefixFold(s, want string) bool {
	if len(s) < len(want) {
		return false
	}
	for i := 0; i < len(want); i++ {
		if lower(s[i]) != want[i] {
			return false
		}
	}
	return true
}

func containsFold(s, want string) bool {
	for i := 0; i+len(want) <= len(s); i++ {
		if hasPrefixFold(s[i:], want) {
			return true
		}
	}
	return false
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

// suggestedSpan reads the block span a too-large error suggests: a hinted
// range first (Infura, Alchemy, reth/dRPC), then, for range caps only, the
// cap the message names. Result caps name a log count, never a span.
func suggestedSpan(text string, isRange bool) uint64 {
	for _, key := range []string{"try with this block range", "this block range should work"} {
		if i := strings.Index(text, key); i >= 0 {
			if n := bracketSpan(text[i+len(key):]); n > 0 {
				return n
			}
		}
	}
	if i := strings.Index(text, "retry with the range "); i >= 0 {
		rest := text[i+len("retry with the range "):]
		from, rest, ok := number(rest)
		if ok && strings.HasPrefix(rest, "-") {
			if to, _, ok := number(rest[1:]); ok && to >= from {
				return to - from + 1
			}
		}
	}
	if n := dataSpan(text); n > 0 {
		return n
	}
	if !isRange {
		return 0
	}
	if i := strings.Index(text, "for your plan ("); i >= 0 { // BlastAPI "(asked > cap)"
		if j := strings.Index(text[i:], " > "); j >= 0 {
			if n, _, ok := number(text[i+j+len(" > "):]); ok {
				return n
			}
		}
	}
	for _, key := range capKeys {
		if i := strings.Index(text, key); i >= 0 {
			if n, _, ok := number(text[i+len(key):]); ok && n > 0 {
				return n
			}
		}
	}
	return 0
}

// capKeys precede the cap in range errors; specific keys before the general
// "maximum", so "maximum allowed is 1000" is not read at "maximum allowed".
var capKeys = []string{
	"maximum is set to",                             // Avalanche
	"maximum allowed number of requested blocks is", // thirdweb
	"maximum allowed is",                            // Sei
	"limit the query to at most",                    // Coinbase
	"max range",                                     // Cloudflare, cdk-erigon
	"up to a",                                       // Alchemy free tier
	"limited to a",                                  // QuickNode
	"limited to",                                    // BlockPI
	"max is",                                        // Merkle "1k"
	"maximum block range",                           // geth, BSC, publicnode
	"max block range",                               // reth
	"range limit",                                   // Tenderly
	"exceeds limit of",                              // Infura
	"ranges over",                                   // dRPC
	"blocks distance",                               // Ankr TAC
	"block range greater than",                      // proxyd
	"block range exceeds",
	"maximum", // Moonbeam "(maximum 1024)"
}

// bracketSpan parses "[from, to]" (hex or decimal, after optional ": ").
func bracketSpan(s string) uint64 {
	s = strings.TrimLeft(s, " :")
	if !strings.HasPrefix(s, "[") {
		return 0
	}
	from, rest, ok := number(s[1:])
	if !ok {
		return 0
	}
	rest = strings.TrimLeft(rest, " ,")
	to, rest, ok := number(rest)
	if !ok || to < from || !strings.HasPrefix(strings.TrimLeft(rest, " "), "]") {
		return 0
	}
	return to - from + 1
}

// dataSpan reads Infura's data {"from":"0x..","to":"0x..",...}.
func dataSpan(text string) uint64 {
	from, ok := jsonNumber(text, `"from":`)
	if !ok {
		return 0
	}
	to, ok := jsonNumber(text, `"to":`)
	if !ok || to < from {
		return 0
	}
	return to - from + 1
}

func jsonNumber(text, key string) (uint64, bool) {
	i := strings.Index(text, key)
	if i < 0 {
		return 0, false
	}
	n, _, ok := number(strings.TrimLeft(text[i+len(key):], ` "`))
	return n, ok
}

// number parses a leading block number after optional spaces, colons or
// '=': hex with 0x, or decimal with thousands commas and an optional k
// ("1k", "10,000"). It returns the rest of s.
func number(s string) (uint64, string, bool) {
	s = strings.TrimLeft(s, " :=")
	const maxDigits, maxHexDigits = 19, 16 // always fit a uint64
	if strings.HasPrefix(s, "0x") {
		i, n := 2, uint64(0)
		for ; i < len(s) && i-2 < maxHexDigits; i++ {
			d, ok := hexDigit(s[i])
			if !ok {
				break
			}
			n = n<<4 | uint64(d)
		}
		if i == 2 {
			return 0, s, false
		}
		return n, s[i:], true
	}
	i, digits, n := 0, 0, uint64(0)
	for ; i < len(s) && digits < maxDigits; i++ {
		c := s[i]
		if c == ',' && digits > 0 && i+1 < len(s) && '0' <= s[i+1] && s[i+1] <= '9' {
			continue
		}
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + uint64(c-'0')
		digits++
	}
	if digits == 0 {
		return 0, s, false
	}
	if i < len(s) && s[i] == 'k' && (i+1 == len(s) || !isLetter(s[i+1])) {
		n *= 1000
		i++
	}
	if i < len(s) && isLetter(s[i]) {
		return 0, s, false // "10kb", "5s": not a block count
	}
	return n, s[i:], true
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' }
