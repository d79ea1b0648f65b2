package cache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
)

// watchedRedis is a Redis tier that says when a replica starts waiting on
// another's claim.
type watchedRedis struct {
	*Redis
	once     sync.Once
	watching chan struct{}
}

func (w *watchedRedis) Watch(ctx context.Context, k Key) (Entry, bool, bool, error) {
	w.once.Do(func() { close(w.watching) })
	return w.Redis.Watch(ctx, k)
}

// reverter answers a revert (near the head: not stored), after release
// when it is not nil; it counts its calls and those made with a context
// already ended (a call that waited out its client's deadline).
type reverter struct {
	release chan struct{}
	calls   atomic.Int64
	late    atomic.Int64
}

func (r *reverter) fetch(ctx context.Context, _ string) (json.RawMessage, error) {
	r.calls.Add(1)
	if r.release != nil {
		<-r.release
	}
	if ctx.Err() != nil {
		r.late.Add(1)
	}
	return nil, &jrpc.Error{Code: 3, Message: "execution reverted", Data: json.RawMessage(`"0x"`)}
}

// claimConfig holds a claim far longer than any call of the tests may
// wait: a call that waits out a claim ends by its own deadline instead.
func claimConfig() Config {
	cfg := testConfig()
	cfg.ClaimHold = time.Minute
	return cfg
}

// TestClaimEndsWithItsFetch: a revert near the head is not stored, and
// the claim its miss took ends with the fetch: the same call asked again
// on the same replica goes upstream at once, never waiting on its own
// claim, and a replica waiting on another's claim learns that nothing is
// coming and asks upstream itself.
func TestClaimEndsWithItsFetch(t *testing.T) {
	ra, rdb, chain := redisTier(t, RedisOptions{})
	rb := &watchedRedis{Redis: NewRedis(rdb, chain, RedisOptions{Timeout: testOpTimeout}), watching: make(chan struct{})}
	cfg := claimConfig()
	a, _ := newTestCache(t, cfg, cfg.RedisLayer(ra))
	b, _ := newTestCache(t, cfg, cfg.RedisLayer(rb))
	v := newView(100, map[uint64]string{0x65: hashA})
	get := func() *evm.Call { return call("eth_call", `[{"to":"`+testAddr+`","data":"0x01"},"0x65"]`) }
	bounded := func() (context.Context, context.CancelFunc) { return context.WithTimeout(t.Context(), 10*time.Second) }

	up := &reverter{}
	for i := range 2 {
		ctx, cancel := bounded()
		_, err, o := a.Serve(ctx, get(), v, false, up.fetch)
		cancel()
		if je, ok := errors.AsType[*jrpc.Error](err); !ok || je.Code != 3 || o != Miss {
			t.Fatalf("call %d: %v %v, want the revert, a miss", i, err, o)
		}
	}
	if up.calls.Load() != 2 || up.late.Load() != 0 {
		t.Fatalf("upstream calls %d, %d after their deadline; want 2, none late: the second call waited on its replica's own claim",
			up.calls.Load(), up.late.Load())
	}

	// Replica a claims and fetches; b waits on a's claim until a's
	// revert, not stored, ends it.
	slow := &reverter{release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := bounded()
		defer cancel()
		_, err, _ := a.Serve(ctx, get(), v, false, slow.fetch)
		done <- err
	}()
	// a's claim is taken before its fetch is asked.
	if !testkit.Poll(10*time.Second, func() bool { return slow.calls.Load() == 1 }) {
		t.Fatal("replica a never asked upstream")
	}
	waiter := &reverter{}
	got := make(chan error, 1)
	go func() {
		ctx, cancel := bounded()
		defer cancel()
		_, err, _ := b.Serve(ctx, get(), v, false, waiter.fetch)
		got <- err
	}()
	<-rb.watching
	if waiter.calls.Load() != 0 {
		t.Fatal("replica b asked upstream while a held the claim")
	}
	close(slow.release)
	if err := <-done; err == nil {
		t.Fatal("replica a: no revert")
	}
	if err := <-got; err == nil {
		t.Fatal("replica b: no revert")
	}
	if waiter.calls.Load() != 1 || waiter.late.Load() != 0 {
		t.Fatalf("replica b asked upstream %d times, %d after its deadline; want once, in time: it waited for an answer that was not coming",
			waiter.calls.Load(), waiter.late.Load())
	}
}

// upstreamLatency is the simulated round trip of a remote in
// BenchmarkUncacheableRepeat.
const upstreamLatency = 2 * time.Millisecond

// BenchmarkUncacheableRepeat is a reverting eth_call near the head (an
// answer the cache does not keep) with Redis on, at the default
// claim_hold: asked for the first time (a new call each time), against
// the same call asked again and again. Before claims ended with their
// fetch, each repeat waited out the first call's claim (claim_hold).
func BenchmarkUncacheableRepeat(b *testing.B) {
	r, _, _ := redisTier(b, RedisOptions{})
	cfg := testConfig()
	c := New(cfg, Options{Chain: "dev", Lower: []Layer{cfg.RedisLayer(r)}, IsRevert: isRevert})
	defer c.Close()
	v := newView(100, map[uint64]string{0x65: hashA})
	up := func(context.Context, string) (json.RawMessage, error) {
		time.Sleep(upstreamLatency)
		return nil, &jrpc.Error{Code: 3, Message: "execution reverted", Data: json.RawMessage(`"0x"`)}
	}
	serve := func(b *testing.B, data string) {
		get := call("eth_call", `[{"to":"`+testAddr+`","data":"`+data+`"},"0x65"]`)
		if _, err, o := c.Serve(context.Background(), get, v, false, up); err == nil || o != Miss {
			b.Fatalf("%v %v, want a revert, a miss", err, o)
		}
	}
	calls := 0 // across the runs of the sub-benchmark: each call new
	b.Run("first", func(b *testing.B) {
		for range b.N {
			calls++
			serve(b, fmt.Sprintf("0x%08x", calls))
		}
	})
	b.Run("repeat", func(b *testing.B) {
		for range b.N {
			serve(b, "0x01")
		}
	})
}
