package jrpc

import (
	"context"
	"net/http"
)

// A CallHook sees every call a chain's Handler serves, so that tracing (or
// anything else per call) lives outside jrpc: jrpc hands it only what it
// already bounds, the chain and the method's metric label, never params or
// results. StartCall runs before the Gate's Check and the Handler, and the
// context it returns is the one they get; EndCall runs once the answer is
// known, with that context and the same CallInfo, whose Note then says how
// the call was answered. Both run on the call's goroutine, for batch items
// concurrently.
type CallHook interface {
	StartCall(ctx context.Context, c CallInfo) context.Context
	// EndCall gets the answer's outcome (the venn_requests_total label:
	// ok, error, timeout, no_remote, limited, invalid, internal) and its
	// JSON-RPC error code (0 for a result). c is StartCall's, so that a
	// hook can put all it says of the call on it at once, at the end.
	EndCall(ctx context.Context, c CallInfo, outcome string, code int)
}

// CallInfo is what a CallHook learns of a call.
type CallInfo struct {
	Chain string
	// Method is the method's metric label (Options.MethodLabel): a bounded
	// set, "other" for the rest.
	Method string
	// Index is the call's place in its batch; -1 when it came alone.
	Index int
	// Transport is TransportHTTP or TransportWS.
	Transport string
	// Header is the HTTP request's, or the WebSocket upgrade's; read only.
	Header http.Header
	// RequestID is the answer's X-Request-Id (RequestID).
	RequestID string
	// Note is the call's (NoteOf), which the parts that answer fill while
	// it is served: read it at EndCall.
	Note *Note
}

// callInfo is what the hook is told of a call about to be served.
func (s *Server) callInfo(ctx context.Context, ch *chainEntry, method string, idx int, n *Note) CallInfo {
	info := CallInfo{Chain: ch.name, Method: s.label(method), Index: idx, Note: n}
	if p, ok := ctx.Value(peerKey{}).(*Peer); ok {
		info.Transport, info.Header, info.RequestID = p.Transport, p.Header, p.RequestID
	}
	return info
}

// endCall runs the hook once the call's answer is known.
func (s *Server) endCall(ctx context.Context, info CallInfo, e *Error) {
	code := 0
	if e != nil {
		code = e.Code
	}
	s.hook.EndCall(ctx, info, outcomeOf(e).String(), code)
}
