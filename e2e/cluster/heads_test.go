//go:build linux

package cluster

import (
	"testing"
	"time"

	harness "github.com/venn-gateway/venn/internal/cluster"
	"github.com/venn-gateway/venn/internal/testkit"
)

// headsLeaseTTL is long beside the feed's staleness limit (a second at
// this block time), so that the followers are seen tracking the heads
// themselves before a new leader is elected.
const headsLeaseTTL = 6 * time.Second

// ownCalls is what r sent the nodes itself: its calls that got an answer.
func ownCalls(r *replica) float64 {
	var n float64
	for _, remote := range []string{"n0", "n1"} {
		v, _ := metric(r, "venn_remote_calls_total", `chain="dev",outcome="ok",remote="`+remote+`"`)
		n += v
	}
	return n
}

func tracking(r *replica, mode string) bool {
	v, _ := metric(r, "venn_head_tracking", `chain="dev",mode="`+mode+`"`)
	return v == 1
}

// The leader is killed: its feed of the remotes' heads stops, and the
// followers go back to polling the remotes themselves well before its
// lease runs out. Once a new leader publishes, the follower left takes its
// feed and stops polling again.
func TestFollowerFallsBackWhenTheLeaderIsKilled(t *testing.T) {
	c := startClusterWith(t, 3, func(conf *harness.Config) {
		conf.LeaseTTL = headsLeaseTTL
		for i := range conf.Remotes {
			conf.Remotes[i].WSURL = "" // polled: each poll is a call to see
		}
	})
	stop := c.mine(t)
	defer stop()
	leader, _, _ := c.waitLeader(t, "")
	followers := c.without(leader)
	for _, r := range followers {
		if !testkit.Poll(waitLimit, func() bool { return tracking(r, "feed") }) {
			t.Fatalf("follower %s does not take the heads from the leader's feed", r.id)
		}
	}
	stale := map[string]float64{}
	for _, r := range followers {
		stale[r.id], _ = metric(r, "venn_head_feed_stale_total", `chain="dev"`)
	}

	c.replica(leader).kill() // no lease release: the followers wait it out
	killed := time.Now()
	for _, r := range followers {
		before := ownCalls(r)
		if !testkit.Poll(waitLimit, func() bool {
			v, _ := metric(r, "venn_head_feed_stale_total", `chain="dev"`)
			return v > stale[r.id] && ownCalls(r) >= before+3
		}) {
			t.Fatalf("follower %s did not go back to polling the remotes after the leader was killed", r.id)
		}
	}
	if took := time.Since(killed); took >= headsLeaseTTL {
		t.Fatalf("the followers fell back %v after the kill, not before the lease (%v) ran out", took, headsLeaseTTL)
	}

	next, _, _ := c.waitLeader(t, leader)
	var follower *replica
	for _, r := range followers {
		if r.id != next {
			follower = r
		}
	}
	if !testkit.Poll(waitLimit, func() bool { return tracking(follower, "feed") }) {
		t.Fatalf("follower %s does not take the heads from the new leader %s's feed", follower.id, next)
	}
	// A poll in flight at the switch may still land: count from 5 blocks on.
	waitBlocks(c.nodes[0], 5)
	before := ownCalls(follower)
	waitBlocks(c.nodes[0], 10)
	if n := ownCalls(follower) - before; n != 0 {
		t.Errorf("follower %s sent the nodes %v calls over 10 blocks while fed by %s", follower.id, n, next)
	}
	if got, head := blockNumber(follower), c.nodes[0].Head(); got+2 < head {
		t.Errorf("follower %s serves head %d, the chain is at %d", follower.id, got, head)
	}
}
