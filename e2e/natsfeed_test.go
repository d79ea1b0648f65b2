package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/venn-gateway/venn/internal/feedtest"
	"github.com/venn-gateway/venn/internal/gethtest"
	"github.com/venn-gateway/venn/internal/natstest"
	"github.com/venn-gateway/venn/internal/simnode"
	"github.com/venn-gateway/venn/internal/testkit"
)

// TestFeedMatchesSimulatedNode: an indexer on venn's JetStream feed, a
// nats.go durable consumer, ends with exactly the node's canonical chain
// (every block's hash, its transactions and receipts with their logs as
// the node has them) through a reorg made with Fork, the indexer killed
// mid-batch and restarted, and NATS killed and restarted, with the reorg applied
// once and nothing delivered twice or skipped.
func TestFeedMatchesSimulatedNode(t *testing.T) {
	sim := simnode.Start(t)
	emitter := sim.Deploy(t, common.FromHex(gethtest.EmitterCode()))
	ns := natstest.Start(t, natstest.Options{})
	v := startVenn(t, nil, vennOptions{
		blockTime: "100ms",
		urls:      [][2]string{{sim.HTTPURL(), sim.WSURL()}},
		top:       `nats: {url: "` + ns.URL() + `", reconnect_wait: 50ms, reconnect_jitter: 10ms}`,
		inChain:   "    nats: {stream: true, max_bytes: 100000000}",
	})
	nc := ns.Connect()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}

	k := uint64(0)
	block := func(calls int) common.Hash {
		for range calls {
			k++
			sim.Send(t, emitter, common.FromHex(gethtest.Topic(k)))
		}
		return sim.Commit()
	}
	x := feedtest.New(t, "indexer")
	x.OnBlock = func(ev *feedtest.Event) { checkBlockEvent(t, sim, ev) }
	atNode := func() bool {
		h := sim.Head(t)
		return x.HasHead && x.Head == h.Number.Uint64() && x.Chain[x.Head] == strings.ToLower(h.Hash().Hex())
	}

	for i := range 4 {
		block(i + 1)
	}
	c := feedtest.Consumer(t, js, "VENN_DEV", "indexer")
	x.Until(c, atNode)

	// A reorg: the two blocks on top leave; a three-block branch with
	// other transactions replaces them.
	head := sim.Head(t).Number.Uint64()
	fork := headerAt(t, sim, head-2)
	orphans := []string{strings.ToLower(headerAt(t, sim, head-1).Hex()), strings.ToLower(headerAt(t, sim, head).Hex())}
	sim.Fork(t, fork)
	for range 3 {
		block(2)
	}
	x.Until(c, atNode)
	if len(x.Reorgs) != 1 {
		t.Fatalf("reorg events = %d, want 1", len(x.Reorgs))
	}
	r := x.Reorgs[0]
	if r.Common.Number != head-2 || !strings.EqualFold(r.Common.Hash, fork.Hex()) || len(r.Removed) != 2 ||
		r.Removed[0].Hash != orphans[0] || r.Removed[1].Hash != orphans[1] {
		t.Fatalf("reorg = common %+v removed %+v, want common %d %s removed %v", r.Common, r.Removed, head-2, fork.Hex(), orphans)
	}

	// The indexer is killed mid-batch (an event applied and not acked,
	// the rest fetched and dropped) and comes back on its durable
	// consumer: the unacked events again, in order, the applied one
	// skipped.
	for range 3 {
		block(1)
	}
	redelivered := x.Redelivered
	x.Crash(c, true)
	block(1)
	c = feedtest.Consumer(t, js, "VENN_DEV", "indexer")
	x.Until(c, atNode)
	if x.Redelivered <= redelivered {
		t.Fatalf("the event applied before the crash was not delivered again")
	}

	// NATS is killed; blocks go by; it comes back. Meanwhile /readyz says
	// the feed is failing, and the replica stays ready.
	ns.Kill()
	for range 3 {
		block(1)
	}
	feedState(t, v, "failing")
	ns.Restart()
	feedState(t, v, "publishing")
	c = feedtest.Consumer(t, js, "VENN_DEV", "indexer")
	x.Until(c, atNode)

	canonical := map[uint64]string{}
	low := x.Head
	for n := range x.Chain {
		low = min(low, n)
	}
	for n := low; n <= x.Head; n++ {
		canonical[n] = strings.ToLower(headerAt(t, sim, n).Hex())
	}
	feedtest.Matches(t, x, canonical)
	if len(x.Reorgs) != 1 || len(x.Gaps) != 0 {
		t.Errorf("reorgs %d, gaps %d: want 1 and 0", len(x.Reorgs), len(x.Gaps))
	}

	// The nats CLI reads the same: the head block by its subject, and
	// every event through a consumer of its own, applied in order.
	applied, last := cliFeed(t, ns, x.Head)
	if applied != canonical[x.Head] || last != canonical[x.Head] {
		t.Errorf("nats CLI: events applied end at %s, block %d's event is %s; the node's is %s",
			applied, x.Head, last, canonical[x.Head])
	}
}

// headerAt is the hash of the node's canonical block n.
func headerAt(t *testing.T, sim *simnode.Node, n uint64) common.Hash {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := sim.Client().HeaderByNumber(ctx, new(big.Int).SetUint64(n))
	if err != nil {
		t.Fatalf("header %d: %v", n, err)
	}
	return h.Hash()
}

// checkBlockEvent checks a block event against the node: its
// transactions are the block's, and its receipts, logs included, are the
// node's byte for byte once compacted.
func checkBlockEvent(t *testing.T, sim *simnode.Node, ev *feedtest.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := sim.Client().BlockByHash(ctx, common.HexToHash(ev.Hash))
	if err != nil {
		t.Fatalf("block %d %s: %v", ev.Number, ev.Hash, err)
	}
	var body struct {
		Transactions []string `json:"transactions"`
	}
	if err := json.Unmarshal(ev.Block, &body); err != nil {
		t.Fatalf("block %d: %v", ev.Number, err)
	}
	if len(body.Transactions) != len(b.Transactions()) {
		t.Fatalf("block %d: %d transactions, the node has %d", ev.Number, len(body.Transactions), len(b.Transactions()))
	}
	for i, tx := range b.Transactions() {
		if !strings.EqualFold(body.Transactions[i], tx.Hash().Hex()) {
			t.Fatalf("block %d: transaction %d is %s, the node's %s", ev.Number, i, body.Transactions[i], tx.Hash().Hex())
		}
	}
	var rcs []struct {
		TxHash string            `json:"transactionHash"`
		Logs   []json.RawMessage `json:"logs"`
	}
	if err := json.Unmarshal(ev.Receipts, &rcs); err != nil || len(rcs) != len(b.Transactions()) {
		t.Fatalf("block %d: %d receipts for %d transactions (%v)", ev.Number, len(rcs), len(b.Transactions()), err)
	}
	for i, rc := range rcs {
		r, err := sim.Client().TransactionReceipt(ctx, b.Transactions()[i].Hash())
		if err != nil {
			t.Fatalf("receipt %s: %v", rc.TxHash, err)
		}
		if len(rc.Logs) != len(r.Logs) {
			t.Fatalf("block %d: receipt %d has %d logs, the node's %d", ev.Number, i, len(rc.Logs), len(r.Logs))
		}
	}
}

// feedState waits until /readyz, answering 200, shows the chain's feed in
// state.
func feedState(t *testing.T, v *venn, state string) {
	t.Helper()
	var last string
	if !testkit.Poll(20*time.Second, func() bool {
		code, body, err := httpGet("http://" + v.metricsAddr + "/readyz")
		if err != nil {
			return false
		}
		var r struct {
			Chains []struct {
				NATSFeed string `json:"nats_feed"`
			} `json:"chains"`
		}
		_ = json.Unmarshal(body, &r)
		last = fmt.Sprintf("%d %s", code, body)
		return code == 200 && len(r.Chains) == 1 && r.Chains[0].NATSFeed == state
	}) {
		t.Fatalf("/readyz never showed the feed %s with 200; last: %s", state, last)
	}
}
