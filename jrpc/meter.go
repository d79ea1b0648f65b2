package jrpc

import (
	"context"
	"net/http"
	"unsafe"
)

// A Meter is a Caller that accounts for what its calls cost once they are
// answered (venn's credit budgets and usage, package edge). The Server
// calls Charge once per message, after the answer is built and before it is
// written, with every call the Caller's Take admitted; over HTTP h is the
// answer's header, which Charge may add to (the call's credits, the
// budget left), over WebSocket nil. Charge must not block: it only counts.
type Meter interface {
	Charge(ctx context.Context, chain string, calls []Charged, h *AnswerHeader)
}

// AnswerHeader is an HTTP answer's header as a Meter adds to it, with room
// for one value in the request's own allocation: a value built in Room and
// given to SetRoom costs no allocation of its own.
type AnswerHeader struct {
	h    http.Header
	vs   [1]string
	room [answerRoom]byte
}

// answerRoom is the room of an AnswerHeader: edge's credit header
// ("call=10, minute=9999990, month=9999999990", 42 bytes for a tenant with
// ten million credits a minute and ten billion a month) fits while its
// three integers have no more than 34 digits between them, and an
// httpRequest is 240 bytes, an allocator size class. A longer value grows
// out of it, into an allocation of its own.
const answerRoom = 56

// Header is the answer's header.
func (a *AnswerHeader) Header() http.Header { return a.h }

// Room is the room for one value, empty: append to it, then SetRoom.
func (a *AnswerHeader) Room() []byte { return a.room[:0] }

// SetRoom sets the header key, in canonical form (it is not canonicalized
// again), to the bytes of v, which Room's room holds (or any bytes the
// caller no longer changes): they are not copied. Once per answer.
func (a *AnswerHeader) SetRoom(key string, v []byte) {
	a.vs[0] = unsafe.String(unsafe.SliceData(v), len(v))
	a.h[key] = a.vs[:]
}

// Charged is one answered call, as a Meter sees it.
type Charged struct {
	// Method is as the client sent it: unbounded, so a Meter bounds it.
	Method string
	// Source is the part that answered it (Note.Source): head, history,
	// cache, forger, remotes, local; "" when none did (refused, failed
	// before any part).
	Source string
	// Code is the answer's JSON-RPC error code; 0 for a result.
	Code int
	// BytesOut is the call's share of the answer; 0 for a notification.
	BytesOut int
}
