package remotes

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
)

// feedFrom feeds follower the heads of leader whenever one of leader's
// remotes reports a new head, as the cluster's feed does, until stop.
func feedFrom(t *testing.T, leader, follower *Pool) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			claims := leader.Heads().ClaimsChanged()
			follower.Heads().FeedHeads(leader.Heads().RemoteHeads())
			select {
			case <-ctx.Done():
				return
			case <-claims:
			}
		}
	})
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return stop
}

// A pool fed by a leader's pool sends its own remotes nothing to follow
// their heads (no polls, no newHeads, no periodic chain id checks), yet its
// head keeps up; handed back to its trackers, it polls and subscribes at
// once. The two pools are two replicas: same remote names, each its own
// nodes of one chain.
func TestFedPoolLeavesItsRemotesAlone(t *testing.T) {
	const blockTime = 50 * time.Millisecond
	var leaderNodes, ownNodes []*fakenode.Node
	for range 2 {
		leaderNodes = append(leaderNodes, fakenode.Start(t, fakenode.Options{ChainID: testChainID}))
		ownNodes = append(ownNodes, fakenode.Start(t, fakenode.Options{ChainID: testChainID}))
	}
	urls := func(ns []*fakenode.Node) []string { return []string{ns[0].URL(), ns[1].URL()} }
	withWS := func(ns []*fakenode.Node) func(int, *Config) {
		return func(i int, c *Config) {
			if i == 1 {
				c.WSURL = ns[1].WSURL() // n1 over newHeads, n0 polled
			}
		}
	}
	leader := startPool(t, PoolConfig{BlockTime: blockTime}, testConfigs(urls(leaderNodes), withWS(leaderNodes)), nil)
	follower := startPool(t, PoolConfig{BlockTime: blockTime, ChainRecheck: minChainRecheck},
		testConfigs(urls(ownNodes), withWS(ownNodes)), nil)
	own := ownNodes[1]
	waitFor(t, "the follower's newHeads subscription", func() bool { return own.CallsAt("eth_subscribe", "newHeads") >= 1 })

	stopFeed := feedFrom(t, leader, follower)
	// Fed, and no poll decided on before the feed began still to come.
	waitFor(t, "both remotes fed, their trackers idle", func() bool {
		return follower.Heads().Fed() == 2 && !follower.members()[0].feed.busy.Load() && !follower.members()[1].feed.busy.Load()
	})
	all := append(append([]*fakenode.Node{}, leaderNodes...), ownNodes...)
	// A poll decided on before the feed began may still land: a block on.
	for _, n := range all {
		n.Mine(1)
	}
	waitFor(t, "the follower at the head", func() bool { return follower.Heads().Head() == own.Head() })
	waitFor(t, "no call in flight", func() bool {
		return follower.members()[0].inFlight.Load() == 0 && follower.members()[1].inFlight.Load() == 0
	})
	subscribed := own.CallsAt("eth_subscribe", "newHeads")
	for _, n := range ownNodes {
		n.ResetCalls()
	}
	for range 10 {
		for _, n := range all {
			n.Mine(1)
		}
		waitFor(t, "the follower at the head", func() bool { return follower.Heads().Head() == own.Head() })
	}
	for i, n := range ownNodes {
		if got := n.TotalCalls(); got != 0 {
			t.Errorf("fed remote n%d got %d calls over 10 blocks (%v)", i, got, n.CallCounts())
		}
	}

	// The feed stops: the follower's trackers take over at once.
	stopFeed()
	before := own.CallsAt("eth_subscribe", "newHeads")
	follower.Heads().TrackHeads()
	if before != 0 || subscribed == 0 {
		t.Fatalf("newHeads subscriptions: %d before the feed, %d during it", subscribed, before)
	}
	waitFor(t, "n0 polled again", func() bool { return headPolls(ownNodes[0]) >= 1 })
	waitFor(t, "n1's newHeads again", func() bool { return own.CallsAt("eth_subscribe", "newHeads") >= 1 })
	if follower.Heads().Fed() != 0 {
		t.Errorf("%d remotes still fed after TrackHeads", follower.Heads().Fed())
	}
}

// A remote the leader's feed does not name (the leader does not vouch for
// it, or has not got it yet) is tracked by the replica itself, while the
// others stay fed.
func TestFeedWithoutARemoteTracksIt(t *testing.T) {
	n0 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	n1 := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	p := startPool(t, PoolConfig{}, testConfigs([]string{n0.URL(), n1.URL()}, nil), nil)
	heads := p.Heads().RemoteHeads()
	if len(heads) != 2 {
		t.Fatalf("RemoteHeads = %+v, want both remotes", heads)
	}
	p.Heads().FeedHeads(heads[:1]) // n0 only
	if !p.members()[0].fed() || p.members()[1].fed() {
		t.Fatalf("fed: n0 %v, n1 %v; want n0 only", p.members()[0].fed(), p.members()[1].fed())
	}
	n1.ResetCalls()
	waitFor(t, "n1 polled", func() bool { return headPolls(n1) >= 2 })
	if got := p.Heads().RemoteHeads(); len(got) != 1 || got[0].Remote != "n1" {
		t.Errorf("RemoteHeads of a fed pool = %+v, want n1's only: a fed remote's head is not this pool's to publish", got)
	}
}
