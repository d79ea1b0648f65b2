package remotes

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/heads"
	"github.com/venn-gateway/venn/remotes/health"
)

// Head tracking as a provider bills it: polls of the latest block.

// headPolls counts n's head polls: eth_getBlockByNumber("latest").
func headPolls(n *fakenode.Node) int64 { return n.CallsAt("eth_getBlockByNumber", "latest") }

// servedCalls counts n's calls of method that were not head polls.
func servedCalls(n *fakenode.Node, method string) int64 {
	return n.Calls(method) - n.CallsAt(method, "latest")
}

// waitNewHeads mines on n until seen says a head came over newHeads: a
// block mined before the subscription is up goes unseen.
func waitNewHeads(t *testing.T, n *fakenode.Node, seen func() bool) {
	t.Helper()
	waitFor(t, "a head over newHeads", func() bool {
		if seen() {
			return true
		}
		n.Mine(1)
		return false
	})
}

// testClock is a clock the test moves by hand.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *testClock) now() time.Time      { return time.Unix(0, c.ns.Load()) }
func (c *testClock) add(d time.Duration) { c.ns.Add(int64(d)) }

// use makes c the clock of p and its remotes.
func (c *testClock) use(p *Pool) {
	p.now = c.now
	for _, r := range p.members() {
		r.now = c.now
	}
}

// With a ws url, the head comes over newHeads and polling stops while heads
// flow; it resumes once they have been silent for two block times. The
// pool's clock is the test's: time passes only when the test says, so a
// busy machine that delays a head cannot make the stream look silent.
func TestNewHeadsStopPolling(t *testing.T) {
	const blockTime = 50 * time.Millisecond
	n := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	clock := newTestClock()
	p := startPoolWith(t, PoolConfig{BlockTime: blockTime}, testConfigs([]string{n.URL()}, func(_ int, c *Config) {
		c.WSURL = n.WSURL()
	}), nil, clock.use)
	r := p.members()[0]
	waitNewHeads(t, n, func() bool { return r.wsHeadAt.Load() != 0 })
	// A poll sent before the first head came may still be on its way.
	waitFor(t, "no poll in flight", func() bool { return r.inFlight.Load() == 0 })

	n.ResetCalls()
	const blocks = 20
	for range blocks {
		n.Mine(1)
		waitFor(t, "the head over newHeads", func() bool { return r.Head() == n.Head() })
		clock.add(blockTime) // one block time between heads
	}
	if got := headPolls(n); got != 0 {
		t.Errorf("%d head polls over %d blocks while newHeads flowed, want 0", got, blocks)
	}

	// No new heads: polling fills in after two block times.
	clock.add(2 * blockTime)
	waitFor(t, "polling to resume", func() bool { return headPolls(n) >= 1 })
}

// Without a ws url the head is polled once per block time: neither a tight
// loop nor a stale head. Each poll waits a block time after the one before
// has its answer, so a busy machine can only space them further: polls
// are counted until there are enough, and how long they took bounds their
// pace from above.
func TestPollingFollowsBlockTime(t *testing.T) {
	tests := []struct {
		give  time.Duration // block time
		polls int64
	}{
		{give: 30 * time.Millisecond, polls: 20},
		{give: 150 * time.Millisecond, polls: 4},
	}
	for _, tt := range tests {
		t.Run(tt.give.String(), func(t *testing.T) {
			n := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
			p := startPool(t, PoolConfig{BlockTime: tt.give}, []Config{{Name: "n0", URL: n.URL(), Timeout: time.Second}}, nil)
			start := time.Now() // before the count starts: no poll counted came before it
			n.ResetCalls()
			n.Mine(1)
			waitFor(t, "the head polls", func() bool { return headPolls(n) >= tt.polls })
			got := headPolls(n)
			took := time.Since(start) // after the count: every poll counted came before it
			if took < time.Duration(got-1)*tt.give {
				t.Errorf("%d head polls in %v at block time %v: faster than the block time", got, took, tt.give)
			}
			waitFor(t, "the mined head", func() bool { return p.Heads().Head() == n.Head() })
		})
	}
}

// A remote on another chain is never used: no client calls, no head polls,
// and alone it leaves the chain with no remote.
func TestWrongChainNeverUsed(t *testing.T) {
	t.Run("beside a good remote", func(t *testing.T) {
		good := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
		wrong := fakenode.Start(t, fakenode.Options{ChainID: 5})
		p := testPool(t, PoolConfig{}, []*fakenode.Node{wrong, good}, nil)
		if p.members()[0].cc.State() != health.Wrong {
			t.Fatal("remote on chain 5 not marked wrong")
		}
		wrong.ResetCalls()
		for i := range 20 {
			if _, err := call(t, p, "eth_getBalance", balanceOf(i)); err != nil {
				t.Fatal(err)
			}
		}
		// Several block times pass while the good remote is polled.
		good.ResetCalls()
		waitFor(t, "good remote polled", func() bool { return headPolls(good) >= 3 })
		// eth_chainId is the recheck, which the next subtest times.
		if got := wrong.TotalCalls() - wrong.Calls("eth_chainId"); got != 0 {
			t.Fatalf("wrong-chain remote got %d calls: %v", got, wrong.CallCounts())
		}
		if p.members()[0].Head() != 0 {
			t.Errorf("wrong-chain remote has head %d: its head was followed", p.members()[0].Head())
		}
	})
	// A remote found on the wrong chain is asked again only after
	// ChainRecheck, the first time too.
	t.Run("asked again only after ChainRecheck", func(t *testing.T) {
		good := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
		wrong := fakenode.Start(t, fakenode.Options{ChainID: 5})
		testPool(t, PoolConfig{}, []*fakenode.Node{wrong, good}, nil)
		wrong.ResetCalls()
		good.ResetCalls()
		waitFor(t, "good remote polled", func() bool { return headPolls(good) >= 3 })
		if got := wrong.Calls("eth_chainId"); got != 0 {
			t.Errorf("wrong-chain remote asked its chain id %d times within 3 block times of being found wrong, want 0 before %v",
				got, DefaultChainRecheck)
		}
	})
	t.Run("alone", func(t *testing.T) {
		wrong := fakenode.Start(t, fakenode.Options{ChainID: 5})
		p := testPool(t, PoolConfig{}, []*fakenode.Node{wrong}, nil)
		if p.Ready() {
			t.Error("pool ready with only a wrong-chain remote")
		}
		wrong.ResetCalls()
		_, err := call(t, p, "eth_getBalance", balanceOf(0))
		if got := wireCode(err); got != jrpc.CodeNoRemote {
			t.Fatalf("err = %v (code %d), want %d", err, got, jrpc.CodeNoRemote)
		}
		if got := wrong.TotalCalls(); got != 0 {
			t.Fatalf("wrong-chain remote got %d calls: %v", got, wrong.CallCounts())
		}
	})
}

// A head far ahead whose timestamps allow it (a real catch-up, or a lie
// told with consistent timestamps) is followed; it must not hold the chain
// hostage: when the remote reports its real head again, its head and the
// chain's follow, and the other remotes are back in rotation.
func TestBogusHeadRecovers(t *testing.T) {
	const head = 100
	good := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: head})
	liar := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: head})
	p := testPool(t, PoolConfig{MaxLag: 5}, []*fakenode.Node{good, liar}, nil)
	liar.SetHead(1_000_000)
	waitFor(t, "the bogus head seen", func() bool { return p.Heads().Head() == 1_000_000 })
	if !p.lagging(p.members()[0], p.healthyBest(p.now())) {
		t.Fatal("with the bogus head the honest remote should look lagging")
	}
	liar.SetHead(head)
	waitFor(t, "the chain head back", func() bool { return p.Heads().Head() < 1000 })
	waitFor(t, "the honest remote back in rotation", func() bool {
		return !p.lagging(p.members()[0], p.healthyBest(p.now()))
	})
	if p.members()[1].Head() > head+5 {
		t.Fatalf("liar's head stuck at %d", p.members()[1].Head())
	}
}

// A remote that claims a head far beyond what the block time allows, that
// no other remote confirms and whose parent nobody knows, moves neither the
// chain's head nor anyone's lag: the honest remote stays in rotation and
// keeps serving, polled or over newHeads.
func TestLyingHeadNotFollowed(t *testing.T) {
	const lie = 1_000_000_000
	for _, ws := range []bool{false, true} {
		name := "polled"
		if ws {
			name = "newHeads"
		}
		t.Run(name, func(t *testing.T) {
			good := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
			liar := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
			m := NewMetrics(nil)
			p := startPool(t, PoolConfig{MaxLag: 5}, testConfigs([]string{good.URL(), liar.URL()}, func(i int, c *Config) {
				if ws {
					c.WSURL = []string{good.WSURL(), liar.WSURL()}[i]
				}
			}), m)
			fakenode.MineEvery(t, 50*time.Millisecond, good, liar)

			liar.SetBogusHead(lie)
			claimed := m.head.WithLabelValues("test", "n1")
			waitFor(t, "the lie reported", func() bool { return testutil.ToFloat64(claimed) == lie })
			// The honest remote moves on a few blocks meanwhile, and the
			// liar, its head held where it was, lags out of rotation: until
			// the pool sees that (its view of the honest head may be a poll
			// behind the node's), the liar may take any of the calls below.
			from := good.Head()
			waitFor(t, "the liar lagging out of rotation", func() bool {
				best := p.healthyBest(p.now())
				if h := p.Heads().Head(); h >= lie {
					t.Fatalf("chain head %d: the lie was followed", h)
				}
				if p.lagging(p.members()[0], best) {
					t.Fatalf("honest remote at %d lagging behind %d", p.members()[0].Head(), best)
				}
				return good.Head() >= from+5 && p.lagging(p.members()[1], best)
			})
			good.ResetCalls()
			for i := range 10 {
				if _, err := call(t, p, "eth_getBalance", balanceOf(i)); err != nil {
					t.Fatal(err)
				}
			}
			if got := good.Calls("eth_getBalance"); got == 0 {
				t.Error("honest remote served none of 10 calls while the other lied")
			}

			liar.SetBogusHead(0)
			waitFor(t, "the liar's real head followed", func() bool {
				return testutil.ToFloat64(claimed) < lie && p.members()[1].Head() >= from
			})
		})
	}
}

// A tip replaced by a sibling at the same height is a head change: the
// pool signals it at once, polled or over newHeads.
func TestSameHeightReorgIsAHeadChange(t *testing.T) {
	for _, ws := range []bool{false, true} {
		name := "polled"
		if ws {
			name = "newHeads"
		}
		t.Run(name, func(t *testing.T) {
			n := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
			p := startPool(t, PoolConfig{}, testConfigs([]string{n.URL()}, func(_ int, c *Config) {
				if ws {
					c.WSURL = n.WSURL()
				}
			}), nil)
			waitFor(t, "the head", func() bool { return p.Heads().Head() == 100 })
			changed := p.Heads().HeadChanged()
			n.Reorg(1)
			select {
			case <-changed:
			case <-time.After(5 * time.Second):
				t.Fatal("no head change after the tip was replaced at the same height")
			}
			if num, hash := p.Heads().Tip(); num != 100 || hash != n.BlockHash(100) {
				t.Errorf("tip %d %s, want the sibling 100 %s", num, hash, n.BlockHash(100))
			}
		})
	}
}

// When one remote moves to a sibling tip and another still reports the
// block it replaced, the tip is the sibling: the remote that saw the change
// saw it later. It does not flip back while the other repeats itself.
func TestSameHeightReorgSeenByOneRemote(t *testing.T) {
	moved := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	stale := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	old := stale.BlockHash(100)
	p := testPool(t, PoolConfig{}, []*fakenode.Node{moved, stale}, nil)
	waitFor(t, "the head", func() bool { _, h := p.Heads().Tip(); return h == old })

	moved.Reorg(1)
	sibling := moved.BlockHash(100)
	waitFor(t, "the sibling tip", func() bool { _, h := p.Heads().Tip(); return h == sibling })
	polls := headPolls(stale)
	waitFor(t, "the stale remote polled again", func() bool { return headPolls(stale) >= polls+3 })
	if _, h := p.Heads().Tip(); h != sibling {
		t.Fatalf("tip %s: back to the replaced block %s", h, old)
	}
}

// A lone remote's head that the timestamps allow moves at once, however far
// (a remote back from an outage, caught up); one they cannot allow is held
// until it has stood for heads.HoldFor.
func TestLoneRemoteHeads(t *testing.T) {
	n := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	clock := newTestClock()
	p := startPoolWith(t, PoolConfig{}, testConfigs([]string{n.URL()}, nil), nil, clock.use)
	waitFor(t, "the block time learned", func() bool { return p.heads.t.Learned() != 0 })

	n.SetHead(5000) // 4900 blocks at 12 s: real timestamps
	waitFor(t, "the caught-up head", func() bool { return p.Heads().Head() == 5000 })

	n.SetBogusHead(1_000_000)
	polls := headPolls(n)
	waitFor(t, "the lie polled", func() bool { return headPolls(n) >= polls+3 })
	if h := p.Heads().Head(); h != 5000 {
		t.Fatalf("head %d right after a jump the timestamps cannot allow", h)
	}
	clock.add(heads.HoldFor)
	waitFor(t, "the held head taken", func() bool { return p.Heads().Head() == 1_000_000 })
}

// A lie taken while no other remote could witness it is dropped once one
// can: the chain's head heals down to the honest one's.
func TestLieTakenAloneIsDropped(t *testing.T) {
	good := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	liar := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	good.SetDown(true)
	liar.SetBogusHead(1_000_000)
	// Not startPool: it would wait for the remote that is down.
	p, err := NewPool(PoolConfig{Chain: "test", ChainID: testChainID, MaxLag: 5, BlockTime: 50 * time.Millisecond},
		testConfigs([]string{good.URL(), liar.URL()}, nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopPool(t, p) })
	waitFor(t, "the lie taken, alone", func() bool { return p.Heads().Head() == 1_000_000 })

	good.SetDown(false)
	waitFor(t, "the head healed", func() bool { return p.Heads().Head() == 100 })
	if p.lagging(p.members()[0], p.healthyBest(p.now())) {
		t.Error("honest remote lagging after the heal")
	}
	if !p.lagging(p.members()[1], p.healthyBest(p.now())) {
		t.Error("liar in rotation after the heal")
	}
}

// A ws:// url without a ws_url is followed over newHeads.
func TestWSURLFollowsNewHeads(t *testing.T) {
	n := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 100})
	// Polls only once an hour: a head that moves came over newHeads.
	p := startPool(t, PoolConfig{BlockTime: time.Hour}, []Config{{Name: "n0", URL: n.WSURL(), Timeout: time.Second}}, nil)
	waitNewHeads(t, n, func() bool { return p.Heads().Head() > 100 })
	from := n.Head()
	for want := from + 1; want <= from+3; want++ {
		n.Mine(1)
		waitFor(t, "the head over newHeads", func() bool { return p.Heads().Head() == want })
	}
}

// Without block_time the block time is learned from block timestamps and
// the head is polled at that cadence: on a chain of 0.1 s blocks the head
// stays within a couple of blocks, not a default 12 s behind.
func TestPollsAtLearnedBlockTime(t *testing.T) {
	n := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 1000, BlockTime: 100 * time.Millisecond})
	p := startPool(t, PoolConfig{BlockTime: learnBlockTime}, []Config{{Name: "n0", URL: n.URL(), Timeout: time.Second}}, nil)
	start := n.Head()
	fakenode.MineEvery(t, 100*time.Millisecond, n)
	waitFor(t, "the head to follow a 0.1 s chain", func() bool {
		h := n.Head()
		return h >= start+10 && h-p.Heads().Head() <= 2
	})
	st := p.Heads().HeadStatus()
	if st.BlockTimeSource != BlockTimeLearned || st.BlockTime < 80*time.Millisecond || st.BlockTime > 125*time.Millisecond {
		t.Errorf("block time %v (%s), want about 100ms learned", st.BlockTime, st.BlockTimeSource)
	}
	if st.PollInterval != st.BlockTime {
		t.Errorf("poll interval %v, want the block time %v", st.PollInterval, st.BlockTime)
	}
	if got := testutil.ToFloat64(p.heads.blockTimeG); got != p.Heads().BlockTime().Seconds() {
		t.Errorf("venn_block_time_seconds %v, want the learned %v", got, p.Heads().BlockTime().Seconds())
	}
}

// block_time in config sets the cadence, whatever the timestamps say.
func TestConfiguredBlockTimeOverrides(t *testing.T) {
	n := fakenode.Start(t, fakenode.Options{ChainID: testChainID, BlockTime: time.Second})
	p := startPool(t, PoolConfig{BlockTime: 3 * time.Second}, testConfigs([]string{n.URL()}, nil), nil)
	if st := p.Heads().HeadStatus(); st.BlockTime != 3*time.Second || st.BlockTimeSource != BlockTimeConfig || st.PollInterval != 3*time.Second {
		t.Errorf("head status %+v, want block time and poll interval 3s from config", st)
	}
	if got := testutil.ToFloat64(p.heads.blockTimeG); got != 3 {
		t.Errorf("venn_block_time_seconds %v, want 3 from config", got)
	}
}
