package remotes

import (
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
)

// Head tracking as a provider bills it: eth_blockNumber calls.

// mineEvery mines one block per d on n until the test ends or stop is
// called, like a chain with that block time.
func mineEvery(t *testing.T, n *fakenode.Node, d time.Duration) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(d)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				n.Mine(1)
			}
		}
	}()
	var stopped bool
	stop = func() {
		if !stopped {
			stopped = true
			close(done)
			<-exited
		}
	}
	t.Cleanup(stop)
	return stop
}

// With a ws url, the head comes over newHeads and eth_blockNumber polling
// stops while heads flow; it resumes once they stop.
func TestNewHeadsStopPolling(t *testing.T) {
	const blockTime = 60 * time.Millisecond
	n := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	p := startPool(t, PoolConfig{BlockTime: blockTime}, testConfigs([]string{n.URL()}, func(_ int, c *Config) {
		c.WSURL = n.WSURL()
	}), nil)
	r := p.remotes[0]
	stop := mineEvery(t, n, blockTime)
	waitFor(t, "a head over newHeads", func() bool { return r.wsHeadAt.Load() != 0 })

	n.ResetCalls()
	start := n.Head()
	window := time.Now().Add(10 * blockTime)
	for time.Now().Before(window) {
		time.Sleep(blockTime / 4) // observing over a window of block times
		if h := n.Head(); r.Head() < h-2 {
			t.Fatalf("remote head %d, node head %d: heads not followed", r.Head(), h)
		}
	}
	if n.Head()-start < 5 {
		t.Fatalf("only %d blocks mined in 10 block times", n.Head()-start)
	}
	if got := n.Calls("eth_blockNumber"); got != 0 {
		t.Errorf("%d eth_blockNumber polls over %d blocks while newHeads flowed, want 0", got, n.Head()-start)
	}

	// No new heads: polling fills in after two block times.
	stop()
	waitFor(t, "polling to resume", func() bool { return n.Calls("eth_blockNumber") >= 2 })
}

// Without a ws url the head is polled once per block time: neither a tight
// loop nor a stale head.
func TestPollingFollowsBlockTime(t *testing.T) {
	const window = 600 * time.Millisecond
	tests := []struct {
		give time.Duration // block time
		want int64         // polls expected in window
	}{
		{give: 30 * time.Millisecond, want: 20},
		{give: 150 * time.Millisecond, want: 4},
	}
	for _, tt := range tests {
		t.Run(tt.give.String(), func(t *testing.T) {
			n := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
			p := startPool(t, PoolConfig{BlockTime: tt.give}, []Config{{Name: "n0", URL: n.URL(), Timeout: time.Second}}, nil)
			n.ResetCalls()
			n.Mine(1)
			time.Sleep(window) // counting calls over a window, not waiting for a state
			got := n.Calls("eth_blockNumber")
			// Scheduling only delays polls, so the bound above is tight.
			if got < tt.want/2 || got > tt.want+1 {
				t.Errorf("%d eth_blockNumber polls in %v at block time %v, want about %d", got, window, tt.give, tt.want)
			}
			if p.Head() != n.Head() {
				t.Errorf("pool head %d, node head %d", p.Head(), n.Head())
			}
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
		if p.remotes[0].chainState.Load() != chainWrong {
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
		waitFor(t, "good remote polled", func() bool { return good.Calls("eth_blockNumber") >= 3 })
		// eth_chainId is the recheck, which the next subtest times.
		if got := wrong.TotalCalls() - wrong.Calls("eth_chainId"); got != 0 {
			t.Fatalf("wrong-chain remote got %d calls: %v", got, wrong.CallCounts())
		}
		if p.remotes[0].Head() != 0 {
			t.Errorf("wrong-chain remote has head %d: its head was followed", p.remotes[0].Head())
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
		waitFor(t, "good remote polled", func() bool { return good.Calls("eth_blockNumber") >= 3 })
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

// One bogus head report must not hold the chain hostage: when the remote
// reports its real head again, its head and the chain's follow, and the
// other remotes are back in rotation.
func TestBogusHeadRecovers(t *testing.T) {
	const head = 100
	good := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: head})
	liar := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: head})
	p := testPool(t, PoolConfig{MaxLag: 5}, []*fakenode.Node{good, liar}, nil)
	liar.SetHead(1_000_000)
	waitFor(t, "the bogus head seen", func() bool { return p.Head() == 1_000_000 })
	if !p.lagging(p.remotes[0], p.healthyBest(p.now())) {
		t.Fatal("with the bogus head the honest remote should look lagging")
	}
	liar.SetHead(head)
	waitFor(t, "the chain head back", func() bool { return p.Head() < 1000 })
	waitFor(t, "the honest remote back in rotation", func() bool {
		return !p.lagging(p.remotes[0], p.healthyBest(p.now()))
	})
	if p.remotes[1].Head() > head+5 {
		t.Fatalf("liar's head stuck at %d", p.remotes[1].Head())
	}
}
