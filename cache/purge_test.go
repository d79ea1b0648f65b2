package cache

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
)

func TestPurgeMatches(t *testing.T) {
	at := time.UnixMilli(1_000_000)
	e := Entry{Method: "eth_call", Remote: "a,liar", Block: 20, Written: at.UnixMilli()}
	tests := []struct {
		give Purge
		want bool
	}{
		{Purge{}, true},
		{Purge{Method: "eth_call"}, true},
		{Purge{Method: "eth_getBalance"}, false},
		{Purge{Remote: "liar"}, true},
		{Purge{Remote: "lia"}, false},
		{Purge{From: 20, To: 20}, true},
		{Purge{From: 21}, false},
		{Purge{From: 1, To: 19}, false},
		{Purge{Since: at}, true},
		{Purge{Since: at.Add(time.Millisecond)}, false},
		{Purge{Remote: "a", Method: "eth_call", From: 10, To: 30, Since: at.Add(-time.Hour)}, true},
	}
	for _, tt := range tests {
		if got := tt.give.Matches(e); got != tt.want {
			t.Errorf("%+v matches %+v: %v, want %v", tt.give, e, got, tt.want)
		}
	}
	if (Purge{}).Matches(Entry{Block: 0}) != true || (Purge{From: 1}).Matches(Entry{Block: 0}) {
		t.Error("an entry by hash (block 0) is selected only without a range")
	}
	if (Purge{From: 5, To: 4}).Validate() == nil {
		t.Error("a range ending below its start is valid")
	}
}

// remoteUpstream answers as the remote it names, and counts its calls.
type remoteUpstream struct {
	name  string
	res   string
	calls atomic.Int64
}

func (u *remoteUpstream) fetch(ctx context.Context, _ string) (json.RawMessage, error) {
	u.calls.Add(1)
	jrpc.NoteOf(ctx).Upstream(u.name, 1)
	return json.RawMessage(u.res), nil
}

// followingReplicas is two caches on one Redis tier (ra, a's), b
// following the purges a publishes; it returns once b is subscribed.
func followingReplicas(t *testing.T) (a, b *Cache, ra *Redis) {
	t.Helper()
	ra, rdb, chain := redisTier(t, RedisOptions{})
	rb := NewRedis(rdb, chain, RedisOptions{Timeout: testOpTimeout})
	cfg := testConfig()
	a, _ = newTestCache(t, cfg, cfg.RedisLayer(ra))
	b, _ = newTestCache(t, cfg, cfg.RedisLayer(rb))
	ctx, cancel := context.WithCancel(t.Context())
	followed := make(chan struct{})
	go func() { defer close(followed); b.FollowPurges(ctx) }()
	t.Cleanup(func() { cancel(); <-followed })
	if !testkit.Poll(10*time.Second, func() bool {
		n, err := rdb.PubSubNumSub(t.Context(), "venn:{"+chain+"}:cache:purged").Result()
		return err == nil && n["venn:{"+chain+"}:cache:purged"] == 1
	}) {
		t.Fatal("replica b never followed the purges")
	}
	return a, b, ra
}

// TestPurgeARemotesAnswersOnEveryReplica: two replicas on one Redis hold a
// liar's answer and an honest remote's; purging the liar's drops it from
// Redis and from both replicas' memory, and the next call asks upstream
// again; the honest remote's answer stays.
func TestPurgeARemotesAnswersOnEveryReplica(t *testing.T) {
	a, b, _ := followingReplicas(t)
	v := newView(100, nil)
	lie := call("eth_getBalance", `["`+testAddr+`","0x10"]`)
	honest := call("eth_getBalance", `["`+testAddr+`","0x11"]`)
	liar := &remoteUpstream{name: "liar", res: `"0xbad"`}
	good := &remoteUpstream{name: "good", res: `"0x1"`}
	if _, _, o := a.Serve(t.Context(), lie, v, false, liar.fetch); o != Miss {
		t.Fatalf("the liar's call: %v, want a miss", o)
	}
	if _, _, o := a.Serve(t.Context(), honest, v, false, good.fetch); o != Miss {
		t.Fatalf("the honest call: %v, want a miss", o)
	}
	for _, c := range []*Cache{a, b} {
		for _, get := range []*evm.Call{lie, honest} {
			if _, _, o := c.Serve(t.Context(), get, v, false, good.fetch); o != Hit {
				t.Fatalf("before the purge: %v, want a hit", o)
			}
		}
	}
	n, err := a.Purge(t.Context(), Purge{Remote: "liar"})
	// The liar's one entry in Redis and in a's memory.
	if err != nil || n != 2 {
		t.Fatalf("purge: %d, %v; want 2 entries", n, err)
	}
	k := mustKey(t, lie, v)
	if !testkit.Poll(10*time.Second, func() bool { _, ok, _ := b.memory.Get(t.Context(), k); return !ok }) {
		t.Fatal("replica b still holds the liar's answer in memory")
	}
	for i, c := range []*Cache{a, b} {
		before := good.calls.Load()
		// a asks upstream again; b then finds a's new answer in Redis.
		if res, _, o := c.Serve(t.Context(), lie, v, false, good.fetch); o == Hit && i == 0 || string(res) != `"0x1"` {
			t.Fatalf("replica %d after the purge: %s %v, want the honest remote's answer", i, res, o)
		}
		if good.calls.Load() == before && i == 0 {
			t.Fatal("replica a did not ask upstream")
		}
		if _, _, o := c.Serve(t.Context(), honest, v, false, liar.fetch); o != Hit {
			t.Fatalf("replica %d: the honest answer after the purge: %v, want a hit", i, o)
		}
	}
}

// TestPurgeDistrustedSinceTheLastGoodCheck: a remote found out (on another
// chain, say) has its answers since its last good check dropped on every
// replica: Redis by remote and time; each replica's memory, which keeps no
// write times, every answer of that remote. Another remote's answers
// stay, and so do the remote's older ones in Redis. The purge is counted
// by remote and cause.
func TestPurgeDistrustedSinceTheLastGoodCheck(t *testing.T) {
	a, b, ra := followingReplicas(t)
	v := newView(100, nil)
	good := time.Now().Add(-time.Minute) // the switched remote's last good check
	entries := []struct {
		name    string
		remote  string
		written time.Time
		inRedis bool // kept in Redis after the purge
		inMem   bool // kept in memory after the purge
	}{
		{"before its last good check", "switched", good.Add(-time.Hour), true, false},
		{"after it", "switched", time.Now(), false, false},
		{"in a vote with it", "honest,switched", time.Now(), false, false},
		{"another remote's", "honest", time.Now(), true, true},
	}
	keys := make([]Key, len(entries))
	for i, e := range entries {
		keys[i] = mustKey(t, call("eth_getBalance", `["`+testAddr+`","`+evm.Quantity(uint64(10+i))+`"]`), v)
		en := Entry{Value: []byte(`"0x1"`), Settled: true, Method: "eth_getBalance", Block: uint64(10 + i),
			Remote: e.remote, Written: e.written.UnixMilli()}
		if err := ra.Set(t.Context(), keys[i], en, time.Hour); err != nil {
			t.Fatal(err)
		}
		for _, c := range []*Cache{a, b} {
			_ = c.memory.Set(t.Context(), keys[i], en, 0)
		}
	}
	if _, err := a.PurgeDistrusted(t.Context(), "switched", good, "wrong_chain"); err != nil {
		t.Fatal(err)
	}
	for i, e := range entries {
		if _, ok, _ := ra.Get(t.Context(), keys[i]); ok != e.inRedis {
			t.Errorf("%s: in Redis %v, want %v", e.name, ok, e.inRedis)
		}
		for j, c := range []*Cache{a, b} {
			if !testkit.Poll(10*time.Second, func() bool { _, ok, _ := c.memory.Get(t.Context(), keys[i]); return ok == e.inMem }) {
				t.Errorf("%s: replica %d's memory holds it: %v", e.name, j, !e.inMem)
			}
		}
	}
	if got := testutil.ToFloat64(a.m.distrusted.WithLabelValues(a.chain, "switched", "wrong_chain")); got != 1 {
		t.Errorf("venn_cache_distrust_purges_total = %v, want 1", got)
	}
	// A remote never checked good was never in rotation: nothing to drop.
	if n, err := a.PurgeDistrusted(t.Context(), "honest", time.Time{}, "wrong_chain"); n != 0 || err != nil {
		t.Errorf("a purge since no good check dropped %d entries (%v)", n, err)
	}
	if _, ok, _ := a.memory.Get(t.Context(), keys[3]); !ok {
		t.Error("a purge since no good check dropped an entry")
	}
}
