package jrpc

import (
	"context"
	"encoding/json"
	"time"
)

// Call is one client call once its answer is out, as a request log sees
// it (Options.OnCall).
type Call struct {
	// Start is when venn began to serve the call's message.
	Start time.Time
	Chain string
	// Peer is the client: its request id, key name and address. Read only.
	Peer *Peer
	// Method and Params are as the client sent them: Method is unbounded
	// (clip it), Params are the client's bytes, never reused, so they may
	// be kept, read only. Both are empty for a message invalid as a whole.
	Method string
	Params json.RawMessage
	// Batch is the call's index in its batch; -1 for a call on its own.
	Batch int
	// Note is how venn answered it: source, remote, attempts, cache.
	Note Note
	// Duration is the time in the handler; 0 for a call that never
	// reached it (refused, invalid, not allowed).
	Duration time.Duration
	// Code is the answer's JSON-RPC error code; 0 for a result.
	Code int
	// Outcome classes the answer as venn_requests_total does: ok, error,
	// timeout, no_remote, limited, invalid or internal.
	Outcome string
	// Status is the HTTP status of the answer; 0 over WebSocket.
	Status int
	// BytesIn and BytesOut are the call's share of its message: all of it
	// for a call on its own, its item of a batch; BytesOut is 0 for a
	// notification.
	BytesIn, BytesOut int
}

// logCalls hands each call of a served message to OnCall, once its answer
// is written with HTTP status (0 over WebSocket).
func (s *Server) logCalls(ctx context.Context, ch *chainEntry, sv *served, start time.Time, status int) {
	p, _ := ctx.Value(peerKey{}).(*Peer)
	c := Call{Start: start, Chain: ch.name, Peer: p, Batch: -1, Status: status}
	if sv.werr != nil {
		c.Code, c.Outcome, c.BytesIn, c.BytesOut = sv.werr.Code, outcomeOf(sv.werr).String(), sv.in, sv.out
		s.onCall(c)
		return
	}
	for i := range sv.items {
		it := &sv.items[i]
		c.Method, c.Params, c.Note, c.Duration = it.req.Method, it.req.Params, it.note, it.took
		c.Code, c.Outcome = 0, outcomeOK.String()
		if it.err != nil {
			c.Code, c.Outcome = it.err.Code, outcomeOf(it.err).String()
		}
		c.BytesIn, c.BytesOut = it.in, it.out
		if sv.batch {
			c.Batch = i
		} else {
			c.BytesIn, c.BytesOut = sv.in, sv.out
		}
		s.onCall(c)
	}
}
