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
// (remotes/consensus): parsed, the ignored fields dropped, re-encoded with sorted keys, hashed. Byte-identical answers are
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

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/remotes/consensus"
)

// ConsensusRule puts the calls of its methods to a vote (consensus.Rule).
type ConsensusRule = consensus.Rule[Tier]

// consensusRule is a ConsensusRule with defaults applied and its ignore
// list compiled.
type consensusRule = consensus.Compiled[Tier]

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
