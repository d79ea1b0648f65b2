package natsfeed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/internal/natstest"
)

const (
	testChain  = "eth"
	testPrefix = "venn"
	waitLimit  = 20 * time.Second
)

// blockHash is block n's hash on fork.
func blockHash(fork string, n uint64) string {
	h := sha256.Sum256([]byte(fork + "/" + strconv.FormatUint(n, 10)))
	return "0x" + hex.EncodeToString(h[:])
}

// testBlock is block n with one transaction whose receipt has one log.
func testBlock(n uint64, hash, parent string) *evm.Block {
	tx := blockHash("tx"+hash, n)
	return &evm.Block{
		Number: n, Hash: hash, Parent: parent,
		Raw: json.RawMessage(fmt.Sprintf(`{"number":"0x%x","hash":"%s","parentHash":"%s","timestamp":"0x%x",`+
			`"transactions":[{"hash":"%s","blockHash":"%s","blockNumber":"0x%x","transactionIndex":"0x0"}]}`,
			n, hash, parent, 1_700_000_000+n, tx, hash, n)),
		Receipts: json.RawMessage(fmt.Sprintf(`[{"transactionHash":"%s","transactionIndex":"0x0","blockHash":"%s",`+
			`"blockNumber":"0x%x","status":"0x1","logs":[{"address":"0x00000000000000000000000000000000000000aa",`+
			`"topics":["%s"],"data":"0x","blockHash":"%s","blockNumber":"0x%x","transactionHash":"%s",`+
			`"transactionIndex":"0x0","logIndex":"0x0","removed":false}]}]`, tx, hash, n, tx, hash, n, tx)),
	}
}

// chainOf is blocks from..to of fork, the first a child of parent.
func chainOf(fork, parent string, from, to uint64) []*evm.Block {
	var out []*evm.Block
	for n := from; n <= to; n++ {
		b := testBlock(n, blockHash(fork, n), parent)
		out = append(out, b)
		parent = b.Hash
	}
	return out
}

// feed is a chain's head store and the leader's writes to it, as the
// stalker makes them, with replicas that follow it into windows.
type feed struct {
	t      *testing.T
	store  *headstore.Memory
	size   int
	mu     sync.Mutex
	chain  []*evm.Block // canonical, as published
	safe   uint64
	final  uint64
	stopWG sync.WaitGroup
	cancel context.CancelFunc
	ctx    context.Context
}

func newFeed(t *testing.T, size int) *feed {
	ctx, cancel := context.WithCancel(context.Background())
	f := &feed{t: t, store: headstore.NewMemory(size), size: size, ctx: ctx, cancel: cancel}
	t.Cleanup(func() { f.cancel(); f.stopWG.Wait() })
	return f
}

// window returns a replica's window following the store.
func (f *feed) window() *headstore.Window {
	w := headstore.NewWindow(f.size)
	fl := headstore.NewFollower(testChain, f.store, w, nil, nil)
	f.stopWG.Go(func() { fl.Run(f.ctx) })
	return w
}

// publish appends ev to the store.
func (f *feed) publish(ev *headstore.Event) {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	ev.Safe, ev.Finalized = f.safe, f.final
	if err := f.store.Publish(context.Background(), headstore.MemoryEpoch, ev); err != nil {
		f.t.Fatal(err)
	}
	for _, d := range ev.Dropped {
		for i, b := range f.chain {
			if b.Hash == d.Hash {
				f.chain = f.chain[:i]
				break
			}
		}
	}
	f.chain = append(f.chain, ev.Added...)
}

// extend adds n blocks of fork on top, one event each.
func (f *feed) extend(fork string, n int) {
	f.t.Helper()
	for range n {
		f.mu.Lock()
		var top uint64
		parent := blockHash("genesis", 0)
		if l := len(f.chain); l > 0 {
			top, parent = f.chain[l-1].Number, f.chain[l-1].Hash
		}
		f.mu.Unlock()
		f.publish(&headstore.Event{Added: chainOf(fork, parent, top+1, top+1)})
	}
}

// reorg replaces the blocks above number at with n blocks of fork.
func (f *feed) reorg(at uint64, fork string, n int) {
	f.t.Helper()
	f.mu.Lock()
	var dropped []headstore.Ref
	parent := ""
	for _, b := range f.chain {
		if b.Number > at {
			dropped = append(dropped, headstore.Ref{Number: b.Number, Hash: b.Hash})
		}
		if b.Number == at {
			parent = b.Hash
		}
	}
	f.mu.Unlock()
	f.publish(&headstore.Event{Dropped: dropped, Added: chainOf(fork, parent, at+1, at+uint64(n))})
}

func (f *feed) setFinality(safe, final uint64) {
	f.mu.Lock()
	f.safe, f.final = safe, final
	f.mu.Unlock()
}

// head is the canonical head's hash.
func (f *feed) head() (uint64, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.chain[len(f.chain)-1]
	return b.Number, b.Hash
}

// canonical is the canonical hash of every block the feed published, by
// number.
func (f *feed) canonical() map[uint64]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[uint64]string{}
	for _, b := range f.chain {
		out[b.Number] = b.Hash
	}
	return out
}

// leader runs a publisher for w until stop is called.
type leader struct {
	p    *Publisher
	stop func()
}

func (f *feed) lead(js jetstream.JetStream, w *headstore.Window, cfg Config) *leader {
	log := slog.New(slog.NewTextHandler(tlog{f.t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p := New(Options{Chain: testChain, Prefix: testPrefix, Config: cfg, JS: js, Store: f.store, Window: w, Logger: log})
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.Lead(ctx, 1) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	f.t.Cleanup(stop)
	return &leader{p: p, stop: stop}
}

// indexer is a consumer of the stream as an indexer is: a durable
// consumer that applies each event to its copy of the chain, acks it,
// and checks the stream as it goes.
type indexer struct {
	t       *testing.T
	name    string
	chain   map[uint64]string
	head    uint64
	hasHead bool
	safe    uint64
	final   uint64
	reorgs  []*Event
	gaps    []*Event
	blocks  int
	seqs    []uint64 // the stream sequences seen, in order
	ids     map[string]bool
	msgs    int
	// redelivered counts messages delivered again after a server crash.
	redelivered int
}

func newIndexer(t *testing.T, name string) *indexer {
	return &indexer{t: t, name: name, chain: map[uint64]string{}, ids: map[string]bool{}}
}

// apply applies one message and checks that it follows on.
func (x *indexer) apply(m jetstream.Msg) {
	x.t.Helper()
	meta, err := m.Metadata()
	if err != nil {
		x.t.Fatal(err)
	}
	if n := len(x.seqs); n > 0 && meta.Sequence.Stream <= x.seqs[n-1] {
		// Delivered again: the server lost the ack (it was killed).
		// An indexer keeps the last stream sequence it applied with its
		// data, and skips what it already has.
		x.redelivered++
		if err := m.Ack(); err != nil {
			x.t.Fatal(err)
		}
		return
	}
	if n := len(x.seqs); n > 0 && meta.Sequence.Stream != x.seqs[n-1]+1 {
		x.t.Fatalf("%s: stream seq %d after %d", x.name, meta.Sequence.Stream, x.seqs[n-1])
	}
	x.seqs = append(x.seqs, meta.Sequence.Stream)
	id := m.Headers().Get(nats.MsgIdHdr)
	if id == "" || x.ids[id] {
		x.t.Fatalf("%s: message id %q empty or seen before", x.name, id)
	}
	x.ids[id] = true
	x.msgs++
	ev, err := Decode(m.Data())
	if err != nil {
		x.t.Fatal(err)
	}
	switch ev.Type {
	case TypeBlock:
		if x.hasHead && ev.Number != x.head+1 {
			x.t.Fatalf("%s: block %d after head %d", x.name, ev.Number, x.head)
		}
		if h, ok := x.chain[ev.Number-1]; ok && h != "" && h != ev.Parent {
			x.t.Fatalf("%s: block %d's parent %s is not the chain's %s", x.name, ev.Number, ev.Parent, h)
		}
		var hdr struct {
			Hash         string            `json:"hash"`
			Transactions []json.RawMessage `json:"transactions"`
		}
		if err := json.Unmarshal(ev.Block, &hdr); err != nil || hdr.Hash != ev.Hash {
			x.t.Fatalf("%s: block %d: body %s does not name %s (%v)", x.name, ev.Number, ev.Block, ev.Hash, err)
		}
		for _, tx := range hdr.Transactions {
			if tx[0] != '"' {
				x.t.Fatalf("%s: block %d: transactions are not hashes: %s", x.name, ev.Number, tx)
			}
		}
		var rcs []json.RawMessage
		if err := json.Unmarshal(ev.Receipts, &rcs); err != nil || len(rcs) != len(hdr.Transactions) {
			x.t.Fatalf("%s: block %d: %d receipts for %d transactions (%v)", x.name, ev.Number, len(rcs), len(hdr.Transactions), err)
		}
		x.chain[ev.Number] = ev.Hash
		x.head, x.hasHead = ev.Number, true
		x.blocks++
	case TypeReorg:
		if h, ok := x.chain[ev.Common.Number]; ok && h != "" && h != ev.Common.Hash {
			x.t.Fatalf("%s: reorg's common block %d %s is not the chain's %s", x.name, ev.Common.Number, ev.Common.Hash, h)
		}
		for _, r := range ev.Removed {
			if x.chain[r.Number] != r.Hash {
				x.t.Fatalf("%s: reorg removes %d %s, which the chain does not hold (%s)", x.name, r.Number, r.Hash, x.chain[r.Number])
			}
		}
		for n := range x.chain {
			if n > ev.Common.Number {
				delete(x.chain, n)
			}
		}
		x.head, x.hasHead = ev.Common.Number, true
		x.reorgs = append(x.reorgs, ev)
	case TypeGap:
		if x.hasHead && ev.From != x.head+1 {
			x.t.Fatalf("%s: gap from %d after head %d", x.name, ev.From, x.head)
		}
		for n := ev.From; n <= ev.To; n++ {
			x.chain[n] = "" // to fetch from history
		}
		x.chain[ev.To] = ev.ToHash
		x.head, x.hasHead = ev.To, true
		x.gaps = append(x.gaps, ev)
	case TypeFinality:
		if ev.Safe < x.safe || ev.Finalized < x.final {
			x.t.Fatalf("%s: finality went down: %d/%d after %d/%d", x.name, ev.Safe, ev.Finalized, x.safe, x.final)
		}
		x.safe, x.final = ev.Safe, ev.Finalized
	}
	if err := m.DoubleAck(context.Background()); err != nil {
		x.t.Fatal(err)
	}
}

// consumer is a durable consumer of the stream.
func consumer(t *testing.T, js jetstream.JetStream, stream, durable string) jetstream.Consumer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for {
		// The leader creates the stream: wait for it.
		c, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
			Durable: durable, AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
		})
		if err == nil {
			return c
		}
		if !errors.Is(err, jetstream.ErrStreamNotFound) || ctx.Err() != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// until consumes until done reports true, within waitLimit.
func (x *indexer) until(c jetstream.Consumer, done func() bool) {
	x.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !done() {
		if time.Now().After(deadline) {
			x.t.Fatalf("%s: not done after %s: head %d, %d messages", x.name, waitLimit, x.head, x.msgs)
		}
		batch, err := c.Fetch(64, jetstream.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			x.t.Fatal(err)
		}
		for m := range batch.Messages() {
			x.apply(m)
		}
	}
}

// at reports whether the indexer's chain ends at the feed's head.
func (x *indexer) at(f *feed) func() bool {
	return func() bool {
		n, h := f.head()
		return x.hasHead && x.head == n && x.chain[n] == h
	}
}

// matches fails unless every block the indexer holds is canonical.
func (x *indexer) matches(f *feed) {
	x.t.Helper()
	want := f.canonical()
	for n, h := range x.chain {
		if w, ok := want[n]; ok && h != "" && h != w {
			x.t.Errorf("%s: block %d is %s, the chain's is %s", x.name, n, h, w)
		}
	}
	for n, h := range want {
		if got, ok := x.chain[n]; ok && got == "" {
			continue // in a gap: the indexer fetches it from history
		}
		if x.chain[n] != h {
			x.t.Errorf("%s: block %d: has %q, want %s", x.name, n, x.chain[n], h)
		}
	}
}

func startNATS(t *testing.T) (*natstest.Server, jetstream.JetStream) {
	t.Helper()
	srv := natstest.Start(t, natstest.Options{})
	return srv, jsFor(t, srv)
}

func jsFor(t *testing.T, srv *natstest.Server) jetstream.JetStream {
	t.Helper()
	nc := srv.Connect(nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// tlog writes a publisher's log to the test's.
type tlog struct{ t *testing.T }

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
