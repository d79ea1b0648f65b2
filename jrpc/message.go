// Package jrpc owns venn's JSON-RPC 2.0 wire: raw request and response types,
// error codes, the HTTP and WebSocket transports, batches and limits.
//
// Params and results stay json.RawMessage end to end so that upstream answers
// are forwarded byte for byte. jrpc knows nothing of chains, remotes or EVM
// semantics: it decodes, calls a Handler, and encodes.
//
// Server serves one Handler per chain at /{chain}: POST for HTTP, GET with
// Upgrade: websocket for WebSocket. Another transport (package nats's
// request/reply) hands each message to ServeInbound, which serves it as an
// HTTP body: same limits, Gate, handler and answer bytes. Each body or message is checked with
// json.Valid once and then scanned, not parsed into a tree; a Request's ID
// and Params are sub-slices of a buffer that is never reused, so handlers
// may keep them. Answers are appended as bytes, the id echoed as sent.
// Batches run concurrently (bounded) and answer in request order.
//
// ToWire (errors.go) is the one place an internal error becomes a wire
// error. Limits (limits.go) bound bodies, batches, messages, connections and
// calls in flight; a broken limit is answered with CodeLimitExceeded rather
// than a dropped connection wherever an answer is possible. A WebSocket call
// finds the connection's Notifier in its context, for subscriptions.
//
// Who may call what, and how often, is a Gate's to decide (gate.go; venn's
// is package edge), asked before a call reaches its Handler. jrpc knows no
// component of venn, no go-ethereum and no Redis.
package jrpc

import (
	"context"
	"encoding/json"
	"strconv"
)

// Version is the only JSON-RPC version venn speaks.
const Version = "2.0"

// Request is one decoded call. ID is the exact bytes the client sent (a JSON
// string, number or null); it is nil for a notification, which gets no answer.
type Request struct {
	ID     json.RawMessage
	Method string
	Params json.RawMessage
}

// IsNotification reports whether the caller expects no answer.
func (r *Request) IsNotification() bool { return r.ID == nil }

// Response is one answer: exactly one of Result and Error is set.
type Response struct {
	ID     json.RawMessage
	Result json.RawMessage
	Error  *Error
}

// Error is a JSON-RPC error object. It is also a Go error, so handlers return
// it directly for answers that must reach the client as sent (an upstream's
// revert, say).
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string {
	return "jsonrpc error " + strconv.Itoa(e.Code) + ": " + e.Message
}

// ErrorCode lets *Error satisfy the coder interface used by ToWire.
func (e *Error) ErrorCode() int { return e.Code }

// Handler answers one call. It returns the raw result, or an error that
// ToWire maps to a wire error. Handlers must be safe for concurrent use:
// batch items and WebSocket messages are served concurrently.
type Handler interface {
	ServeRPC(ctx context.Context, req *Request) (json.RawMessage, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *Request) (json.RawMessage, error)

// ServeRPC calls f.
func (f HandlerFunc) ServeRPC(ctx context.Context, req *Request) (json.RawMessage, error) {
	return f(ctx, req)
}
