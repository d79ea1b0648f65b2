//go:build linux

package cluster

import (
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	harness "github.com/venn-gateway/venn/internal/cluster"
	"github.com/venn-gateway/venn/internal/feedtest"
	"github.com/venn-gateway/venn/internal/natstest"
)

// TestFeedLeaderKilledMidStream: three replicas publish the chain's feed
// to JetStream while they lead it; the leader is killed -9 while blocks
// and a reorg go by. The next leader goes on from the stream's own tail:
// an indexer on a durable consumer sees no stream sequence skipped, no
// message id twice, every reorg it is told removing blocks it holds, and
// ends with exactly the node's chain.
func TestFeedLeaderKilledMidStream(t *testing.T) {
	ns := natstest.Start(t, natstest.Options{})
	c := startClusterWith(t, 3, func(conf *harness.Config) {
		conf.Extra += "\nnats: {url: \"" + ns.URL() + "\", reconnect_wait: 50ms, reconnect_jitter: 10ms}"
		conf.ChainExtra += "nats: {stream: true, max_bytes: 100000000}\n"
	})
	stop := c.mine(t)
	defer stop()
	leader, _, _ := c.waitLeader(t, "")
	c.waitConverged(t, c.replicas)

	js, err := jetstream.New(ns.Connect())
	if err != nil {
		t.Fatal(err)
	}
	x := feedtest.New(t, "indexer")
	cons := feedtest.Consumer(t, js, "VENN_DEV", "indexer")
	node := c.nodes[0]
	x.Until(cons, func() bool { return x.HasHead && x.Head+2 >= node.Head() })

	c.reorg(3)
	c.replica(leader).kill() // mid-stream: the nodes mine on
	next, _, _ := c.waitLeader(t, leader)
	t.Logf("leader %s killed; %s leads", leader, next)
	waitBlocks(node, 10)
	c.reorg(2)
	waitBlocks(node, 5)
	stop()

	head := node.Head()
	want := strings.ToLower(node.BlockHash(head))
	x.Until(cons, func() bool { return x.HasHead && x.Head == head && x.Chain[head] == want })
	canonical := map[uint64]string{}
	low := head
	for n := range x.Chain {
		low = min(low, n)
	}
	for n := low; n <= head; n++ {
		canonical[n] = strings.ToLower(node.BlockHash(n))
	}
	feedtest.Matches(t, x, canonical)
	if len(x.Gaps) != 0 {
		t.Errorf("gaps: %+v", x.Gaps)
	}
	if len(x.Reorgs) == 0 {
		t.Errorf("no reorg event for the two reorgs")
	}
	t.Logf("%d messages, %d blocks, %d reorgs", x.Msgs, x.Blocks, len(x.Reorgs))
}
