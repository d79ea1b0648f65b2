package edge

import (
	"strconv"
	"time"

	"github.com/venn-gateway/venn/jrpc"
)

// Wire errors of the edge. None repeats a key.

func errUnauthorized(reason authReason, chain, keyHeader string) *jrpc.Error {
	switch reason {
	case authMissingKey:
		return &jrpc.Error{Code: jrpc.CodeUnauthorized, Message: "unauthorized: an API key is required, in the " +
			keyHeader + " header or the path (/CHAIN/KEY)"}
	case authChain:
		return &jrpc.Error{Code: jrpc.CodeUnauthorized, Message: "unauthorized: this API key may not use chain " + chain}
	default:
		return &jrpc.Error{Code: jrpc.CodeUnauthorized, Message: "unauthorized: invalid API key"}
	}
}

// errNoMethod is geth's answer for a method it does not expose, so that
// clients see a blocked method as they would on the node.
func errNoMethod(method string) *jrpc.Error {
	return &jrpc.Error{Code: jrpc.CodeMethodNotFound, Message: "the method " + method + " does not exist/is not available"}
}

func errRateLimited(wait time.Duration) *jrpc.Error {
	ms := max(int64((wait+time.Millisecond-1)/time.Millisecond), 1)
	return &jrpc.Error{Code: jrpc.CodeRateLimited, Message: "rate limited",
		Data: []byte(`{"retry_after_ms":` + strconv.FormatInt(ms, 10) + `}`)}
}

func errOverBurst(n, burst int) *jrpc.Error {
	return &jrpc.Error{Code: jrpc.CodeRateLimited, Message: "rate limited: " + strconv.Itoa(n) +
		" calls at once exceed the limit's burst (" + strconv.Itoa(burst) + "); send fewer at a time"}
}

func errRateLimitUnavailable() *jrpc.Error {
	return &jrpc.Error{Code: jrpc.CodeRateLimited, Message: "rate limit unavailable; retry shortly"}
}

func errOriginNotAllowed() *jrpc.Error {
	return &jrpc.Error{Code: jrpc.CodeUnauthorized, Message: "unauthorized: origin not allowed (cors.allowed_origins)"}
}
