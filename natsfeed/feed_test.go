package natsfeed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	"github.com/venn-gateway/venn/internal/feedtest"
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

// at reports whether the indexer's chain ends at the feed's head.
func at(x *feedtest.Indexer, f *feed) func() bool {
	return func() bool {
		n, h := f.head()
		return x.HasHead && x.Head == n && x.Chain[n] == h
	}
}

// matches fails unless every block the indexer holds is the feed's
// canonical one, and it holds every one of them (or has it in a gap).
func matches(t *testing.T, x *feedtest.Indexer, f *feed) {
	t.Helper()
	feedtest.Matches(t, x, f.canonical())
}
