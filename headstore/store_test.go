package headstore

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
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
				if err := s.Publish(ctx, 1, &Event{Added: []*Block{b}}); err != nil {
					t.Fatal(err)
				}
			}
			waitWindow(t, early, main[:3])
			late := startFollower(t, s, 8) // joins mid-way: snapshot, then events

			// A reorg: 12 leaves, 12b, 13b, 14b replace it.
			b12 := c.block("b", 12, main[1].Hash, 0, serveTx{"xb", nil})
			b13 := c.block("b", 13, b12.Hash, 0)
			b14 := c.block("b", 14, b13.Hash, 0)
			ev := &Event{Dropped: []Ref{{Number: 12, Hash: main[2].Hash}}, Added: []*Block{b12, b13, b14}, Safe: 12, Finalized: 11}
			if err := s.Publish(ctx, 1, ev); err != nil {
				t.Fatal(err)
			}
			if ev.Seq != 4 {
				t.Fatalf("fourth event has seq %d", ev.Seq)
			}
			want := []*Block{main[0], main[1], b12, b13, b14}
			snap, err := s.Snapshot(ctx)
			if err != nil || snap.Seq != 4 || !sameBlocks(snap.Blocks, want) || snap.Safe != 12 || snap.Finalized != 11 {
				t.Fatalf("snapshot seq %d, %d blocks, safe %d, finalized %d, %v", snap.Seq, len(snap.Blocks), snap.Safe, snap.Finalized, err)
			}
			for _, w := range []*Window{early, late} {
				waitWindow(t, w, want)
				if _, ok := w.Answer("eth_getBlockByHash", []byte(`["`+main[2].Hash+`",false]`)); ok {
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
func waitWindow(t *testing.T, w *Window, want []*Block) {
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

func sameBlocks(got, want []*Block) bool {
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
