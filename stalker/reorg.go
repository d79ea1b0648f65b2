package stalker

// Reorgs that cannot be the chain's. A remote re-pointed at another
// network at the same height reports, at every height, a sibling of the
// chain's block; when its report is the tip, the walk back from it finds
// no ancestor in the window, and publishing it would replace the whole
// window with the other network's blocks, again at every block. Two rules
// stop that:
//
//   - a reorg that reaches at or below the finalized block is refused: the
//     chain cannot do it, it is a switch or a lie;
//   - a reorg whose branch links to nothing in the window has the remotes
//     that report it checked at once (their chain id), each out of
//     rotation until it passes; it is refused unless every one passes (a
//     reorg deeper than the window, on a chain without finality, that
//     remotes of this chain report, is still followed).
//
// A refused branch's blocks are remembered, so that its descendants are
// refused without walking it again while the pool moves its tip away.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/venn-gateway/venn/evm"
)

// errRefused: a reorg was refused; nothing was written.
var errRefused = errors.New("reorg refused")

// Why a reorg was refused, as venn_reorgs_refused_total says.
const (
	refusedFinalized  = "finalized"
	refusedNoAncestor = "no_ancestor"
)

// maxRefused bounds the refused blocks remembered.
const maxRefused = 256

// acceptReorg applies the rules to the reorg to b, whose branch (lowest
// first) walkBack found: nil when it may be published.
func (s *Stalker) acceptReorg(ctx context.Context, l *leading, b *evm.Block, branch []*evm.Block) error {
	from := branch[0].Number
	// The branch's blocks name the remotes that report it, whose heads
	// may have moved on since; never the pool's tip, which may be another
	// remote's block by now (checking those would pass the branch).
	hashes := make([]string, len(branch))
	for i, e := range branch {
		hashes[i] = e.Hash
	}
	switch {
	case l.finalized > 0 && from <= l.finalized:
		// Its reporters are checked too: the usual cause is a switch.
		s.heads.CheckTipChain(ctx, hashes...)
		return s.refuse(l, b, branch, refusedFinalized)
	case from <= l.chain[0].Number:
		if !s.heads.CheckTipChain(ctx, hashes...) {
			return s.refuse(l, b, branch, refusedNoAncestor)
		}
		s.log.Warn("reorg deeper than the window, reported by remotes on the chain: followed",
			"from", from, "new_head", b.Number, "new_hash", b.Hash)
	}
	return nil
}

// refuse records the refusal of the reorg to b and returns its error.
func (s *Stalker) refuse(l *leading, b *evm.Block, branch []*evm.Block, reason string) error {
	for _, e := range branch {
		l.refused = append(l.refused, e.Hash)
	}
	if n := len(l.refused); n > maxRefused {
		l.refused = slices.Delete(l.refused, 0, n-maxRefused)
	}
	s.m.refused.WithLabelValues(reason).Inc()
	s.log.Error("reorg refused: another network's blocks, or a lie; not published",
		"reason", reason, "from", branch[0].Number, "new_head", b.Number, "new_hash", b.Hash,
		"finalized", l.finalized, "window_from", l.chain[0].Number)
	return fmt.Errorf("%w (%s): block %d %s", errRefused, reason, b.Number, b.Hash)
}

// wasRefused reports whether hash is a block of a refused branch.
func (l *leading) wasRefused(hash string) bool { return slices.Contains(l.refused, hash) }
