package wire

import (
	"errors"
	"strconv"

	"github.com/venn-gateway/venn/jrpc"
)

// The errors a transport returns. Every one of them names the remote, never
// its URL: URLs carry API keys.

// UpstreamError is a JSON-RPC error object sent by a remote. HTTPStatus is the
// status it came with (0 over WebSocket).
type UpstreamError struct {
	Remote     string
	HTTPStatus int
	Err        *jrpc.Error
}

func (e *UpstreamError) Error() string {
	return "remote " + e.Remote + ": " + e.Err.Error()
}

func (e *UpstreamError) Unwrap() error { return e.Err }

// HTTPStatusError is a non-2xx HTTP reply whose body is not JSON-RPC. Body
// holds at most the first 256 bytes, for classification and logs.
type HTTPStatusError struct {
	Remote string
	Status int
	Body   string
}

func (e *HTTPStatusError) Error() string {
	return "remote " + e.Remote + ": http status " + strconv.Itoa(e.Status)
}

// ReplyTooLargeError is a reply over the remote's max_response_bytes, on
// the wire or inflated. It tells the answer's size, not the remote's
// health: it is not a fault, and the pool gives the caller a clear error
// rather than trying remotes whose cap is no larger.
type ReplyTooLargeError struct {
	Remote string
	Limit  int64
}

func (e *ReplyTooLargeError) Error() string {
	return "remote " + e.Remote + ": reply over " + strconv.FormatInt(e.Limit, 10) + " bytes"
}

// ErrReplyBudget marks a reply left unread because the replies the process
// was reading held the whole reply budget (limits.max_reply_bytes_in_flight)
// for longer than a reply may wait. It is venn's overload, not the remote's
// fault: the call fails over.
var ErrReplyBudget = errors.New("reply budget exhausted")

// ErrBadReply marks a 2xx reply that is empty, not JSON, not a JSON-RPC
// response, or a response to some other call. Transports wrap it with detail.
var ErrBadReply = errors.New("bad reply")

// ErrTransport marks a failure to reach the remote or read its reply
// (refused, reset, DNS, TLS, EOF mid-body). Transports wrap it with the
// remote's name and the underlying cause, stripped of any URL.
var ErrTransport = errors.New("transport failure")
