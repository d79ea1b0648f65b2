package jrpc

import "encoding/json"

// Standard JSON-RPC 2.0 codes. venn itself sends -32700, -32600, -32601 and
// -32603; CodeInvalidParams it sends only for the params of a method it
// answers itself (eth_subscribe, the filter methods), in geth's words, since
// it passes params it does not need to read through unchecked.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternal       = -32603
)

// venn's own codes, in the server range -32000..-32099. Each names a condition
// of the gateway, never of an upstream: upstream errors are forwarded as sent.
const (
	// CodeNoRemote: no remote of the chain could serve the call.
	CodeNoRemote = -32050
	// CodeTimeout: the call's total deadline passed before any remote answered.
	CodeTimeout = -32051
	// CodeLimitExceeded: the request broke one of venn's limits (body size,
	// body read time, batch length, message size, connections, HTTP
	// requests in flight), or its answer did (a remote's reply over
	// max_response_bytes).
	CodeLimitExceeded = -32052
	// CodeUnknownChain: the URL path names no configured chain.
	CodeUnknownChain = -32053
	// CodeShuttingDown: venn is draining and takes no new calls.
	CodeShuttingDown = -32054
	// CodeRateLimited: the client's key or address is over its rate limit
	// (HTTP 429 with Retry-After), or the limiter cannot decide and
	// rate_limits.on_redis_error is closed (HTTP 503).
	CodeRateLimited = -32055
	// CodeUnauthorized: API keys are configured and the request carries no
	// valid one (HTTP 401), or its key may not use the chain (HTTP 403). A
	// method a key may not call is answered as geth answers a method it does
	// not expose: CodeMethodNotFound.
	CodeUnauthorized = -32056
	// CodeRemotesDisagree: a call put to a vote (consensus) found no answer
	// enough remotes agreed on.
	CodeRemotesDisagree = -32058
	// CodeBlockUnavailable: the call reads data at a block older than any
	// remote of the chain keeps (a pruned node's state window, expired
	// history); no remote was asked.
	CodeBlockUnavailable = -32059
)

// coder is implemented by errors that carry their own JSON-RPC code: the
// domain errors of the packages below the server, which ToWire maps.
type coder interface {
	error
	ErrorCode() int
}

// dataCoder is a coder whose wire error carries data.
type dataCoder interface {
	coder
	ErrorData() json.RawMessage
}
