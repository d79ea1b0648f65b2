package natsfeed

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/internal/feedtest"
	"github.com/venn-gateway/venn/internal/natstest"
)

// TestFeedInOrder: blocks, a reorg with what it removed, finality moves:
// an indexer's chain ends as the feed's, every reorg applied once.
func TestFeedInOrder(t *testing.T) {
	_, js := startNATS(t)
	f := newFeed(t, 32)
	f.extend("a", 5)
	f.lead(js, f.window(), Config{})
	x := feedtest.New(t, "indexer")
	c := feedtest.Consumer(t, js, "VENN_ETH", "idx")
	x.Until(c, at(x, f)) // the stream is live
	f.extend("a", 3)
	f.reorg(6, "b", 4) // 7, 8 leave; 7'..10' come
	f.setFinality(8, 4)
	f.extend("b", 2)
	x.Until(c, at(x, f))
	matches(t, x, f)
	if len(x.Reorgs) != 1 {
		t.Fatalf("reorgs = %d, want 1", len(x.Reorgs))
	}
	r := x.Reorgs[0]
	if r.Common.Number != 6 || len(r.Removed) != 2 || r.Removed[0].Number != 7 || len(r.Added) != 4 {
		t.Errorf("reorg = %+v, want common 6, removed 7 and 8, added 7..10", r)
	}
	if x.Safe != 8 || x.Final != 4 {
		t.Errorf("finality = %d/%d, want 8/4", x.Safe, x.Final)
	}
	if len(x.Gaps) != 0 {
		t.Errorf("gaps = %+v", x.Gaps)
	}
}

// TestFeedResume: an indexer killed mid-stream comes back on its durable
// consumer and goes on exactly after what it acked.
func TestFeedResume(t *testing.T) {
	_, js := startNATS(t)
	f := newFeed(t, 32)
	f.lead(js, f.window(), Config{})
	f.extend("a", 10)
	x := feedtest.New(t, "first")
	c := feedtest.Consumer(t, js, "VENN_ETH", "idx")
	x.Until(c, func() bool { return x.Head >= 4 })
	// The indexer goes away; the chain goes on.
	f.reorg(8, "b", 4)
	f.extend("b", 5)
	again := feedtest.Consumer(t, js, "VENN_ETH", "idx")
	x.Until(again, at(x, f))
	matches(t, x, f)
}

// TestFeedConsumerKilledMidBatch: an indexer killed with events fetched
// and unacked, one of them applied (committed before the ack was sent),
// comes back on its durable consumer while the chain goes on: it gets the
// unacked events again, in stream order before anything newer, skips the
// one it applied, and ends on the chain.
func TestFeedConsumerKilledMidBatch(t *testing.T) {
	_, js := startNATS(t)
	f := newFeed(t, 32)
	f.extend("a", 3)
	f.lead(js, f.window(), Config{})
	x := feedtest.New(t, "indexer")
	c := feedtest.Consumer(t, js, "VENN_ETH", "idx")
	x.Until(c, at(x, f))
	f.extend("a", 4)
	f.reorg(5, "b", 3)
	redelivered := x.Redelivered
	if n := x.Crash(c, true); n < 1 {
		t.Fatalf("crashed with %d messages unacked", n)
	}
	// The chain goes on while the indexer is down, and after.
	f.extend("b", 3)
	x.Until(feedtest.Consumer(t, js, "VENN_ETH", "idx"), at(x, f))
	matches(t, x, f)
	if x.Redelivered <= redelivered {
		t.Errorf("the event applied before the crash was not delivered again (redelivered %d)", x.Redelivered)
	}
	if len(x.Reorgs) != 1 {
		t.Errorf("reorgs = %d, want 1", len(x.Reorgs))
	}
}

// TestFeedNATSRestart: NATS goes away while blocks and a reorg go by; when
// it returns, the leader publishes what it missed, in order, nothing
// twice and nothing skipped.
func TestFeedNATSRestart(t *testing.T) {
	srv, js := startNATS(t)
	f := newFeed(t, 32)
	f.extend("a", 5)
	f.lead(js, f.window(), Config{})
	x := feedtest.New(t, "indexer")
	x.Until(feedtest.Consumer(t, js, "VENN_ETH", "idx"), at(x, f))

	srv.Kill()
	f.extend("a", 4) // to 9
	f.reorg(7, "b", 3)
	f.setFinality(9, 5)
	f.extend("b", 2) // to 12
	srv.Restart()

	x.Until(feedtest.Consumer(t, js, "VENN_ETH", "idx"), at(x, f))
	matches(t, x, f)
	if x.Final != 5 {
		t.Errorf("finalized = %d, want 5", x.Final)
	}
}

// TestFeedPastWindow: NATS away longer than the window reaches: the
// stream says which blocks to fetch from history with a gap event, then
// goes on with the window's blocks.
func TestFeedPastWindow(t *testing.T) {
	srv, js := startNATS(t)
	f := newFeed(t, 8) // the store keeps at most 32 events
	f.extend("a", 3)
	f.lead(js, f.window(), Config{})
	x := feedtest.New(t, "indexer")
	x.Until(feedtest.Consumer(t, js, "VENN_ETH", "idx"), at(x, f))

	srv.Kill()
	f.extend("a", 60)
	srv.Restart()

	x.Until(feedtest.Consumer(t, js, "VENN_ETH", "idx"), at(x, f))
	if len(x.Gaps) != 1 || x.Gaps[0].From != 4 || x.Gaps[0].To != 63-8 || x.Gaps[0].Reason != GapBehind {
		t.Fatalf("gaps = %+v, want one from 4 to 55, behind", x.Gaps)
	}
	matches(t, x, f)
}

// TestFeedFailover: two replicas publish at once (a deposed leader that
// has not noticed yet), and one is killed mid-stream: the stream has no
// duplicate and no gap, and the indexer ends on the chain.
func TestFeedFailover(t *testing.T) {
	srv, js := startNATS(t)
	js2 := jsFor(t, srv)
	f := newFeed(t, 32)
	a := f.lead(js, f.window(), Config{})
	f.lead(js2, f.window(), Config{})
	x := feedtest.New(t, "indexer")
	c := feedtest.Consumer(t, js, "VENN_ETH", "idx")
	f.extend("a", 1)
	x.Until(c, at(x, f)) // the stream is live
	for round := range 6 {
		f.extend("a", 3)
		f.reorg(uint64(3*round+2), "b"+string(rune('0'+round)), 4) // 3-block reorgs, 4-block branches
		if round == 2 {
			x.Until(c, func() bool { return x.Reorgs != nil })
			a.stop() // killed mid-stream: the other goes on
		}
	}
	x.Until(c, at(x, f))
	matches(t, x, f)
	if len(x.Reorgs) < 4 {
		t.Errorf("reorgs = %d, want at least 4 of 6 (a catch-up may tell two at once)", len(x.Reorgs))
	}
}

// TestStreamRetentionUpdated: a stream whose retention differs from the
// config is updated at start.
func TestStreamRetentionUpdated(t *testing.T) {
	_, js := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cfg := Config{MaxAge: time.Hour, MaxBytes: 1 << 20}.WithDefaults(testChain)
	if _, err := js.CreateStream(ctx, cfg.streamConfig(SubjectsFor(testPrefix, testChain))); err != nil {
		t.Fatal(err)
	}
	f := newFeed(t, 8)
	f.extend("a", 2)
	f.lead(js, f.window(), Config{MaxAge: 2 * time.Hour, MaxBytes: 2 << 20})
	x := feedtest.New(t, "indexer")
	x.Until(feedtest.Consumer(t, js, "VENN_ETH", "idx"), at(x, f))
	s, err := js.Stream(ctx, "VENN_ETH")
	if err != nil {
		t.Fatal(err)
	}
	got := s.CachedInfo().Config
	if got.MaxAge != 2*time.Hour || got.MaxBytes != 2<<20 {
		t.Errorf("stream retention = %s, %d bytes; want 2h, %d", got.MaxAge, got.MaxBytes, 2<<20)
	}
}

// TestStreamConflict: a stream by the same name taking other subjects is
// reported and left alone; nothing is published to it.
func TestStreamConflict(t *testing.T) {
	_, js := startNATS(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "VENN_ETH", Subjects: []string{"other.>"},
		Retention: jetstream.WorkQueuePolicy}); err != nil {
		t.Fatal(err)
	}
	f := newFeed(t, 8)
	f.extend("a", 2)
	l := f.lead(js, f.window(), Config{})
	deadline := time.Now().Add(waitLimit)
	for l.p.State() != StateConflict {
		if time.Now().After(deadline) {
			t.Fatalf("state = %s, want %s", l.p.State(), StateConflict)
		}
		time.Sleep(10 * time.Millisecond) // polls a state the publisher reaches on its own
	}
	s, err := js.Stream(ctx, "VENN_ETH")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo(); got.Config.Subjects[0] != "other.>" || got.Config.Retention != jetstream.WorkQueuePolicy || got.State.Msgs != 0 {
		t.Errorf("stream changed: %+v, %d messages", got.Config, got.State.Msgs)
	}
	var ce *ConflictError
	if _, err := l.p.ensure(ctx); !errors.As(err, &ce) {
		t.Errorf("ensure = %v, want a ConflictError", err)
	}
}

// TestFeedBlockTooLarge: a block over the server's max_payload is not
// skipped silently: a gap event names it with its hash, and the stream
// goes on from it.
func TestFeedBlockTooLarge(t *testing.T) {
	srv := natstest.Start(t, natstest.Options{MaxPayload: 64 << 10})
	js := jsFor(t, srv)
	f := newFeed(t, 16)
	f.extend("a", 3)
	f.lead(js, f.window(), Config{})
	x := feedtest.New(t, "indexer")
	c := feedtest.Consumer(t, js, "VENN_ETH", "idx")
	x.Until(c, at(x, f))
	_, parent := f.head()
	big := mainnetBlock(4, parent) // ~450 KB of message
	f.publish(&headstore.Event{Added: []*evm.Block{big}})
	f.extend("a", 2)
	x.Until(c, at(x, f))
	if len(x.Gaps) != 1 || x.Gaps[0].From != 4 || x.Gaps[0].To != 4 || x.Gaps[0].ToHash != big.Hash || x.Gaps[0].Reason != GapTooLarge {
		t.Fatalf("gaps = %+v, want block 4 too_large with its hash", x.Gaps)
	}
	matches(t, x, f)
}

// TestStartSeq: an indexer that starts from a block number gets that
// block first, and after a reorg the canonical one.
func TestStartSeq(t *testing.T) {
	_, js := startNATS(t)
	f := newFeed(t, 32)
	f.extend("a", 6)
	f.lead(js, f.window(), Config{})
	x := feedtest.New(t, "all")
	x.Until(feedtest.Consumer(t, js, "VENN_ETH", "all"), at(x, f))
	f.reorg(3, "b", 4)
	x.Until(feedtest.Consumer(t, js, "VENN_ETH", "all"), at(x, f))

	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	s, err := js.Stream(ctx, "VENN_ETH")
	if err != nil {
		t.Fatal(err)
	}
	seq, err := StartSeq(ctx, s, SubjectsFor(testPrefix, testChain), 5)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: seq})
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Next(jetstream.FetchMaxWait(waitLimit))
	if err != nil {
		t.Fatal(err)
	}
	ev, err := Decode(m.Data())
	if err != nil {
		t.Fatal(err)
	}
	if want := f.canonical()[5]; ev.Type != TypeBlock || ev.Number != 5 || ev.Hash != want {
		t.Fatalf("first event from block 5: %s %d %s, want block 5 %s", ev.Type, ev.Number, ev.Hash, want)
	}
}
