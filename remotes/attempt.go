package remotes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/verdict"
	"github.com/venn-gateway/venn/remotes/wire"
)

// maxRateLimitWait bounds how long a call waits for venn's own rate limit
// of a remote when no other remote can serve it.
const maxRateLimitWait = time.Second

// attempt is one call on its way through the remotes: where it may go,
// what it has tried, and what the failures so far leave it with. Every
// strategy carries its retry state here, and acts on replies through take.
type attempt struct {
	p      *Pool
	method string
	params json.RawMessage
	rt     route

	tried   uint64  // remotes tried, by slot (Remote.slot)
	n       int     // sends counted against MaxAttempts
	hedges  int     // hedges sent (hedge.go)
	limited *Remote // a remote skipped for venn's own rate limit; nil: none
	waited  bool    // the call has waited once for that remote's token

	failures

	stop bool // the call sends no more
	// The call's outcome, once done, and the remote that gave it.
	done bool
	res  json.RawMessage
	err  error
	by   *Remote
}

// failures is what the replies that were not answers leave a call with,
// most useful first: a range to split, a null that is the answer of last
// resort when no remote has the data, and the last fault.
type failures struct {
	tooLarge error // *tooLargeError
	null     json.RawMessage
	nullBy   *Remote
	last     error
}

// newAttempt starts a call. The attempt is the caller's alone: goroutines
// that outlive a send (hedges, votes) take a copy of its judge.
func (p *Pool) newAttempt(method string, params json.RawMessage, rt route) attempt {
	return attempt{p: p, method: method, params: params, rt: rt}
}

// judge is the judge of the call's replies.
func (a *attempt) judge() judge {
	return judge{method: a.method, rt: a.rt, log: a.p.log, tracer: a.p.conf().Tracer}
}

// next is the remote for the call's next send, or nil. withToken is set
// when nothing else could serve and the call waited for the rate-limit
// token of the remote it skipped for it: send with the token taken.
func (a *attempt) next(ctx context.Context) (r *Remote, idx int, withToken bool) {
	p := a.p
	v := p.view()
	if r, idx = p.selection().pick(&v, a.method, &a.rt, a.tried); r != nil {
		return r, idx, false
	}
	// Nothing else can serve: a burst over the configured rate waits
	// briefly for a token rather than failing at once.
	lr := a.limited
	if lr == nil || a.waited {
		return nil, 0, false
	}
	if lr.available(p.now()) != 0 || !lr.waitForToken(ctx, maxRateLimitWait) {
		return nil, 0, false
	}
	a.waited = true
	return lr, lr.slot, true
}

// sent counts a send to remote idx.
func (a *attempt) sent(idx int) {
	a.tried |= 1 << idx
	a.n++
}

// call sends to r and judges the reply.
func (a *attempt) call(ctx context.Context, r *Remote, idx int, withToken bool) judged {
	jg := a.judge()
	return jg.send(ctx, r, idx, a.n, a.params, withToken)
}

// take acts on one judged reply: the call is done with an answer, or with
// an error no other remote would change; or it goes on, with what the reply
// left it.
func (a *attempt) take(ctx context.Context, j judged) {
	switch j.mean {
	case meanAnswer:
		a.finish(j.res, nil)
		a.by = j.r
	case meanCaller:
		a.finish(nil, clientError(j.err))
		a.by = j.r // a revert is the remote's answer
	case meanCut:
		a.finish(nil, clientError(j.err))
	case meanMissing:
		a.null, a.nullBy = j.res, j.r
	case meanTooLarge:
		a.finish(nil, j.err) // getlogs.go splits it
	case meanLocal:
		a.n-- // nothing was sent
		if errors.Is(j.err, errOwnRateLimit) {
			a.limited = j.r
		}
	case meanFault:
		// Over our own cap: every remote sends the same answer, so only
		// one allowed a larger reply is worth trying.
		if j.over != nil && !a.allowsLarger(j.over.Limit) {
			a.finish(nil, errReplyTooLarge(j.over.Limit))
			return
		}
		a.last = j.err
		// Writes: no failover once a remote may have acted.
		a.stop = a.rt.once || ctx.Err() != nil
	}
}

func (a *attempt) finish(res json.RawMessage, err error) {
	a.done, a.stop, a.res, a.err = true, true, res, err
}

// outcome is the call's answer once the strategy has stopped sending.
func (a *attempt) outcome(ctx context.Context) (json.RawMessage, error) {
	if a.done {
		return a.res, a.err
	}
	if a.null != nil {
		a.by = a.nullBy
		return a.null, nil
	}
	return nil, a.exhausted(ctx)
}

// exhausted is the error of a call no remote could serve.
func (a *attempt) exhausted(ctx context.Context) error {
	if a.n == 0 {
		if err := a.unserved(); err != nil {
			return err
		}
	}
	return a.p.exhausted(ctx, a.method, a.n, a.last)
}

// observe records how many sends the call made, and tells the call's note
// which remote's answer was served. It runs on the call's goroutine once
// the strategy is done: racing sends report to the attempt, never to the
// note.
func (a *attempt) observe(ctx context.Context) {
	a.p.attempts.Observe(float64(a.n))
	a.note(ctx)
}

// note tells the call's note (when it has one) the remote served and the
// sends made.
func (a *attempt) note(ctx context.Context) {
	if n := jrpc.NoteOf(ctx); n != nil {
		name := ""
		if a.by != nil {
			name = a.by.Name()
		}
		n.Upstream(name, a.n)
	}
}

// allowsLarger reports whether a remote the call has not tried may send a
// reply larger than limit.
func (a *attempt) allowsLarger(limit int64) bool {
	for _, r := range a.p.members() {
		if a.tried&(1<<r.slot) == 0 && r.cfg.MaxResponseBytes > limit {
			return true
		}
	}
	return false
}

// unserved is the answer to a call no remote was asked: every remote said
// it lacks the method (that answer, not "no remote"), or none is configured
// for it; nil when some remote might serve it.
func (a *attempt) unserved() error {
	method := a.method
	configured := false
	for _, r := range a.p.members() {
		if err := r.lacks(method); err != nil {
			return err
		}
		configured = configured || r.configuredFor(method)
	}
	if !configured {
		return &unservedError{method: method}
	}
	return nil
}

// clientError is what the client sees of an upstream error: the remote's
// own JSON-RPC error, verbatim, so answers match the node's.
func clientError(err error) error {
	var ue *wire.UpstreamError
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// exhausted builds the error for a call no remote could serve. When the last
// remote answered with a JSON-RPC error, that is the most useful answer (and
// the node's own: a future block range, say); otherwise venn says why.
func (p *Pool) exhausted(ctx context.Context, method string, tried int, lastErr error) error {
	var (
		ue   *wire.UpstreamError
		over *wire.ReplyTooLargeError
	)
	switch {
	case lastErr != nil && errors.As(lastErr, &ue):
		return ue.Err
	case lastErr != nil && errors.As(lastErr, &over):
		return errReplyTooLarge(over.Limit)
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return &timeoutError{msg: fmt.Sprintf("request timed out after trying %d remote(s)", tried)}
	}
	e := &noRemoteError{method: method, chain: p.conf().Chain, tried: tried, remotes: p.reasons()}
	if tried > 0 {
		e.last = verdict.Classify(method, lastErr).Reason
	}
	return e
}
