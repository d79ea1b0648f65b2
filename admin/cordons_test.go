package admin

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/keyspace"
	"github.com/venn-gateway/venn/remotes"
)

// fakePool records the cordons it is given.
type fakePool struct {
	Pool // nil: only SetCordons is called
	mu   sync.Mutex
	got  [][]remotes.ManualCordon
}

func (p *fakePool) SetCordons(_ time.Time, cs []remotes.ManualCordon) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, cs)
	return nil
}

func (p *fakePool) calls() [][]remotes.ManualCordon {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.got
}

// fakeStore is a cordon store whose list runs a hook and fails on demand.
type fakeStore struct {
	memoryCordons
	onList func(chain string)
	fail   bool
}

func (f *fakeStore) list(ctx context.Context, chain string) ([]remotes.ManualCordon, error) {
	if f.onList != nil {
		f.onList(chain)
	}
	if f.fail {
		return nil, errors.New("redis down")
	}
	return f.memoryCordons.list(ctx, chain)
}

// TestSyncKeepsItsSnapshot: a reload that removes an earlier chain while
// a chain's cordons are being read neither panics nor lands them on
// another chain's pool.
func TestSyncKeepsItsSnapshot(t *testing.T) {
	pa, pb, pc := &fakePool{}, &fakePool{}, &fakePool{}
	var mu sync.Mutex
	chains := []Chain{{Name: "a", Pool: pa}, {Name: "b", Pool: pb}, {Name: "c", Pool: pc}}
	list := func() []Chain { mu.Lock(); defer mu.Unlock(); return chains }
	store := &fakeStore{memoryCordons: *newMemoryCordons()}
	_ = store.put(context.Background(), "b", remotes.ManualCordon{Remote: "n0"})
	s := newSyncer(store, list, time.Hour, time.Now, func(string, error) {})
	store.onList = func(string) { mu.Lock(); chains = chains[1:]; mu.Unlock() } // a reload drops "a"
	s.sync(context.Background(), "b")
	if len(pb.calls()) != 1 || len(pb.calls()[0]) != 1 || len(pc.calls()) != 0 {
		t.Fatalf("b got %v, c got %v: want b's cordon on b only", pb.calls(), pc.calls())
	}
	chains = []Chain{{Name: "a", Pool: pa}, {Name: "b", Pool: pb}, {Name: "c", Pool: pc}}
	s.sync(context.Background(), "c") // its index, 2, is past the end of the list after the reload
	if len(pc.calls()) != 1 {
		t.Fatalf("c got %v", pc.calls())
	}
}

// TestSyncReappliesWhenTheStoreFails: a failed read hands the pool the
// last list read again, so its expiry and the last-remote rule go on.
func TestSyncReappliesWhenTheStoreFails(t *testing.T) {
	p := &fakePool{}
	store := &fakeStore{memoryCordons: *newMemoryCordons()}
	_ = store.put(context.Background(), "a", remotes.ManualCordon{Remote: "n0", Until: time.Now().Add(time.Minute)})
	var errs int
	s := newSyncer(store, func() []Chain { return []Chain{{Name: "a", Pool: p}} }, time.Hour, time.Now,
		func(string, error) { errs++ })
	s.syncAll(context.Background())
	store.fail = true
	s.syncAll(context.Background())
	s.syncAll(context.Background())
	got := p.calls()
	if len(got) != 3 || len(got[2]) != 1 || got[2][0].Remote != "n0" || errs != 2 {
		t.Fatalf("pool got %v with %d errors: want the last list three times, two errors", got, errs)
	}
}

// waitSubscribed waits until n replicas listen on chain's cordon channel.
func waitSubscribed(t *testing.T, rdb redis.UniversalClient, chain string, n int64) {
	t.Helper()
	ch := keyspace.For(chain).CordonsNotify
	testkit.WaitFor(t, 5*time.Second, "replicas subscribed to "+ch, func() bool {
		m, err := rdb.PubSubNumSub(context.Background(), ch).Result()
		return err == nil && m[ch] == n
	})
}

// TestCordonReachesAnAddedChain: a chain a reload added hears of a cordon
// made on another replica by message, not by the resync (an hour here).
func TestCordonReachesAnAddedChain(t *testing.T) {
	rdb, token := testkit.Redis(t, func(token string) string { return "venn:{*" + token + "*}*" })
	first, added := "first-"+token, "added-"+token
	nodes := []*fakenode.Node{fakenode.Start(t, fakenode.Options{Head: 100}), fakenode.Start(t, fakenode.Options{Head: 100})}
	clk := &clock{now: time.Now()}
	hour := func(o *Options) { o.Config.CordonResync = time.Hour }
	a := startReplica(t, first, "a-"+token, nodes, rdb, clk, hour)
	b := startReplica(t, first, "b-"+token, nodes, rdb, clk, hour)
	t.Cleanup(func() { rdb.HDel(context.Background(), keyspace.Replicas, "a-"+token, "b-"+token) })
	var pools []*remotes.Pool
	for _, r := range []*replica{a, b} {
		p := startPool(t, added, nodes, prometheus.NewRegistry())
		pools = append(pools, p)
		r.admin.setChains(context.Background(), []Chain{{Name: first, Pool: r.pool, Heads: r.pool.Heads()}, {Name: added, Pool: p, Heads: p.Heads()}})
	}
	waitSubscribed(t, rdb, added, 2)
	if code, body := testkit.AdminDo(t, "POST", a.srv.URL+"/admin/chains/"+added+"/remotes/n1/cordon", testToken, `{}`); code != http.StatusOK {
		t.Fatalf("cordon = %d %s", code, body)
	}
	testkit.WaitFor(t, time.Second, "n1 cordoned on b's added chain", func() bool { return outBy(pools[1], "n1") })
}
