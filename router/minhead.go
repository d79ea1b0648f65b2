package router

import (
	"context"
	"fmt"

	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
)

// A call's floor (jrpc.MinHead, Dshackle's height selector): answered
// only by a part of venn whose head is at or above it. The head window
// answers, and pins the tags, only when its head reaches the floor; the
// history store and the response cache answer at a fixed block, the same
// from any source, and ignore it; the remotes get it resolved to a number
// (the pool's selection takes only remotes that reach it, and answers a
// clear error when none does).

// floor resolves ctx's floor to a block number (0: none) and returns ctx
// carrying it so for the remotes, or the error of a tag the cluster does
// not know yet.
func (rt *Router) floor(ctx context.Context) (context.Context, uint64, error) {
	m := jrpc.MinHeadOf(ctx)
	if m.Zero() {
		return ctx, 0, nil
	}
	n := m.Number
	if m.Tag != "" {
		t, err := rt.tagNumber(m.Tag)
		if err != nil {
			return ctx, 0, err
		}
		n = max(n, t)
	}
	if m.Tag == "" {
		return ctx, n, nil
	}
	return jrpc.WithMinHead(ctx, jrpc.MinHead{Number: n}), n, nil
}

// tagNumber is the cluster's number for a floor's tag: for latest the
// remotes' best head (the window's head without one), for safe and
// finalized the head window's.
func (rt *Router) tagNumber(tag string) (uint64, error) {
	var tags headstore.Tags
	if rt.head != nil {
		tags, _ = rt.head.Tags()
	}
	var n uint64
	switch tag {
	case "latest":
		n = rt.up.HealthyHead()
		if n == 0 {
			n = tags.Latest
		}
	case "safe":
		n = tags.Safe
	case "finalized":
		n = tags.Finalized
	default:
		return 0, &floorError{msg: fmt.Sprintf("minimum height %q is not a tag venn knows (latest, safe, finalized)", tag)}
	}
	if n == 0 {
		return 0, &floorError{msg: fmt.Sprintf("minimum height %s: the chain's %s block is not known yet", tag, tag)}
	}
	return n, nil
}

// reaches reports whether the head window's head is at or above floor
// (0: no floor).
func (rt *Router) reaches(floor uint64) bool {
	if floor == 0 {
		return true
	}
	n, ok := rt.head.Latest()
	return ok && n >= floor
}
