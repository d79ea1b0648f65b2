package redisstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/headstore/storetest"
)

// These tests run against the real Redis at 127.0.0.1:6379. Each test
// works on its own chain (its name plus a random suffix) and deletes the
// chain's keys when it ends, since other packages' tests share the server.

const redisTestAddr = "127.0.0.1:6379"

// errRedisTestStop ends a Follow from inside fn once a test saw enough.
var errRedisTestStop = errors.New("test: stop following")

type redisTest struct {
	t     *testing.T
	ctx   context.Context
	rdb   *redis.Client
	chain string
	name  string // the client name, to find our connections in CLIENT LIST
	s     *Store
}

// newRedisTest returns a store of window blocks on a fresh chain whose
// epoch is 1.
func newRedisTest(t *testing.T, window int) *redisTest {
	t.Helper()
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	chain := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, t.Name()) + "_" + hex.EncodeToString(suffix[:])
	name := "venn-test-" + hex.EncodeToString(suffix[:])
	rdb := redis.NewClient(&redis.Options{Addr: redisTestAddr, ClientName: name})
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("Redis at %s is unreachable; the headstore Redis tests need a real server there: %v", redisTestAddr, err)
	}
	rt := &redisTest{t: t, ctx: t.Context(), rdb: rdb, chain: chain, name: name, s: New(rdb, chain, window)}
	t.Cleanup(rt.deleteKeys)
	rt.setEpoch(1)
	return rt
}

// deleteKeys deletes every key of the chain.
func (rt *redisTest) deleteKeys() {
	rt.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	it := rt.rdb.Scan(ctx, 0, "venn:{"+rt.chain+"}:*", 1000).Iterator()
	var keys []string
	for it.Next(ctx) {
		keys = append(keys, it.Val())
	}
	if err := it.Err(); err != nil {
		rt.t.Errorf("scan keys: %v", err)
		return
	}
	if len(keys) > 0 {
		if err := rt.rdb.Del(ctx, keys...).Err(); err != nil {
			rt.t.Errorf("delete keys: %v", err)
		}
	}
}

func (rt *redisTest) key(suffix string) string { return "venn:{" + rt.chain + "}:" + suffix }

func (rt *redisTest) setEpoch(n uint64) {
	rt.t.Helper()
	if err := rt.rdb.Set(rt.ctx, rt.key("epoch"), n, 0).Err(); err != nil {
		rt.t.Fatal(err)
	}
}

func (rt *redisTest) publish(epoch uint64, ev *headstore.Event) uint64 {
	rt.t.Helper()
	if err := rt.s.Publish(rt.ctx, epoch, ev); err != nil {
		rt.t.Fatalf("publish: %v", err)
	}
	return ev.Seq
}

// publishEach publishes each block as its own event.
func (rt *redisTest) publishEach(epoch uint64, blocks []*evm.Block) {
	rt.t.Helper()
	for _, b := range blocks {
		rt.publish(epoch, &headstore.Event{Added: []*evm.Block{b}})
	}
}

func (rt *redisTest) snapshot() *headstore.Snapshot {
	rt.t.Helper()
	s, err := rt.s.Snapshot(rt.ctx)
	if err != nil {
		rt.t.Fatalf("snapshot: %v", err)
	}
	return s
}

// canon is the snapshot's block hashes; it also checks that the window is
// contiguous and parent-linked.
func (rt *redisTest) canon() []string {
	rt.t.Helper()
	var out []string
	s := rt.snapshot()
	for i, b := range s.Blocks {
		if i > 0 && (b.Number != s.Blocks[i-1].Number+1 || b.Parent != s.Blocks[i-1].Hash) {
			rt.t.Errorf("window breaks at %d: %d %s after %d %s",
				i, b.Number, b.Parent, s.Blocks[i-1].Number, s.Blocks[i-1].Hash)
		}
		out = append(out, b.Hash)
	}
	return out
}

func (rt *redisTest) bodyExists(hash string) bool {
	rt.t.Helper()
	n, err := rt.rdb.Exists(rt.ctx, rt.key("blk:"+hash)).Result()
	if err != nil {
		rt.t.Fatal(err)
	}
	return n == 1
}

func (rt *redisTest) streamLen() int64 {
	rt.t.Helper()
	n, err := rt.rdb.XLen(rt.ctx, rt.key("events")).Result()
	if err != nil {
		rt.t.Fatal(err)
	}
	return n
}

// follow runs Follow until it delivered the event with seq until, and
// returns the events it saw; err is Follow's error if it ended otherwise.
func (rt *redisTest) follow(gen string, seq, until uint64) ([]*headstore.Event, error) {
	ctx, cancel := context.WithTimeout(rt.ctx, 5*time.Second)
	defer cancel()
	var got []*headstore.Event
	err := rt.s.Follow(ctx, gen, seq, func(ev *headstore.Event) error {
		got = append(got, ev)
		if ev.Seq == until {
			return errRedisTestStop
		}
		return nil
	})
	if errors.Is(err, errRedisTestStop) {
		err = nil
	}
	return got, err
}

// redisTestHash is block n's hash on fork.
func redisTestHash(fork string, n uint64) string {
	h := sha256.Sum256([]byte(fork + "/" + strconv.FormatUint(n, 10)))
	return "0x" + hex.EncodeToString(h[:])
}

// redisTestBlock is an empty block as a remote would send it.
func redisTestBlock(n uint64, hash, parent string) *evm.Block {
	return &evm.Block{
		Number:   n,
		Hash:     hash,
		Parent:   parent,
		Raw:      json.RawMessage(fmt.Sprintf(`{"number":"0x%x","hash":"%s","parentHash":"%s","transactions":[]}`, n, hash, parent)),
		Receipts: json.RawMessage(`[]`),
	}
}

// redisTestChain is blocks from..to of fork, the first one a child of
// parent, each next one of the one before.
func redisTestChain(fork, parent string, from, to uint64) []*evm.Block {
	var out []*evm.Block
	for n := from; n <= to; n++ {
		b := redisTestBlock(n, redisTestHash(fork, n), parent)
		out = append(out, b)
		parent = b.Hash
	}
	return out
}

func redisTestHashes(blocks []*evm.Block) []string {
	out := make([]string, len(blocks))
	for i, b := range blocks {
		out[i] = b.Hash
	}
	return out
}

func redisTestSeqs(evs []*headstore.Event) []uint64 {
	out := make([]uint64, len(evs))
	for i, ev := range evs {
		out[i] = ev.Seq
	}
	return out
}

func redisTestRange(from, to uint64) []uint64 {
	var out []uint64
	for n := from; n <= to; n++ {
		out = append(out, n)
	}
	return out
}

func TestRedisFencing(t *testing.T) {
	t.Parallel()
	rt := newRedisTest(t, 0)
	rt.setEpoch(5)
	if got, err := rt.s.Epoch(rt.ctx); err != nil || got != 5 {
		t.Fatalf("Epoch = %d, %v; want 5", got, err)
	}
	blocks := redisTestChain("a", redisTestHash("a", 0), 1, 3)
	rt.publish(5, &headstore.Event{Added: blocks[:1], Safe: 1})
	before := rt.snapshot()
	beforeLen := rt.streamLen()

	tests := []struct {
		name  string
		setup func()
		give  uint64
	}{
		{name: "older epoch", give: 4},
		{name: "newer epoch than stored", give: 6},
		{name: "zero epoch", give: 0},
		{name: "epoch key missing", give: 5, setup: func() {
			if err := rt.rdb.Del(rt.ctx, rt.key("epoch")).Err(); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup()
			}
			ev := &headstore.Event{Dropped: []headstore.Ref{{Number: 1, Hash: blocks[0].Hash}}, Added: blocks[1:2], Safe: 2, Finalized: 1}
			err := rt.s.Publish(rt.ctx, tt.give, ev)
			if !errors.Is(err, headstore.ErrFenced) {
				t.Fatalf("Publish = %v, want ErrFenced", err)
			}
			if ev.Seq != 0 {
				t.Errorf("fenced event got seq %d", ev.Seq)
			}
			if after := rt.snapshot(); !reflect.DeepEqual(after, before) {
				t.Errorf("snapshot changed:\n got %+v\nwant %+v", after, before)
			}
			if n := rt.streamLen(); n != beforeLen {
				t.Errorf("stream length %d, want %d", n, beforeLen)
			}
			if rt.bodyExists(blocks[1].Hash) {
				t.Error("fenced block's body was written")
			}
			if !rt.bodyExists(blocks[0].Hash) {
				t.Error("fenced drop deleted a body")
			}
		})
	}

	rt.setEpoch(5)
	ev := &headstore.Event{Added: blocks[1:2], Epoch: 99}
	if got := rt.publish(5, ev); got != 2 {
		t.Errorf("seq = %d, want 2", got)
	}
	if ev.Epoch != 5 {
		t.Errorf("ev.Epoch = %d, want the writer's 5", ev.Epoch)
	}
}

func TestRedisEmpty(t *testing.T) {
	t.Parallel()
	rt := newRedisTest(t, 0)
	if err := rt.rdb.Del(rt.ctx, rt.key("epoch")).Err(); err != nil {
		t.Fatal(err)
	}
	if got := rt.snapshot(); !reflect.DeepEqual(got, &headstore.Snapshot{}) {
		t.Errorf("snapshot of an empty store = %+v, want empty", got)
	}
	if got, err := rt.s.Epoch(rt.ctx); err != nil || got != 0 {
		t.Errorf("Epoch = %d, %v; want 0", got, err)
	}
}

func TestRedisSequence(t *testing.T) {
	t.Parallel()
	rt := newRedisTest(t, 0)
	blocks := redisTestChain("a", redisTestHash("a", 0), 1, 3)
	for i, b := range blocks {
		ev := &headstore.Event{Added: []*evm.Block{b}, Safe: b.Number - 1, Time: int64(1000 + i)}
		if got := rt.publish(1, ev); got != uint64(i+1) {
			t.Fatalf("seq = %d, want %d", got, i+1)
		}
	}
	// Zero safe/finalized leave the stored ones alone.
	rt.publish(1, &headstore.Event{Added: redisTestChain("a", blocks[2].Hash, 4, 4), Finalized: 2})
	blocks = append(blocks, redisTestChain("a", blocks[2].Hash, 4, 4)...)

	snap := rt.snapshot()
	if snap.Gen == "" || snap.Seq != 4 || snap.Safe != 2 || snap.Finalized != 2 {
		t.Errorf("snapshot gen %q seq %d safe %d finalized %d; want a gen, 4, 2, 2",
			snap.Gen, snap.Seq, snap.Safe, snap.Finalized)
	}
	if !reflect.DeepEqual(snap.Blocks, blocks) {
		t.Errorf("snapshot blocks differ from the published ones")
	}

	tests := []struct {
		name string
		give uint64
		want []uint64
	}{
		{name: "from the start", give: 0, want: []uint64{1, 2, 3, 4}},
		{name: "from seq 2", give: 2, want: []uint64{3, 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := rt.follow(snap.Gen, tt.give, 4)
			if err != nil {
				t.Fatalf("Follow: %v", err)
			}
			if seqs := redisTestSeqs(got); !reflect.DeepEqual(seqs, tt.want) {
				t.Fatalf("seqs = %v, want %v", seqs, tt.want)
			}
			for _, ev := range got {
				want := blocks[ev.Seq-1]
				if len(ev.Added) != 1 || !reflect.DeepEqual(ev.Added[0], want) {
					t.Errorf("event %d added %+v, want %+v", ev.Seq, ev.Added, want)
				}
				if ev.Epoch != 1 {
					t.Errorf("event %d epoch %d, want 1", ev.Seq, ev.Epoch)
				}
			}
			if ev := got[len(got)-1]; ev.Finalized != 2 || ev.Safe != 0 {
				t.Errorf("event 4 safe %d finalized %d, want 0, 2", ev.Safe, ev.Finalized)
			}
		})
	}
}

// A replica that starts while the leader publishes, from a snapshot taken
// mid-way, sees every later event once, in order; one that started on an
// empty store sees the whole history.
func TestRedisFollowersJoinMidway(t *testing.T) {
	t.Parallel()
	rt := newRedisTest(t, 0)
	const total = 30
	blocks := redisTestChain("a", redisTestHash("a", 0), 1, total)

	type result struct {
		from uint64
		seqs []uint64
		err  error
	}
	results := make(chan result, 3)
	var wg sync.WaitGroup
	defer wg.Wait()
	start := func(gen string, from uint64) {
		wg.Go(func() {
			evs, err := rt.follow(gen, from, total)
			results <- result{from: from, seqs: redisTestSeqs(evs), err: err}
		})
	}
	start("", 0) // the store is still empty: any history will do
	for i, b := range blocks {
		rt.publish(1, &headstore.Event{Added: []*evm.Block{b}})
		if i == 9 || i == 19 {
			s := rt.snapshot()
			start(s.Gen, s.Seq)
		}
	}
	wg.Wait()
	close(results)
	for r := range results {
		if r.err != nil {
			t.Errorf("follower from %d: %v", r.from, r.err)
			continue
		}
		if want := redisTestRange(r.from+1, total); !reflect.DeepEqual(r.seqs, want) {
			t.Errorf("follower from %d saw %v, want %v", r.from, r.seqs, want)
		}
	}
}

func TestRedisReorg(t *testing.T) {
	t.Parallel()
	rt := newRedisTest(t, 0)
	a := redisTestChain("a", redisTestHash("a", 0), 1, 5)
	rt.publishEach(1, a)

	// The leader walked back to 3: 4 and 5 are orphaned.
	b := redisTestChain("b", a[2].Hash, 4, 6)
	reorg := &headstore.Event{Dropped: []headstore.Ref{{Number: 4, Hash: a[3].Hash}, {Number: 5, Hash: a[4].Hash}}, Added: b}
	rt.publish(1, reorg)
	want := append(redisTestHashes(a[:3]), redisTestHashes(b)...)
	if got := rt.canon(); !reflect.DeepEqual(got, want) {
		t.Errorf("canon = %v, want %v", got, want)
	}
	for _, o := range a[3:] {
		if rt.bodyExists(o.Hash) {
			t.Errorf("orphan %d's body is still stored", o.Number)
		}
	}
	evs, err := rt.follow(rt.snapshot().Gen, 5, 6)
	if err != nil {
		t.Fatalf("Follow: %v", err)
	}
	if len(evs) != 1 || !reflect.DeepEqual(evs[0].Dropped, reorg.Dropped) || !reflect.DeepEqual(evs[0].Added, b) {
		t.Errorf("follower saw %+v, want the reorg", evs)
	}

	// A branch that replaces blocks without naming them drops them too.
	c := redisTestChain("c", b[0].Hash, 5, 5)
	rt.publish(1, &headstore.Event{Added: c})
	want = append(redisTestHashes(a[:3]), b[0].Hash, c[0].Hash)
	if got := rt.canon(); !reflect.DeepEqual(got, want) {
		t.Errorf("after replace: canon = %v, want %v", got, want)
	}
	for _, o := range b[1:] {
		if rt.bodyExists(o.Hash) {
			t.Errorf("replaced %d's body is still stored", o.Number)
		}
	}

	// Re-adding a block that is already canonical keeps its body.
	rt.publish(1, &headstore.Event{Added: b[:2]})
	want = append(redisTestHashes(a[:3]), redisTestHashes(b[:2])...)
	if got := rt.canon(); !reflect.DeepEqual(got, want) {
		t.Errorf("after re-add: canon = %v, want %v", got, want)
	}
	if !rt.bodyExists(b[0].Hash) || !rt.bodyExists(b[1].Hash) || rt.bodyExists(c[0].Hash) {
		t.Error("after re-add: wrong bodies stored")
	}

	// An event that only drops shortens the window.
	rt.publish(1, &headstore.Event{Dropped: []headstore.Ref{{Number: 5, Hash: b[1].Hash}}})
	want = append(redisTestHashes(a[:3]), b[0].Hash)
	if got := rt.canon(); !reflect.DeepEqual(got, want) {
		t.Errorf("after drop: canon = %v, want %v", got, want)
	}
	if rt.bodyExists(b[1].Hash) {
		t.Error("after drop: the dropped body is still stored")
	}
}

func TestRedisGap(t *testing.T) {
	t.Parallel()
	a := redisTestChain("a", redisTestHash("a", 0), 1, 5)
	tests := []struct {
		name string
		give *evm.Block
		want []string
	}{
		{
			name: "linked",
			give: redisTestBlock(6, redisTestHash("a", 6), a[4].Hash),
			want: append(redisTestHashes(a), redisTestHash("a", 6)),
		},
		{
			name: "gap",
			give: redisTestBlock(10, redisTestHash("x", 10), redisTestHash("x", 9)),
			want: []string{redisTestHash("x", 10)},
		},
		{
			name: "parent is not the block below",
			give: redisTestBlock(6, redisTestHash("x", 6), redisTestHash("x", 5)),
			want: []string{redisTestHash("x", 6)},
		},
		{
			name: "replaces the head from an unknown parent",
			give: redisTestBlock(5, redisTestHash("x", 5), redisTestHash("x", 4)),
			want: []string{redisTestHash("x", 5)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rt := newRedisTest(t, 0)
			rt.publishEach(1, a)
			rt.publish(1, &headstore.Event{Added: []*evm.Block{tt.give}})
			if got := rt.canon(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("canon = %v, want %v", got, tt.want)
			}
			kept := map[string]bool{}
			for _, h := range tt.want {
				kept[h] = true
			}
			for _, b := range a {
				if rt.bodyExists(b.Hash) != kept[b.Hash] {
					t.Errorf("block %d: body stored %v, want %v", b.Number, !kept[b.Hash], kept[b.Hash])
				}
			}
		})
	}
}

func TestRedisTrim(t *testing.T) {
	t.Parallel()
	const window = 4
	rt := newRedisTest(t, window)
	blocks := redisTestChain("a", redisTestHash("a", 0), 1, 300)
	rt.publishEach(1, blocks[:10])
	if got, want := rt.canon(), redisTestHashes(blocks[6:10]); !reflect.DeepEqual(got, want) {
		t.Errorf("canon = %v, want blocks 7..10 %v", got, want)
	}
	for _, b := range blocks[:6] {
		if rt.bodyExists(b.Hash) {
			t.Errorf("block %d's body outlived the window", b.Number)
		}
	}

	// The stream is trimmed approximately (whole nodes at a time), so it is
	// bounded by MAXLEN plus one node.
	rt.publishEach(1, blocks[10:])
	node := int64(100)
	if cfg, err := rt.rdb.ConfigGet(rt.ctx, "stream-node-max-entries").Result(); err == nil {
		if n, err := strconv.ParseInt(cfg["stream-node-max-entries"], 10, 64); err == nil && n > 0 {
			node = n
		}
	}
	if n := rt.streamLen(); n > 4*window+node {
		t.Errorf("stream holds %d events after 300, want at most %d", n, 4*window+node)
	}
	if got, want := rt.canon(), redisTestHashes(blocks[296:]); !reflect.DeepEqual(got, want) {
		t.Errorf("canon = %v, want the last 4 blocks %v", got, want)
	}
	if n, err := rt.rdb.Keys(rt.ctx, rt.key("blk:*")).Result(); err != nil || len(n) != window {
		t.Errorf("%d block bodies stored (%v), want %d", len(n), err, window)
	}
}

// Redis keeps nothing on disk: a restart loses the chain's keys, the
// leader's next write starts a new history, and followers must notice
// whether the new history is behind them or already past them.
func TestRedisDataLoss(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		after int // events published in the new history
	}{
		{name: "new history behind the follower", after: 1},
		{name: "new history past the follower", after: 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rt := newRedisTest(t, 0)
			a := redisTestChain("a", redisTestHash("a", 0), 1, 3)
			rt.publishEach(1, a)
			old := rt.snapshot()

			ctx, cancel := context.WithCancel(rt.ctx)
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel()
			saw3 := make(chan struct{})
			done := make(chan error, 1)
			wg.Go(func() {
				done <- rt.s.Follow(ctx, old.Gen, 0, func(ev *headstore.Event) error {
					if ev.Seq == 3 {
						close(saw3)
					}
					return nil
				})
			})
			select {
			case <-saw3:
			case err := <-done:
				t.Fatalf("Follow ended early: %v", err)
			case <-time.After(5 * time.Second):
				t.Fatal("follower did not reach seq 3")
			}

			rt.deleteKeys()
			rt.setEpoch(2)
			rt.publishEach(2, redisTestChain("b", redisTestHash("b", 0), 1, uint64(tt.after)))

			select {
			case err := <-done:
				if !errors.Is(err, headstore.ErrGap) {
					t.Errorf("Follow = %v, want ErrGap", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Follow did not notice the lost history")
			}
			s := rt.snapshot()
			if s.Gen == old.Gen || s.Gen == "" || s.Seq != uint64(tt.after) {
				t.Errorf("new snapshot gen %q seq %d; want a gen other than %q, seq %d", s.Gen, s.Seq, old.Gen, tt.after)
			}
		})
	}
}

// Losing only the state (an eviction) also starts a new history rather
// than writing a seq the stream already holds.
func TestRedisStateLost(t *testing.T) {
	t.Parallel()
	rt := newRedisTest(t, 0)
	a := redisTestChain("a", redisTestHash("a", 0), 1, 4)
	rt.publishEach(1, a[:3])
	old := rt.snapshot()
	if err := rt.rdb.Del(rt.ctx, rt.key("state")).Err(); err != nil {
		t.Fatal(err)
	}
	if got := rt.publish(1, &headstore.Event{Added: a[3:]}); got != 1 {
		t.Errorf("seq after the state was lost = %d, want 1", got)
	}
	s := rt.snapshot()
	if s.Gen == old.Gen || !reflect.DeepEqual(redisTestHashes(s.Blocks), redisTestHashes(a)) {
		t.Errorf("snapshot gen %q (old %q), blocks %v", s.Gen, old.Gen, redisTestHashes(s.Blocks))
	}
	if n := rt.streamLen(); n != 1 {
		t.Errorf("stream holds %d events, want only the new history's 1", n)
	}
}

func TestRedisFollowWrongHistory(t *testing.T) {
	t.Parallel()
	rt := newRedisTest(t, 0)
	rt.publishEach(1, redisTestChain("a", redisTestHash("a", 0), 1, 3))
	gen := rt.snapshot().Gen
	tests := []struct {
		name string
		gen  string
		seq  uint64
	}{
		{name: "other gen", gen: "0123456789abcdef", seq: 0},
		{name: "other gen at the head", gen: "0123456789abcdef", seq: 3},
		{name: "ahead of the store", gen: gen, seq: 7},
		{name: "no gen but a seq", gen: "", seq: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			evs, err := rt.follow(tt.gen, tt.seq, 100)
			if !errors.Is(err, headstore.ErrGap) || len(evs) != 0 {
				t.Errorf("Follow = %v after %d events, want ErrGap", err, len(evs))
			}
		})
	}
}

func TestRedisFollowCancel(t *testing.T) {
	t.Parallel()
	rt := newRedisTest(t, 0)
	rt.publishEach(1, redisTestChain("a", redisTestHash("a", 0), 1, 1))
	gen := rt.snapshot().Gen

	ctx, cancel := context.WithCancel(rt.ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	done := make(chan error, 1)
	wg.Go(func() {
		done <- rt.s.Follow(ctx, gen, 1, func(*headstore.Event) error { return nil })
	})
	// Cancel only once the follower sits in XREAD on the server.
	deadline := time.Now().Add(5 * time.Second)
	for !rt.blockedInXread() {
		if time.Now().After(deadline) {
			t.Fatal("follower never blocked in XREAD")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Follow = %v, want context.Canceled", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Follow took %v to return after cancel", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Follow did not return after cancel")
	}
}

// blockedInXread reports whether one of the test's connections is in XREAD.
func (rt *redisTest) blockedInXread() bool {
	rt.t.Helper()
	list, err := rt.rdb.ClientList(rt.ctx).Result()
	if err != nil {
		rt.t.Fatal(err)
	}
	for line := range strings.SplitSeq(list, "\n") {
		if strings.Contains(line, " name="+rt.name+" ") && strings.Contains(line, " cmd=xread ") {
			return true
		}
	}
	return false
}

func TestRedisFollowerFellBehind(t *testing.T) {
	t.Parallel()
	const window = 4
	tests := []struct {
		name    string
		publish uint64
		from    uint64
	}{
		// 300 events with MAXLEN ~16: entry 2 is long trimmed.
		{name: "events trimmed", publish: 300, from: 1},
		// The stream still holds entry 1, but block 1 left the window.
		{name: "body trimmed", publish: 10, from: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rt := newRedisTest(t, window)
			rt.publishEach(1, redisTestChain("a", redisTestHash("a", 0), 1, tt.publish))
			evs, err := rt.follow(rt.snapshot().Gen, tt.from, tt.publish)
			if !errors.Is(err, headstore.ErrGap) || len(evs) != 0 {
				t.Errorf("Follow = %v after %d events, want ErrGap", err, len(evs))
			}
		})
	}
}

func TestRedisSnapshotBodyGone(t *testing.T) {
	t.Parallel()
	rt := newRedisTest(t, 0)
	a := redisTestChain("a", redisTestHash("a", 0), 1, 3)
	rt.publishEach(1, a)
	if err := rt.rdb.Del(rt.ctx, rt.key("blk:"+a[1].Hash)).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.s.Snapshot(rt.ctx); !errors.Is(err, errRedisNoBody) {
		t.Errorf("Snapshot = %v, want the missing body reported", err)
	}
}

// Bodies come back byte for byte: no compaction, no HTML escaping, and a
// nil field stays nil. (Whitespace around a value is not part of it and
// is not kept.)
func TestRedisBodyBytes(t *testing.T) {
	t.Parallel()
	rt := newRedisTest(t, 0)
	h, p := redisTestHash("a", 1), redisTestHash("a", 0)
	tests := []struct {
		name string
		give *evm.Block
	}{
		{name: "spaces and html", give: &evm.Block{Number: 1, Hash: h, Parent: p,
			Raw:      json.RawMessage("{ \"number\" : \"0x1\",\n \"extraData\": \"<&>\u00e9\", \"transactions\": [] }"),
			Receipts: json.RawMessage("[ ]")}},
		{name: "no receipts", give: &evm.Block{Number: 1, Hash: redisTestHash("b", 1), Parent: p, Raw: json.RawMessage(`{"number":"0x1"}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := &headstore.Event{Added: []*evm.Block{tt.give}}
			rt.publish(1, ev)
			got := rt.snapshot().Blocks
			if len(got) != 1 || !bytes.Equal(got[0].Raw, tt.give.Raw) || !reflect.DeepEqual(got[0], tt.give) {
				t.Fatalf("snapshot block = %+v, want %+v", got[0], tt.give)
			}
			evs, err := rt.follow(rt.snapshot().Gen, ev.Seq-1, ev.Seq)
			if err != nil || len(evs) != 1 || !reflect.DeepEqual(evs[0].Added, []*evm.Block{tt.give}) {
				t.Fatalf("followed %+v, %v; want the block back", evs, err)
			}
		})
	}
}

func TestRedisPublishInvalid(t *testing.T) {
	t.Parallel()
	rt := newRedisTest(t, 0)
	a := redisTestChain("a", redisTestHash("a", 0), 1, 3)
	tests := []struct {
		name string
		give *headstore.Event
	}{
		{name: "nil", give: nil},
		{name: "not contiguous", give: &headstore.Event{Added: []*evm.Block{a[0], a[2]}}},
		{name: "not linked", give: &headstore.Event{Added: []*evm.Block{a[0], redisTestBlock(2, redisTestHash("x", 2), redisTestHash("x", 1))}}},
		{name: "nil block", give: &headstore.Event{Added: []*evm.Block{nil}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := rt.s.Publish(rt.ctx, 1, tt.give)
			if err == nil || errors.Is(err, headstore.ErrFenced) {
				t.Errorf("Publish = %v, want an invalid-event error", err)
			}
		})
	}
	if n := rt.streamLen(); n != 0 {
		t.Errorf("stream holds %d events after invalid ones", n)
	}
}

// Two leaders publish at once, an old one and the current one: only the
// current one's events land, and the stream stays gapless.
func TestRedisConcurrentPublishers(t *testing.T) {
	t.Parallel()
	rt := newRedisTest(t, 0)
	rt.setEpoch(2)
	const each = 50
	var fenced [3]int // by epoch
	var other []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, epoch := range []uint64{1, 2} {
		blocks := redisTestChain("e"+strconv.FormatUint(epoch, 10), redisTestHash("genesis", 0), 1, each)
		wg.Go(func() {
			for _, b := range blocks {
				err := rt.s.Publish(rt.ctx, epoch, &headstore.Event{Epoch: epoch, Added: []*evm.Block{b}})
				mu.Lock()
				switch {
				case errors.Is(err, headstore.ErrFenced):
					fenced[epoch]++
				case err != nil:
					other = append(other, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(other) > 0 || fenced[1] != each || fenced[2] != 0 {
		t.Fatalf("fenced: epoch 1 %d, epoch 2 %d (want %d, 0); other errors %v", fenced[1], fenced[2], each, other)
	}
	entries, err := rt.rdb.XRange(rt.ctx, rt.key("events"), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != each {
		t.Errorf("stream holds %d events, want %d", len(entries), each)
	}
	for i, m := range entries {
		var e struct{ Epoch uint64 }
		if err := json.Unmarshal([]byte(m.Values["e"].(string)), &e); err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("%d-0", i+1); m.ID != want || e.Epoch != 2 {
			t.Errorf("entry %d: id %s epoch %d, want %s epoch 2", i, m.ID, e.Epoch, want)
		}
	}
	want := redisTestHashes(redisTestChain("e2", redisTestHash("genesis", 0), 1, each))
	if got := rt.canon(); !reflect.DeepEqual(got, want) {
		t.Errorf("canon = %v, want the current leader's blocks %v", got, want)
	}
	if rt.bodyExists(redisTestHash("e1", 1)) {
		t.Error("the fenced leader's block body was stored")
	}
}

// A body read back from Redis is the block written, byte for byte (its
// block and receipts as the remote sent them, escapes and spacing kept),
// and a body that is not what the leader writes is refused, not served.
func TestRedisBlockBody(t *testing.T) {
	b := &evm.Block{Number: 7, Hash: "0x" + strings.Repeat("ab", 32), Parent: "0x" + strings.Repeat("cd", 32),
		Raw:      json.RawMessage(`{"number":"0x7", "extraData":"\u003cx\u003e","transactions":[]}`),
		Receipts: json.RawMessage(`[ ]`)}
	body, err := encodeRedisBlock(b)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeRedisBlock(body)
	if err != nil {
		t.Fatal(err)
	}
	if got.Number != b.Number || got.Hash != b.Hash || got.Parent != b.Parent ||
		!bytes.Equal(got.Raw, b.Raw) || !bytes.Equal(got.Receipts, b.Receipts) {
		t.Fatalf("read back %+v, wrote %+v", got, b)
	}
	for _, give := range []string{``, `[]`, `{"number":7,"block":{"a":}`, `{"number":"7"}`, `{"hash":7}`, `{"number":1} x`} {
		if _, err := decodeRedisBlock([]byte(give)); err == nil {
			t.Errorf("%q: read as a block", give)
		}
	}
}

// TestStoreContract holds the Redis store to every Store's contract.
func TestStoreContract(t *testing.T) {
	t.Parallel()
	storetest.Contract(t, func(t *testing.T, window int) headstore.Store { return newRedisTest(t, window).s })
}
