package subcenter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
)

func hash32(s string) string {
	h := fmt.Sprintf("%x", s)
	if len(h) > 64 {
		h = h[:64]
	}
	return "0x" + strings.Repeat("0", 64-len(h)) + h
}

func addr(i uint64) string  { return fmt.Sprintf("0x%040x", 0xa0+i) }
func topic(i uint64) string { return fmt.Sprintf("0x%064x", 0xf0+i) }

func blockHash(fork string, n uint64) string {
	if n == 0 {
		return hash32("genesis")
	}
	return hash32(fmt.Sprintf("%s/%d", fork, n))
}

// block is block n of fork, whose parent is block n-1 of parentFork: a
// hash of its own, one transaction, and one log from address addr(n%3)
// with topic0 topic(n%2).
func block(fork string, n uint64, parentFork string) *evm.Block {
	h, p := blockHash(fork, n), blockHash(parentFork, n-1)
	tx := hash32(fmt.Sprintf("tx %s/%d", fork, n))
	q := fmt.Sprintf("0x%x", n)
	raw := `{"baseFeePerGas":"0x7","difficulty":"0x0","extraData":"0x","gasLimit":"0x1c9c380","gasUsed":"0x5208","hash":"` + h +
		`","logsBloom":"0x00","miner":"` + addr(9) + `","mixHash":"` + hash32("mix") + `","nonce":"0x0000000000000000","number":"` + q +
		`","parentHash":"` + p + `","receiptsRoot":"` + hash32("r") + `","sha3Uncles":"` + hash32("u") + `","size":"0x300","stateRoot":"` +
		hash32("s") + `","timestamp":"` + q + `","transactions":[{"blockHash":"` + h + `","blockNumber":"` + q + `","hash":"` + tx +
		`","transactionIndex":"0x0"}],"transactionsRoot":"` + hash32("t") + `","uncles":[],"withdrawals":[],"withdrawalsRoot":"` + hash32("w") + `"}`
	log := `{"address":"` + addr(n%3) + `","topics":["` + topic(n%2) + `"],"data":"0x","blockNumber":"` + q + `","transactionHash":"` + tx +
		`","transactionIndex":"0x0","blockHash":"` + h + `","logIndex":"0x0","removed":false}`
	rcpt := `[{"blockHash":"` + h + `","blockNumber":"` + q + `","logs":[` + log + `],"status":"0x1","transactionHash":"` + tx + `","transactionIndex":"0x0"}]`
	b, err := evm.ParseBlock([]byte(raw), []byte(rcpt))
	if err != nil {
		panic(err)
	}
	return b
}

// feed drives a window the way a follower does.
type feed struct {
	t   *testing.T
	w   *headstore.Window
	seq uint64
}

func newFeed(t *testing.T, size int) *feed {
	return &feed{t: t, w: headstore.NewWindow(size)}
}

func (f *feed) apply(dropped []headstore.Ref, added ...*evm.Block) {
	f.t.Helper()
	f.seq++
	if err := f.w.Apply(&headstore.Event{Seq: f.seq, Dropped: dropped, Added: added}); err != nil {
		f.t.Fatal(err)
	}
}

// extend adds blocks from..to of fork, the first one's parent on parentFork.
func (f *feed) extend(fork string, from, to uint64, parentFork string) {
	f.t.Helper()
	for n := from; n <= to; n++ {
		f.apply(nil, block(fork, n, parentFork))
		parentFork = fork
	}
}

// notifier records notifications like a client would see them.
type notifier struct {
	once   sync.Once
	closed chan struct{}
	ctx    context.Context // ends with closed
	cancel context.CancelFunc
	got    chan note
	block  chan struct{} // nil: writes don't block
	// refuse makes every other try find the writer's turn taken, as a
	// connection does while a reply, or an earlier write, is still going.
	refuse bool
	tries  atomic.Int64
	code   chan int
}

type note struct {
	id     string
	result string
}

func newNotifier() *notifier {
	ctx, cancel := context.WithCancel(context.Background())
	return &notifier{closed: make(chan struct{}), ctx: ctx, cancel: cancel,
		got: make(chan note, 10000), code: make(chan int, 1)}
}

func (n *notifier) Notify(context.Context, string, json.RawMessage) error {
	return errors.New("unused")
}
func (n *notifier) NotifySubscriptions(ctx context.Context, notes []jrpc.SubscriptionNote) error {
	for _, nt := range notes {
		if err := n.notify(ctx, nt.ID, nt.Result); err != nil {
			return err
		}
	}
	return nil
}

// TryNotifySubscriptions finds the turn taken while writes block.
func (n *notifier) TryNotifySubscriptions(notes []jrpc.SubscriptionNote) (bool, error) {
	if n.block != nil || n.refuse && n.tries.Add(1)%2 == 0 {
		return false, nil
	}
	return true, n.NotifySubscriptions(context.Background(), notes)
}

func (n *notifier) notify(ctx context.Context, id string, res json.RawMessage) error {
	if n.block != nil {
		select {
		case <-n.block:
		case <-n.closed:
			return jrpc.ErrConnClosed
		}
	}
	select {
	case <-n.closed:
		return jrpc.ErrConnClosed
	case n.got <- note{id, string(res)}:
		return nil
	}
}
func (n *notifier) Disconnect(code int, reason string) {
	n.once.Do(func() {
		n.code <- code
		close(n.closed)
		n.cancel()
	})
}
func (n *notifier) Closed() <-chan struct{} { return n.closed }

func (n *notifier) AfterClose(f func()) { context.AfterFunc(n.ctx, f) }

// ctxFor is the context of a WebSocket call on n.
func ctxFor(n jrpc.Notifier) context.Context {
	return jrpc.ContextWithNotifier(context.Background(), n)
}

func subscribe(t *testing.T, c *Center, n *notifier, params string) string {
	t.Helper()
	res, err := c.Subscribe(ctxFor(n), json.RawMessage(params))
	if err != nil {
		t.Fatalf("subscribe %s: %v", params, err)
	}
	var id string
	if err := json.Unmarshal(res, &id); err != nil || !strings.HasPrefix(id, "0x") {
		t.Fatalf("subscription id %s", res)
	}
	return id
}

// collect reads notifications until want arrived, or fails after a while.
func (n *notifier) collect(t *testing.T, want int) []note {
	t.Helper()
	var out []note
	deadline := time.After(5 * time.Second)
	for len(out) < want {
		select {
		case x := <-n.got:
			out = append(out, x)
		case <-deadline:
			t.Fatalf("got %d notifications, want %d: %v", len(out), want, out)
		}
	}
	return out
}

// quiet checks that nothing more arrives for a moment.
func (n *notifier) quiet(t *testing.T) {
	t.Helper()
	select {
	case x := <-n.got:
		t.Fatalf("unexpected notification %v", x)
	case <-time.After(100 * time.Millisecond):
	}
}

func startCenter(t *testing.T, f *feed, opts Options) *Center {
	t.Helper()
	c := New("test", f.w, nil, opts, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

func headNumbers(t *testing.T, notes []note) []string {
	t.Helper()
	var out []string
	for _, x := range notes {
		var h struct{ Number, Hash string }
		if err := json.Unmarshal([]byte(x.result), &h); err != nil {
			t.Fatal(err)
		}
		out = append(out, h.Number+"/"+h.Hash[len(h.Hash)-6:])
	}
	return out
}

// A connection whose writer's turn is now free, now taken, gets its
// notifications partly from the dispatcher, partly from a writer
// goroutine: still each once, in order.
func TestNewHeadsInOrderWhenTheTurnIsSometimesTaken(t *testing.T) {
	f := newFeed(t, 16)
	f.extend("a", 1, 1, "a")
	c := startCenter(t, f, Options{})
	waitView(t, c, 1) // the chain subscribers start from
	n := newNotifier()
	n.refuse = true
	subscribe(t, c, n, `["newHeads"]`)
	const blocks = 200
	var want []string
	for i := uint64(2); i < 2+blocks; i++ {
		f.extend("a", i, i, "a")
		waitView(t, c, i) // delivered: the window, 16 blocks, never moves past it
		h := blockHash("a", i)
		want = append(want, fmt.Sprintf("0x%x/%s", i, h[len(h)-6:]))
	}
	if got := headNumbers(t, n.collect(t, blocks)); !slices.Equal(got, want) {
		t.Fatalf("heads:\n got %v\nwant %v", got, want)
	}
	n.quiet(t)
	if n.tries.Load() < 2 {
		t.Fatalf("%d tries: the dispatcher never wrote", n.tries.Load())
	}
}

func TestNewHeadsInOrderThroughReorgsAndReloads(t *testing.T) {
	f := newFeed(t, 16)
	f.extend("a", 1, 5, "a")
	c := startCenter(t, f, Options{})
	n := newNotifier()
	subscribe(t, c, n, `["newHeads"]`)
	waitView(t, c, 5)

	short := func(fork string, n uint64) string { return fmt.Sprintf("0x%x/%s", n, blockHash(fork, n)[60:]) }
	expect := func(want ...string) {
		t.Helper()
		if got := headNumbers(t, n.collect(t, len(want))); !slices.Equal(got, want) {
			t.Fatalf("heads\n got %v\nwant %v", got, want)
		}
	}
	f.extend("a", 6, 7, "a")
	expect(short("a", 6), short("a", 7))
	// A reorg replacing 6..7 with b's 6..8.
	f.apply([]headstore.Ref{{Number: 6, Hash: blockHash("a", 6)}, {Number: 7, Hash: blockHash("a", 7)}},
		block("b", 6, "a"), block("b", 7, "b"), block("b", 8, "b"))
	expect(short("b", 6), short("b", 7), short("b", 8))
	// A reload (the follower lost the feed) into a snapshot that already
	// holds 9 and 10: nothing twice, nothing missed.
	blocks := append(f.w.Blocks(), block("b", 9, "b"), block("b", 10, "b"))
	f.seq += 5
	if err := f.w.Reset(&headstore.Snapshot{Gen: "g2", Seq: f.seq, Blocks: blocks}); err != nil {
		t.Fatal(err)
	}
	f.extend("b", 11, 11, "b")
	expect(short("b", 9), short("b", 10), short("b", 11))
	n.quiet(t)
}

// waitView waits until the dispatcher has told subscribers of the window up
// to head: what the test changes next is new to them.
func waitView(t *testing.T, c *Center, head uint64) {
	t.Helper()
	for range 500 {
		if c.told.Load() == head {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the dispatcher is at %d, not %d", c.told.Load(), head)
}

func TestLogsRemovedOnReorgThenNewBranch(t *testing.T) {
	f := newFeed(t, 16)
	f.extend("a", 1, 3, "a")
	c := startCenter(t, f, Options{})
	all, byAddr, byTopic := newNotifier(), newNotifier(), newNotifier()
	subscribe(t, c, all, `["logs",{}]`)
	subscribe(t, c, byAddr, `["logs",{"address":["`+addr(1)+`","0x`+strings.ToUpper(addr(2)[2:])+`"]}]`)
	subscribe(t, c, byTopic, `["logs",{"topics":[["`+topic(1)+`"]]}]`)
	waitView(t, c, 3)

	type ev struct {
		block   string
		removed bool
	}
	read := func(n *notifier, want int) []ev {
		var out []ev
		for _, x := range n.collect(t, want) {
			var l struct {
				BlockHash string `json:"blockHash"`
				Removed   bool   `json:"removed"`
			}
			if err := json.Unmarshal([]byte(x.result), &l); err != nil {
				t.Fatal(err)
			}
			out = append(out, ev{l.BlockHash, l.Removed})
		}
		n.quiet(t)
		return out
	}
	a, b := func(n uint64) string { return blockHash("a", n) }, func(n uint64) string { return blockHash("b", n) }
	check := func(name string, n *notifier, want ...ev) {
		t.Helper()
		if got := read(n, len(want)); !slices.Equal(got, want) {
			t.Errorf("%s\n got %v\nwant %v", name, got, want)
		}
	}
	f.extend("a", 4, 6, "a")
	check("unfiltered", all, ev{a(4), false}, ev{a(5), false}, ev{a(6), false})
	// Addresses 1 and 2: blocks 4 (4%3=1), 5 (2); not 6 (0).
	check("by address", byAddr, ev{a(4), false}, ev{a(5), false})
	// Topic 1: odd blocks.
	check("by topic", byTopic, ev{a(5), false})

	f.apply([]headstore.Ref{{Number: 5, Hash: blockHash("a", 5)}, {Number: 6, Hash: blockHash("a", 6)}},
		block("b", 5, "a"), block("b", 6, "b"))
	check("unfiltered", all, ev{a(5), true}, ev{a(6), true}, ev{b(5), false}, ev{b(6), false})
	check("by address", byAddr, ev{a(5), true}, ev{b(5), false})
	check("by topic", byTopic, ev{a(5), true}, ev{b(5), false})
}

func TestSlowSubscriberIsDisconnectedAndOthersKeepUp(t *testing.T) {
	f := newFeed(t, 64)
	f.extend("a", 1, 2, "a")
	c := startCenter(t, f, Options{QueueLen: 5})
	slow, fast := newNotifier(), newNotifier()
	slow.block = make(chan struct{}) // never reads
	subscribe(t, c, slow, `["newHeads"]`)
	subscribe(t, c, fast, `["newHeads"]`)
	waitView(t, c, 2)
	for i := range uint64(10) {
		// One block at a time: the fast subscriber's queue of 5 never fills.
		f.extend("a", 3+i, 3+i, "a")
		fast.collect(t, 1)
	}
	select {
	case code := <-slow.code:
		if code != closeSlow {
			t.Fatalf("close code %d, want %d", code, closeSlow)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("slow subscriber was not disconnected")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.conns) != 1 || len(c.heads) != 1 {
		t.Fatalf("after the disconnect: %d connections, %d newHeads subscriptions; want 1, 1", len(c.conns), len(c.heads))
	}
}

func TestSubscribeErrorsAndUnsubscribe(t *testing.T) {
	f := newFeed(t, 16)
	f.extend("a", 1, 2, "a")
	c := startCenter(t, f, Options{MaxPerConn: 2})
	n := newNotifier()
	for _, tc := range []struct {
		ctx    context.Context
		params string
		code   int
		msg    string
	}{
		{context.Background(), `["newHeads"]`, -32601, "notifications not supported"},
		{ctxFor(n), `["bogus"]`, -32601, `"bogus" is not a subscription`},
		{ctxFor(n), `[]`, -32602, "expected subscription name"},
		{ctxFor(n), `["logs"]`, -32602, "missing value for required argument 1"},
		{ctxFor(n), `["logs",{"address":"0x12"}]`, -32602, "invalid address"},
		{ctxFor(n), `["logs",{"topics":[1]}]`, -32602, "invalid topic(s)"},
		{ctxFor(n), `["logs",{"fromBlock":"pending"}]`, -32602, "pending logs are not supported"},
		{ctxFor(n), `["logs",{"fromBlock":"0x5","toBlock":"0x4"}]`, -32602, "invalid block range params"},
		{ctxFor(n), `["newPendingTransactions"]`, -32601, "needs a remote with a ws_url"},
		{ctxFor(n), `["newHeads",{}]`, -32602, "too many arguments"},
	} {
		if _, err := c.Subscribe(tc.ctx, json.RawMessage(tc.params)); !isRPCError(err, tc.code, tc.msg) {
			t.Errorf("subscribe %s: %v, want %d %q", tc.params, err, tc.code, tc.msg)
		}
	}
	id := subscribe(t, c, n, `["newHeads"]`)
	subscribe(t, c, n, `["logs",{}]`)
	if _, err := c.Subscribe(ctxFor(n), json.RawMessage(`["newHeads"]`)); err == nil || !strings.Contains(err.Error(), "max_subscriptions_per_connection") {
		t.Fatalf("third subscription on a connection limited to 2: %v", err)
	}
	waitView(t, c, 2)
	f.extend("a", 3, 3, "a")
	if got := n.collect(t, 2); len(got) != 2 {
		t.Fatal(got)
	}
	res, err := c.Unsubscribe(ctxFor(n), json.RawMessage(`["`+id+`"]`))
	if err != nil || string(res) != "true" {
		t.Fatalf("unsubscribe: %s %v", res, err)
	}
	if _, err := c.Unsubscribe(ctxFor(n), json.RawMessage(`["`+id+`"]`)); !isRPCError(err, -32000, "subscription not found") {
		t.Fatalf("second unsubscribe: %v", err)
	}
	if _, err := c.Unsubscribe(ctxFor(newNotifier()), json.RawMessage(`["`+id+`"]`)); err == nil {
		t.Fatal("another connection unsubscribed this one's subscription")
	}
	f.extend("a", 4, 4, "a")
	got := n.collect(t, 1) // the log only
	if !strings.Contains(got[0].result, `"logIndex"`) {
		t.Fatalf("after unsubscribing newHeads got %v", got)
	}
	n.quiet(t)
}

func TestConnectionCloseForgetsSubscriptions(t *testing.T) {
	f := newFeed(t, 16)
	f.extend("a", 1, 1, "a")
	c := startCenter(t, f, Options{})
	n := newNotifier()
	subscribe(t, c, n, `["newHeads"]`)
	subscribe(t, c, n, `["logs",{"address":"`+addr(1)+`"}]`)
	n.Disconnect(1000, "bye")
	for range 200 {
		c.mu.Lock()
		left := len(c.conns) + len(c.heads) + c.logs.n + len(c.logs.byAddr)
		c.mu.Unlock()
		if left == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("subscriptions of a closed connection were kept")
}

func TestNewHeadIsGethsHeader(t *testing.T) {
	// geth v1.17.10's eth_getBlockByNumber and newHeads for one dev block.
	block := `{"baseFeePerGas":"0x2ab4a79a","blobGasUsed":"0x0","difficulty":"0x0","excessBlobGas":"0x0","extraData":"0x","gasLimit":"0x2aea540","gasUsed":"0x0","hash":"0x0ce2","logsBloom":"0x00","miner":"0x0000000000000000000000000000000000000000","mixHash":"0x1a","nonce":"0x0000000000000000","number":"0x2","parentBeaconBlockRoot":"0x00","parentHash":"0x9b","receiptsRoot":"0x56","requestsHash":"0xe3","sha3Uncles":"0x1d","size":"0x2ab","stateRoot":"0x7c","timestamp":"0x6a","transactions":[],"transactionsRoot":"0x56","uncles":[],"withdrawals":[],"withdrawalsRoot":"0x56"}`
	want := `{"parentHash":"0x9b","sha3Uncles":"0x1d","miner":"0x0000000000000000000000000000000000000000","stateRoot":"0x7c","transactionsRoot":"0x56","receiptsRoot":"0x56","logsBloom":"0x00","difficulty":"0x0","number":"0x2","gasLimit":"0x2aea540","gasUsed":"0x0","timestamp":"0x6a","extraData":"0x","mixHash":"0x1a","nonce":"0x0000000000000000","baseFeePerGas":"0x2ab4a79a","withdrawalsRoot":"0x56","blobGasUsed":"0x0","excessBlobGas":"0x0","parentBeaconBlockRoot":"0x00","requestsHash":"0xe3","blockAccessListHash":null,"slotNumber":null,"hash":"0x0ce2"}`
	if got := string(newHead([]byte(block))); got != want {
		t.Fatalf("newHead\n got %s\nwant %s", got, want)
	}
	l := `{"address":"0x1","topics":[],"data":"0x","removed":false}`
	if got := string(removedLog([]byte(l))); got != `{"address":"0x1","topics":[],"data":"0x","removed":true}` {
		t.Fatalf("removed log %s", got)
	}
	if got := string(removedLog([]byte(`{"address":"0x1"}`))); got != `{"address":"0x1","removed":true}` {
		t.Fatalf("removed log without the member %s", got)
	}
}

// isRPCError reports whether err reaches the client as a JSON-RPC error
// with code and msg in its message.
func isRPCError(err error, code int, msg string) bool {
	e := jrpc.ToWire(err)
	return e != nil && e.Code == code && strings.Contains(e.Message, msg)
}

// logNote is a logs notification as a test compares it: the block it came
// from and whether it takes the log back.
type logNote struct {
	block   string
	removed bool
}

// logNotes reads want logs notifications from n and checks that no more come.
func logNotes(t *testing.T, n *notifier, want int) []logNote {
	t.Helper()
	var out []logNote
	for _, x := range n.collect(t, want) {
		var l struct {
			BlockHash string `json:"blockHash"`
			Removed   bool   `json:"removed"`
		}
		if err := json.Unmarshal([]byte(x.result), &l); err != nil {
			t.Fatal(err)
		}
		out = append(out, logNote{l.BlockHash, l.Removed})
	}
	n.quiet(t)
	return out
}

// logsOf is the log notifications of blocks from..to of fork, removed or not.
func logsOf(fork string, from, to uint64, removed bool) []logNote {
	var out []logNote
	for n := from; n <= to; n++ {
		out = append(out, logNote{blockHash(fork, n), removed})
	}
	return out
}

// TestReorgDuringARebuildRemovesOnlyWhatWasSent: the window reloads short
// (a Redis restart) and, while it grows back, the chain reorgs below the
// head subscribers were told. The blocks the new branch replaces are taken
// back, each only from the subscriptions that were sent it, and the new
// branch follows once.
func TestReorgDuringARebuildRemovesOnlyWhatWasSent(t *testing.T) {
	f := newFeed(t, 16)
	f.extend("a", 1, 20, "a")
	c := New("test", f.w, nil, Options{}, nil, nil) // synced by hand
	t.Cleanup(c.Stop)
	c.sync()
	first, second := newNotifier(), newNotifier()
	subscribe(t, c, first, `["logs",{}]`)
	f.extend("a", 21, 24, "a")
	c.sync()
	subscribe(t, c, second, `["logs",{}]`)
	f.extend("a", 25, 25, "a")
	c.sync()
	if got, want := logNotes(t, first, 5), logsOf("a", 21, 25, false); !slices.Equal(got, want) {
		t.Fatalf("before the restart\n got %v\nwant %v", got, want)
	}
	logNotes(t, second, 1)

	// The reload: a fresh window of a few blocks below what was told.
	blocks := []*evm.Block{block("a", 12, "a"), block("a", 13, "a"), block("a", 14, "a")}
	f.seq = 1
	if err := f.w.Reset(&headstore.Snapshot{Gen: "g2", Seq: f.seq, Blocks: blocks}); err != nil {
		t.Fatal(err)
	}
	c.sync()
	for n := uint64(15); n <= 22; n++ {
		f.extend("a", n, n, "a")
		c.sync()
	}
	first.quiet(t) // a window growing back into the chain told sends nothing
	// 23..25 are replaced while the window is still below 25.
	f.extend("b", 23, 23, "a")
	c.sync()
	f.extend("b", 24, 27, "b")
	c.sync()

	want := append(logsOf("a", 23, 25, true), logsOf("b", 23, 23, false)...)
	want = append(want, logsOf("b", 24, 27, false)...)
	if got := logNotes(t, first, len(want)); !slices.Equal(got, want) {
		t.Errorf("subscribed before 21\n got %v\nwant %v", got, want)
	}
	want = append(logsOf("a", 25, 25, true), logsOf("b", 23, 27, false)...)
	if got := logNotes(t, second, len(want)); !slices.Equal(got, want) {
		t.Errorf("subscribed after 24\n got %v\nwant %v", got, want)
	}
}

// TestRemovedLogsOnlyForLogsSent: a subscription started after blocks
// were sent is not sent them again as removed; blocks of a new branch it
// was sent, below where it started, are.
func TestRemovedLogsOnlyForLogsSent(t *testing.T) {
	f := newFeed(t, 16)
	f.extend("a", 1, 8, "a")
	c := New("test", f.w, nil, Options{}, nil, nil)
	t.Cleanup(c.Stop)
	c.sync()
	f.extend("a", 9, 10, "a")
	c.sync()
	n := newNotifier()
	subscribe(t, c, n, `["logs",{}]`) // at 10: sent nothing yet
	drop := func(fork string, from, to uint64) []headstore.Ref {
		var out []headstore.Ref
		for i := from; i <= to; i++ {
			out = append(out, headstore.Ref{Number: i, Hash: blockHash(fork, i)})
		}
		return out
	}
	f.apply(drop("a", 9, 10), block("b", 9, "a"), block("b", 10, "b"), block("b", 11, "b"))
	c.sync()
	if got, want := logNotes(t, n, 3), logsOf("b", 9, 11, false); !slices.Equal(got, want) {
		t.Fatalf("a reorg of blocks sent before it started\n got %v\nwant %v", got, want)
	}
	f.apply(drop("b", 10, 11), block("c", 10, "b"))
	c.sync()
	want := append(logsOf("b", 10, 11, true), logsOf("c", 10, 10, false)...)
	if got := logNotes(t, n, len(want)); !slices.Equal(got, want) {
		t.Fatalf("a reorg of blocks it was sent\n got %v\nwant %v", got, want)
	}
}

// TestForkPoint: what the window proves about the chain told, whether it
// holds the same numbers, fewer, or none of them.
func TestForkPoint(t *testing.T) {
	chain := func(spec ...string) []*evm.Parts {
		// spec: "fork:from-to:parentFork"
		var out []*evm.Parts
		for _, sp := range spec {
			var fork, parent string
			var from, to uint64
			if _, err := fmt.Sscanf(strings.ReplaceAll(sp, ":", " "), "%s %d-%d %s", &fork, &from, &to, &parent); err != nil {
				t.Fatalf("spec %q: %v", sp, err)
			}
			for n := from; n <= to; n++ {
				p, err := evm.Split(block(fork, n, parent))
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, p)
				parent = fork
			}
		}
		return out
	}
	told := func(ps []*evm.Parts) []toldBlock {
		out := make([]toldBlock, len(ps))
		for i, p := range ps {
			out[i] = toldBlock{Parts: p, at: 1}
		}
		return out
	}
	view := told(chain("a:10-20:a")) // index i is block 10+i
	tests := []struct {
		name      string
		give      []*evm.Parts
		wantFork  int
		wantAdded string // first-last added, "" for none
		missed    uint64
	}{
		{"the same chain, one more", chain("a:5-21:a"), 11, "21-21", 0},
		{"rebuilt, still below the head told", chain("a:12-15:a"), 11, "", 0},
		{"rebuilt, passed the head told", chain("a:12-22:a"), 11, "21-22", 0},
		{"a reorg inside both", chain("a:5-14:a", "b:15-18:a"), 5, "15-18", 0},
		{"rebuilt on another branch below the head told", chain("a:12-14:a", "b:15-16:a"), 5, "15-16", 0},
		{"above the head told, its parent another block", chain("b:21-23:b"), 10, "21-23", 1},
		{"above the head told, its child", chain("a:21-23:a"), 11, "21-23", 0},
		{"past a gap: nothing proven", chain("b:30-32:b"), 11, "30-32", 9},
		{"below what was told, the child of another block", chain("b:4-9:b"), 0, "4-9", 0},
		{"below what was told, its parent", chain("a:4-9:a"), 11, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fork := forkPoint(view, tt.give)
			added, missed := above(view[:fork], tt.give)
			got := ""
			if len(added) > 0 {
				got = fmt.Sprintf("%d-%d", added[0].Number, added[len(added)-1].Number)
			}
			if fork != tt.wantFork || got != tt.wantAdded || missed != tt.missed {
				t.Errorf("fork at %d, added %q, missed %d; want %d, %q, %d", fork, got, missed, tt.wantFork, tt.wantAdded, tt.missed)
			}
		})
	}
}
