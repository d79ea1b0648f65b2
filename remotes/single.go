package remotes

import (
	"context"
	"encoding/json"
)

// single is the plain strategy: one remote at a time, with failover.
func (a *attempt) single(ctx context.Context) (json.RawMessage, error) {
	return a.failover(ctx, nil)
}

// failover sends the call to one remote after another, as selection
// offers them, until a reply ends it (an answer, the caller's own error, a
// range to split, a reply no remote could make smaller) or the attempts or
// the deadline run out. With a hedge group, each send is a race while the
// call has hedges left (hedge.go).
func (a *attempt) failover(ctx context.Context, g *HedgeGroup) (json.RawMessage, error) {
	for !a.stop && a.n < a.p.conf().MaxAttempts {
		r, idx, withToken := a.next(ctx)
		if r == nil {
			break
		}
		a.sent(idx)
		if g != nil && !withToken && a.hedges < g.Max {
			a.race(ctx, g, r, idx)
			continue
		}
		a.take(ctx, a.call(ctx, r, idx, withToken))
	}
	return a.outcome(ctx)
}
