package remotes

// The voted strategy: the pool asks several remotes at once and accepts an
// answer only when enough of them give the same one (consensus.go has the
// rules and what votes).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/venn-gateway/venn/remotes/misbehave"
)

// hash is a digest of an answer's bytes or of its canonical form.
type hash = [sha256.Size]byte

// ballot is one remote's reply, judged and, when it votes, hashed by the
// goroutine that made the call.
type ballot struct {
	judged
	raw  hash // of the result's bytes as sent; of code and data for an error
	null bool
}

// answer is one distinct answer and the remotes that gave it.
type answer struct {
	raws     []hash // byte-exact forms seen of it
	canon    hash   // valid when hasCanon
	hasCanon bool
	null     bool
	res      json.RawMessage
	err      error // a caller error given as the answer
	voters   []*Remote
}

func newAnswer(b ballot) *answer {
	a := &answer{raws: []hash{b.raw}, null: b.null, res: b.res, voters: []*Remote{b.r}}
	if b.mean == meanCaller {
		a.err = b.err
		a.canon, a.hasCanon = b.raw, true // errorKey is canonical already
	}
	return a
}

// sameCanon reports whether n, an answer of different bytes, is this
// answer in canonical form.
func (a *answer) sameCanon(n *answer, ig *ignoreSet) bool {
	if a.err != nil || n.err != nil {
		return false // error keys are canonical already: different keys differ
	}
	return a.canonKey(ig) == n.canonKey(ig)
}

// canonKey is the hash of the canonical form, computed once. A result that
// does not parse (the transport has checked it is JSON) keeps its bytes.
func (a *answer) canonKey(ig *ignoreSet) hash {
	if !a.hasCanon {
		a.canon = a.raws[0]
		if c, err := canonical(a.res, ig); err == nil {
			a.canon = sha256.Sum256(c)
		}
		a.hasCanon = true
	}
	return a.canon
}

func (a *answer) digest() string {
	if a.hasCanon {
		return hex.EncodeToString(a.canon[:6])
	}
	return hex.EncodeToString(a.raws[0][:6])
}

// bestTier is the best tier among the voters that trust accepts.
func (a *answer) bestTier(trust func(*Remote) bool) (Tier, int) {
	best, n := TierFallback+1, 0
	for _, r := range a.voters {
		if trust(r) {
			n++
			best = min(best, r.Tier())
		}
	}
	return best, n
}

// tally counts the votes of one call.
type tally struct {
	ignore  *ignoreSet
	answers []*answer
	voters  int
}

func (t *tally) add(b ballot) *answer {
	t.voters++
	for _, a := range t.answers {
		if slices.Contains(a.raws, b.raw) {
			a.voters = append(a.voters, b.r)
			return a
		}
	}
	n := newAnswer(b)
	for _, a := range t.answers {
		if a.sameCanon(n, t.ignore) {
			a.raws = append(a.raws, b.raw)
			a.voters = append(a.voters, b.r)
			return a
		}
	}
	t.answers = append(t.answers, n)
	return n
}

func (t *tally) lead() *answer {
	var best *answer
	for _, a := range t.answers {
		if best == nil || len(a.voters) > len(best.voters) {
			best = a
		}
	}
	return best
}

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
	t       tally
}

// newVote puts a call to the vote of rule.
func (p *Pool) newVote(method string, params json.RawMessage, rt route, rule *consensusRule) *vote {
	v := &vote{attempt: p.newAttempt(method, params, rt), rule: rule,
		ballots: make(chan ballot, maxRemotes), spares: p.conf().MaxAttempts - 1, t: tally{ignore: rule.ignore}}
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
		t.add(b)
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
	if acc := t.lead(); acc != nil {
		if len(acc.voters) >= v.rule.Agree {
			return acc
		}
		lead = len(acc.voters)
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
	v.by = acc.voters[0] // whose bytes are served
	for _, w := range v.t.answers {
		if w != acc {
			for _, r := range w.voters {
				v.disagreed(r, acc, w, len(acc.voters), v.t.voters)
			}
		}
	}
	if v.pending == 0 {
		v.cancel()
	} else {
		v.judgeLate(acc)
	}
	return acc.reply()
}

// judgeLate compares the answers still out with the accepted one, in the
// background (owned by the pool's wait group), then releases the calls'
// context. The accepted answer is this goroutine's alone from here on: the
// caller only reads its result bytes.
func (v *vote) judgeLate(acc *answer) {
	agreed, voters, pending := len(acc.voters), v.t.voters, v.pending
	v.p.wg.Go(func() {
		defer v.cancel()
		for range pending {
			b := <-v.ballots
			if !b.good() {
				continue
			}
			voters++
			if slices.Contains(acc.raws, b.raw) {
				continue
			}
			if w := newAnswer(b); !acc.sameCanon(w, v.rule.ignore) {
				v.disagreed(b.r, acc, w, agreed, voters)
			}
		}
	})
}

// disagreed punishes r for answer w where acc was accepted, unless one of
// them is null (missing data is not a lie).
func (v *vote) disagreed(r *Remote, acc, w *answer, agreed, voters int) {
	if w.null || acc.null {
		return
	}
	p, ig := v.p, v.rule.ignore
	acc.canonKey(ig) // digests of the same kind on both sides
	w.canonKey(ig)
	kind := misbehave.Disagree
	if need, grace := v.rt.need, max(p.conf().MaxLag, 1); need > 0 && need+grace > p.heads.best.Load() {
		// Near the head the remotes may honestly be on different forks.
		kind = misbehave.DisagreeTip
	}
	p.misbehaved(r, kind, v.method, fmt.Sprintf("answered %s; %d of %d remotes agreed on %s",
		w.digest(), agreed, voters, acc.digest()))
}

// settle answers a vote that ended without quorum.
func (v *vote) settle(ctx context.Context) (json.RawMessage, error) {
	t, rule := &v.t, v.rule
	p, method := v.p, v.method
	if len(t.answers) == 0 {
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
	case DisputeMostCommon:
		acc = t.mostCommon(func(*Remote) bool { return true })
	case DisputePreferTier:
		acc = t.mostCommon(func(r *Remote) bool { return r.Tier() <= rule.TrustedTier })
	}
	if acc != nil {
		v.by = acc.voters[0]
		p.cons.Outcome(method, "resolved")
		p.log.Info("remotes disagree; answer chosen by policy", "method", method,
			"policy", rule.OnDispute.String(), "answers", len(t.answers), "voters", t.voters,
			"chosen", acc.digest(), "given_by", len(acc.voters))
		return acc.reply()
	}
	p.cons.Outcome(method, "disputed")
	p.log.Warn("remotes disagree", "method", method, "answers", len(t.answers), "voters", t.voters, "agree", rule.Agree)
	return nil, &disagreeError{method: method, agree: rule.Agree, voters: t.voters, answers: len(t.answers)}
}

// cast turns one judged reply into a ballot, on the goroutine that made the
// call: an answer or a caller error votes, hashed.
func cast(j judged) ballot {
	b := ballot{judged: j}
	switch j.mean {
	case meanAnswer:
		b.null = isNull(j.res)
		b.raw = sha256.Sum256(j.res)
	case meanCaller:
		b.raw = errorKey(j.err, j.v)
	}
	return b
}

// reply is the answer as the client gets it.
func (a *answer) reply() (json.RawMessage, error) {
	if a.err != nil {
		return nil, clientError(a.err)
	}
	return a.res, nil
}

// mostCommon is the answer the most trusted voters gave. A tie goes to
// data over null, then to the better tier; a tie after that, or no trusted
// voter, is nil.
func (t *tally) mostCommon(trust func(*Remote) bool) *answer {
	type rank struct {
		n    int
		data bool
		tier Tier
	}
	better := func(a, b rank) int { // >0: a wins
		switch {
		case a.n != b.n:
			return a.n - b.n
		case a.data != b.data:
			if a.data {
				return 1
			}
			return -1
		}
		return int(b.tier) - int(a.tier)
	}
	var (
		best     *answer
		bestRank rank
		tied     bool
	)
	for _, a := range t.answers {
		tier, n := a.bestTier(trust)
		if n == 0 {
			continue
		}
		r := rank{n: n, data: !a.null, tier: tier}
		switch c := better(r, bestRank); {
		case best == nil || c > 0:
			best, bestRank, tied = a, r, false
		case c == 0:
			tied = true
		}
	}
	if tied {
		return nil
	}
	return best
}
