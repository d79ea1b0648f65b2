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
