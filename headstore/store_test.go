package headstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/testkit"
)

// storeUnderTest is one Store implementation at epoch 1.
type storeUnderTest struct {
	name string
	new  func(t *testing.T, window int) Store
}

var stores = []storeUnderTest{
	{"memory", func(_ *testing.T, window int) Store { return NewMemory(window) }},
	{"redis", func(t *testing.T, window int) Store { return newRedisTest(t, window).s }},
}

// TestStoreContract holds every Store to the same behaviour, as a follower
// sees it through a Window.
func TestStoreContract(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			c := newServeChain()
			main := serveMain(c) // 10..14
			s := st.new(t, 8)
			ctx := t.Context()

			if err := s.Publish(ctx, 2, &Event{Added: main[:1]}); !errors.Is(err, ErrFenced) {
				t.Fatalf("publish with a stale epoch: %v, want ErrFenced", err)
			}
			early := startFollower(t, s, 8)
			for _, b := range main[:3] {
				if err := s.Publish(ctx, 1, &Event{Added: []*evm.Block{b}}); err != nil {
					t.Fatal(err)
				}
			}
			waitWindow(t, early, main[:3])
			late := startFollower(t, s, 8) // joins mid-way: snapshot, then events

			// A reorg: 12 leaves, 12b, 13b, 14b replace it.
			b12 := c.block("b", 12, main[1].Hash, 0, serveTx{"xb", nil})
			b13 := c.block("b", 13, b12.Hash, 0)
			b14 := c.block("b", 14, b13.Hash, 0)
			ev := &Event{Dropped: []Ref{{Number: 12, Hash: main[2].Hash}}, Added: []*evm.Block{b12, b13, b14}, Safe: 12, Finalized: 11}
			if err := s.Publish(ctx, 1, ev); err != nil {
				t.Fatal(err)
			}
			if ev.Seq != 4 {
				t.Fatalf("fourth event has seq %d", ev.Seq)
			}
			// A writer that last saw seq 2 does not know the store: refused,
			// nothing written; one that saw 4 goes on.
			b15 := c.block("b", 15, b14.Hash, 0)
			if err := s.Publish(ctx, 1, &Event{Seq: 2, Added: []*evm.Block{b15}}); !errors.Is(err, ErrStale) {
				t.Fatalf("publish after seq 2 of 4: %v, want ErrStale", err)
			}
			if snap, err := s.Snapshot(ctx); err != nil || snap.Seq != 4 || snap.Blocks[len(snap.Blocks)-1].Hash != b14.Hash {
				t.Fatalf("after a stale publish: snapshot %+v, %v; want seq 4, head 14b", snap, err)
			}
			want := []*evm.Block{main[0], main[1], b12, b13, b14}
			snap, err := s.Snapshot(ctx)
			if err != nil || snap.Seq != 4 || !sameBlocks(snap.Blocks, want) || snap.Safe != 12 || snap.Finalized != 11 {
				t.Fatalf("snapshot seq %d, %d blocks, safe %d, finalized %d, %v", snap.Seq, len(snap.Blocks), snap.Safe, snap.Finalized, err)
			}
			for _, w := range []*Window{early, late} {
				waitWindow(t, w, want)
				if _, ok := w.Answer(evm.ParseCall("eth_getBlockByHash", []byte(`["`+main[2].Hash+`",false]`))); ok {
					t.Fatal("a follower still serves the orphaned block")
				}
				if tags, _ := w.Tags(); tags.Safe != 12 || tags.Finalized != 11 {
					t.Fatalf("follower tags %+v", tags)
				}
			}
		})
	}
}

func startFollower(t *testing.T, s Store, size int) *Window {
	t.Helper()
	w := NewWindow(size)
	f := NewFollower("test", s, w, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return w
}

// waitWindow waits until w holds exactly want and is live.
func waitWindow(t *testing.T, w *Window, want []*evm.Block) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !sameBlocks(w.Blocks(), want) || !w.live.Load() {
		if time.Now().After(deadline) {
			t.Fatalf("window holds %d blocks, want %d", len(w.Blocks()), len(want))
		}
		select {
		case <-w.Changed():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func sameBlocks(got, want []*evm.Block) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].Hash != want[i].Hash || got[i].Number != want[i].Number {
			return false
		}
	}
	return true
}

func TestFollowerMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	s := NewMemory(8)
	c := newServeChain()
	blocks := serveMain(c)
	for _, b := range blocks[:2] {
		if err := s.Publish(t.Context(), 1, &Event{Added: []*evm.Block{b}}); err != nil {
			t.Fatal(err)
		}
	}
	w := NewWindow(8)
	f := NewFollower("metrics", s, w, nil, m)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	waitWindow(t, w, blocks[:2]) // loaded from the snapshot: no event yet
	if err := s.Publish(t.Context(), 1, &Event{Added: blocks[2:3]}); err != nil {
		t.Fatal(err)
	}
	waitWindow(t, w, blocks[:3])

	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			switch {
			case mt.GetGauge() != nil:
				got[mf.GetName()] = mt.GetGauge().GetValue()
			case mt.GetCounter() != nil:
				got[mf.GetName()] = mt.GetCounter().GetValue()
			case mt.GetHistogram() != nil:
				got[mf.GetName()] = float64(mt.GetHistogram().GetSampleCount())
			}
		}
	}
	if got["venn_head_number"] != 12 || got["venn_head_window_reloads_total"] != 1 ||
		got["venn_head_propagation_seconds"] != 1 || got["venn_head_age_seconds"] <= 0 {
		t.Fatalf("metrics %v: want head 12, 1 reload, 1 propagation sample, a positive age", got)
	}

	// Stopped for good (its chain removed), the follower's chain leaves
	// every series, the scraped ones too.
	cancel()
	wg.Wait()
	m.DropChain("metrics")
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Errorf("%d series after DropChain (%v), want none", n, err)
	}
}

// downStore is a Memory store whose Snapshot fails while down is set: a
// Redis that does not answer.
type downStore struct {
	*Memory
	down  atomic.Bool
	tries atomic.Int64 // Snapshot calls while down
}

func (s *downStore) Snapshot(ctx context.Context) (*Snapshot, error) {
	if s.down.Load() {
		s.tries.Add(1)
		return nil, errors.New("connection refused")
	}
	return s.Memory.Snapshot(ctx)
}

// venn_head_feed_up is 0 while the follower cannot reach its store and 1
// once it follows it again.
func TestFollowerFeedUp(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	s := &downStore{Memory: NewMemory(8)}
	s.down.Store(true)
	f := NewFollower("feed", s, NewWindow(8), nil, m)
	up := func() float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "venn_head_feed_up" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("venn_head_feed_up not gathered")
		return 0
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	testkit.WaitFor(t, 5*time.Second, "two tries of the store", func() bool { return s.tries.Load() >= 2 })
	if got := up(); got != 0 {
		t.Fatalf("venn_head_feed_up %v while the store is down, want 0", got)
	}
	s.down.Store(false)
	testkit.WaitFor(t, 5*time.Second, "the feed to be up", func() bool { return up() == 1 })
}
