package consensus

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"slices"
)

// Vote is one voter's answer, hashed by the goroutine that got it.
type Vote[V any] struct {
	Voter V
	Raw   Hash // of the result's bytes as sent; for a caller error, its ErrorKey
	Null  bool
	Res   json.RawMessage
	Err   error // a caller error given as the answer
}

// Answer is one distinct answer and the voters that gave it.
type Answer[V any] struct {
	raws     []Hash // byte-exact forms seen of it
	canon    Hash   // valid when hasCanon
	hasCanon bool
	Null     bool
	Res      json.RawMessage
	Err      error // a caller error given as the answer
	Voters   []V
}

// NewAnswer is the answer of one vote.
func NewAnswer[V any](v Vote[V]) *Answer[V] {
	a := &Answer[V]{raws: []Hash{v.Raw}, Null: v.Null, Res: v.Res, Err: v.Err, Voters: []V{v.Voter}}
	if v.Err != nil {
		a.canon, a.hasCanon = v.Raw, true // ErrorKey is canonical already
	}
	return a
}

// Has reports whether raw is a byte-exact form of the answer.
func (a *Answer[V]) Has(raw Hash) bool { return slices.Contains(a.raws, raw) }

// SameCanon reports whether n, an answer of different bytes, is this
// answer in canonical form.
func (a *Answer[V]) SameCanon(n *Answer[V], ig *Ignore) bool {
	if a.Err != nil || n.Err != nil {
		return false // error keys are canonical already: different keys differ
	}
	return a.CanonKey(ig) == n.CanonKey(ig)
}

// CanonKey is the hash of the canonical form, computed once. A result
// that does not parse (the transport has checked it is JSON) keeps its
// bytes.
func (a *Answer[V]) CanonKey(ig *Ignore) Hash {
	if !a.hasCanon {
		a.canon = a.raws[0]
		if c, err := Canonical(a.Res, ig); err == nil {
			a.canon = sha256.Sum256(c)
		}
		a.hasCanon = true
	}
	return a.canon
}

// Digest is a short form of the answer's hash, for logs.
func (a *Answer[V]) Digest() string {
	if a.hasCanon {
		return hex.EncodeToString(a.canon[:6])
	}
	return hex.EncodeToString(a.raws[0][:6])
}

// bestTier is the best tier among the voters that trust accepts, and how
// many it accepts.
func (a *Answer[V]) bestTier(trust func(V) (tier int, ok bool)) (int, int) {
	best, n := math.MaxInt, 0
	for _, v := range a.Voters {
		if tier, ok := trust(v); ok {
			n++
			best = min(best, tier)
		}
	}
	return best, n
}

// Tally counts the votes of one call.
type Tally[V any] struct {
	Ignore  *Ignore
	Answers []*Answer[V]
	Voters  int
}

// Add counts v under the answer it gives, and returns that answer.
func (t *Tally[V]) Add(v Vote[V]) *Answer[V] {
	t.Voters++
	for _, a := range t.Answers {
		if a.Has(v.Raw) {
			a.Voters = append(a.Voters, v.Voter)
			return a
		}
	}
	n := NewAnswer(v)
	for _, a := range t.Answers {
		if a.SameCanon(n, t.Ignore) {
			a.raws = append(a.raws, v.Raw)
			a.Voters = append(a.Voters, v.Voter)
			return a
		}
	}
	t.Answers = append(t.Answers, n)
	return n
}

// Lead is the answer with the most voters so far, nil before any.
func (t *Tally[V]) Lead() *Answer[V] {
	var best *Answer[V]
	for _, a := range t.Answers {
		if best == nil || len(a.Voters) > len(best.Voters) {
			best = a
		}
	}
	return best
}

// MostCommon is the answer the most trusted voters gave; trust gives a
// voter's tier (lower is better) and whether it is trusted. A tie goes
// to data over null, then to the better tier; a tie after that, or no
// trusted voter, is nil.
func (t *Tally[V]) MostCommon(trust func(V) (tier int, ok bool)) *Answer[V] {
	type rank struct {
		n    int
		data bool
		tier int
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
		return b.tier - a.tier
	}
	var (
		best     *Answer[V]
		bestRank rank
		tied     bool
	)
	for _, a := range t.Answers {
		tier, n := a.bestTier(trust)
		if n == 0 {
			continue
		}
		r := rank{n: n, data: !a.Null, tier: tier}
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
