package verdict

// Upstream error classification: Classify and the order of its steps here,
// the verdicts in verdict.go, the rule table in rules.go, the span a cap
// names in span.go.
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
	"github.com/venn-gateway/venn/remotes/wire"
)

// coder is an error with its own JSON-RPC code, which jrpc.ToWire maps.
type coder interface {
	error
	ErrorCode() int
}

// Scan limits: the useful text of an error is short and comes first; revert
// data and HTML pages can be long.
const (
	maxScanMessage = 2048
	maxScanData    = 1024
)

// Classify says what to do with err, the failure of one call of method to one
// remote. err is what a transport returns: *wire.UpstreamError,
// *wire.HTTPStatusError, an error wrapping wire.ErrBadReply or
// wire.ErrTransport, a context error, or a net error; or what a call through
// the pool returned, whose errors with a JSON-RPC code (ErrorCode) are read
// as the wire error jrpc makes of them. A nil err gives the zero Verdict.
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
	case *wire.UpstreamError:
		return classifyUpstream(method, e)
	case *wire.HTTPStatusError:
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
	if _, ok := errors.AsType[*wire.ReplyTooLargeError](err); ok {
		return vResponse // the answer's size: another remote's is as large
	}
	if errors.Is(err, wire.ErrReplyBudget) {
		return vBudget
	}
	if errors.Is(err, wire.ErrBadReply) {
		return Verdict{Class: ClassRetry, Reason: ReasonBadReply, Fault: true}
	}
	if ue, ok := errors.AsType[*wire.UpstreamError](err); ok {
		return classifyUpstream(method, ue)
	}
	if he, ok := errors.AsType[*wire.HTTPStatusError](err); ok {
		return classifyHTTPStatus(he.Status, he.Body)
	}
	if je, ok := errors.AsType[*jrpc.Error](err); ok {
		return classifyRPC(method, 0, je)
	}
	if _, ok := errors.AsType[coder](err); ok {
		// venn's own answer (no remote, a limit): read as the client gets it.
		return classifyRPC(method, 0, jrpc.ToWire(err))
	}
	ne, isNet := errors.AsType[net.Error](err)
	if isNet && ne.Timeout() {
		return Verdict{Class: ClassRetry, Reason: ReasonTimeout, Fault: true}
	}
	if isNet || errors.Is(err, wire.ErrTransport) {
		return Verdict{Class: ClassRetry, Reason: ReasonTransport, Fault: true}
	}
	// We cannot tell whether the remote even answered: count it.
	return Verdict{Class: ClassRetry, Reason: ReasonUnknown, Fault: true}
}

func classifyUpstream(method string, e *wire.UpstreamError) Verdict {
	if e.Err == nil {
		return Verdict{Class: ClassRetry, Reason: ReasonBadReply, Fault: true}
	}
	return classifyRPC(method, e.HTTPStatus, e.Err)
}

// classifyRPC classifies a JSON-RPC error object that came with HTTP status
// status (0 over WebSocket), by the steps of the file comment in order: the
// first that decides wins.
func classifyRPC(method string, status int, e *jrpc.Error) Verdict {
	if v, ok := revertVerdict(e); ok {
		return v
	}
	f := rpcFailure{method: method, status: status, code: e.Code, t: newScanText(lowerText(e.Message, e.Data))}
	if v, ok := f.callersOwn(); ok {
		return v
	}
	if v, ok := f.tooLarge(); ok {
		return v
	}
	if v, ok := f.throttled(); ok {
		return v
	}
	if v, ok := f.missing(); ok {
		return v
	}
	if v, ok := f.malformed(); ok {
		return v
	}
	if v, ok := f.outcome(); ok {
		return v
	}
	return f.fallback()
}

// rpcFailure is a JSON-RPC error object being classified: the method
// called, the HTTP status it came with, its code and its lower-cased text.
type rpcFailure struct {
	method string
	status int
	code   int
	t      *scanText
}

// revertVerdict is step 1: reverts are definitive, and their reason text is
// the contract's. The most common error, decided on the message alone:
// revert data can be long and is never lower-cased.
func revertVerdict(e *jrpc.Error) (Verdict, bool) {
	if hasPrefixFold(e.Message, "execution reverted") || hasPrefixFold(e.Message, "vm exception") {
		return vRevert, true
	}
	if e.Code != 3 {
		return Verdict{}, false
	}
	if containsFold(e.Message, "unknown block") || containsFold(e.Message, "block not found with number") {
		return vHeader, true // Alchemy reuses code 3 for a block near the tip
	}
	return vRevert, true
}

// callersOwn is the rest of step 1: eth_simulateV1's validation codes (geth
// internal/ethapi/errors.go) and a subscription over HTTP.
func (f *rpcFailure) callersOwn() (Verdict, bool) {
	if f.code <= -38000 && f.code > -38100 {
		switch f.code {
		case -38010:
			return vNonceLow, true
		case -38014:
			return vFunds, true
		case -38011, -38012, -38013, -38015, -38024, -38025:
			return vInvalidTx, true
		}
		return vParams, true
	}
	if f.t.contains("notifications not supported") {
		return vNotifyUnsup, true // geth over HTTP, -32601 (or -32001 before v1.12.1)
	}
	return Verdict{}, false
}

// tooLarge is step 2, the caps, with the span a range or result cap names.
func (f *rpcFailure) tooLarge() (Verdict, bool) {
	if v, ok := match(f.t, tooLargeRules); ok {
		if v.Reason == ReasonRangeTooLarge || v.Reason == ReasonTooManyResults {
			v.MaxSpan = suggestedSpan(f.t.s, v.Reason == ReasonRangeTooLarge)
		}
		return v, true
	}
	switch {
	case f.code == -32614 || f.code == 35: // QuickNode, dRPC range codes
		return vRange, true
	case f.status == 413:
		return vReqSize, true
	}
	return Verdict{}, false
}

// throttled is step 3: the sender limit, billing, rate limits.
func (f *rpcFailure) throttled() (Verdict, bool) {
	if f.code == -32017 || f.t.contains("sender is over rate limit") {
		return vSenderLimit, true // every remote reaches the same sequencer
	}
	if v, ok := match(f.t, billingRules); ok {
		return v, true
	}
	if f.status == 402 || f.code == 402 {
		return vBilling, true
	}
	if v, ok := match(f.t, rateRules); ok {
		return v, true
	}
	if f.status == 429 || f.code == 429 {
		return vRateLimited, true
	}
	return Verdict{}, false
}

// missing is step 4: block tags, a lagging remote, missing data.
func (f *rpcFailure) missing() (Verdict, bool) {
	if v, ok := match(f.t, missingRules); ok {
		if v.Reason == ReasonPruned || v.Reason == ReasonMissingState {
			v.Oldest = earliestNamed(f.t.s)
		}
		return v, true
	}
	switch f.code {
	case 4444:
		v := vPruned
		v.Oldest = earliestNamed(f.t.s)
		return v, true
	case -39001:
		return vHeader, true
	case -32019:
		return vLagging, true
	}
	return Verdict{}, false
}

// malformed is step 5: the code itself says the request is malformed. The
// text then describes the caller's input and may name anything (a tracer
// config's "timeout" field, say), so only auth dressed as -32600 overrides
// it.
func (f *rpcFailure) malformed() (Verdict, bool) {
	switch f.code {
	case jrpc.CodeInvalidParams, jrpc.CodeInvalidRequest, jrpc.CodeParseError:
	default:
		return Verdict{}, false
	}
	if v, ok := match(f.t, authRules); ok {
		return v, true
	}
	if f.status == 401 || f.status == 403 {
		return vUnauthorized, true
	}
	if v, ok := match(f.t, paramsRules); ok {
		return v, true
	}
	return codeVerdict(f.code)
}

// outcome is step 6: outcomes, unsupported methods, auth, "not found",
// invalid params.
func (f *rpcFailure) outcome() (Verdict, bool) {
	if f.t.s == "rejected" {
		// Monad's pool policy (§3.4); only the whole text: Infura's origin
		// refusal and EIP-1474's "transaction rejected" say it too.
		return vPool, true
	}
	if v, ok := match(f.t, outcomeRules); ok {
		if v.Reason == ReasonInsufficientFunds && isReplay(f.method) {
			// A trace/debug replay that runs out of funds is an artefact of
			// the remote's state reconstruction: another may do better.
			return Verdict{Class: ClassRetry, Reason: ReasonInsufficientFunds}, true
		}
		return v, true
	}
	if v, ok := match(f.t, authRules); ok {
		return v, true
	}
	if v, ok := notFound(f.t); ok {
		return v, true
	}
	return match(f.t, paramsRules)
}

// fallback is step 7: the status, the code, the default.
func (f *rpcFailure) fallback() Verdict {
	switch f.status {
	case 401, 403:
		return vUnauthorized
	case 405, 415:
		return vUnsupported
	}
	if v, ok := codeVerdict(f.code); ok {
		return v
	}
	if f.status == 499 || f.status >= 500 {
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
