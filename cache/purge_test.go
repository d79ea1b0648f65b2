package cache

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

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

// TestPurgeARemotesAnswersOnEveryReplica: two replicas on one Redis hold a
// liar's answer and an honest remote's; purging the liar's drops it from
// Redis and from both replicas' memory, and the next call asks upstream
// again; the honest remote's answer stays.
func TestPurgeARemotesAnswersOnEveryReplica(t *testing.T) {
	ra, rdb, chain := redisTier(t, RedisOptions{})
	rb := NewRedis(rdb, chain, RedisOptions{Timeout: testOpTimeout})
	cfg := testConfig()
	a, _ := newTestCache(t, cfg, cfg.RedisLayer(ra))
	b, _ := newTestCache(t, cfg, cfg.RedisLayer(rb))
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
	// Redis's one entry of the liar; a's memory, which keeps no remotes,
	// drops both.
	if err != nil || n != 3 {
		t.Fatalf("purge: %d, %v; want 3 entries", n, err)
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
