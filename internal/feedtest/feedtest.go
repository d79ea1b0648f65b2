// Package feedtest is an indexer of venn's JetStream feed for tests: a
// nats.go durable consumer that applies every event to its copy of the
// chain, acks it, and fails the test on anything an indexer could not
// apply (a block that does not go on from its head, a reorg removing what
// it does not hold, a stream sequence skipped, a message id seen twice).
// It decodes the events by the schema docs/nats.md documents, not with
// package natsfeed, so it checks what a client outside venn sees.
package feedtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// WaitLimit bounds Until and Consumer.
const WaitLimit = 20 * time.Second

// Ref names a block.
type Ref struct {
	Number uint64 `json:"number"`
	Hash   string `json:"hash"`
}

// Event is one event as the docs describe it.
type Event struct {
	Type      string          `json:"type"`
	Number    uint64          `json:"number"`
	Hash      string          `json:"hash"`
	Parent    string          `json:"parent"`
	Block     json.RawMessage `json:"block"`
	Receipts  json.RawMessage `json:"receipts"`
	Common    *Ref            `json:"common"`
	Removed   []Ref           `json:"removed"`
	Added     []Ref           `json:"added"`
	From      uint64          `json:"from"`
	To        uint64          `json:"to"`
	ToHash    string          `json:"to_hash"`
	Reason    string          `json:"reason"`
	Safe      uint64          `json:"safe"`
	Finalized uint64          `json:"finalized"`
}

func decode(data []byte) (*Event, error) {
	var ev Event
	if err := json.Unmarshal(data, &ev); err != nil {
		return nil, err
	}
	switch ev.Type {
	case "block", "reorg", "gap", "finality":
		return &ev, nil
	}
	return nil, fmt.Errorf("unknown event type %q", ev.Type)
}

// indexer is a consumer of the stream as an indexer is: a durable
// consumer that applies each event to its copy of the chain, acks it,
// and checks the stream as it goes.
type Indexer struct {
	t    testing.TB
	name string
	// Chain is the block hash by number ("" for a block in a gap, to be
	// fetched from history); Head is its head, HasHead false until the
	// first event.
	Chain   map[uint64]string
	Head    uint64
	HasHead bool
	// Safe and Final are the finality told.
	Safe, Final uint64
	// Reorgs and Gaps are the reorg and gap events applied, in order;
	// Blocks counts the block events, Msgs every event.
	Reorgs []*Event
	Gaps   []*Event
	Blocks int
	Msgs   int
	// Redelivered counts messages delivered again (the server lost an
	// ack when it was killed, or the indexer died before it acked) and
	// skipped, as an indexer that keeps its
	// last applied stream sequence with its data skips them.
	Redelivered int
	// OnBlock, when set, is called with every block event applied.
	OnBlock func(*Event)

	seqs []uint64 // the stream sequences applied, in order
	ids  map[string]bool
}

// New returns an empty indexer; name labels its failures.
func New(t testing.TB, name string) *Indexer {
	return &Indexer{t: t, name: name, Chain: map[uint64]string{}, ids: map[string]bool{}}
}

// apply applies one message, checks that it follows on, and acks it.
func (x *Indexer) apply(m jetstream.Msg) {
	x.t.Helper()
	x.take(m)
	if err := m.DoubleAck(context.Background()); err != nil {
		x.t.Fatal(err)
	}
}

// take applies one message and checks that it follows on; a message
// delivered again is skipped. It does not ack.
func (x *Indexer) take(m jetstream.Msg) {
	x.t.Helper()
	meta, err := m.Metadata()
	if err != nil {
		x.t.Fatal(err)
	}
	if n := len(x.seqs); n > 0 && meta.Sequence.Stream <= x.seqs[n-1] {
		// Delivered again: the server lost the ack (it was killed).
		// An indexer keeps the last stream sequence it applied with its
		// data, and skips what it already has.
		x.Redelivered++
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
	x.Msgs++
	ev, err := decode(m.Data())
	if err != nil {
		x.t.Fatal(err)
	}
	switch ev.Type {
	case "block":
		if x.HasHead && ev.Number != x.Head+1 {
			x.t.Fatalf("%s: block %d after head %d", x.name, ev.Number, x.Head)
		}
		if h, ok := x.Chain[ev.Number-1]; ok && h != "" && h != ev.Parent {
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
		x.Chain[ev.Number] = ev.Hash
		x.Head, x.HasHead = ev.Number, true
		x.Blocks++
		if x.OnBlock != nil {
			x.OnBlock(ev)
		}
	case "reorg":
		if h, ok := x.Chain[ev.Common.Number]; ok && h != "" && h != ev.Common.Hash {
			x.t.Fatalf("%s: reorg's common block %d %s is not the chain's %s", x.name, ev.Common.Number, ev.Common.Hash, h)
		}
		for _, r := range ev.Removed {
			if x.Chain[r.Number] != r.Hash {
				x.t.Fatalf("%s: reorg removes %d %s, which the chain does not hold (%s)", x.name, r.Number, r.Hash, x.Chain[r.Number])
			}
		}
		for n := range x.Chain {
			if n > ev.Common.Number {
				delete(x.Chain, n)
			}
		}
		x.Head, x.HasHead = ev.Common.Number, true
		x.Reorgs = append(x.Reorgs, ev)
	case "gap":
		if x.HasHead && ev.From != x.Head+1 {
			x.t.Fatalf("%s: gap from %d after head %d", x.name, ev.From, x.Head)
		}
		for n := ev.From; n <= ev.To; n++ {
			x.Chain[n] = "" // to fetch from history
		}
		x.Chain[ev.To] = ev.ToHash
		x.Head, x.HasHead = ev.To, true
		x.Gaps = append(x.Gaps, ev)
	case "finality":
		if ev.Safe < x.Safe || ev.Finalized < x.Final {
			x.t.Fatalf("%s: finality went down: %d/%d after %d/%d", x.name, ev.Safe, ev.Finalized, x.Safe, x.Final)
		}
		x.Safe, x.Final = ev.Safe, ev.Finalized
	}
}

// AckWait is how long the test consumers' server waits for an ack
// before it delivers a message again: short, so that a test of an
// indexer killed mid-batch waits little.
const AckWait = 2 * time.Second

// Consumer is the durable consumer of stream by that name, from the
// stream's start, created once the stream exists, set up as docs/nats.md
// tells an indexer to: one message pending at a time (MaxAckPending 1),
// so that after a crash the server delivers the unacked event again
// before any newer one, and the events stay in stream order.
func Consumer(t testing.TB, js jetstream.JetStream, stream, durable string) jetstream.Consumer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WaitLimit)
	defer cancel()
	for {
		// The leader creates the stream: wait for it.
		c, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
			Durable: durable, AckPolicy: jetstream.AckExplicitPolicy, DeliverPolicy: jetstream.DeliverAllPolicy,
			MaxAckPending: 1, AckWait: AckWait,
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

// Crash is the indexer killed mid-batch: it fetches what the consumer
// delivers (waiting for at least one message), applies the first message
// without acking it when applied is set (its data committed, the process
// killed before the ack), and drops the rest unacked and unapplied. The
// server delivers them all again once their ack wait ends. It returns how
// many messages it left unacked.
func (x *Indexer) Crash(c jetstream.Consumer, applied bool) int {
	x.t.Helper()
	deadline := time.Now().Add(WaitLimit)
	for {
		batch, err := c.Fetch(64, jetstream.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			x.t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			if n == 0 && applied {
				x.take(m)
			}
			n++
		}
		if n > 0 {
			return n
		}
		if time.Now().After(deadline) {
			x.t.Fatalf("%s: nothing delivered to crash on within %s", x.name, WaitLimit)
		}
	}
}

// Until consumes until done reports true, within WaitLimit.
func (x *Indexer) Until(c jetstream.Consumer, done func() bool) {
	x.t.Helper()
	deadline := time.Now().Add(WaitLimit)
	for !done() {
		if time.Now().After(deadline) {
			x.t.Fatalf("%s: not done after %s: head %d, %d messages", x.name, WaitLimit, x.Head, x.Msgs)
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

// Matches fails unless every block x holds is canonical's (by number)
// and x holds every one of canonical's, or has it in a gap to fetch.
func Matches(t testing.TB, x *Indexer, canonical map[uint64]string) {
	t.Helper()
	for n, h := range x.Chain {
		if w, ok := canonical[n]; ok && h != "" && h != w {
			t.Errorf("%s: block %d is %s, the chain's is %s", x.name, n, h, w)
		}
	}
	for n, h := range canonical {
		if got, ok := x.Chain[n]; ok && got == "" {
			continue // in a gap: the indexer fetches it from history
		}
		if x.Chain[n] != h {
			t.Errorf("%s: block %d: has %q, want %s", x.name, n, x.Chain[n], h)
		}
	}
}
