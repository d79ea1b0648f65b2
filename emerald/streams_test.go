package emerald

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/venn-gateway/venn/emerald/pb"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/internal/gethtest"
	"github.com/venn-gateway/venn/internal/simnode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
	rstatus "github.com/venn-gateway/venn/remotes/status"
	"github.com/venn-gateway/venn/subcenter"
)

// waitLimit bounds every wait for an event.
const waitLimit = 20 * time.Second

// simFeed drives a head window from the simulated backend the way the
// leader's feed does: each sync publishes one event taking the window from
// the chain it holds to the node's, the blocks that left it dropped.
type simFeed struct {
	t   *testing.T
	sim *simnode.Node
	w   *headstore.Window
	seq uint64
	// held is the chain the window was given, by number.
	held map[uint64]string
	head uint64
}

func newSimFeed(t *testing.T, sim *simnode.Node) *simFeed {
	f := &simFeed{t: t, sim: sim, w: headstore.NewWindow(64), held: map[uint64]string{}}
	f.w.SetLive(true)
	f.sync()
	return f
}

// sync brings the window to the node's head.
func (f *simFeed) sync() {
	f.t.Helper()
	h := f.sim.Head(f.t)
	n, hash := h.Number.Uint64(), strings.ToLower(h.Hash().Hex())
	var added []*evm.Block
	for n > 0 && f.held[n] != hash {
		b := f.block(hash)
		added = append([]*evm.Block{b}, added...)
		n, hash = n-1, b.Parent
		if len(added) > 32 && len(f.held) > 0 {
			f.t.Fatal("sync: no fork point within 32 blocks")
		}
		if len(f.held) == 0 && len(added) == 16 {
			break // the first sync: the recent blocks are enough
		}
	}
	var dropped []headstore.Ref
	for m := n + 1; m <= f.head; m++ {
		dropped = append(dropped, headstore.Ref{Number: m, Hash: f.held[m]})
		delete(f.held, m)
	}
	if len(added) == 0 && len(dropped) == 0 {
		return
	}
	f.seq++
	if err := f.w.Apply(&headstore.Event{Seq: f.seq, Dropped: dropped, Added: added}); err != nil {
		f.t.Fatal(err)
	}
	for _, b := range added {
		f.held[b.Number] = b.Hash
	}
	f.head = h.Number.Uint64()
}

func (f *simFeed) block(hash string) *evm.Block {
	f.t.Helper()
	raw := rpcCall(f.t, f.sim.HTTPURL(), "eth_getBlockByHash", hash, true)
	rcpts := rpcCall(f.t, f.sim.HTTPURL(), "eth_getBlockReceipts", hash)
	b, err := evm.ParseBlock(raw, rcpts)
	if err != nil {
		f.t.Fatal(err)
	}
	return b
}

// commit seals n blocks and syncs the window.
func (f *simFeed) commit(n int) {
	f.t.Helper()
	for range n {
		f.sim.Commit()
	}
	f.sync()
}

// noKeepAlive leaves no idle connection behind for goleak to find.
var noKeepAlive = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

func rpcCall(t *testing.T, url, method string, params ...any) json.RawMessage {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	resp, err := noKeepAlive.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var r struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(data, &r); err != nil || r.Error != nil {
		t.Fatalf("%s: %s %v", method, data, err)
	}
	return r.Result
}

// chainCaller is the router's eth_subscribe path: the subcenter.
type chainCaller struct {
	c *subcenter.Center
	w *headstore.Window
}

func (ch *chainCaller) ServeRPC(ctx context.Context, req *jrpc.Request) (json.RawMessage, error) {
	switch req.Method {
	case "eth_subscribe":
		return ch.c.Subscribe(ctx, req.Params)
	case "eth_unsubscribe":
		return ch.c.Unsubscribe(ctx, req.Params)
	}
	return nil, &jrpc.Error{Code: jrpc.CodeMethodNotFound, Message: "not here"}
}

func (ch *chainCaller) Window() *headstore.Window { return ch.w }

func (ch *chainCaller) Remotes() []rstatus.Remote {
	n, _, _ := ch.w.Head()
	return []rstatus.Remote{{Name: "sim", Tier: "primary", InRotation: true, Head: n,
		Availability: []rstatus.Availability{{Kind: "state", Oldest: 1}, {Kind: "logs"}}}}
}

// table is a Table a test changes, as the app's reload does.
type table struct {
	mu      sync.Mutex
	list    []Chain
	changed chan struct{}
}

func newTable(list ...Chain) *table { return &table{list: list, changed: make(chan struct{})} }

func (t *table) Chains() []Chain {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.list)
}

func (t *table) Changed() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.changed
}

// set serves list from now on, as a reload does.
func (t *table) set(list ...Chain) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.list = list
	close(t.changed)
	t.changed = make(chan struct{})
}

// rig is a chain fed from the simulated backend, its subcenter, and the
// streams served over gRPC and its subscriptions over WebSocket.
type rig struct {
	sim   *simnode.Node
	feed  *simFeed
	ch    *chainCaller
	srv   *Server
	table *table
	chain Chain  // the chain served, in table
	grpc  string // gRPC address
	ws    string // WebSocket URL
}

const testRef = pb.ChainRef_CHAIN_ETHEREUM__MAINNET

func newRig(t *testing.T, opts subcenter.Options, heartbeat time.Duration) *rig {
	sim := simnode.Start(t)
	f := newSimFeed(t, sim)
	c := subcenter.New("sim", f.w, nil, opts, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	ch := &chainCaller{c: c, w: f.w}

	js := jrpc.NewServer(jrpc.Options{})
	js.Handle("sim", jrpc.HandlerFunc(ch.ServeRPC))
	chain := Chain{Name: "sim", ChainID: 1, Remotes: ch.Remotes, Window: f.w,
		Ready: func() bool { return true }, Head: func() (uint64, bool) { return f.w.Latest() }}
	tb := newTable(chain)
	srv := New(Config{}, Options{Addr: "127.0.0.1:0"}, js, tb)
	srv.Heartbeat = heartbeat
	if err := srv.Start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	lis := srv.Addr()
	hs := httptest.NewServer(js.Handler())
	t.Cleanup(hs.Close)
	return &rig{srv: srv, sim: sim, feed: f, ch: ch, table: tb, chain: chain, grpc: lis.String(),
		ws: "ws" + strings.TrimPrefix(hs.URL, "http") + "/sim"}
}

func (r *rig) client(t *testing.T, opts ...grpc.DialOption) pb.BlockchainClient {
	t.Helper()
	conn, err := grpc.NewClient(r.grpc, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewBlockchainClient(conn)
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

func TestSubscribeHeadReportsReorgDepth(t *testing.T) {
	r := newRig(t, subcenter.Options{}, 0)
	r.feed.commit(1)
	heads, err := r.client(t).SubscribeHead(waitCtx(t), &pb.Chain{Type: testRef})
	if err != nil {
		t.Fatal(err)
	}
	recv := func() *pb.ChainHead {
		t.Helper()
		h, err := heads.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	first := recv()
	base := r.sim.Head(t)
	if first.Height != base.Number.Uint64() || "0x"+first.BlockId != strings.ToLower(base.Hash().Hex()) {
		t.Fatalf("first head %d %s, want the current head %d %s", first.Height, first.BlockId, base.Number, base.Hash())
	}
	if first.Timestamp != base.Time*1000 || len(first.Weight) != 0 || first.Chain != testRef {
		t.Fatalf("first head: timestamp %d weight %x chain %v", first.Timestamp, first.Weight, first.Chain)
	}
	if len(first.LowerBounds) == 0 {
		t.Fatal("no lower bounds")
	}
	r.feed.commit(2)
	for i := range 2 {
		if h := recv(); h.Height != base.Number.Uint64()+uint64(i)+1 || h.Reorg != 0 {
			t.Fatalf("head %d: height %d reorg %d", i, h.Height, h.Reorg)
		}
	}
	// Two blocks leave; a branch of three takes their place.
	r.sim.Fork(t, base.Hash())
	r.feed.commit(3)
	parent := strings.TrimPrefix(strings.ToLower(base.Hash().Hex()), "0x")
	for i := range 3 {
		h := recv()
		want := uint64(0)
		if i == 0 {
			want = 2
		}
		if h.Height != base.Number.Uint64()+uint64(i)+1 || h.Reorg != want || h.ParentBlockId != parent {
			t.Fatalf("after the fork, head %d: height %d reorg %d parent %s, want reorg %d parent %s",
				i, h.Height, h.Reorg, h.ParentBlockId, want, parent)
		}
		parent = h.BlockId
	}
	if got := "0x" + parent; got != strings.ToLower(r.sim.Head(t).Hash().Hex()) {
		t.Fatalf("last head %s, the node's is %s", got, r.sim.Head(t).Hash())
	}
}

// wsResults subscribes over WebSocket and returns a reader of its
// notifications' results, byte for byte.
func wsResults(t *testing.T, url, params string) func() json.RawMessage {
	t.Helper()
	ctx := waitCtx(t)
	ws, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	if err := ws.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_subscribe","params":`+params+`}`)); err != nil {
		t.Fatal(err)
	}
	read := func() map[string]json.RawMessage {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	if reply := read(); reply["result"] == nil {
		t.Fatalf("subscribe: %v", reply)
	}
	return func() json.RawMessage {
		var p struct {
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(read()["params"], &p); err != nil {
			t.Fatal(err)
		}
		return p.Result
	}
}

func TestNativeSubscribeLogsMatchWebSocketThroughAReorg(t *testing.T) {
	r := newRig(t, subcenter.Options{}, 0)
	contract := r.sim.Deploy(t, common.FromHex(gethtest.EmitterCode()))
	r.feed.sync()
	filter := fmt.Sprintf(`{"address":%q}`, strings.ToLower(contract.Hex()))
	ws := wsResults(t, r.ws, `["logs",`+filter+`]`)
	stream, err := r.client(t).NativeSubscribe(waitCtx(t), &pb.NativeSubscribeRequest{
		Chain: testRef, Method: "logs", Payload: []byte(filter), UnsubscribeMethod: "eth_unsubscribe"})
	if err != nil {
		t.Fatal(err)
	}
	// The subscription is in place once its stream answers: a heartbeat
	// would do, but a first notification is what the test waits for.
	ping := func(n uint64) {
		r.sim.Send(t, contract, common.FromHex(gethtest.Topic(n)))
		r.feed.commit(1)
	}
	base := r.sim.Head(t).Hash()
	ping(1)
	ping(2)
	r.sim.Fork(t, base)
	r.feed.commit(3) // the first seals both pings again
	const perCall = 5
	const want = perCall * (2 + 2 + 2) // the logs, removed, then again
	removed := 0
	for i := range want {
		fromWS := ws()
		var item *pb.NativeSubscribeReplyItem
		for item == nil || item.Heartbeat {
			if item, err = stream.Recv(); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(item.Payload, fromWS) {
			t.Fatalf("notification %d:\n grpc %s\n ws   %s", i, item.Payload, fromWS)
		}
		if bytes.Contains(fromWS, []byte(`"removed":true`)) {
			removed++
		}
	}
	if removed != 2*perCall {
		t.Fatalf("%d removed logs, want %d", removed, 2*perCall)
	}
}

func TestNativeSubscribeHeartbeatsAndRefusals(t *testing.T) {
	r := newRig(t, subcenter.Options{}, time.Millisecond)
	c := r.client(t)
	s, err := c.NativeSubscribe(waitCtx(t), &pb.NativeSubscribeRequest{Chain: testRef, Method: "newHeads"})
	if err != nil {
		t.Fatal(err)
	}
	if item, err := s.Recv(); err != nil || !item.Heartbeat || len(item.Payload) != 0 {
		t.Fatalf("first item with nothing to tell: %v %v, want a heartbeat", item, err)
	}
	tests := []struct {
		name string
		give *pb.NativeSubscribeRequest
		want codes.Code
	}{
		{"unknown chain", &pb.NativeSubscribeRequest{Chain: pb.ChainRef_CHAIN_ETHEREUM__SEPOLIA, Method: "newHeads"}, codes.Unavailable},
		{"no method", &pb.NativeSubscribeRequest{Chain: testRef}, codes.InvalidArgument},
		{"unserved", &pb.NativeSubscribeRequest{Chain: testRef, Method: "nope"}, codes.Unimplemented},
		{"bad filter", &pb.NativeSubscribeRequest{Chain: testRef, Method: "logs", Payload: []byte(`{"address":7}`)}, codes.InvalidArgument},
		{"not JSON", &pb.NativeSubscribeRequest{Chain: testRef, Method: "logs", Payload: []byte(`{`)}, codes.InvalidArgument},
		{"unsubscribe method", &pb.NativeSubscribeRequest{Chain: testRef, Method: "newHeads", UnsubscribeMethod: "x"}, codes.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := c.NativeSubscribe(waitCtx(t), tt.give)
			if err == nil {
				_, err = s.Recv()
			}
			if status.Code(err) != tt.want {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

// streams are one of each stream a client opens on testRef: the head, a
// newHeads subscription (dropped by eth_unsubscribe when it ends) and the
// three status streams, over every chain.
type streams struct {
	heads grpc.ServerStreamingClient[pb.ChainHead]
	subs  grpc.ServerStreamingClient[pb.NativeSubscribeReplyItem]
	st    grpc.ServerStreamingClient[pb.ChainStatus]
	cs    grpc.ServerStreamingClient[pb.SubscribeChainStatusResponse]
	ns    grpc.ServerStreamingClient[pb.NodeStatusResponse]
}

func openStreams(t *testing.T, ctx context.Context, c pb.BlockchainClient) *streams {
	t.Helper()
	var s streams
	errs := make([]error, 5)
	s.heads, errs[0] = c.SubscribeHead(ctx, &pb.Chain{Type: testRef})
	s.subs, errs[1] = c.NativeSubscribe(ctx, &pb.NativeSubscribeRequest{Chain: testRef, Method: "newHeads", UnsubscribeMethod: "eth_unsubscribe"})
	s.st, errs[2] = c.SubscribeStatus(ctx, &pb.StatusRequest{})
	s.cs, errs[3] = c.SubscribeChainStatus(ctx, &pb.SubscribeChainStatusRequest{})
	s.ns, errs[4] = c.SubscribeNodeStatus(ctx, &pb.SubscribeNodeStatusRequest{})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return &s
}

func TestCancelledStreamsLeakNoGoroutine(t *testing.T) {
	r := newRig(t, subcenter.Options{}, 0)
	ignore := goleak.IgnoreCurrent()
	conn, err := grpc.NewClient(r.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	c := pb.NewBlockchainClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	s := openStreams(t, ctx, c)
	r.feed.commit(1)
	for _, recv := range []func() error{
		func() error { _, err := s.heads.Recv(); return err },
		func() error { _, err := s.subs.Recv(); return err },
		func() error { _, err := s.st.Recv(); return err },
		func() error { _, err := s.cs.Recv(); return err },
		func() error { _, err := s.ns.Recv(); return err },
	} {
		if err := recv(); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	if _, err := s.subs.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("after cancel: %v", err)
	}
	deadline := time.Now().Add(waitLimit)
	for r.ch.c.Subscribers() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the subcenter still holds the cancelled stream")
		}
		runtime.Gosched()
	}
	conn.Close()
	goleak.VerifyNone(t, ignore)
}

func TestClientThatNeverReadsIsCutOff(t *testing.T) {
	r := newRig(t, subcenter.Options{QueueLen: 16}, 0)
	contract := r.sim.Deploy(t, common.FromHex(gethtest.EmitterCode()))
	r.feed.sync()
	// A fixed window turns off gRPC's window growth: what the client does
	// not read stays unacknowledged, as over a slow network.
	c := r.client(t, grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
	filter := fmt.Sprintf(`{"address":%q}`, strings.ToLower(contract.Hex()))
	slow, err := c.NativeSubscribe(waitCtx(t), &pb.NativeSubscribeRequest{Chain: testRef, Method: "logs", Payload: []byte(filter)})
	if err != nil {
		t.Fatal(err)
	}
	// A reader on the same subcenter keeps up throughout.
	ws := wsResults(t, r.ws, `["logs",`+filter+`]`)
	deadline := time.Now().Add(waitLimit)
	for r.ch.c.Subscribers() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the stream never subscribed")
		}
		runtime.Gosched()
	}
	// Each block's logs carry 8 KiB of data: the client's window fills
	// within a few blocks.
	data := make([]byte, 8<<10) // zeros: the cheapest calldata
	for blocks := 0; r.ch.c.Subscribers() == 2; blocks++ {
		if blocks > 200 {
			t.Fatal("200 blocks and the client that never reads is still served")
		}
		r.sim.Send(t, contract, data)
		r.feed.commit(1)
		for range 5 { // the emitter's logs of one call
			ws()
		}
	}
	for {
		_, err := slow.Recv()
		if err == nil {
			continue
		}
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "too slow") {
			t.Fatalf("the slow stream ended with %v, want RESOURCE_EXHAUSTED", err)
		}
		break
	}
}

func TestStatusStreamsSnapshotThenDeltas(t *testing.T) {
	r := newRig(t, subcenter.Options{}, 0)
	r.feed.commit(1)
	c := r.client(t)
	ctx := waitCtx(t)
	st, err := c.SubscribeStatus(ctx, &pb.StatusRequest{Chains: []pb.ChainRef{testRef}})
	if err != nil {
		t.Fatal(err)
	}
	if s, err := st.Recv(); err != nil || s.Availability != pb.AvailabilityEnum_AVAIL_OK || s.Quorum != 1 || s.Chain != testRef {
		t.Fatalf("status: %v %v", s, err)
	}
	cs, err := c.SubscribeChainStatus(ctx, &pb.SubscribeChainStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	full, err := cs.Recv()
	if err != nil || !full.FullResponse || len(full.ChainDescription.ChainEvent) != 7 {
		t.Fatalf("first chain status: %v %v, want a full one", full, err)
	}
	ns, err := c.SubscribeNodeStatus(ctx, &pb.SubscribeNodeStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	node, err := ns.Recv()
	if err != nil || node.NodeId != "sim" || node.Status.Availability != pb.AvailabilityEnum_AVAIL_OK {
		t.Fatalf("node: %v %v", node, err)
	}
	r.feed.commit(1)
	head := r.sim.Head(t).Number.Uint64()
	delta, err := cs.Recv()
	if err != nil || delta.FullResponse {
		t.Fatalf("after a block: %v %v, want a delta", delta, err)
	}
	var got *pb.HeadEvent
	for _, ev := range delta.ChainDescription.ChainEvent {
		switch e := ev.ChainEvent.(type) {
		case *pb.ChainEvent_Head:
			got = e.Head
		case *pb.ChainEvent_CapabilitiesEvent, *pb.ChainEvent_SupportedSubscriptionsEvent:
			t.Fatalf("delta repeats what did not change: %v", ev)
		}
	}
	if got == nil || got.Height != head {
		t.Fatalf("delta head %v, want %d", got, head)
	}
	if node, err := ns.Recv(); err != nil || node.Status.CurrentHeight != int64(head) {
		t.Fatalf("node after a block: %v %v", node, err)
	}
}

func TestStopEndsStreamsWithAStatus(t *testing.T) {
	r := newRig(t, subcenter.Options{}, 0)
	r.feed.commit(1)
	c := r.client(t)
	ctx := waitCtx(t)
	heads, err := c.SubscribeHead(ctx, &pb.Chain{Type: testRef})
	if err != nil {
		t.Fatal(err)
	}
	subs, err := c.NativeSubscribe(ctx, &pb.NativeSubscribeRequest{Chain: testRef, Method: "newHeads"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.SubscribeStatus(ctx, &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := heads.Recv(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(waitLimit)
	for r.ch.c.Subscribers() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("NativeSubscribe never subscribed")
		}
		runtime.Gosched()
	}
	// Stop waits for the streams: it returns once they ended, well within
	// the stop timeout.
	if err := r.srv.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for name, recv := range map[string]func() error{
		"SubscribeHead":   func() error { _, err := heads.Recv(); return err },
		"NativeSubscribe": func() error { _, err := subs.Recv(); return err },
		"SubscribeStatus": func() error { _, err := st.Recv(); return err },
	} {
		var err error
		for err == nil {
			err = recv()
		}
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "shutting down") {
			t.Fatalf("%s ended with %v, want UNAVAILABLE", name, err)
		}
	}
}

// recvEnd receives from a stream until it ends, and returns its status.
func recvEnd[T any](recv func() (T, error)) error {
	for {
		if _, err := recv(); err != nil {
			return err
		}
	}
}

func describedRefs(t *testing.T, c pb.BlockchainClient) []pb.ChainRef {
	t.Helper()
	d, err := c.Describe(waitCtx(t), &pb.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var refs []pb.ChainRef
	for _, ch := range d.Chains {
		refs = append(refs, ch.Chain)
	}
	return refs
}

// A reload that adds a chain keeps every open stream; the status streams
// and Describe report the chain added, then the one removed; the streams
// on the removed chain end with UNAVAILABLE saying why.
func TestReloadKeepsStreamsAndEndsThoseOfARemovedChain(t *testing.T) {
	r := newRig(t, subcenter.Options{}, 0)
	r.feed.commit(1)
	c := r.client(t)
	s := openStreams(t, waitCtx(t), c)
	heads, subs, st, cs, ns := s.heads, s.subs, s.st, s.cs, s.ns
	first, err := heads.Recv()
	if err != nil {
		t.Fatal(err)
	}
	for _, recv := range []func() error{
		func() error { _, err := st.Recv(); return err },
		func() error { _, err := cs.Recv(); return err },
		func() error { _, err := ns.Recv(); return err },
	} {
		if err := recv(); err != nil {
			t.Fatal(err)
		}
	}
	testkit.WaitFor(t, waitLimit, "NativeSubscribe subscribing", func() bool { return r.ch.c.Subscribers() > 0 })

	// A reload adds Optimism, fed from the same node.
	const opRef = pb.ChainRef_CHAIN_OPTIMISM__MAINNET
	op := newSimFeed(t, r.sim)
	opChain := Chain{Name: "op", ChainID: 10, Window: op.w, Ready: func() bool { return true },
		Head: func() (uint64, bool) { return op.w.Latest() },
		Remotes: func() []rstatus.Remote {
			n, _, _ := op.w.Head()
			return []rstatus.Remote{{Name: "op-node", Tier: "primary", InRotation: true, Head: n}}
		}}
	r.table.set(r.chain, opChain)
	testkit.RecvUntil(t, "SubscribeStatus after the chain was added", st.Recv, func(s *pb.ChainStatus) bool {
		return s.Chain == opRef && s.Availability == pb.AvailabilityEnum_AVAIL_OK
	})
	testkit.RecvUntil(t, "SubscribeChainStatus after the chain was added", cs.Recv, func(m *pb.SubscribeChainStatusResponse) bool {
		return m.ChainDescription.Chain == opRef && m.FullResponse && len(m.ChainDescription.ChainEvent) == 7
	})
	testkit.RecvUntil(t, "SubscribeNodeStatus after the chain was added", ns.Recv, func(m *pb.NodeStatusResponse) bool {
		return m.NodeId == "op-node" && m.Description.Chain == opRef
	})
	if got := describedRefs(t, c); !slices.Equal(got, []pb.ChainRef{testRef, opRef}) {
		t.Fatalf("Describe after the chain was added: %v", got)
	}
	// The streams on the chain kept go on.
	r.feed.commit(1)
	if h, err := heads.Recv(); err != nil || h.Height != first.Height+1 {
		t.Fatalf("SubscribeHead after the reload: %v %v, want height %d", h, err, first.Height+1)
	}
	note := testkit.RecvUntil(t, "NativeSubscribe after the reload", subs.Recv, func(m *pb.NativeSubscribeReplyItem) bool { return !m.Heartbeat })
	if want := fmt.Sprintf(`"number":"0x%x"`, first.Height+1); !bytes.Contains(note.Payload, []byte(want)) {
		t.Fatalf("newHeads after the reload: %s, want %s", note.Payload, want)
	}

	// A reload removes the first chain.
	r.table.set(opChain)
	for name, recv := range map[string]func() error{
		"SubscribeHead":   func() error { return recvEnd(heads.Recv) },
		"NativeSubscribe": func() error { return recvEnd(subs.Recv) },
	} {
		if err := recv(); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "no longer served") {
			t.Fatalf("%s on the removed chain ended with %v, want UNAVAILABLE saying why", name, err)
		}
	}
	testkit.RecvUntil(t, "SubscribeStatus after the chain was removed", st.Recv, func(s *pb.ChainStatus) bool {
		return s.Chain == testRef && s.Availability == pb.AvailabilityEnum_AVAIL_UNAVAILABLE
	})
	testkit.RecvUntil(t, "SubscribeChainStatus after the chain was removed", cs.Recv, func(m *pb.SubscribeChainStatusResponse) bool {
		evs := m.ChainDescription.ChainEvent
		return m.ChainDescription.Chain == testRef && !m.FullResponse && len(evs) > 0 &&
			evs[0].GetStatus().GetAvailability() == pb.AvailabilityEnum_AVAIL_UNAVAILABLE
	})
	testkit.RecvUntil(t, "SubscribeNodeStatus after the chain was removed", ns.Recv, func(m *pb.NodeStatusResponse) bool {
		return m.NodeId == "sim" && m.Status.Availability == pb.AvailabilityEnum_AVAIL_UNAVAILABLE
	})
	if got := describedRefs(t, c); !slices.Equal(got, []pb.ChainRef{opRef}) {
		t.Fatalf("Describe after the chain was removed: %v", got)
	}
	// Served again, it is described whole again.
	r.table.set(r.chain, opChain)
	testkit.RecvUntil(t, "SubscribeChainStatus after the chain came back", cs.Recv, func(m *pb.SubscribeChainStatusResponse) bool {
		return m.ChainDescription.Chain == testRef && m.FullResponse
	})
}
