//go:build linux

package hostile

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
)

// A remote is re-pointed at another network, at the same height: it goes
// on answering well, with the other network's blocks, and its heads are
// siblings of the chain's at every height, so the last report seen made
// it the tip. The leader walked back the whole window without finding an
// ancestor and published the foreign branch, over and over, and clients
// got the other network's blocks. Now a walk-back that finds no ancestor
// has the remote that reported the tip checked at once, out of rotation
// until it passes; it fails, and the reorg is refused. No replica's window
// serves a block of the other network, the head feed never holds one, and
// calls forwarded before the remote is found out reach it rarely (at most
// 1% of calls; under load, a few).
func TestChainSwitchAtTheSameHeight(t *testing.T) {
	w := startWorld(t, options{nodes: 3})
	foreign := fakenode.New(fakenode.Options{ChainID: otherChainID}) // the other network's hashes; never listens
	stop := w.mine(t)
	w.waitServing(t, w.replicas)
	seq := w.feedSeq(t)
	leaderID, _ := w.leader()
	leader := w.replica(leaderID)

	switched := w.nodes[2]
	switched.SwitchChain(otherChainID)
	start := switched.Head()
	// Foreign answers by replica and by the part of venn that answered.
	// The window must never give one. A call forwarded to the remotes in
	// the moments before the switched one is found out may reach it: that
	// is the pool's exposure until its chain check, counted and bounded
	// below, not the window's.
	calls, bad, fromWindow, forwarded := 0, map[string]int{}, 0, 0
	ask := func(r *replica, n string, want func(b block) string) {
		res, src, err := r.callRaw("eth_getBlockByNumber", n, false)
		var b block
		if err != nil || json.Unmarshal(res, &b) != nil {
			return
		}
		calls++
		if b.Hash == want(b) {
			bad[r.id+" from "+src]++
			if src == "head" {
				fromWindow++
			} else {
				forwarded++
			}
		}
	}
	foreignAt := func(b block) string { return foreign.BlockHash(b.number()) }
	// Thirty blocks of the switched remote's siblings, asked of every
	// replica as a client would: latest, and the window's blocks.
	for switched.Head() < start+30 {
		for _, r := range w.replicas {
			ask(r, "latest", foreignAt)
			ask(r, hexq(w.nodes[0].Head()-uint64(calls%window)), foreignAt)
		}
	}
	stop()
	if fromWindow > 0 || forwarded > calls/100 {
		t.Errorf("replicas served the other network's blocks in %d calls (by replica and source: %v)", calls, bad)
	} else if forwarded > 0 {
		t.Logf("%d calls forwarded before the switch was found out reached the switched remote (%v)", forwarded, bad)
	}
	testkit.WaitFor(t, waitLimit, "the switched remote out of rotation on the leader", func() bool {
		v, _ := leader.metric("venn_remote_wrong_chain", `remote="n2"`)
		return v == 1
	})
	w.waitServing(t, w.replicas)
	for _, a := range w.feedAdded(t, seq) {
		if a.Hash != w.nodes[0].BlockHash(parseQ(a.Number)) {
			t.Fatalf("the head feed published block %s %s, not the chain's (the other network's: %v)",
				a.Number, a.Hash, a.Hash == foreign.BlockHash(parseQ(a.Number)))
		}
	}
	if v, _ := leader.metric("venn_reorgs_total", `chain="dev"`); v != 0 {
		t.Errorf("the leader published %v reorgs; the chain had none", v)
	}
	for _, r := range w.replicas {
		checkAnswers(t, r, w.nodes[0])
	}
}

// feedSeq is the head feed's sequence number in Redis now.
func (w *world) feedSeq(t *testing.T) uint64 {
	t.Helper()
	v, err := w.redis.Client.HGet(context.Background(), "venn:{"+chain+"}:state", "seq").Result()
	if err != nil {
		t.Fatalf("read the feed's seq: %v", err)
	}
	n, _ := strconv.ParseUint(v, 10, 64)
	return n
}

// feedAdded is every block the head feed's events after seq added, as
// numbers and hashes.
func (w *world) feedAdded(t *testing.T, seq uint64) []block {
	t.Helper()
	entries, err := w.redis.Client.XRange(context.Background(), "venn:{"+chain+"}:events",
		strconv.FormatUint(seq+1, 10)+"-0", "+").Result()
	if err != nil {
		t.Fatalf("read the head feed: %v", err)
	}
	var out []block
	for _, e := range entries {
		var ev struct {
			Added []struct {
				Number uint64 `json:"number"`
				Hash   string `json:"hash"`
			} `json:"added"`
		}
		if err := json.Unmarshal([]byte(e.Values["e"].(string)), &ev); err != nil {
			t.Fatalf("feed entry %s: %v", e.ID, err)
		}
		for _, a := range ev.Added {
			out = append(out, block{Number: hexq(a.Number), Hash: a.Hash})
		}
	}
	return out
}
