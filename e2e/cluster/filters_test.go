//go:build linux

package cluster

import (
	"strings"
	"testing"

	harness "github.com/venn-gateway/venn/internal/cluster"
)

// filterLog is a log as a filter's client tells them apart.
type filterLog struct {
	BlockNumber string `json:"blockNumber"`
	BlockHash   string `json:"blockHash"`
	LogIndex    string `json:"logIndex"`
	Removed     bool   `json:"removed"`
}

// TestFiltersAcrossReplicas: a log filter and a block filter made through
// one replica are polled round robin through all three, as behind a load
// balancer, while the chain grows and reorgs, a remote fails and the
// replica that made them is killed. Every canonical log is delivered
// exactly once (net of removed: true for the orphans, each after the log
// it takes back), every canonical block's hash arrives, and no poll costs
// an eth_getLogs upstream: the window answers them.
func TestFiltersAcrossReplicas(t *testing.T) {
	// Archive remotes are never probed for what history they keep: every
	// eth_getLogs they see is a client's.
	c := startClusterWith(t, 3, func(conf *harness.Config) {
		for i := range conf.Remotes {
			conf.Remotes[i].Extra = "archive: true"
		}
	})
	c.waitLeader(t, "")
	for _, n := range c.nodes {
		n.Mine(1)
	}
	c.waitConverged(t, c.replicas)

	var logID, blockID string
	if err := rpc(c.replicas[0], "eth_newFilter", &logID, map[string]any{}); err != nil {
		t.Fatal(err)
	}
	if err := rpc(c.replicas[0], "eth_newBlockFilter", &blockID); err != nil {
		t.Fatal(err)
	}
	if len(logID) < 3 || !strings.HasPrefix(logID, "0x") || logID == blockID {
		t.Fatalf("filter ids %q and %q", logID, blockID)
	}
	start := c.nodes[0].Head()
	getLogsBefore := c.nodes[0].Calls("eth_getLogs") + c.nodes[1].Calls("eth_getLogs")

	var (
		logs   []filterLog
		hashes []string
		live   = c.replicas
		turn   int
	)
	poll := func() {
		t.Helper()
		r := live[turn%len(live)]
		turn++
		var ls []filterLog
		if err := rpc(r, "eth_getFilterChanges", &ls, logID); err != nil {
			t.Fatalf("poll of the log filter on %s: %v", r.id, err)
		}
		logs = append(logs, ls...)
		var hs []string
		if err := rpc(r, "eth_getFilterChanges", &hs, blockID); err != nil {
			t.Fatalf("poll of the block filter on %s: %v", r.id, err)
		}
		hashes = append(hashes, hs...)
	}
	// A step of the chain, then a poll on the next replica.
	step := func(k int) {
		for range k {
			for _, n := range c.nodes {
				n.Mine(1)
			}
			poll()
		}
	}
	step(5)
	c.waitConverged(t, live)
	poll()
	c.reorg(3)
	step(4)
	c.waitConverged(t, live)
	poll()

	// A remote fails: its filters would have gone with it.
	c.nodes[1].SetFailStatus(500)
	step(3)
	// The replica that made the filters dies.
	c.replicas[0].kill()
	live = c.without(c.replicas[0].id)
	step(3)
	c.reorg(2)
	step(3)
	c.waitConverged(t, live)
	poll()
	poll()
	head := c.nodes[0].Head()
	if got := c.nodes[0].Calls("eth_getLogs") + c.nodes[1].Calls("eth_getLogs") - getLogsBefore; got != 0 {
		t.Fatalf("polls answered from the window made %d eth_getLogs upstream", got)
	}

	// Logs: net one of each canonical log after the start, none of any
	// orphan; a removed log only after the log it takes back.
	type key struct{ hash, index string }
	net := map[key]int{}
	for i, l := range logs {
		k := key{l.BlockHash, l.LogIndex}
		if l.Removed {
			net[k]--
			if net[k] < 0 {
				t.Fatalf("log #%d removes %+v, never delivered", i, l)
			}
			continue
		}
		net[k]++
		if net[k] > 1 {
			t.Fatalf("log #%d %+v delivered twice", i, l)
		}
	}
	want := 0
	for n := start + 1; n <= head; n++ {
		for _, l := range nodeLogs(t, c.nodes[0], c.nodes[0].BlockHash(n)) {
			want++
			if net[key{l.BlockHash, l.LogIndex}] != 1 {
				t.Fatalf("canonical log %+v of block %d: delivered %d times net", l, n, net[key{l.BlockHash, l.LogIndex}])
			}
			delete(net, key{l.BlockHash, l.LogIndex})
		}
	}
	for k, v := range net {
		if v != 0 {
			t.Fatalf("orphan log %+v left delivered (%d)", k, v)
		}
	}
	if want == 0 {
		t.Fatal("the node's blocks had no logs: nothing was checked")
	}

	// Blocks: every canonical hash after the start, none twice.
	seen := map[string]bool{}
	for _, h := range hashes {
		if seen[h] {
			t.Fatalf("block hash %s delivered twice", h)
		}
		seen[h] = true
	}
	for n := start + 1; n <= head; n++ {
		if !seen[c.nodes[0].BlockHash(n)] {
			t.Fatalf("block %d (%s) never delivered; got %d hashes", n, c.nodes[0].BlockHash(n), len(hashes))
		}
	}
	t.Logf("blocks %d..%d: %d logs net, %d log changes, %d block hashes", start+1, head, want, len(logs), len(hashes))

	// Uninstalled on one replica, gone on the others.
	var ok bool
	if err := rpc(live[0], "eth_uninstallFilter", &ok, logID); err != nil || !ok {
		t.Fatalf("uninstall: %v, %v", ok, err)
	}
	var ls []filterLog
	err := rpc(live[1], "eth_getFilterChanges", &ls, logID)
	if err == nil || !strings.Contains(err.Error(), "filter not found") {
		t.Fatalf("uninstalled filter polled: %v", err)
	}
}
