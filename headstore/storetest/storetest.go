// Package storetest holds every headstore.Store to one contract, as a
// follower sees it through a Window: fencing, sequence numbers, a reorg, a
// stale writer, and followers that join early and midway. The memory store
// runs it in headstore's tests and the Redis store in redisstore's.
//
// It owns the contract and the synthetic blocks it publishes, nothing
// else: it opens no connection (the caller makes the store) and must not
// be imported by product code.
package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
)

// Contract runs the contract on stores newStore makes: each holds window
// blocks, is empty, and is at epoch 1.
func Contract(t *testing.T, newStore func(t *testing.T, window int) headstore.Store) {
	t.Helper()
	main := chain("main", hash("block 9"), 10, 14)
	s := newStore(t, 8)
	ctx := t.Context()

	if err := s.Publish(ctx, 2, &headstore.Event{Added: main[:1]}); !errors.Is(err, headstore.ErrFenced) {
		t.Fatalf("publish with a stale epoch: %v, want ErrFenced", err)
	}
	early := follow(t, s, 8)
	for _, b := range main[:3] {
		if err := s.Publish(ctx, 1, &headstore.Event{Added: []*evm.Block{b}}); err != nil {
			t.Fatal(err)
		}
	}
	waitWindow(t, early, main[:3])
	late := follow(t, s, 8) // joins mid-way: snapshot, then events

	// A reorg: 12 leaves, 12b, 13b, 14b replace it.
	fork := chain("b", main[1].Hash, 12, 14)
	ev := &headstore.Event{Dropped: []headstore.Ref{{Number: 12, Hash: main[2].Hash}}, Added: fork, Safe: 12, Finalized: 11}
	if err := s.Publish(ctx, 1, ev); err != nil {
		t.Fatal(err)
	}
	if ev.Seq != 4 {
		t.Fatalf("fourth event has seq %d", ev.Seq)
	}
	// A writer that last saw seq 2 does not know the store: refused,
	// nothing written; one that saw 4 goes on.
	b15 := chain("b", fork[2].Hash, 15, 15)
	if err := s.Publish(ctx, 1, &headstore.Event{Seq: 2, Added: b15}); !errors.Is(err, headstore.ErrStale) {
		t.Fatalf("publish after seq 2 of 4: %v, want ErrStale", err)
	}
	if snap, err := s.Snapshot(ctx); err != nil || snap.Seq != 4 || snap.Blocks[len(snap.Blocks)-1].Hash != fork[2].Hash {
		t.Fatalf("after a stale publish: snapshot %+v, %v; want seq 4, head 14b", snap, err)
	}
	want := append([]*evm.Block{main[0], main[1]}, fork...)
	snap, err := s.Snapshot(ctx)
	if err != nil || snap.Seq != 4 || !sameBlocks(snap.Blocks, want) || snap.Safe != 12 || snap.Finalized != 11 {
		t.Fatalf("snapshot seq %d, %d blocks, safe %d, finalized %d, %v", snap.Seq, len(snap.Blocks), snap.Safe, snap.Finalized, err)
	}
	for _, w := range []*headstore.Window{early, late} {
		waitWindow(t, w, want)
		if _, ok := w.Answer(evm.ParseCall("eth_getBlockByHash", []byte(`["`+main[2].Hash+`",false]`))); ok {
			t.Fatal("a follower still serves the orphaned block")
		}
		if _, ok := w.Answer(evm.ParseCall("eth_getTransactionReceipt", []byte(`["`+txHash(fork[0])+`"]`))); !ok {
			t.Fatal("a follower does not serve the new branch's receipt")
		}
		if tags, _ := w.Tags(); tags.Safe != 12 || tags.Finalized != 11 {
			t.Fatalf("follower tags %+v", tags)
		}
	}
}

// follow starts a follower of s into a new window of size blocks.
func follow(t *testing.T, s headstore.Store, size int) *headstore.Window {
	t.Helper()
	w := headstore.NewWindow(size)
	f := headstore.NewFollower("test", s, w, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	return w
}

// waitWindow waits until w holds exactly want and answers (is live).
func waitWindow(t *testing.T, w *headstore.Window, want []*evm.Block) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, live := w.Latest(); live && sameBlocks(w.Blocks(), want) {
			return
		}
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

// hash is a 32-byte hex hash derived from label.
func hash(label string) string {
	sum := sha256.Sum256([]byte(label))
	return "0x" + hex.EncodeToString(sum[:])
}

// txHash is the hash of b's one transaction.
func txHash(b *evm.Block) string { return hash("tx " + b.Hash) }

// chain is blocks from..to of fork, the first a child of parent, each with
// one transaction and its receipt, as a remote would send them.
func chain(fork, parent string, from, to uint64) []*evm.Block {
	var out []*evm.Block
	for n := from; n <= to; n++ {
		h := hash(fork + "/" + strconv.FormatUint(n, 10))
		num := `"0x` + strconv.FormatUint(n, 16) + `"`
		th := hash("tx " + h)
		tx := `{"blockHash":"` + h + `","blockNumber":` + num + `,"hash":"` + th + `","transactionIndex":"0x0"}`
		rc := `{"blockHash":"` + h + `","blockNumber":` + num + `,"logs":[],"status":"0x1","transactionHash":"` + th + `","transactionIndex":"0x0"}`
		b := &evm.Block{
			Number: n, Hash: h, Parent: parent,
			Raw: json.RawMessage(`{"hash":"` + h + `","number":` + num + `,"parentHash":"` + parent +
				`","timestamp":"0x` + strconv.FormatUint(1_700_000_000+12*n, 16) + `","transactions":[` + tx + `],"uncles":[]}`),
			Receipts: json.RawMessage(`[` + rc + `]`),
		}
		out = append(out, b)
		parent = h
	}
	return out
}
