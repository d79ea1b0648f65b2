package remotes

// Integrity: CallVerified checks every answer a remote sends against
// itself (package evm: a block's hash against its header, its roots against
// its transactions, withdrawals and receipts) before the pool takes it. An
// answer that fails a check fails over to the next remote, like a bad reply.
//
// Blame waits for the other remotes' answers, because a failed check has
// two explanations: the remote lied, or venn's encoding is at odds with the
// chain (an L2's header, a fork newer than venn). Only an answer that passes
// the very checks another failed tells them apart: then the failing remotes
// lied, and are charged (error rate, breaker) and reported as misbehaving
// (misbehave.go: counted, logged, cordoned when it repeats). When no answer
// passes, nobody is blamed: the first answer is served, its failed checks
// are counted as skipped ("unreproducible"), and when two remotes or more
// failed a check alike, that check is skipped at once on the chain for
// unreproducibleTTL, so that a chain venn can't reproduce does not cost
// every call a round of all its remotes.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/evm"
	integ "github.com/venn-gateway/venn/integrity"
	"github.com/venn-gateway/venn/remotes/misbehave"
	"github.com/venn-gateway/venn/remotes/wire"
)

// unreproducibleTTL is how long a check that every remote asked failed
// alike is skipped on the chain before it is tried again.
const unreproducibleTTL = 10 * time.Minute

// integrityMetrics are the series of local checks.
type integrityMetrics struct {
	skipped  *prometheus.CounterVec // chain, check, reason
	failures *prometheus.CounterVec // chain, remote, check
}

func newIntegrityMetrics(reg prometheus.Registerer) *integrityMetrics {
	m := &integrityMetrics{
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "integrity_skipped_total",
			Help: "Integrity checks of an answer venn served that could not be run, by reason (unknown_type, unknown_field, unreproducible, ...)."},
			[]string{"chain", "check", "reason"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "venn", Name: "integrity_failures_total",
			Help: "Answers of a remote that failed an integrity check another remote's answer passed: lies, served from another remote."},
			[]string{"chain", "remote", "check"}),
	}
	if reg != nil {
		reg.MustRegister(m.skipped, m.failures)
	}
	return m
}

// integrity is the pool's part of local checks.
type integrity struct {
	chain string
	m     *integrityMetrics

	mu      sync.Mutex
	unrepro map[integ.Check]time.Time // until when a check every remote failed is skipped
}

func (in *integrity) init(chain string, m *Metrics) {
	in.chain, in.m = chain, m.ig
	if in.m == nil {
		in.m = newIntegrityMetrics(nil)
	}
	in.unrepro = make(map[integ.Check]time.Time)
}

// excused is the set of checks currently skipped on the chain.
func (in *integrity) excused(now time.Time) integ.CheckSet {
	in.mu.Lock()
	defer in.mu.Unlock()
	var s integ.CheckSet
	for c, until := range in.unrepro {
		if now.Before(until) {
			s |= 1 << c
		} else {
			delete(in.unrepro, c)
		}
	}
	return s
}

// suspect is an answer that failed a check, and its remote.
type suspect struct {
	r   *Remote
	res json.RawMessage
	v   integ.Verdict
}

// CallVerified is Call for an answer that can be checked locally: each
// remote's answer goes through verify (integ.VerifyBlock, integ.VerifyReceipts
// and friends, with what the caller knows: the block asked for, the block
// the receipts belong to; it must not keep the answer), and one that fails
// a check is a bad reply, failed over to the next remote. It returns the answer served and
// its verdict (what passed, what was skipped). The remotes that failed a
// check the served answer passed are charged and reported as misbehaving;
// when no answer passes, the first is served, nobody is blamed, and the
// failures count as skipped (see the file comment).
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
	vc := &verifiedCall{p: p, method: method, verify: verify, excused: p.integ.excused(p.now())}
	rt := p.readRoute(method, viewOf(c))
	// The judge calls check for each answer, in the order they come (a
	// hedge's on its own goroutine); never voted (single.go).
	rt.verify = vc.check
	if hedge > 0 {
		// One hedge (one token), tried at up to three delays: the remote
		// it needs may report the block a little after the first.
		rt.hedger = newHedger(HedgeConfig{Groups: []HedgeGroup{{Delay: hedge, Quantile: 0.9, Max: 3}}, Budget: 1, Burst: 1},
			p.conf().Chain, p.m)
	}
	res, err := p.send(ctx, method, params, rt)
	vc.mu.Lock() // a hedge that lost may still be checking its answer
	defer vc.mu.Unlock()
	if err == nil {
		vc.accepted = vc.verdictOf(res)
	}
	switch {
	case len(vc.suspects) == 0:
	case err == nil && !isNull(res):
		vc.blame()
	default:
		res, err = vc.suspects[0].res, nil
		vc.accepted = vc.unreproducible()
	}
	if err == nil {
		for _, s := range vc.accepted.Skipped {
			p.integ.m.skipped.WithLabelValues(p.conf().Chain, s.Check.String(), string(s.Reason)).Inc()
		}
	}
	return res, vc.accepted, err
}

// verifiedCall is one CallVerified: the verdict of the answer served and
// the answers that failed a check.
type verifiedCall struct {
	p        *Pool
	method   string
	verify   func(json.RawMessage) integ.Verdict
	excused  integ.CheckSet // checks skipped on the chain for now
	accepted integ.Verdict

	mu       sync.Mutex // check runs on a hedge's goroutine too
	passed   []suspect  // the answers that passed, with their verdicts
	suspects []suspect
}

// check is the route's verify: an answer that fails a check is a bad
// reply, kept as a suspect.
func (vc *verifiedCall) check(r *Remote, res json.RawMessage) error {
	v := vc.verify(res)
	v.Excuse(vc.excused, integ.SkipUnreproducible)
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if len(v.Failed) == 0 {
		vc.passed = append(vc.passed, suspect{r: r, res: res, v: v})
		return nil
	}
	vc.suspects = append(vc.suspects, suspect{r: r, res: res, v: v})
	return fmt.Errorf("%w: %w", wire.ErrBadReply, v.Err())
}

// verdictOf is the verdict of the answer served, res: one that passed.
func (vc *verifiedCall) verdictOf(res json.RawMessage) integ.Verdict {
	for _, a := range vc.passed {
		if len(a.res) == len(res) && (len(res) == 0 || &a.res[0] == &res[0]) {
			return a.v
		}
	}
	for _, a := range vc.passed { // copied on its way: the same bytes
		if bytes.Equal(a.res, res) {
			return a.v
		}
	}
	return integ.Verdict{}
}

// blame charges the suspects that failed a check the served answer passed.
func (vc *verifiedCall) blame() {
	for _, s := range vc.suspects {
		if fs := s.v.FailedSet(); vc.accepted.Passed&fs == fs {
			vc.lied(s.r, s.v)
		} else {
			// The answer served skipped a check this one failed (it
			// had a member this one lacked, say): no proof either way.
			vc.p.log.Debug("integrity check failed where the answer served skipped it: not blamed",
				"remote", s.r.Name(), "method", vc.method, "err", s.v.Err())
		}
	}
}

// lied charges r for an answer that failed checks another answer passed.
func (vc *verifiedCall) lied(r *Remote, v integ.Verdict) {
	p := vc.p
	names := make([]string, len(v.Failed))
	for i, f := range v.Failed {
		names[i] = f.Check.String()
		p.integ.m.failures.WithLabelValues(p.conf().Chain, r.Name(), names[i]).Inc()
	}
	err := v.Err()
	r.rejected(vc.method, fmt.Errorf("remote %s: %w: %w", r.Name(), wire.ErrBadReply, err))
	p.misbehaved(r, misbehave.Integrity, vc.method, strings.TrimPrefix(err.Error(), "integrity: "))
}

// unreproducible serves the first of answers that all failed a check: no
// remote asked could show that the others lied. The failed checks become
// skips; a check that two remotes or more failed alike is skipped at once
// on the chain for a while.
func (vc *verifiedCall) unreproducible() integ.Verdict {
	p, method, suspects := vc.p, vc.method, vc.suspects
	v := suspects[0].v
	alike := v.FailedSet()
	for _, s := range suspects[1:] {
		alike &= s.v.FailedSet()
	}
	if len(suspects) >= 2 && alike != 0 {
		now := p.now()
		var names []string
		p.integ.mu.Lock()
		for _, c := range integ.AllChecks() {
			if alike.Has(c) {
				if _, known := p.integ.unrepro[c]; !known {
					names = append(names, c.String())
				}
				p.integ.unrepro[c] = now.Add(unreproducibleTTL)
			}
		}
		p.integ.mu.Unlock()
		if len(names) > 0 {
			p.log.Warn("integrity checks fail alike on every remote asked: skipped on this chain; venn can't reproduce its data",
				"checks", strings.Join(names, ","), "remotes", len(suspects), "method", method, "for", unreproducibleTTL,
				"err", v.Err())
		}
	}
	v.Excuse(v.FailedSet(), integ.SkipUnreproducible)
	return v
}
