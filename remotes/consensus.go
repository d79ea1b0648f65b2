package remotes

// Consensus: for the methods a chain lists, the voted strategy (vote.go)
// asks several remotes at once and accepts an answer only when enough of
// them give the same one.
//
// A vote is one upstream call per remote, chosen by selection (select.go:
// tiers, health, height: a remote below the block asked for is never
// asked, so it never votes; when the best tier has fewer remotes in
// rotation than the rule asks, the next tier's vote too). What a reply
// means is the judge's (judge.go). Answers are compared canonicalised
// (canonical.go): parsed, the ignored fields dropped, re-encoded with sorted keys, hashed. Byte-identical answers are
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
	"encoding/json"
	"fmt"
	"strings"

	"github.com/venn-gateway/venn/evm"
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
// for the method, a call that must reach one remote only, a verified call
// (integrity.go: its caller judges every answer with its check), or one
// that names a moving block.
func (p *Pool) voteRule(method string, params json.RawMessage, rt *route) *consensusRule {
	if p.rules() == nil || rt.once || rt.only != nil || rt.verify != nil {
		return nil
	}
	rule := p.rules()[method]
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
