package cache

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/testkit"
)

// sampleEntries are answers of every shape: empty results, an error, a
// value with every byte, unsettled and settled.
var sampleEntries = []struct {
	name string
	give Entry
}{
	{"empty code", Entry{Value: []byte(`"0x"`), Settled: true, Method: "eth_getCode", Block: 1}},
	{"zero balance", Entry{Value: []byte(`"0x0"`), Method: "eth_getBalance", Block: 19_000_000}},
	{"revert", Entry{Value: []byte(`{"code":3,"message":"execution reverted","data":"0x08c379a0"}`),
		Error: true, Settled: true, Method: "eth_call", Block: 1 << 40}},
	{"every byte", Entry{Value: allBytes(), Settled: true, Method: "debug_traceTransaction"}},
	{"unknown block", Entry{Value: []byte(`{"a": 1,  "b":[ ]}`), Method: "eth_getProof"}},
}

func allBytes() []byte {
	b := make([]byte, 0, 512)
	for range 2 {
		for i := range 256 {
			b = append(b, byte(i))
		}
	}
	return b
}

func sameEntry(a, b Entry) bool {
	return bytes.Equal(a.Value, b.Value) && a.Error == b.Error && a.Settled == b.Settled &&
		a.Method == b.Method && a.Block == b.Block
}

// TestRedisRoundTrip: what Set stored, Get returns byte for byte; an
// unknown key is a miss without an error.
func TestRedisRoundTrip(t *testing.T) {
	r, _, _ := redisTier(t, RedisOptions{})
	ctx := t.Context()
	for _, tt := range sampleEntries {
		k := testKey(tt.name)
		if err := r.Set(ctx, k, tt.give, time.Minute); err != nil {
			t.Fatalf("%s: Set: %v", tt.name, err)
		}
		got, ok, err := r.Get(ctx, k)
		if err != nil || !ok || !sameEntry(got, tt.give) {
			t.Errorf("%s: Get = %+v, %v, %v; want %+v", tt.name, got, ok, err, tt.give)
		}
	}
	if _, ok, err := r.Get(ctx, testKey("nobody stored this")); ok || err != nil {
		t.Errorf("Get of an unknown key = %v, %v; want a miss", ok, err)
	}
	k := testKey(sampleEntries[0].name)
	if err := r.Delete(ctx, k); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := r.Get(ctx, k); ok || err != nil {
		t.Errorf("Get after Delete = %v, %v; want a miss", ok, err)
	}
}

// TestRedisTTL: every entry expires: after the TTL given, or the tier's
// max TTL when none is given or a longer one; the size counter an entry
// is counted in outlives it, by at most its slot.
func TestRedisTTL(t *testing.T) {
	const maxTTL = time.Hour
	r, rdb, chain := redisTier(t, RedisOptions{MaxTTL: maxTTL})
	ctx := t.Context()
	tests := []struct {
		give, want time.Duration
	}{
		{give: 90 * time.Second, want: 90 * time.Second},
		{give: 0, want: maxTTL},
		{give: 48 * time.Hour, want: maxTTL},
	}
	for i, tt := range tests {
		k := testKey("ttl " + strconv.Itoa(i))
		if err := r.Set(ctx, k, Entry{Value: []byte(`"0x1"`)}, tt.give); err != nil {
			t.Fatal(err)
		}
		got, err := rdb.PTTL(ctx, "venn:{"+chain+"}:c:"+k.String()).Result()
		if err != nil || got > tt.want || got < tt.want-10*time.Second {
			t.Errorf("Set for %v: PTTL %v, %v; want about %v", tt.give, got, err, tt.want)
		}
		slot, _ := sizeSlot(time.Now().Add(tt.want), tt.want)
		counter, err := rdb.PTTL(ctx, "venn:{"+chain+"}:cn:"+slot).Result()
		if err != nil || counter < got || counter > got+time.Hour {
			t.Errorf("Set for %v: its size counter's PTTL %v, %v; want the entry's %v and at most an hour more", tt.give, counter, err, got)
		}
	}
}

// TestRedisTooLarge: a value past the cap is refused with ErrTooLarge and
// not stored; one at the cap is.
func TestRedisTooLarge(t *testing.T) {
	r, rdb, chain := redisTier(t, RedisOptions{MaxEntryBytes: 10})
	ctx := t.Context()
	big, fits := testKey("big"), testKey("fits")
	if err := r.Set(ctx, big, Entry{Value: []byte(`"123456789"`)}, 0); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Set of 11 bytes under a cap of 10 = %v; want ErrTooLarge", err)
	}
	if n, err := rdb.Exists(ctx, "venn:{"+chain+"}:c:"+big.String()).Result(); err != nil || n != 0 {
		t.Fatalf("the refused entry exists: %d, %v", n, err)
	}
	if err := r.Set(ctx, fits, Entry{Value: []byte(`"12345678"`)}, 0); err != nil {
		t.Fatalf("Set of 10 bytes under a cap of 10 = %v", err)
	}
	if _, ok, err := r.Get(ctx, fits); !ok || err != nil {
		t.Fatalf("Get of the entry at the cap = %v, %v", ok, err)
	}
}

// TestRedisClaimShared: two replicas' tiers on one Redis: the first to
// claim a miss asks upstream, the other is told to wait, for the hold
// only; a replica's claim is its own again (it never waits on itself);
// storing the answer ends the claim, and so does a release, which the
// waiter watches.
func TestRedisClaimShared(t *testing.T) {
	a, rdb, chain := redisTier(t, RedisOptions{})
	b := NewRedis(boundedClient(t, "127.0.0.1:6379"), chain, RedisOptions{Timeout: testOpTimeout})
	ctx := t.Context()
	k := testKey("claimed")
	if mine, err := a.Claim(ctx, k, 2*time.Second); !mine || err != nil {
		t.Fatalf("first claim = %v, %v; want mine", mine, err)
	}
	if mine, err := b.Claim(ctx, k, 2*time.Second); mine || err != nil {
		t.Fatalf("second replica's claim = %v, %v; want not mine", mine, err)
	}
	if mine, err := a.Claim(ctx, k, 2*time.Second); !mine || err != nil {
		t.Fatalf("a second claim by the first = %v, %v; want mine", mine, err)
	}
	if _, ok, claimed, err := b.Watch(ctx, k); ok || !claimed || err != nil {
		t.Fatalf("watch of a held claim = %v, %v, %v; want claimed, no entry", ok, claimed, err)
	}
	if err := b.Release(ctx, k); err != nil {
		t.Fatal(err)
	}
	if _, _, claimed, _ := b.Watch(ctx, k); !claimed {
		t.Fatal("another replica's release ended the claim")
	}
	if err := a.Release(ctx, k); err != nil {
		t.Fatal(err)
	}
	if _, ok, claimed, err := b.Watch(ctx, k); ok || claimed || err != nil {
		t.Fatalf("watch after the release = %v, %v, %v; want neither entry nor claim", ok, claimed, err)
	}
	if mine, err := a.Claim(ctx, k, 2*time.Second); !mine || err != nil {
		t.Fatalf("claim after the release = %v, %v; want mine", mine, err)
	}
	if ttl, err := rdb.PTTL(ctx, "venn:{"+chain+"}:cc:"+k.String()).Result(); err != nil || ttl <= 0 || ttl > 2*time.Second {
		t.Fatalf("claim's PTTL %v, %v; want within the hold", ttl, err)
	}
	if err := a.Set(ctx, k, Entry{Value: []byte(`"0x2"`)}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if e, ok, _, err := b.Watch(ctx, k); !ok || err != nil || string(e.Value) != `"0x2"` {
		t.Fatalf("watch after the store = %s, %v, %v; want the entry", e.Value, ok, err)
	}
	if mine, err := b.Claim(ctx, k, 2*time.Second); !mine || err != nil {
		t.Fatalf("claim after the answer was stored = %v, %v; want mine", mine, err)
	}
}

// TestRedisSize: the entries stored and their bytes, each entry once
// however often it is stored.
func TestRedisSize(t *testing.T) {
	r, _, _ := redisTier(t, RedisOptions{})
	ctx := t.Context()
	var wantBytes int64
	for i, tt := range sampleEntries {
		k := testKey(tt.name)
		ttl := time.Duration(i+1) * 40 * time.Minute // across hours
		for range 2 {
			if err := r.Set(ctx, k, tt.give, ttl); err != nil {
				t.Fatal(err)
			}
		}
		wantBytes += int64(len(encodeEntry(tt.give)))
	}
	n, b, err := r.Size(ctx)
	if err != nil || n != int64(len(sampleEntries)) || b != wantBytes {
		t.Fatalf("Size = %d entries, %d bytes, %v; want %d, %d", n, b, err, len(sampleEntries), wantBytes)
	}
}

// TestRedisUnreachable: a Redis that refuses or hangs is an error within
// the tier's timeout, and then, for a pause, an ErrDown at once.
func TestRedisUnreachable(t *testing.T) {
	const timeout = 100 * time.Millisecond
	tests := []struct {
		name string
		addr func(testing.TB) string
	}{
		{"closed port", testkit.ClosedAddr},
		{"stalled", stallServer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRedis(boundedClient(t, tt.addr(t)), "down", RedisOptions{Timeout: timeout})
			ctx := t.Context()
			k := testKey("k")
			var err error
			if d := timed(func() { _, _, err = r.Get(ctx, k) }); err == nil || d > timeout+time.Second {
				t.Fatalf("Get = %v after %v; want an error within about %v", err, d, timeout)
			}
			if errors.Is(err, ErrDown) {
				t.Fatalf("first Get = %v; want Redis's own error", err)
			}
			calls := []func() error{
				func() error { _, _, err := r.Get(ctx, k); return err },
				func() error { return r.Set(ctx, k, Entry{Value: []byte(`1`)}, 0) },
				func() error { _, err := r.Claim(ctx, k, time.Second); return err },
				func() error { _, _, err := r.Size(ctx); return err },
				func() error { return r.Delete(ctx, k) },
			}
			for i, call := range calls {
				if d := timed(func() { err = call() }); !errors.Is(err, ErrDown) || d > 10*time.Millisecond {
					t.Errorf("call %d right after = %v in %v; want ErrDown at once", i, err, d)
				}
			}
			if mine, _ := r.Claim(ctx, k, time.Second); !mine {
				t.Error("Claim on a Redis that is down is not mine: a miss would wait for nobody")
			}

		})
	}
}

// TestRedisCallerGaveUp: a caller's deadline that passes before the
// tier's is Redis's failure (the pause starts); a caller that cancels says
// nothing of Redis.
func TestRedisCallerGaveUp(t *testing.T) {
	addr := stallServer(t)
	k := testKey("k")

	r := NewRedis(boundedClient(t, addr), "stalled", RedisOptions{Timeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if d := timed(func() { _, _, _ = r.Get(ctx, k) }); d > time.Second {
		t.Fatalf("Get under a 50ms deadline took %v", d)
	}
	if _, _, err := r.Get(t.Context(), k); !errors.Is(err, ErrDown) {
		t.Fatalf("Get after the caller's deadline passed = %v; want ErrDown", err)
	}

	r = NewRedis(boundedClient(t, addr), "stalled", RedisOptions{Timeout: 5 * time.Second})
	ctx, cancel = context.WithCancel(t.Context())
	cancel()
	if _, _, err := r.Get(ctx, k); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get of a cancelled caller = %v; want context.Canceled", err)
	}
	if err := r.out.allow(); err != nil {
		t.Fatalf("after a cancelled caller the tier pauses: %v", err)
	}
}
