package jrpc

import (
	"context"
	"net/http"
)

// A Meter is a Caller that accounts for what its calls cost once they are
// answered (venn's credit budgets and usage, package edge). The Server
// calls Charge once per message, after the answer is built and before it is
// written, with every call the Caller's Take admitted; over HTTP h is the
// answer's header, which Charge may add to (the call's credits, the
// budget left), over WebSocket nil. Charge must not block: it only counts.
type Meter interface {
	Charge(ctx context.Context, chain string, calls []Charged, h http.Header)
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
