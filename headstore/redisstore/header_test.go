package redisstore

import (
	"context"
	"errors"
	"testing"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
)

// TestHeaderCodec: a header crosses the channel byte for byte.
func TestHeaderCodec(t *testing.T) {
	b := redisTestBlock(5, redisTestHash("a", 5), redisTestHash("a", 4))
	h, ok := headstore.HeaderOf(b.Raw)
	if !ok {
		t.Fatal("no header")
	}
	h.Epoch, h.Time = 7, 12345
	enc, err := encodeHeader(h)
	if err != nil {
		t.Fatal(err)
	}
	back, err := decodeHeader(enc)
	if err != nil {
		t.Fatalf("decode %s: %v", enc, err)
	}
	if back.Number != h.Number || back.Hash != h.Hash || back.Parent != h.Parent || string(back.Raw) != string(h.Raw) ||
		back.Epoch != 7 || back.Time != 12345 {
		t.Errorf("round trip %+v, want %+v", back, h)
	}
	for _, bad := range []string{``, `[]`, `{"number":1}`, `{"hash":"0x1"}`} {
		if _, err := decodeHeader([]byte(bad)); err == nil {
			t.Errorf("decode %q: no error", bad)
		}
	}
}

// followHeaders follows s's headers into a fresh window until the test
// ends.
func followHeaders(t *testing.T, s headstore.HeaderStore) *headstore.Window {
	t.Helper()
	w := headstore.NewWindow(8)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.FollowHeaders(ctx, w.Announce)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// listening reports whether someone follows rt's headers.
func (rt *redisTest) listening() bool {
	n, err := rt.rdb.PubSubNumSub(rt.ctx, rt.s.keys.Headers).Result()
	if err != nil {
		rt.t.Fatal(err)
	}
	return n[rt.s.keys.Headers] > 0
}

// announce publishes h once a follower listens (a header sent before is
// not replayed), and waits until w has it.
func (rt *redisTest) announce(epoch uint64, w *headstore.Window, h *headstore.Header) {
	rt.t.Helper()
	for i := 0; !rt.listening(); i++ {
		if i == 10_000 {
			rt.t.Fatal("the follower never listened")
		}
	}
	heard := w.Announced()
	if err := rt.s.PublishHeader(rt.ctx, epoch, h); err != nil {
		rt.t.Fatalf("publish header: %v", err)
	}
	<-heard
}

// TestRedisHeaders: a header published under the leader's epoch reaches a
// follower byte for byte; one under a stale epoch is fenced.
func TestRedisHeaders(t *testing.T) {
	t.Parallel()
	rt := newRedisTest(t, 8)
	rt.setEpoch(3)
	w := followHeaders(t, rt.s)
	b := redisTestBlock(5, redisTestHash("a", 5), redisTestHash("a", 4))
	h, ok := headstore.HeaderOf(b.Raw)
	if !ok {
		t.Fatal("no header")
	}
	rt.announce(3, w, h)
	got := w.Ahead()
	if len(got) != 1 || got[0].Hash != b.Hash || got[0].Parent != b.Parent || got[0].Number != 5 ||
		string(got[0].Raw) != string(h.Raw) || got[0].Epoch != 3 || got[0].Time == 0 {
		t.Fatalf("follower heard %+v, want %+v", got, h)
	}
	err := rt.s.PublishHeader(rt.ctx, 2, &headstore.Header{Number: 6, Hash: "0x6", Parent: b.Hash, Raw: []byte(`{}`)})
	if !errors.Is(err, headstore.ErrFenced) {
		t.Fatalf("publish header under a stale epoch = %v, want ErrFenced", err)
	}
}

// TestFollowerHeaders: the Follower hands the headers to its window
// beside the events, and the window answers the announced number as the
// head until the block comes.
func TestFollowerHeaders(t *testing.T) {
	t.Parallel()
	rt := newRedisTest(t, 8)
	blocks := redisTestChain("a", redisTestHash("a", 0), 1, 3)
	rt.publishEach(1, blocks)
	w := headstore.NewWindow(8)
	f := headstore.NewFollower(rt.chain, rt.s, w, nil, nil)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for {
		changed := w.Changed()
		if n, ok := w.Latest(); ok && n == 3 {
			break
		}
		<-changed
	}
	next := redisTestBlock(4, redisTestHash("a", 4), blocks[2].Hash)
	h, _ := headstore.HeaderOf(next.Raw)
	rt.announce(1, w, h)
	if got, ok := w.Answer(evm.ParseCall("eth_blockNumber", nil)); !ok || string(got) != `"0x4"` {
		t.Fatalf("eth_blockNumber = %s, %v; want the announced 0x4", got, ok)
	}
	rt.publish(1, &headstore.Event{Added: []*evm.Block{next}})
	for {
		changed := w.Changed()
		if len(w.Ahead()) == 0 {
			break
		}
		<-changed
	}
}
