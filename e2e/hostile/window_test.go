//go:build linux

package hostile

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	harness "github.com/venn-gateway/venn/internal/cluster"
	"github.com/venn-gateway/venn/internal/testkit"
)

// maxLag is venn's default max_lag: how far a window may trail the
// remotes and still answer.
const maxLag = 5

// The leader is killed, and within the next second the chain replaces its
// head with a sibling at the same height. No leader publishes the reorg
// until the lease runs out; meanwhile the follower's own pool sees the
// remotes' new hash. From then on the follower must not serve the orphan
// as latest: its window's head no longer agrees with the remotes, so calls
// go to them. Before, freshness was judged by numbers only, and the
// follower served the orphan until a new leader published.
func TestReorgDuringLeaderKill(t *testing.T) {
	const leaseTTL = 6 * time.Second // a wide gap between the kill and a new leader
	w := startWorld(t, options{tweak: func(c *harness.Config) { c.LeaseTTL = leaseTTL }})
	leaderID, _ := w.leader()
	follower := w.others(leaderID)[0]
	node := w.nodes[0]

	w.replica(leaderID).kill()
	orphan := w.reorg(1)[0]
	head := node.Head()
	sibling := node.BlockHash(head)
	testkit.WaitFor(t, waitLimit, "the follower's pool sees the new head "+sibling, func() bool {
		_, h, _ := follower.chainStatus()
		return h == sibling
	})
	// Until a new leader publishes the sibling, and a little after.
	served, orphans := 0, map[string]int{} // by the part of venn that answered
	testkit.WaitFor(t, 2*leaseTTL+waitLimit, "a new leader publishes the sibling", func() bool {
		var b block
		res, src, err := follower.callRaw("eth_getBlockByNumber", "latest", false)
		if err != nil || json.Unmarshal(res, &b) != nil {
			t.Fatalf("latest: %s %v", res, err)
		}
		served++
		if b.Hash == orphan {
			orphans[src]++
		}
		id, _ := w.leader()
		v, _ := follower.metric("venn_head_number", `chain="dev"`)
		return id != "" && id != leaderID && uint64(v) >= head && b.Hash == sibling
	})
	if len(orphans) > 0 {
		t.Fatalf("the follower served the orphaned head in %d calls after its pool saw the sibling (by source: %v)",
			served, orphans)
	}
	checkAnswers(t, follower, node)
}

// A follower frozen for a while (a VM pause, a long stop-the-world) wakes
// with its window and its pool's heads equally old: numbers agree, and
// before, it answered from a window many blocks behind. Its head is older
// than the chain's block time allows and nothing heard from the remotes
// since the pause vouches for it: calls go to the remotes until the window
// catches up. The calls are sent while it is frozen, so they wait in its
// sockets beside whatever news came meanwhile, as a client's calls do.
// Frozen alone, the leader's feed queues news for it; frozen with the
// leader (the host paused), nothing does. Whether the old code answered
// before the news was read was a race: three pauses each.
func TestFrozenFollower(t *testing.T) {
	tests := []struct {
		name       string
		withLeader bool
	}{
		{"alone", false},
		{"with the leader", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := startWorld(t, options{})
			leaderID, _ := w.leader()
			follower := w.others(leaderID)[0]
			frozen := []*replica{follower}
			if tt.withLeader {
				frozen = append(frozen, w.replica(leaderID))
			}
			stop := w.mine(t)
			w.waitServing(t, w.replicas)
			for range 3 { // a race in the old code: each pause gives it a chance
				checkFrozen(t, w, follower, frozen)
				w.waitServing(t, w.replicas)
			}
			stop()
			w.waitServing(t, w.replicas)
			checkAnswers(t, follower, w.nodes[0])
		})
	}
}

// checkFrozen freezes the replicas in frozen while the chain moves 20
// blocks, with four calls to r in its sockets, and fails t when r answers
// them with a head more than maxLag behind the chain's when it woke.
func checkFrozen(t *testing.T, w *world, r *replica, frozen []*replica) {
	t.Helper()
	node := w.nodes[0]
	// Connections made before the pause, one per call, so that the calls
	// are in the replica's sockets the moment it stops.
	keep := &http.Client{Timeout: waitLimit, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer keep.CloseIdleConnections()
	url := "http://" + r.rpc + "/" + chain
	var warm sync.WaitGroup
	for range 4 {
		warm.Go(func() { _, _, _ = post(keep, url, "eth_chainId") })
	}
	warm.Wait()
	for _, f := range frozen {
		f.pause(t)
	}
	frozenAt := node.Head()
	type answer struct {
		method string
		n      uint64
		err    error
	}
	answers := make(chan answer, 4)
	for _, latest := range []bool{false, true, false, true} {
		go func() {
			a := answer{method: "eth_blockNumber"}
			var params []any
			if latest {
				a.method, params = "eth_getBlockByNumber", []any{"latest", false}
			}
			res, src, err := post(keep, url, a.method, params...)
			a.method += " (answered from " + src + ")"
			var b block
			switch {
			case err != nil:
				a.err = err
			case latest:
				a.err = json.Unmarshal(res, &b)
			default:
				a.err = json.Unmarshal(res, &b.Number)
			}
			a.n = b.number()
			answers <- a
		}()
	}
	testkit.WaitFor(t, waitLimit, "the chain moves 20 blocks", func() bool { return node.Head() >= frozenAt+20 })
	woke := node.Head()
	for _, f := range frozen {
		f.resume()
	}
	for range 4 {
		a := <-answers
		if a.err != nil {
			t.Fatalf("%s: %v", a.method, a.err)
		}
		if a.n+maxLag < woke {
			t.Errorf("right after it woke replica %s answered %s with block %d; the chain was at %d", r.id, a.method, a.n, woke)
		}
	}
}
