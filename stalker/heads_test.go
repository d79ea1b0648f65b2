package stalker

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/keyspace"
	"github.com/venn-gateway/venn/remotes"
)

// fakeHeadPool is a pool's head side: heads to publish, and what the feed
// gave it.
type fakeHeadPool struct {
	mu     sync.Mutex
	heads  []remotes.RemoteHead
	claims chan struct{}
	fed    []remotes.RemoteHead // nil: tracking itself
	tracks int
}

func newFakeHeadPool(heads ...remotes.RemoteHead) *fakeHeadPool {
	return &fakeHeadPool{heads: heads, claims: make(chan struct{})}
}

func (p *fakeHeadPool) RemoteHeads() []remotes.RemoteHead {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]remotes.RemoteHead(nil), p.heads...)
}

func (p *fakeHeadPool) ClaimsChanged() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.claims
}

// report is a remote reporting a new head.
func (p *fakeHeadPool) report(h remotes.RemoteHead) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.heads = []remotes.RemoteHead{h}
	close(p.claims)
	p.claims = make(chan struct{})
}

func (p *fakeHeadPool) FeedHeads(hs []remotes.RemoteHead) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fed = append([]remotes.RemoteHead{}, hs...)
}

func (p *fakeHeadPool) TrackHeads() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fed = nil
	p.tracks++
}

func (p *fakeHeadPool) Fed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.fed)
}

// fedNumber is the head number fed for the one remote; 0: none.
func (p *fakeHeadPool) fedNumber() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.fed) != 1 {
		return 0
	}
	return p.fed[0].Number
}

func (p *fakeHeadPool) BlockTime() time.Duration { return 50 * time.Millisecond }

func head(n uint64) remotes.RemoteHead {
	return remotes.RemoteHead{Remote: "n0", Number: n, Hash: "0x01", Parent: "0x02", Time: n}
}

// headsChain is a chain of its own with a leadership's epoch, its keys
// deleted at cleanup.
func headsChain(t *testing.T) (chain string, epoch uint64, rdb *redis.Client) {
	t.Helper()
	rdb = newRedis(t)
	chain = testChain(t, rdb)
	t.Cleanup(func() { rdb.Del(context.Background(), keyspace.For(chain).Heads) })
	epoch, ok, err := newElector(t, rdb, chain, "leader", time.Minute).Acquire(t.Context())
	if err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	return chain, epoch, rdb
}

// goRun runs f until the test ends or stop is called.
func goRun(t *testing.T, f func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { f(ctx) })
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return stop
}

// The leader publishes each remote's new head and followers take it; when
// the leader stops, the follower's feed goes stale and it tracks the heads
// itself, until a leader publishes again.
func TestHeadShareFeedsFollowersAndGoesStale(t *testing.T) {
	chain, epoch, rdb := headsChain(t)
	lp, fp := newFakeHeadPool(head(100)), newFakeHeadPool()
	m := NewHeadShareMetrics(nil)
	leader := NewHeadShare(rdb, chain, lp, testLogger(t), nil)
	follower := NewHeadShare(rdb, chain, fp, testLogger(t), m)
	goRun(t, follower.Run)
	stopLead := goRun(t, func(ctx context.Context) { leader.Lead(ctx, epoch) })

	testkit.WaitFor(t, 5*time.Second, "the follower fed head 100", func() bool { return fp.fedNumber() == 100 })
	if got, want := follower.Mode(), HeadsFeed; got != want {
		t.Errorf("follower mode %q, want %q", got, want)
	}
	if got := leader.Mode(); got != HeadsLeader {
		t.Errorf("leader mode %q, want %q", got, HeadsLeader)
	}
	lp.report(head(101))
	testkit.WaitFor(t, 5*time.Second, "the follower fed head 101", func() bool { return fp.fedNumber() == 101 })

	stopLead()
	testkit.WaitFor(t, 5*time.Second, "the follower tracking the heads itself", func() bool { return fp.Fed() == 0 })
	if got := follower.Mode(); got != HeadsOwn {
		t.Errorf("follower mode %q after the leader left, want %q", got, HeadsOwn)
	}
	if got := testutil.ToFloat64(m.stale.WithLabelValues(chain)); got != 1 {
		t.Errorf("venn_head_feed_stale_total = %v, want 1", got)
	}

	goRun(t, func(ctx context.Context) { leader.Lead(ctx, epoch) })
	testkit.WaitFor(t, 5*time.Second, "the follower fed again", func() bool { return fp.fedNumber() == 101 })
	if got := follower.Mode(); got != HeadsFeed {
		t.Errorf("follower mode %q with a leader back, want %q", got, HeadsFeed)
	}
}

// A follower that starts after the leader's last report reads it from
// Redis at once; a deposed leader's report is refused and reaches nobody;
// a report whose heads are all older than the staleness limit is not
// routed on.
func TestHeadShareSnapshotFencingAndStaleHeads(t *testing.T) {
	chain, epoch, rdb := headsChain(t)
	lp := newFakeHeadPool(head(7))
	leader := NewHeadShare(rdb, chain, lp, testLogger(t), nil)
	if err := leader.publish(t.Context(), epoch); err != nil {
		t.Fatal(err)
	}
	if err := leader.publish(t.Context(), epoch-1); err == nil || !strings.HasPrefix(err.Error(), "FENCED") {
		t.Fatalf("publish under an old epoch = %v, want FENCED", err)
	}
	fp := newFakeHeadPool()
	follower := NewHeadShare(rdb, chain, fp, testLogger(t), nil)
	goRun(t, follower.Run)
	testkit.WaitFor(t, 5*time.Second, "the follower fed from the snapshot", func() bool { return fp.fedNumber() == 7 })

	old := head(8)
	old.Age = time.Minute
	lp.report(old)
	if err := leader.publish(t.Context(), epoch); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 5*time.Second, "the follower tracking itself", func() bool { return fp.Fed() == 0 })
	if got := follower.Mode(); got != HeadsOwn {
		t.Errorf("follower mode %q on a report of minute-old heads, want %q", got, HeadsOwn)
	}
}

// A report taken longer ago than the staleness limit is old news, such as
// the reports a paused follower finds queued when it wakes: it is not fed,
// though its heads were new when it was taken. One taken just now is.
func TestHeadShareIgnoresOldReports(t *testing.T) {
	fp := newFakeHeadPool()
	follower := NewHeadShare(nil, "old-reports", fp, testLogger(t), nil)
	stale := time.NewTimer(time.Hour)
	defer stale.Stop()
	report := func(at time.Time, n uint64) string {
		b, err := json.Marshal(headsReport{Epoch: 1, Heads: []remotes.RemoteHead{head(n)}, At: at.UnixNano()})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	follower.take(report(time.Now().Add(-time.Minute), 9), time.Second, stale)
	if got := fp.fedNumber(); got != 0 {
		t.Fatalf("a minute-old report fed head %d", got)
	}
	follower.take(report(time.Now(), 10), time.Second, stale)
	if got := fp.fedNumber(); got != 10 {
		t.Fatalf("a report taken now fed head %d, want 10", got)
	}
}
