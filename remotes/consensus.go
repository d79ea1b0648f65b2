package remotes

// Consensus: for the methods a chain lists, the pool asks several remotes at
// once and accepts an answer only when enough of them give the same one.
//
// A vote is one upstream call per remote, chosen by pick (tiers, health,
// height: a remote below the block asked for is never asked, so it never
// votes; when the best tier has fewer remotes in rotation than the rule
// asks, the next tier's vote too). Answers are compared canonicalised: parsed, the ignored fields
// dropped, re-encoded with sorted keys, hashed. Byte-identical answers are
// the same answer without that work, so the common case (every remote
// sends the same bytes) costs one hash per answer. What votes:
//
//   - a result, null included (but not a null that the route calls missing
//     data: the remote claims the block and has not got it);
//   - an error the classifier calls the caller's own (a revert, invalid
//     params), compared by code and data, not message: node implementations
//     word the same error differently;
//   - nothing else: upstream faults, throttling, missing data and caps do not
//     vote, and another remote is asked in their place.
//
// When Agree answers match, that answer is returned at once; the remotes
// still out finish in the background and are judged too. A remote whose
// answer differs from an accepted one misbehaved (misbehave.go), except
// where one side is null: a remote without the data is behind, not lying.
// About a block within max_lag of the head it is only disagree_tip, which
// is not punished: honest remotes can briefly be on different forks.
// Without quorum the rule's DisputePolicy decides, and nobody is punished:
// there is no majority to have disagreed with.
//
// Calls that name a moving block (latest, pending, safe, finalized, or no
// block where the method takes one) are not put to a vote: remotes at
// different heads answer them differently and honestly. The router pins
// latest, safe and finalized to numbers before calls reach the pool.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/jrpc"
)

// DisputePolicy says what a vote without quorum answers.
type DisputePolicy uint8

const (
	// DisputeError answers -32058 (jrpc.CodeRemotesDisagree).
	DisputeError DisputePolicy = iota
	// DisputeMostCommon answers with the answer most remotes gave; a tie
	// goes to data over null, then to the answer of the best tier, and is
	// otherwise an error.
	DisputeMostCommon
	// DisputePreferTier answers with the answer most remotes of the trusted
	// tier (or better) gave, with the same tie rules; without a trusted
	// answer it is an error.
	DisputePreferTier
)

func (d DisputePolicy) String() string {
	switch d {
	case DisputeError:
		return "error"
	case DisputeMostCommon:
		return "most_common"
	case DisputePreferTier:
		return "prefer_tier"
	}
	return "unknown"
}

// ParseDisputePolicy reads a policy as written in config; "" is error.
func ParseDisputePolicy(s string) (DisputePolicy, error) {
	switch s {
	case "", "error":
		return DisputeError, nil
	case "most_common":
		return DisputeMostCommon, nil
	case "prefer_tier":
		return DisputePreferTier, nil
	}
	return 0, fmt.Errorf("unknown dispute policy %q (want error, most_common or prefer_tier)", s)
}

// DefaultConsensusRemotes is how many remotes a rule asks when it does not
// say (or the chain's remote count, if smaller).
const DefaultConsensusRemotes = 3

// ConsensusRule puts the calls of Methods to a vote.
type ConsensusRule struct {
	// Methods are exact method names (no prefixes: the name is a metric
	// label). Writes and stateful methods cannot be voted on.
	Methods []string `yaml:"methods"`
	// Remotes are asked at once (N); 0 is min(3, the chain's remotes).
	Remotes int `yaml:"remotes"`
	// Agree is how many must give the same answer (K); 0 is a majority of
	// Remotes. It must be a majority, or two answers could both win.
	Agree int `yaml:"agree"`
	// IgnoreFields are left out of the comparison. A plain name ("size")
	// is dropped at any depth; a dotted path ("transactions.v") is followed
	// from the result's root, through arrays as if they were not there,
	// and "*" matches any key. The answer returned is one agreeing
	// remote's, ignored fields as that remote sent them.
	IgnoreFields []string      `yaml:"ignore_fields"`
	OnDispute    DisputePolicy `yaml:"on_dispute"`
	// TrustedTier: for DisputePreferTier, remotes of this tier or a better
	// one are trusted (primary trusts only primary).
	TrustedTier Tier `yaml:"trusted_tier"`
}

// consensusRule is a ConsensusRule with defaults applied and its ignore
// list compiled.
type consensusRule struct {
	ConsensusRule
	ignore *ignoreSet // nil: compare everything
}

// compileRules checks the rules against the chain's remote count and
// indexes them by method. Errors name the rule by index.
func compileRules(rules []ConsensusRule, nRemotes int) (map[string]*consensusRule, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	rules = ConsensusDefaults(rules, nRemotes)
	if err := ValidateConsensus(rules, nRemotes); err != nil {
		return nil, err
	}
	out := make(map[string]*consensusRule)
	for i, r := range rules {
		ig, err := compileIgnore(r.IgnoreFields)
		if err != nil {
			return nil, fmt.Errorf("consensus[%d]: %w", i, err)
		}
		cr := &consensusRule{ConsensusRule: r, ignore: ig}
		for _, m := range r.Methods {
			out[m] = cr
		}
	}
	return out, nil
}

// Votable reports why method cannot be put to a vote, or nil: it must be
// an exact name, and neither a write nor stateful.
func Votable(method string) error {
	switch {
	case method == "" || strings.ContainsAny(method, "* \t"):
		return fmt.Errorf("%q is not an exact method name", method)
	case method == "eth_sendRawTransaction" || evm.IsWrite(method):
		return fmt.Errorf("%s is a write: it is never sent to several remotes to compare", method)
	case evm.IsStateful(method):
		return fmt.Errorf("%s is stateful: its answer belongs to one remote", method)
	}
	return nil
}

// voteRule returns the rule that puts this call to a vote, or nil: no rule
// for the method, a call that must reach one remote only, or one that names
// a moving block.
func (p *Pool) voteRule(method string, params json.RawMessage, rt *route) *consensusRule {
	if p.cons.rules == nil || rt.noVote || rt.once || rt.only != nil {
		return nil
	}
	rule := p.cons.rules[method]
	if rule == nil || !fixedBlock(method, rt.view(method, params)) {
		return nil
	}
	return rule
}

// fixedBlock reports whether every remote asked would answer for the same
// block: the call names one by number or hash, or takes none.
func fixedBlock(method string, cv callView) bool {
	fixed := func(r evm.BlockRef) bool {
		return r.Kind == evm.RefNumber || r.Kind == evm.RefHash || r.Kind == evm.RefEarliest
	}
	if method == "eth_getLogs" {
		if !cv.logsOK {
			return true // every node refuses it alike
		}
		return cv.byHash || fixed(cv.from.ref()) && fixed(cv.to.ref())
	}
	if cv.hasBlock {
		return !cv.blockOK || fixed(cv.block.ref())
	}
	return true
}

// ballotKind is what one remote's reply counts as.
type ballotKind uint8

const (
	ballotVote     ballotKind = iota // an answer: it votes
	ballotNone                       // no answer: ask another remote
	ballotLocal                      // venn's own limit kept it from being sent
	ballotTooLarge                   // an eth_getLogs span to split
	ballotMissing                    // null where the route calls null missing data
)

// hash is a digest of an answer's bytes or of its canonical form.
type hash = [sha256.Size]byte

// ballot is one remote's reply, classified by the goroutine that made the
// call.
type ballot struct {
	r    *Remote
	kind ballotKind
	raw  hash // of the result's bytes as sent; of code and data for an error
	null bool
	res  json.RawMessage
	err  error // for an error vote: the caller error given as the answer
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
	a := &answer{raws: []hash{b.raw}, null: b.null, res: b.res, err: b.err, voters: []*Remote{b.r}}
	if b.err != nil {
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
	ignore   *ignoreSet
	answers  []*answer
	voters   int
	lastErr  error
	null     json.RawMessage // a missing-data null, the answer if nothing else comes
	tooLarge error
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

// consensus asks rule.Remotes remotes at once and returns the answer
// rule.Agree of them give. A remote that gives no answer is replaced, at
// most MaxAttempts-1 times in all, and so is one whose answer leaves quorum
// out of reach.
func (p *Pool) consensus(ctx context.Context, method string, params json.RawMessage, rt route, rule *consensusRule) (json.RawMessage, error) {
	first, idx := p.pick(method, rt, 0)
	if first == nil {
		// Nothing to vote with: do knows the right answer (the method is
		// unsupported everywhere, a rate-limit wait, no remote).
		rt.noVote = true
		return p.do(ctx, method, params, rt)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = p.now().Add(p.cfg.CallDeadline)
	}
	// The calls are detached from the caller, bounded by its deadline: once
	// an answer is accepted the late ones still finish, to be judged.
	vctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	ballots := make(chan ballot, maxRemotes) // each remote is asked once at most
	var (
		tried         uint64
		sent, pending int
		spares        = p.cfg.MaxAttempts - 1
		t             = tally{ignore: rule.ignore}
	)
	ask := func(r *Remote, idx int) {
		tried |= 1 << idx
		sent++
		pending++
		p.wg.Go(func() {
			res, err := r.call(vctx, method, params)
			ballots <- p.cast(r, method, rt, res, err)
		})
	}
	another := func() bool {
		r, idx := p.pick(method, rt, tried)
		if r == nil {
			return false
		}
		ask(r, idx)
		return true
	}
	ask(first, idx)
	for sent < rule.Remotes && another() {
	}
	defer func() { p.attempts.Observe(float64(sent)) }()
	for pending > 0 {
		var b ballot
		select {
		case b = <-ballots:
		case <-ctx.Done():
			cancel()
			p.cons.outcome(method, "no_answer")
			return nil, p.exhausted(ctx, method, sent, t.lastErr)
		}
		pending--
		switch b.kind {
		case ballotVote:
			t.add(b)
		case ballotLocal:
			sent-- // nothing was sent: another remote costs no spare
			another()
		case ballotMissing:
			t.null = b.res
		case ballotTooLarge:
			t.tooLarge = b.err
		default:
			t.lastErr = b.err
		}
		if b.kind != ballotVote && b.kind != ballotLocal && spares > 0 && another() {
			spares-- // keep Remotes asking
		}
		if a := t.lead(); a != nil && len(a.voters) >= rule.Agree {
			p.cons.outcome(method, "agreed")
			for _, w := range t.answers {
				if w != a {
					for _, r := range w.voters {
						p.disagreed(r, method, rt, rule, a, w, len(a.voters), t.voters)
					}
				}
			}
			if pending == 0 {
				cancel()
			} else {
				p.judgeLate(method, rt, rule, a, t.voters, ballots, pending, cancel)
			}
			return a.reply()
		}
		// Quorum out of reach with what is out: one more remote may settle it.
		lead := 0
		if a := t.lead(); a != nil {
			lead = len(a.voters)
		}
		for lead+pending < rule.Agree && spares > 0 && another() {
			spares--
		}
	}
	cancel()
	return p.settle(ctx, method, rule, &t, sent)
}

// reply is the answer as the client gets it.
func (a *answer) reply() (json.RawMessage, error) {
	if a.err != nil {
		return nil, clientError(a.err)
	}
	return a.res, nil
}

// judgeLate compares the answers still out with the accepted one, in the
// background (owned by the pool's wait group), then releases the calls'
// context. The accepted answer is this goroutine's alone from here on: the
// caller only reads its result bytes.
func (p *Pool) judgeLate(method string, rt route, rule *consensusRule, acc *answer, voters int, ballots <-chan ballot, pending int, cancel context.CancelFunc) {
	agreed := len(acc.voters)
	p.wg.Go(func() {
		defer cancel()
		for range pending {
			b := <-ballots
			if b.kind != ballotVote {
				continue
			}
			voters++
			if slices.Contains(acc.raws, b.raw) {
				continue
			}
			if w := newAnswer(b); !acc.sameCanon(w, rule.ignore) {
				p.disagreed(b.r, method, rt, rule, acc, w, agreed, voters)
			}
		}
	})
}

// disagreed punishes r for answer a where acc was accepted, unless one of
// them is null (missing data is not a lie).
func (p *Pool) disagreed(r *Remote, method string, rt route, rule *consensusRule, acc, a *answer, agreed, voters int) {
	if a.null || acc.null {
		return
	}
	acc.canonKey(rule.ignore) // digests of the same kind on both sides
	a.canonKey(rule.ignore)
	kind := kindDisagree
	if grace := max(p.cfg.MaxLag, 1); rt.need > 0 && rt.need+grace > p.best.Load() {
		// Near the head the remotes may honestly be on different forks.
		kind = kindDisagreeTip
	}
	p.misbehaved(r, kind, method, fmt.Sprintf("answered %s; %d of %d remotes agreed on %s",
		a.digest(), agreed, voters, acc.digest()))
}

// settle answers a vote that ended without quorum.
func (p *Pool) settle(ctx context.Context, method string, rule *consensusRule, t *tally, sent int) (json.RawMessage, error) {
	if len(t.answers) == 0 {
		p.cons.outcome(method, "no_answer")
		switch {
		case t.tooLarge != nil && method == "eth_getLogs":
			return nil, t.tooLarge // split it: the parts are voted on
		case t.null != nil:
			return t.null, nil // every remote asked lacks it: as do answers
		}
		return nil, p.exhausted(ctx, method, sent, t.lastErr)
	}
	var a *answer
	switch rule.OnDispute {
	case DisputeMostCommon:
		a = t.mostCommon(func(*Remote) bool { return true })
	case DisputePreferTier:
		a = t.mostCommon(func(r *Remote) bool { return r.Tier() <= rule.TrustedTier })
	}
	if a != nil {
		p.cons.outcome(method, "resolved")
		p.log.Info("remotes disagree; answer chosen by policy", "method", method,
			"policy", rule.OnDispute.String(), "answers", len(t.answers), "voters", t.voters,
			"chosen", a.digest(), "given_by", len(a.voters))
		return a.reply()
	}
	p.cons.outcome(method, "disputed")
	p.log.Warn("remotes disagree", "method", method, "answers", len(t.answers), "voters", t.voters, "agree", rule.Agree)
	return nil, &jrpc.Error{Code: jrpc.CodeRemotesDisagree, Message: fmt.Sprintf(
		"remotes disagree on %s: no answer was given by %d remote(s); %d answered with %d different answer(s)",
		method, rule.Agree, t.voters, len(t.answers))}
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

// cast turns one remote's reply into a ballot, on the goroutine that made
// the call.
func (p *Pool) cast(r *Remote, method string, rt route, res json.RawMessage, err error) ballot {
	b := ballot{r: r, res: res, err: err}
	if err == nil && rt.check != nil {
		if cerr := rt.check(res); cerr != nil {
			err = fmt.Errorf("remote %s: %w", r.Name(), cerr)
			r.rejected(method, err)
			b.kind, b.err = ballotNone, err
			return b
		}
	}
	if err == nil {
		b.null = isNull(res)
		if b.null && rt.nullIsMissing {
			b.kind = ballotMissing
			return b
		}
		b.raw = sha256.Sum256(res)
		return b
	}
	if errors.Is(err, errLocalLimit) {
		b.kind = ballotLocal
		return b
	}
	v := Classify(method, err)
	if p.log.Enabled(context.Background(), slog.LevelDebug) {
		p.log.Debug("remote call failed", "remote", r.Name(), "method", method,
			"class", v.Class.String(), "reason", string(v.Reason), "err", err)
	}
	switch {
	case v.Class == ClassCaller && v.Reason != ReasonCanceled:
		b.raw, b.err = errorKey(err, v), err
		return b
	case v.Class == ClassTooLarge && method == "eth_getLogs" && splitHelps(v.Reason):
		if v.Reason == ReasonRangeTooLarge && v.MaxSpan > 0 {
			r.learnSpan(v.MaxSpan)
		}
		b.kind, b.err = ballotTooLarge, &tooLargeError{span: v.MaxSpan, err: err}
		return b
	}
	b.kind = ballotNone
	return b
}

// errorKey identifies a caller error given as an answer by its code and
// data; messages differ between node implementations for the same error.
func errorKey(err error, v Verdict) [sha256.Size]byte {
	var je *jrpc.Error
	if !errors.As(err, &je) {
		return sha256.Sum256([]byte("error reason " + string(v.Reason)))
	}
	data := []byte(je.Data)
	if c, cerr := canonical(je.Data, nil); cerr == nil {
		data = c
	}
	return sha256.Sum256(fmt.Appendf(nil, "error %d %s", je.Code, data))
}

// canonical re-encodes a JSON value with sorted keys and without the
// ignored fields. Numbers keep their text.
func canonical(raw json.RawMessage, ig *ignoreSet) ([]byte, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the value")
	}
	if ig != nil {
		v = ig.strip(v, ig.paths)
	}
	return json.Marshal(v)
}

// ignoreSet is a compiled ignore_fields list.
type ignoreSet struct {
	anyDepth map[string]bool
	paths    [][]string
}

func compileIgnore(fields []string) (*ignoreSet, error) {
	if len(fields) == 0 {
		return nil, nil
	}
	s := &ignoreSet{anyDepth: map[string]bool{}}
	for _, f := range fields {
		segs := strings.Split(f, ".")
		if slices.Contains(segs, "") {
			return nil, fmt.Errorf("ignore_fields: %q is not a field name or a dotted path", f)
		}
		if len(segs) == 1 && f != "*" {
			s.anyDepth[f] = true
			continue
		}
		s.paths = append(s.paths, segs)
	}
	return s, nil
}

// strip drops the ignored fields from v in place; paths are the path
// suffixes still live at v. Arrays pass their paths on to every element.
func (s *ignoreSet) strip(v any, paths [][]string) any {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			if s.anyDepth[k] {
				delete(t, k)
				continue
			}
			var sub [][]string
			drop := false
			for _, p := range paths {
				if p[0] == k || p[0] == "*" {
					if len(p) == 1 {
						drop = true
						break
					}
					sub = append(sub, p[1:])
				}
			}
			if drop {
				delete(t, k)
				continue
			}
			if len(sub) > 0 || len(s.anyDepth) > 0 {
				t[k] = s.strip(c, sub)
			}
		}
	case []any:
		for i, c := range t {
			t[i] = s.strip(c, paths)
		}
	}
	return v
}
