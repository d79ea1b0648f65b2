//go:build linux

package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
)

// subscriber is one WebSocket client of a replica with two subscriptions,
// logs (every log) and newHeads, recording every notification in the order
// it came.
type subscriber struct {
	r    *replica
	ws   *websocket.Conn
	done chan struct{} // closed when reading ends

	mu    sync.Mutex
	kinds map[string]string // subscription id → "logs" or "newHeads"
	heads []subHead
	logs  []subLog
	bad   []string // messages that were not what a subscriber expects
	err   error    // why reading ended
}

type subHead struct {
	Number     string `json:"number"`
	Hash       string `json:"hash"`
	ParentHash string `json:"parentHash"`
}

type subLog struct {
	BlockNumber     string `json:"blockNumber"`
	BlockHash       string `json:"blockHash"`
	TransactionHash string `json:"transactionHash"`
	LogIndex        string `json:"logIndex"`
	Removed         bool   `json:"removed"`
}

func (h subHead) number() uint64 { return parseQ(h.Number) }
func (l subLog) number() uint64  { return parseQ(l.BlockNumber) }

func parseQ(s string) uint64 {
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
	if err != nil {
		return 0
	}
	return n
}

// subscribe connects to r and subscribes to logs, then (once logs is
// acknowledged) to newHeads: every block a head arrives for is one whose
// logs the client also gets. The connection is closed when the test ends.
func subscribe(t *testing.T, r *replica) *subscriber {
	t.Helper()
	return subscribeTo(t, r, chain)
}

// subscribeTo is subscribe on the replica's chain name.
func subscribeTo(t *testing.T, r *replica, name string) *subscriber {
	t.Helper()
	return subscribeWith(t, r, name,
		`{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["logs",{}]}`,
		`{"jsonrpc":"2.0","id":2,"method":"eth_subscribe","params":["newHeads"]}`)
}

// subscribeWith is subscribe with the requests given: id 1 subscribes to
// logs, id 2 to newHeads.
func subscribeWith(t *testing.T, r *replica, name string, reqs ...string) *subscriber {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws://"+r.rpc+"/"+name, nil)
	if err != nil {
		t.Fatalf("replica %s: dial: %v", r.id, err)
	}
	ws.SetReadLimit(1 << 20)
	s := &subscriber{r: r, ws: ws, done: make(chan struct{}), kinds: map[string]string{}}
	go s.read()
	t.Cleanup(func() {
		_ = ws.CloseNow()
		<-s.done
	})
	for i, req := range reqs {
		if err := ws.Write(ctx, websocket.MessageText, []byte(req)); err != nil {
			t.Fatalf("replica %s: subscribe: %v", r.id, err)
		}
		if !testkit.Poll(5*time.Second, func() bool { return s.subscriptions() > i }) {
			t.Fatalf("replica %s: no answer to %s; ended: %v; unexpected: %q", r.id, req, s.ended(), s.unexpected())
		}
	}
	return s
}

// read records every message until the connection ends.
func (s *subscriber) read() {
	defer close(s.done)
	for {
		_, data, err := s.ws.Read(context.Background())
		if err != nil {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			return
		}
		s.record(data)
	}
}

func (s *subscriber) record(data []byte) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
		Method string          `json:"method"`
		Params struct {
			Subscription string          `json:"subscription"`
			Result       json.RawMessage `json:"result"`
		} `json:"params"`
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := json.Unmarshal(data, &msg); err != nil {
		s.bad = append(s.bad, fmt.Sprintf("%.200s: %v", data, err))
		return
	}
	switch {
	case msg.ID != nil && msg.Error == nil:
		var id string
		if err := json.Unmarshal(msg.Result, &id); err != nil {
			s.bad = append(s.bad, fmt.Sprintf("reply %.200s", data))
			return
		}
		s.kinds[id] = map[string]string{"1": "logs", "2": "newHeads"}[string(msg.ID)]
	case msg.Method == "eth_subscription":
		switch s.kinds[msg.Params.Subscription] {
		case "newHeads":
			var h subHead
			if err := json.Unmarshal(msg.Params.Result, &h); err != nil || h.Hash == "" {
				s.bad = append(s.bad, fmt.Sprintf("head %.200s", data))
				return
			}
			s.heads = append(s.heads, h)
		case "logs":
			var l subLog
			if err := json.Unmarshal(msg.Params.Result, &l); err != nil || l.BlockHash == "" {
				s.bad = append(s.bad, fmt.Sprintf("log %.200s", data))
				return
			}
			s.logs = append(s.logs, l)
		default:
			s.bad = append(s.bad, fmt.Sprintf("notification before its reply or of an unknown id: %.200s", data))
		}
	default:
		s.bad = append(s.bad, fmt.Sprintf("%.200s", data))
	}
}

func (s *subscriber) subscriptions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.kinds)
}

func (s *subscriber) unexpected() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bad...)
}

// ended is why the connection ended, nil while it is open.
func (s *subscriber) ended() error {
	select {
	case <-s.done:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.err
	default:
		return nil
	}
}

// lastHead is the number of the last head received, 0 before the first.
func (s *subscriber) lastHead() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.heads) == 0 {
		return 0
	}
	return s.heads[len(s.heads)-1].number()
}

// snapshot copies what was received.
func (s *subscriber) snapshot() ([]subHead, []subLog) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]subHead(nil), s.heads...), append([]subLog(nil), s.logs...)
}

// waitHead waits until s has received block n's head.
func (s *subscriber) waitHead(t *testing.T, n uint64) {
	t.Helper()
	if !testkit.Poll(waitLimit, func() bool { return s.lastHead() >= n || s.ended() != nil }) || s.lastHead() < n {
		t.Fatalf("subscriber on %s: last head %d, want %d (connection ended: %v)", s.r.id, s.lastHead(), n, s.ended())
	}
}

// check asserts that s received the node's canonical chain through block
// to, once each and in order: consecutive numbers, each head the child of
// the one before, the node's hashes, from a block no later than from; and,
// for every one of those blocks, exactly the node's logs, none removed.
func (s *subscriber) check(t *testing.T, node *fakenode.Node, from, to uint64) {
	t.Helper()
	heads, logs := s.snapshot()
	who := "subscriber on " + s.r.id
	if bad := s.unexpected(); len(bad) > 0 {
		t.Errorf("%s: unexpected messages: %q", who, bad)
	}
	if len(heads) == 0 {
		t.Fatalf("%s: no heads", who)
	}
	first := heads[0].number()
	if first > from {
		t.Errorf("%s: first head %d, want %d or earlier", who, first, from)
	}
	for i, h := range heads {
		n := first + uint64(i)
		if h.number() != n {
			t.Fatalf("%s: head #%d is block %d, want %d: %s", who, i, h.number(), n, headRun(heads, i))
		}
		if h.Hash != node.BlockHash(n) {
			t.Errorf("%s: block %d is %s, canonical is %s", who, n, h.Hash, node.BlockHash(n))
		}
		if i > 0 && h.ParentHash != heads[i-1].Hash {
			t.Errorf("%s: block %d's parent is %s, the head before was %s", who, n, h.ParentHash, heads[i-1].Hash)
		}
	}
	last := heads[len(heads)-1].number()
	if last < to {
		t.Errorf("%s: last head %d, want %d", who, last, to)
	}

	// Logs: the subscription started before newHeads, so it may hold logs
	// of blocks before the first head; from the first head on it must be
	// the node's logs exactly.
	for len(logs) > 0 && logs[0].number() < first {
		logs = logs[1:]
	}
	var want []subLog
	for n := first; n <= last; n++ {
		want = append(want, nodeLogs(t, node, node.BlockHash(n))...)
	}
	for i := range max(len(logs), len(want)) {
		switch {
		case i >= len(logs):
			t.Fatalf("%s: %d logs, the node has %d for blocks %d..%d; first missing: %+v", who, len(logs), len(want), first, last, want[i])
		case i >= len(want):
			t.Fatalf("%s: %d logs, the node has %d for blocks %d..%d; first extra: %+v", who, len(logs), len(want), first, last, logs[i])
		case logs[i] != want[i]:
			t.Fatalf("%s: log #%d is %+v, the node's is %+v", who, i, logs[i], want[i])
		}
	}
	t.Logf("%s: blocks %d..%d (%d heads), %d logs, each once and in order", who, first, last, len(heads), len(logs))
}

// headRun shows the heads around i.
func headRun(heads []subHead, i int) string {
	var b strings.Builder
	for _, h := range heads[max(0, i-3):min(len(heads), i+3)] {
		fmt.Fprintf(&b, "%d ", h.number())
	}
	return b.String()
}

// nodeLogs is the node's eth_getLogs for one block.
func nodeLogs(t *testing.T, node *fakenode.Node, hash string) []subLog {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "eth_getLogs",
		"params": []any{map[string]string{"blockHash": hash}}})
	resp, err := client.Post(node.URL(), "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("node eth_getLogs: %v", err)
	}
	defer resp.Body.Close()
	var msg struct {
		Result []subLog         `json:"result"`
		Error  *json.RawMessage `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil || msg.Error != nil {
		t.Fatalf("node eth_getLogs %s: %v %s", hash, err, msg.Error)
	}
	return msg.Result
}

// TestSubscribersAcrossLeaderKill: clients subscribed to newHeads and logs
// on the two followers get every block once, in order, across a kill -9
// of the leader and a new leader's first blocks; the client on the killed
// leader sees its connection end.
func TestSubscribersAcrossLeaderKill(t *testing.T) {
	c := startCluster(t, 3)
	stop := c.mine(t)
	defer stop()
	leader, _, _ := c.waitLeader(t, "")
	c.waitConverged(t, c.replicas)

	live := c.without(leader)
	var subs []*subscriber
	for _, r := range live {
		subs = append(subs, subscribe(t, r))
	}
	onLeader := subscribe(t, c.replica(leader))
	// Every subscriber has seen a few blocks before the kill.
	before := c.nodes[0].Head() + 3
	for _, s := range append(subs, onLeader) {
		s.waitHead(t, before)
	}

	killedAt := c.nodes[0].Head()
	c.replica(leader).kill()
	next, _, took := c.waitLeader(t, leader)
	t.Logf("leader %s killed at block %d; %s leads after %v", leader, killedAt, next, took)
	if !testkit.Poll(5*time.Second, func() bool { return onLeader.ended() != nil }) {
		t.Errorf("the subscriber on the killed leader %s still has an open connection", leader)
	} else {
		t.Logf("the subscriber on the killed leader: connection ended: %v", onLeader.ended())
	}

	waitBlocks(c.nodes[0], 10)
	stop()
	c.waitConverged(t, live)
	end := c.nodes[0].Head()
	for _, s := range subs {
		s.waitHead(t, end)
		s.check(t, c.nodes[0], killedAt, end)
	}
	for _, r := range live {
		if v, _ := metric(r, "venn_subscription_missed_blocks_total", `chain="dev"`); v != 0 {
			t.Errorf("replica %s: venn_subscription_missed_blocks_total = %v, want 0", r.id, v)
		}
	}
}

// TestSubscribersAcrossRedisRestart: a short Redis outage (the feed and
// the lease lost, Redis back empty) neither repeats a block to a
// subscriber nor, since it lasts far less than the window, skips one.
func TestSubscribersAcrossRedisRestart(t *testing.T) {
	c := startCluster(t, 3)
	stop := c.mine(t)
	defer stop()
	leader, _, _ := c.waitLeader(t, "")
	c.waitConverged(t, c.replicas)

	var subs []*subscriber
	for _, r := range c.without(leader) {
		subs = append(subs, subscribe(t, r))
	}
	before := c.nodes[0].Head() + 3
	for _, s := range subs {
		s.waitHead(t, before)
	}

	downAt := c.nodes[0].Head()
	c.redis.Kill()
	waitBlocks(c.nodes[0], 5)
	c.restartRedis(t)
	upAt := c.nodes[0].Head()
	next, _, took := c.waitLeader(t, "")
	t.Logf("Redis down from block %d to %d (window %d); %s leads %v after the restart", downAt, upAt, window, next, took)

	waitBlocks(c.nodes[0], 10)
	stop()
	c.waitConverged(t, c.replicas)
	end := c.nodes[0].Head()
	if gap := upAt - downAt; gap >= window/2 {
		t.Fatalf("Redis was down for %d blocks, not well under the window (%d): the test cannot tell a skip from a bug", gap, window)
	}
	for _, s := range subs {
		s.waitHead(t, end)
		s.check(t, c.nodes[0], downAt, end)
	}
	for _, r := range c.replicas {
		if v, _ := metric(r, "venn_subscription_missed_blocks_total", `chain="dev"`); v != 0 {
			t.Errorf("replica %s: venn_subscription_missed_blocks_total = %v, want 0", r.id, v)
		}
	}
}

// TestLogsSubscriberResumesOnAnotherReplica: a logs subscriber whose
// replica is killed -9 mid-stream (blocks keep coming) subscribes again on
// another replica with the last block it got logs of (venn's resumeFrom):
// across both connections it gets the node's logs for every block, each
// once and in order.
func TestLogsSubscriberResumesOnAnotherReplica(t *testing.T) { resumeAcrossKill(t, false) }

// TestLogsSubscriberResumesAcrossAReorg: as above, but while the client is
// away the last two blocks it got logs of are reorged out: on resuming it
// gets their logs again with removed: true, then the new branch's.
func TestLogsSubscriberResumesAcrossAReorg(t *testing.T) { resumeAcrossKill(t, true) }

func resumeAcrossKill(t *testing.T, reorg bool) {
	c := startCluster(t, 3)
	stop := c.mine(t)
	defer stop()
	leader, _, _ := c.waitLeader(t, "")
	c.waitConverged(t, c.replicas)
	followers := c.without(leader)
	a, b := followers[0], followers[1]

	first := subscribe(t, a)
	first.waitHead(t, c.nodes[0].Head()+3)
	a.kill()
	if !testkit.Poll(5*time.Second, func() bool { return first.ended() != nil }) {
		t.Fatalf("the subscriber on the killed replica %s still has an open connection", a.id)
	}
	heads, before := first.snapshot()
	if len(before) == 0 {
		t.Fatal("no logs before the kill")
	}
	last := before[len(before)-1]
	forkAt := last.number() + 1 // no fork: nothing the client got leaves
	if reorg {
		forkAt = last.number() - 1
		salt := uint64(time.Now().UnixNano())
		for _, n := range c.nodes {
			n.SetFork(forkAt, salt)
		}
	}
	waitBlocks(c.nodes[0], 3) // blocks come while the client is away

	resume := fmt.Sprintf(`{"resumeFrom":{"number":%q,"hash":%q}}`, last.BlockNumber, last.BlockHash)
	second := subscribeWith(t, b, chain,
		`{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":["logs",{},`+resume+`]}`,
		`{"jsonrpc":"2.0","id":2,"method":"eth_subscribe","params":["newHeads"]}`)
	waitBlocks(c.nodes[0], 5)
	stop()
	c.waitConverged(t, c.without(a.id))
	end := c.nodes[0].Head()
	second.waitHead(t, end)
	// The resumed stream is complete once block end's logs are in: they
	// come with its head on the live stream.
	if !testkit.Poll(waitLimit, func() bool {
		_, l := second.snapshot()
		return len(l) > 0 && l[len(l)-1].number() >= end
	}) {
		t.Fatalf("the resumed subscriber never got block %d's logs", end)
	}
	_, after := second.snapshot()
	if bad := append(first.unexpected(), second.unexpected()...); len(bad) > 0 {
		t.Errorf("unexpected messages: %q", bad)
	}

	got := append(before, after...)
	from := heads[0].number()
	for len(got) > 0 && got[0].number() < from {
		got = got[1:]
	}
	// The node's logs up to the fork; what the client got of the orphaned
	// blocks, then the same again removed; the new branch's logs.
	var want, orphaned []subLog
	for n := from; n < forkAt; n++ {
		want = append(want, nodeLogs(t, c.nodes[0], c.nodes[0].BlockHash(n))...)
	}
	for _, l := range before {
		if l.number() >= forkAt {
			orphaned = append(orphaned, l)
		}
	}
	want = append(want, orphaned...)
	for _, l := range orphaned {
		l.Removed = true
		want = append(want, l)
	}
	for n := forkAt; n <= end; n++ {
		want = append(want, nodeLogs(t, c.nodes[0], c.nodes[0].BlockHash(n))...)
	}
	if reorg && len(orphaned) == 0 {
		t.Fatal("the reorg took back no log the client got")
	}
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			t.Fatalf("%d logs, want %d for blocks %d..%d; first missing: %+v", len(got), len(want), from, end, want[i])
		case i >= len(want):
			t.Fatalf("%d logs, want %d for blocks %d..%d; first extra: %+v", len(got), len(want), from, end, got[i])
		case got[i] != want[i]:
			t.Fatalf("log #%d is %+v, want %+v (resumed after block %s, fork at %d)", i, got[i], want[i], last.BlockNumber, forkAt)
		}
	}
	t.Logf("blocks %d..%d: %d logs on %s, resumed after block %d on %s with %d more (%d removed); each once and in order",
		from, end, len(before), a.id, last.number(), b.id, len(after), len(orphaned))
}
