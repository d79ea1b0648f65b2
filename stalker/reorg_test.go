package stalker

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
)

const otherChainID = 4242

// refusedReorgs is the chain's count of reorgs refused for reason.
func refusedReorgs(m *Metrics, reason string) float64 {
	return testutil.ToFloat64(m.refused.WithLabelValues("test", reason))
}

// holds reports whether the window holds block n as hash.
func (f *feed) holds(n uint64, hash string) bool {
	for _, b := range f.window.Blocks() {
		if b.Number == n {
			return b.Hash == hash
		}
	}
	return false
}

// A reorg that reaches at or below the finalized block cannot be the
// chain's: it is refused, and the window keeps the finalized chain.
func TestStalkerRefusesAReorgBelowFinalized(t *testing.T) {
	node := startNode(t, fakenode.Options{ChainID: testChainID, Head: 100, FinalizedDepth: 4})
	f := startFeed(t, 16, node)
	f.waitCanonical(t, node, 16)
	kept, head := node.BlockHash(93), node.BlockHash(100)

	node.Reorg(8) // from 93; finalized is 96
	testkit.WaitFor(t, 10*time.Second, "the reorg refused", func() bool {
		return refusedReorgs(f.m, refusedFinalized) >= 1
	})
	if !f.holds(93, kept) || !f.holds(100, head) {
		t.Fatal("the window does not hold the finalized chain")
	}
	if got := testutil.ToFloat64(f.m.reorgs.WithLabelValues("test")); got != 0 {
		t.Fatalf("reorgs_total = %v, want 0", got)
	}
}

// A remote re-pointed at another network at the same height reports a
// sibling of every block; the walk back from its head finds no ancestor
// in the window. Its chain id is checked at once, it is found on the other
// network and out of rotation, and the reorg is refused: the window never
// holds the other network's blocks, and follows the chain on.
func TestStalkerRefusesAChainSwitch(t *testing.T) {
	good := startNode(t, fakenode.Options{ChainID: testChainID, Head: 100})
	switched := startNode(t, fakenode.Options{ChainID: testChainID, Head: 100})
	f := startFeed(t, 16, good, switched)
	f.waitCanonical(t, good, 16)

	switched.SwitchChain(otherChainID)
	switched.Mine(1) // a head the pool takes: a sibling of the chain's 101
	good.Mine(1)
	switched.Mine(1)
	testkit.WaitFor(t, 10*time.Second, "the switched remote out of rotation", func() bool {
		for _, s := range f.pool.Status() {
			if s.Name == "n1" {
				return !s.InRotation
			}
		}
		return false
	})
	good.Mine(2)
	f.waitCanonical(t, good, 16)
	if got := testutil.ToFloat64(f.m.reorgs.WithLabelValues("test")); got != 0 {
		t.Fatalf("reorgs_total = %v, want 0: the other network's blocks were published", got)
	}
	if got := refusedReorgs(f.m, refusedNoAncestor); got < 1 {
		t.Fatalf("reorgs refused for no ancestor = %v, want at least 1", got)
	}
}

// A reorg deeper than the window, on a chain without finality, that the
// remotes reporting it are on the chain: it is followed.
func TestStalkerFollowsADeepReorgOfTheChain(t *testing.T) {
	node := startNode(t, fakenode.Options{ChainID: testChainID, Head: 100, FinalizedDepth: 1000, SafeDepth: 1000})
	f := startFeed(t, 16, node)
	f.waitCanonical(t, node, 16)

	node.SetFork(80, 5)
	node.Mine(1)
	f.waitCanonical(t, node, 16)
	if got := refusedReorgs(f.m, refusedNoAncestor); got != 0 {
		t.Fatalf("reorgs refused = %v, want 0", got)
	}
}
