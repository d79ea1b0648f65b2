package remotes

// The voted strategy: the pool asks several remotes at once and accepts an
// answer only when enough of them give the same one (consensus.go has the
// rules and what votes).

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/venn-gateway/venn/remotes/consensus"
	"github.com/venn-gateway/venn/remotes/misbehave"
)

// ballot is one remote's reply, judged and, when it votes, hashed by the
// goroutine that made the call.
type ballot struct {
	judged
	vote consensus.Vote[*Remote] // set when it votes
}

// answer is one distinct answer and the remotes that gave it.
type answer = consensus.Answer[*Remote]

// vote is one call put to a vote: its attempt, the ballots coming back and
// the tally of the answers. It lives on the heap: its calls outlive it.
type vote struct {
	attempt
	jg   judge // the attempt's, for the goroutines of the calls
	rule *consensusRule
	// The calls are detached from the caller, bounded by its deadline: once
	// an answer is accepted the late ones still finish, to be judged.
	ctx     context.Context
	cancel  context.CancelFunc
	ballots chan ballot // each remote is asked once at most
	pending int
	spares  int // replacements left for remotes that gave no answer
	t       consensus.Tally[*Remote]
}

// newVote puts a call to the vote of rule.
func (p *Pool) newVote(method string, params json.RawMessage, rt route, rule *consensusRule) *vote {
	v := &vote{attempt: p.newAttempt(method, params, rt), rule: rule,
		ballots: make(chan ballot, maxRemotes), spares: p.conf().MaxAttempts - 1, t: consensus.Tally[*Remote]{Ignore: rule.Ignore}}
	v.jg = v.judge()
	v.jg.role = roleVote
	return v
}

// run asks rule.Remotes remotes at once and returns the answer rule.Agree
// of them give. A remote that gives no answer is replaced, at most
// MaxAttempts-1 times in all, and so is one whose answer leaves quorum out
// of reach.
func (v *vote) run(ctx context.Context) (json.RawMessage, error) {
	p, rule := v.p, v.rule
	first, idx := p.pick(v.method, v.rt, 0)
	if first == nil {
		// Nothing to vote with: the answer of a call no remote can take
		// (the method is unsupported everywhere, no remote).
		return v.outcome(ctx)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = p.now().Add(p.conf().CallDeadline)
	}
	v.ctx, v.cancel = context.WithDeadline(context.WithoutCancel(ctx), deadline)
	v.ask(first, idx)
	for v.n < rule.Remotes && v.another() {
	}
	for v.pending > 0 {
		var b ballot
		select {
		case b = <-v.ballots:
		case <-ctx.Done():
			v.cancel()
			p.cons.Outcome(v.method, "no_answer")
			return nil, p.exhausted(ctx, v.method, v.n, v.last)
		}
		if acc := v.count(b); acc != nil {
			return v.accept(acc)
		}
	}
	v.cancel()
	return v.settle(ctx)
}

// ask sends the call to r (index idx); its ballot comes back on v.ballots.
func (v *vote) ask(r *Remote, idx int) {
	v.sent(idx)
	v.pending++
	n := v.n
	v.p.wg.Go(func() { v.ballots <- cast(v.jg.ask(v.ctx, r, idx, n, v.params)) })
}

// another asks one more remote, if selection has one.
func (v *vote) another() bool {
	r, idx := v.p.pick(v.method, v.rt, v.tried)
	if r == nil {
		return false
	}
	v.ask(r, idx)
	return true
}

// count takes one ballot, asking other remotes where it leaves the vote
// short, and returns the answer once one has quorum.
func (v *vote) count(b ballot) *answer {
	t := &v.t
	v.pending--
	switch b.mean {
	case meanAnswer, meanCaller:
		t.Add(b.vote)
	case meanLocal:
		v.n-- // nothing was sent: another remote costs no spare
		v.another()
	case meanMissing:
		v.null = b.res
	case meanTooLarge:
		v.tooLarge = b.err
	default:
		v.last = b.err
	}
	if !b.good() && b.mean != meanLocal && v.spares > 0 && v.another() {
		v.spares-- // keep Remotes asking
	}
	lead := 0
	if acc := t.Lead(); acc != nil {
		if len(acc.Voters) >= v.rule.Agree {
			return acc
		}
		lead = len(acc.Voters)
	}
	// Quorum out of reach with what is out: one more remote may settle it.
	for lead+v.pending < v.rule.Agree && v.spares > 0 && v.another() {
		v.spares--
	}
	return nil
}

// accept returns the answer that has quorum, and judges the remotes that
// gave another, now and, for the ballots still out, in the background.
func (v *vote) accept(acc *answer) (json.RawMessage, error) {
	v.p.cons.Outcome(v.method, "agreed")
	v.by = acc.Voters[0] // whose bytes are served
	for _, w := range v.t.Answers {
		if w != acc {
			for _, r := range w.Voters {
				v.disagreed(r, acc, w, len(acc.Voters), v.t.Voters)
			}
		}
	}
	if v.pending == 0 {
		v.cancel()
	} else {
		v.judgeLate(acc)
	}
	return reply(acc)
}

// judgeLate compares the answers still out with the accepted one, in the
// background (owned by the pool's wait group), then releases the calls'
// context. The accepted answer is this goroutine's alone from here on: the
// caller only reads its result bytes.
func (v *vote) judgeLate(acc *answer) {
	agreed, voters, pending := len(acc.Voters), v.t.Voters, v.pending
	late := &v.p.cons.late
	late.Add(int64(pending)) // before the call returns: its caller may wait for them
	v.p.wg.Go(func() {
		defer v.cancel()
		for range pending {
			b := <-v.ballots
			if b.good() {
				voters++
				if !acc.Has(b.vote.Raw) {
					if w := consensus.NewAnswer(b.vote); !acc.SameCanon(w, v.rule.Ignore) {
						v.disagreed(b.r, acc, w, agreed, voters)
					}
				}
			}
			late.Add(-1)
		}
	})
}

// disagreed punishes r for answer w where acc was accepted, unless one of
// them is null (missing data is not a lie).
func (v *vote) disagreed(r *Remote, acc, w *answer, agreed, voters int) {
	if w.Null || acc.Null {
		return
	}
	p, ig := v.p, v.rule.Ignore
	acc.CanonKey(ig) // digests of the same kind on both sides
	w.CanonKey(ig)
	kind := misbehave.Disagree
	if need, grace := v.rt.need, max(p.conf().MaxLag, 1); need > 0 && need+grace > p.heads.Head() {
		// Near the head the remotes may honestly be on different forks.
		kind = misbehave.DisagreeTip
	}
	p.misbehaved(r, kind, v.method, fmt.Sprintf("answered %s; %d of %d remotes agreed on %s",
		w.Digest(), agreed, voters, acc.Digest()))
}

// settle answers a vote that ended without quorum.
func (v *vote) settle(ctx context.Context) (json.RawMessage, error) {
	t, rule := &v.t, v.rule
	p, method := v.p, v.method
	if len(t.Answers) == 0 {
		p.cons.Outcome(method, "no_answer")
		switch {
		case v.tooLarge != nil && method == "eth_getLogs":
			return nil, v.tooLarge // split it: the parts are voted on
		case v.null != nil:
			return v.null, nil // every remote asked lacks it: as do answers
		}
		return nil, p.exhausted(ctx, method, v.n, v.last)
	}
	var acc *answer
	switch rule.OnDispute {
	case consensus.DisputeMostCommon:
		acc = t.MostCommon(func(r *Remote) (int, bool) { return int(r.Tier()), true })
	case consensus.DisputePreferTier:
		acc = t.MostCommon(func(r *Remote) (int, bool) { return int(r.Tier()), r.Tier() <= rule.TrustedTier })
	}
	if acc != nil {
		v.by = acc.Voters[0]
		p.cons.Outcome(method, "resolved")
		p.log.Info("remotes disagree; answer chosen by policy", "method", method,
			"policy", rule.OnDispute.String(), "answers", len(t.Answers), "voters", t.Voters,
			"chosen", acc.Digest(), "given_by", len(acc.Voters))
		return reply(acc)
	}
	p.cons.Outcome(method, "disputed")
	p.log.Warn("remotes disagree", "method", method, "answers", len(t.Answers), "voters", t.Voters, "agree", rule.Agree)
	return nil, &disagreeError{method: method, agree: rule.Agree, voters: t.Voters, answers: len(t.Answers)}
}

// cast turns one judged reply into a ballot, on the goroutine that made the
// call: an answer or a caller error votes, hashed.
func cast(j judged) ballot {
	b := ballot{judged: j}
	switch j.mean {
	case meanAnswer:
		b.vote = consensus.Vote[*Remote]{Voter: j.r, Raw: sha256.Sum256(j.res), Null: isNull(j.res), Res: j.res}
	case meanCaller:
		b.vote = consensus.Vote[*Remote]{Voter: j.r, Raw: consensus.ErrorKey(j.err, j.v), Res: j.res, Err: j.err}
	}
	return b
}

// reply is the answer as the client gets it.
func reply(a *answer) (json.RawMessage, error) {
	if a.Err != nil {
		return nil, clientError(a.Err)
	}
	return a.Res, nil
}
