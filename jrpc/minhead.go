package jrpc

import "context"

// MinHead is a call's floor: a transport's client asked that the call be
// answered only by a part of venn whose head is at or above it (Dshackle's
// height selector, package emerald). The router resolves a tag to the
// cluster's number for it and serves from its head window only when the
// window reaches the floor; the remotes' selection takes only remotes
// whose head does, and answers a clear error when none does. Answers at a
// fixed block (history, the response cache) are the same from any source
// and ignore it. The zero MinHead is no floor.
type MinHead struct {
	// Number is a block number the source's head must reach; 0: none.
	Number uint64
	// Tag is one of "latest", "safe", "finalized": the cluster's number
	// for it, as the router knows it; "": none. With Number both hold.
	Tag string
}

// Zero reports no floor.
func (m MinHead) Zero() bool { return m.Number == 0 && m.Tag == "" }

type minHeadKey struct{}

// WithMinHead gives ctx's calls the floor m (the zero MinHead: ctx as it
// is).
func WithMinHead(ctx context.Context, m MinHead) context.Context {
	if m.Zero() {
		return ctx
	}
	return context.WithValue(ctx, minHeadKey{}, m)
}

// MinHeadOf is ctx's floor; the zero MinHead when it has none.
func MinHeadOf(ctx context.Context) MinHead {
	m, _ := ctx.Value(minHeadKey{}).(MinHead)
	return m
}
