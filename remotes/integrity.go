package remotes

// Integrity: CallVerified checks every answer a remote sends against
// itself (package evm: a block's hash against its header, its roots against
// its transactions, withdrawals and receipts) before the pool takes it. An
// answer that fails a check fails over to the next remote, like a bad reply.
// Which answer is served, who lied and which checks the chain skips for a
// while is remotes/verified's; the pool charges the liars (error rate,
// breaker) and reports them as misbehaving (misbehave.go: counted, logged,
// cordoned when it repeats).

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/venn-gateway/venn/evm"
	integ "github.com/venn-gateway/venn/integrity"
	"github.com/venn-gateway/venn/remotes/misbehave"
	"github.com/venn-gateway/venn/remotes/verified"
	"github.com/venn-gateway/venn/remotes/wire"
)

// CallVerified is Call for an answer that can be checked locally: each
// remote's answer goes through verify (integ.VerifyBlock, integ.VerifyReceipts
// and friends, with what the caller knows: the block asked for, the block
// the receipts belong to; it must not keep the answer), and one that fails
// a check is a bad reply, failed over to the next remote. It returns the answer served and
// its verdict (what passed, what was skipped). The remotes that failed a
// check the served answer passed are charged and reported as misbehaving;
// when no answer passes, the first is served, nobody is blamed, and the
// failures count as skipped (see remotes/verified).
//
// Verified calls are neither shared with identical calls in flight, nor
// hedged by the chain's hedge groups, nor put to a vote: each of those
// would judge an answer without its check.
//
// A hedge above 0 is the caller's own (the leader's fetch of a new block,
// which every subscriber waits on): when the remote asked has not answered
// within its p90 latency and at least hedge, another remote that can take
// the call (its head reaches the block asked for; looked for again at twice
// and three times that wait while none can) gets it too, and the first
// answer that passes verify is served. Each answer is still checked, and
// blamed as above; the chain's hedge budget is not drawn on, one hedge per
// call. 0: not hedged.
func (p *Pool) CallVerified(ctx context.Context, method string, params json.RawMessage,
	verify func(json.RawMessage) integ.Verdict, hedge time.Duration) (json.RawMessage, integ.Verdict, error) {
	c := evm.ParseCall(method, params)
	return p.callVerified(ctx, &c, verify, hedge)
}

// callVerified is CallVerified of a parsed call.
func (p *Pool) callVerified(ctx context.Context, c *evm.Call, verify func(json.RawMessage) integ.Verdict,
	hedge time.Duration) (json.RawMessage, integ.Verdict, error) {
	method, params := c.Method, c.Params
	ctx, cancel := context.WithTimeout(ctx, p.conf().CallDeadline)
	defer cancel()
	vc := verified.NewCall[*Remote](p.integ, method, verify, p.now)
	rt := p.readRoute(method, viewOf(c))
	// The judge calls Check for each answer, in the order they come (a
	// hedge's on its own goroutine); never voted (single.go).
	rt.verify = vc.Check
	if hedge > 0 {
		// One hedge (one token), tried at up to three delays: the remote
		// it needs may report the block a little after the first.
		rt.hedger = newHedger(HedgeConfig{Groups: []HedgeGroup{{Delay: hedge, Quantile: 0.9, Max: 3}}, Budget: 1, Burst: 1},
			p.conf().Chain, p.m)
	}
	res, err := p.send(ctx, method, params, rt)
	return vc.Serve(res, err, func(r *Remote, v integ.Verdict) { p.lied(r, method, v) })
}

// lied charges r for an answer to method that failed checks another
// answer passed.
func (p *Pool) lied(r *Remote, method string, v integ.Verdict) {
	err := v.Err()
	r.rejected(method, fmt.Errorf("remote %s: %w: %w", r.Name(), wire.ErrBadReply, err))
	p.misbehaved(r, misbehave.Integrity, method, strings.TrimPrefix(err.Error(), "integrity: "))
}
