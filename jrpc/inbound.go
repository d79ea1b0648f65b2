package jrpc

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// An Inbound is one JSON-RPC message, a call or a batch, that came by a
// transport other than HTTP and WebSocket (package nats: request/reply).
// It is served as an HTTP POST's body is: the same limits, Gate, handler,
// metrics and request log, and the same answer byte for byte.
type Inbound struct {
	// Chain names the chain exactly as Handle was given it.
	Chain string
	// Transport names the transport in Peer.Transport, the Gate's
	// Admission and the request log ("nats").
	Transport string
	// Header holds the message's headers, read as an HTTP request's: the
	// API key (edge's key header), X-Request-Id, X-Venn-Skip-Cache,
	// traceparent. nil for none.
	Header http.Header
	// RemoteAddr is the client's address as host:port, "" when the
	// transport knows none (per-address limits then count the client as
	// unknown).
	RemoteAddr string
	// Body is the message; handlers may keep slices of it.
	Body []byte
	// MinHead is the floor of the message's calls (MinHead); zero: none.
	MinHead MinHead
	// Note, when set, gets a single call's note once it is served: which
	// part of venn answered and which remote (gRPC's upstream_id). A batch
	// leaves it as it was.
	Note *Note
}

// GateRequest is in as the HTTP request the Gate reads: its headers and
// address on a POST to /CHAIN, with ctx.
func (in Inbound) GateRequest(ctx context.Context) *http.Request {
	h := in.Header
	if h == nil {
		h = http.Header{}
	}
	return (&http.Request{Method: http.MethodPost, URL: &url.URL{Path: "/" + in.Chain},
		Header: h, RemoteAddr: in.RemoteAddr, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}).WithContext(ctx)
}

// ServeInbound serves in and appends its answer to buf. The answer is
// empty when the message held only notifications. A message refused or
// invalid as a whole (unknown chain, over max_body_bytes, refused by the
// Gate, not JSON, server shutting down) is answered with one error
// object, which is also returned: the transport counts it. ctx bounds the
// calls, as an HTTP request's context does.
func (s *Server) ServeInbound(ctx context.Context, in Inbound, buf []byte) ([]byte, *Error) {
	ch := s.chains.Load().byName[in.Chain]
	if ch == nil {
		e := errUnknownChain("/"+in.Chain, s.chains.Load().paths)
		return appendError(buf, nil, e), e
	}
	if limit := s.lim().MaxBodyBytes; int64(len(in.Body)) > limit {
		ch.metrics.rejected(limitBody)
		e := errBodyTooLarge(limit)
		return appendError(buf, nil, e), e
	}
	h := in.Header
	if h == nil {
		h = http.Header{}
	}
	id := h.Get(requestIDHeader)
	if !validRequestID(id) {
		id = s.ids.next()
	}
	p := &Peer{Transport: in.Transport, RemoteAddr: in.RemoteAddr, Header: h, RequestID: id}
	var cl Caller
	if s.gate != nil {
		// The Gate reads requests: the message's headers and address make
		// one, so that keys and limits are decided as for HTTP.
		in.Header = h
		r := in.GateRequest(ctx)
		var refused *Refusal
		cl, refused = s.gate.Admit(r, Admission{Chain: ch.name, Transport: in.Transport})
		if refused != nil {
			ch.metrics.count(otherMethod, outcomeOf(refused.Err))
			return appendError(buf, nil, refused.Err), refused.Err
		}
		p.ClientIP, p.Key = cl.ClientIP(), cl.Key()
	}
	ctx = context.WithValue(ctx, peerKey{}, p)
	ctx = withSkipCache(ctx, h, true)
	ctx = WithMinHead(ctx, in.MinHead)
	admitted := s.beginCalls()
	if admitted {
		defer s.endCalls() // the caller publishes the answer after: Shutdown waits for results only
	}
	var start time.Time
	if s.onCall != nil {
		start = time.Now()
	}
	out, sv := s.serveMessage(ctx, ch, cl, in.Body, buf, admitted)
	if s.onCall != nil {
		s.logCalls(ctx, ch, &sv, start, 0)
	}
	if in.Note != nil && sv.note != nil {
		*in.Note = *sv.note
	}
	switch {
	case sv.werr != nil:
		return out, sv.werr
	case sv.refused != nil:
		return out, sv.refused.Err
	case !admitted:
		return out, errShuttingDown()
	}
	return out, nil
}

// AppendError appends the answer to a message refused as a whole, before
// it was read: e, with id null. A transport that refuses a message itself
// (too many in flight) answers with it.
func AppendError(buf []byte, e *Error) []byte { return appendError(buf, nil, e) }
