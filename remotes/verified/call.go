package verified

// Blame waits for the other remotes' answers, because a failed check has
// two explanations: the remote lied, or venn's encoding is at odds with the
// chain (an L2's header, a fork newer than venn). Only an answer that passes
// the very checks another failed tells them apart: then the failing remotes
// lied, and the pool charges them (error rate, breaker) and reports them as
// misbehaving. When no answer passes, nobody is blamed: the first answer is
// served, its failed checks are counted as skipped ("unreproducible"), and
// when two remotes or more failed a check alike, that check is skipped at
// once on the chain for UnreproducibleTTL, so that a chain venn can't
// reproduce does not cost every call a round of all its remotes.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	integ "github.com/venn-gateway/venn/integrity"
	"github.com/venn-gateway/venn/remotes/wire"
)

// UnreproducibleTTL is how long a check that every remote asked failed
// alike is skipped on the chain before it is tried again.
const UnreproducibleTTL = 10 * time.Minute

// Remote is who sent an answer: the pool's remote.
type Remote interface {
	Name() string
}

// Chain is a chain's part of local checks: the checks it skips for now,
// its log and series.
type Chain struct {
	name string
	log  *slog.Logger
	m    *Metrics

	mu      sync.Mutex
	unrepro map[integ.Check]time.Time // until when a check every remote failed is skipped
}

// NewChain is the local checks of chain; log nil logs nothing, m nil
// counts in series of its own.
func NewChain(chain string, log *slog.Logger, m *Metrics) *Chain {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	return &Chain{name: chain, log: log, m: m, unrepro: make(map[integ.Check]time.Time)}
}

// excused is the set of checks currently skipped on the chain.
func (ch *Chain) excused(now time.Time) integ.CheckSet {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	var s integ.CheckSet
	for c, until := range ch.unrepro {
		if now.Before(until) {
			s |= 1 << c
		} else {
			delete(ch.unrepro, c)
		}
	}
	return s
}

// suspect is an answer that failed a check, and its remote.
type suspect[R Remote] struct {
	r   R
	res json.RawMessage
	v   integ.Verdict
}

// Call is one verified call: the verdict of the answer served and the
// answers that failed a check.
type Call[R Remote] struct {
	ch       *Chain
	method   string
	verify   func(json.RawMessage) integ.Verdict
	now      func() time.Time
	excused  integ.CheckSet // checks skipped on the chain for now
	accepted integ.Verdict

	mu       sync.Mutex   // Check runs on a hedge's goroutine too
	passed   []suspect[R] // the answers that passed, with their verdicts
	suspects []suspect[R]
}

// NewCall starts a call of method on ch whose answers go through verify.
func NewCall[R Remote](ch *Chain, method string, verify func(json.RawMessage) integ.Verdict, now func() time.Time) *Call[R] {
	return &Call[R]{ch: ch, method: method, verify: verify, now: now, excused: ch.excused(now())}
}

// Check is the route's verify: an answer that fails a check is a bad
// reply, kept as a suspect.
func (vc *Call[R]) Check(r R, res json.RawMessage) error {
	v := vc.verify(res)
	v.Excuse(vc.excused, integ.SkipUnreproducible)
	vc.mu.Lock()
	defer vc.mu.Unlock()
	if len(v.Failed) == 0 {
		vc.passed = append(vc.passed, suspect[R]{r: r, res: res, v: v})
		return nil
	}
	vc.suspects = append(vc.suspects, suspect[R]{r: r, res: res, v: v})
	return fmt.Errorf("%w: %w", wire.ErrBadReply, v.Err())
}

// Serve is the call's outcome once the pool's send returned res and err:
// the answer served and its verdict (what passed, what was skipped). The
// remotes that failed a check the served answer passed are handed to lied,
// after their failures are counted; when no answer passed, the first is
// served, nobody is blamed, and the failures count as skipped.
func (vc *Call[R]) Serve(res json.RawMessage, err error, lied func(r R, v integ.Verdict)) (json.RawMessage, integ.Verdict, error) {
	vc.mu.Lock() // a hedge that lost may still be checking its answer
	defer vc.mu.Unlock()
	if err == nil {
		vc.accepted = vc.verdictOf(res)
	}
	switch {
	case len(vc.suspects) == 0:
	case err == nil && string(res) != "null": // a null answer proves no lie
		vc.blame(lied)
	default:
		res, err = vc.suspects[0].res, nil
		vc.accepted = vc.unreproducible()
	}
	if err == nil {
		for _, s := range vc.accepted.Skipped {
			vc.ch.m.Skipped(vc.ch.name, s.Check.String(), string(s.Reason)).Inc()
		}
	}
	return res, vc.accepted, err
}

// verdictOf is the verdict of the answer served, res: one that passed.
func (vc *Call[R]) verdictOf(res json.RawMessage) integ.Verdict {
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

// blame hands lied the suspects that failed a check the served answer
// passed.
func (vc *Call[R]) blame(lied func(r R, v integ.Verdict)) {
	for _, s := range vc.suspects {
		if fs := s.v.FailedSet(); vc.accepted.Passed&fs == fs {
			for _, f := range s.v.Failed {
				vc.ch.m.Failures(vc.ch.name, s.r.Name(), f.Check.String()).Inc()
			}
			lied(s.r, s.v)
		} else {
			// The answer served skipped a check this one failed (it
			// had a member this one lacked, say): no proof either way.
			vc.ch.log.Debug("integrity check failed where the answer served skipped it: not blamed",
				"remote", s.r.Name(), "method", vc.method, "err", s.v.Err())
		}
	}
}

// unreproducible serves the first of answers that all failed a check: no
// remote asked could show that the others lied. The failed checks become
// skips; a check that two remotes or more failed alike is skipped at once
// on the chain for a while.
func (vc *Call[R]) unreproducible() integ.Verdict {
	ch, suspects := vc.ch, vc.suspects
	v := suspects[0].v
	alike := v.FailedSet()
	for _, s := range suspects[1:] {
		alike &= s.v.FailedSet()
	}
	if len(suspects) >= 2 && alike != 0 {
		now := vc.now()
		var names []string
		ch.mu.Lock()
		for _, c := range integ.AllChecks() {
			if alike.Has(c) {
				if _, known := ch.unrepro[c]; !known {
					names = append(names, c.String())
				}
				ch.unrepro[c] = now.Add(UnreproducibleTTL)
			}
		}
		ch.mu.Unlock()
		if len(names) > 0 {
			ch.log.Warn("integrity checks fail alike on every remote asked: skipped on this chain; venn can't reproduce its data",
				"checks", strings.Join(names, ","), "remotes", len(suspects), "method", vc.method, "for", UnreproducibleTTL,
				"err", v.Err())
		}
	}
	v.Excuse(v.FailedSet(), integ.SkipUnreproducible)
	return v
}
