package stalker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/keyspace"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const redisAddr = "127.0.0.1:6379"

// newRedis returns a client of the test Redis, closed at cleanup.
func newRedis(t *testing.T, opts ...func(*redis.Options)) *redis.Client {
	t.Helper()
	o := &redis.Options{Addr: redisAddr}
	for _, opt := range opts {
		opt(o)
	}
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("redis at %s: %v", redisAddr, err)
	}
	return rdb
}

// testChain returns a chain name unique to this run and deletes its keys at
// cleanup (through rdb, which must outlive the cleanup: create it first).
func testChain(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	chain := "test-" + strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()) + "-" + hex.EncodeToString(b[:])
	t.Cleanup(func() { rdb.Del(context.Background(), keyspace.For(chain).Lease, keyspace.For(chain).Epoch) })
	return chain
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testTTL is the lease TTL of the tests that race a leader's clock against
// Redis's. A leader steps down TTL/4 before its lease can expire and has
// TTL/2 to spare for each renew; those margins are what the tests prove,
// so they must exceed what a loaded two-core machine delays a goroutine
// (hundreds of milliseconds). Shorter leases make the tests measure the
// scheduler instead.
const testTTL = DefaultLeaseTTL

func newElector(t *testing.T, rdb redis.UniversalClient, chain, id string, ttl time.Duration) *RedisElector {
	return NewRedisElector(rdb, ElectionConfig{Chain: chain, ReplicaID: id, TTL: ttl, Logger: testLogger(t)})
}

// campaign runs e.Run until stop is called or the test ends; stop waits for
// Run to return.
func campaign(t *testing.T, e Elector, lead func(context.Context, uint64)) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Run(ctx, lead)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			// A client that ignores deadlines holds Run for a renew
			// and a release of up to ReadTimeout each.
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Errorf("Run did not return after its context ended")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// eventually polls cond until it holds or within passes.
func eventually(t *testing.T, within time.Duration, cond func() bool, what string) {
	t.Helper()
	testkit.WaitFor(t, within, what, cond)
}

// term is one leadership as lead saw it.
type term struct {
	who        string
	epoch      uint64
	start, end time.Time
	cause      error // of the lead context
}

// tracker hands out lead funcs and records their terms. leading counts the
// leads running at once; more than one is a split brain.
type tracker struct {
	leading atomic.Int32
	overlap atomic.Bool

	mu    sync.Mutex
	terms []term
}

// lead returns a lead func for who that holds leadership for hold (0: until
// its context ends).
func (tr *tracker) lead(who string, hold time.Duration) func(context.Context, uint64) {
	return func(ctx context.Context, epoch uint64) {
		if tr.leading.Add(1) > 1 {
			tr.overlap.Store(true)
		}
		tr.mu.Lock()
		i := len(tr.terms)
		tr.terms = append(tr.terms, term{who: who, epoch: epoch, start: time.Now()})
		tr.mu.Unlock()

		var after <-chan time.Time
		if hold > 0 {
			after = time.After(hold)
		}
		select {
		case <-ctx.Done():
		case <-after:
		}

		// Done leading before it says so.
		tr.leading.Add(-1)
		tr.mu.Lock()
		tr.terms[i].end = time.Now()
		tr.terms[i].cause = context.Cause(ctx)
		tr.mu.Unlock()
	}
}

func (tr *tracker) snapshot() []term {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]term(nil), tr.terms...)
}

// current is the running term, if any.
func (tr *tracker) current() (term, bool) {
	ts := tr.snapshot()
	if len(ts) == 0 || !ts[len(ts)-1].end.IsZero() {
		return term{}, false
	}
	return ts[len(ts)-1], true
}

// Three replicas that keep handing leadership over: never two leaders, and
// every new leadership has a higher epoch.
func TestOneLeaderAtATime(t *testing.T) {
	t.Parallel()
	const want = 6 // terms
	rdb := newRedis(t)
	chain := testChain(t, rdb)
	var tr tracker
	for _, id := range []string{"a", "b", "c"} {
		// Short terms, so leadership moves between them while we watch.
		campaign(t, newElector(t, newRedis(t), chain, id, testTTL), tr.lead(id, 60*time.Millisecond))
	}

	// Hand-overs come at the replicas' retries, every TTL/4: a handful
	// take a few seconds, however slow the machine, as long as it gets
	// there.
	watchUntil(t, 10*want*testTTL/4, func() bool { return len(tr.snapshot()) >= want }, func() {
		if n := tr.leading.Load(); n > 1 {
			t.Fatalf("%d leaders at once", n)
		}
	}, strconv.Itoa(want)+" terms")
	if tr.overlap.Load() {
		t.Fatal("two leads overlapped")
	}

	terms := tr.snapshot()
	who := map[string]bool{}
	for i, tm := range terms {
		who[tm.who] = true
		if i == 0 {
			continue
		}
		prev := terms[i-1]
		if tm.epoch <= prev.epoch {
			t.Errorf("term %d (%s) epoch %d after epoch %d", i, tm.who, tm.epoch, prev.epoch)
		}
		if prev.end.IsZero() || tm.start.Before(prev.end) {
			t.Errorf("term %d (%s) started before term %d ended", i, tm.who, i-1)
		}
	}
	if len(who) < 2 {
		t.Errorf("leadership never moved: %v", who)
	}
}

// during calls check every millisecond for d.
func during(d time.Duration, check func()) {
	end := time.NewTimer(d)
	defer end.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		check()
		select {
		case <-end.C:
			return
		case <-tick.C:
		}
	}
}

// watchUntil calls check every millisecond until done holds; done not
// holding within fails the test.
func watchUntil(t *testing.T, within time.Duration, done func() bool, check func(), what string) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		check()
		if done() {
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("not within %v: %s", within, what)
		case <-tick.C:
		}
	}
}

// A leader that shuts down cleanly releases the lease: the next one takes
// over at its next retry, not after the TTL.
func TestCleanShutdownHandsOver(t *testing.T) {
	t.Parallel()
	const ttl = testTTL
	rdb := newRedis(t)
	chain := testChain(t, rdb)
	var tr tracker
	electors := map[string]*RedisElector{}
	stops := map[string]func(){}
	for _, id := range []string{"a", "b"} {
		electors[id] = newElector(t, rdb, chain, id, ttl)
		stops[id] = campaign(t, electors[id], tr.lead(id, 0))
	}
	var first term
	eventually(t, 2*time.Second, func() (ok bool) { first, ok = tr.current(); return ok }, "a leader")

	t0 := time.Now()
	stops[first.who]()
	if got := tr.snapshot()[0]; got.end.IsZero() {
		t.Fatal("Run returned before lead did")
	}
	v, err := rdb.Get(t.Context(), keyspace.For(chain).Lease).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	if v == electors[first.who].value(first.epoch) {
		t.Fatalf("lease %q still held after clean shutdown", v)
	}

	var next term
	eventually(t, ttl, func() (ok bool) { next, ok = tr.current(); return ok }, "the other replica to take over")
	if next.who == first.who {
		t.Fatalf("stopped replica %s leads again", next.who)
	}
	if took := next.start.Sub(t0); took >= ttl {
		t.Errorf("takeover took %v, want < TTL %v", took, ttl)
	}
	if next.epoch <= first.epoch {
		t.Errorf("epoch %d after %d", next.epoch, first.epoch)
	}
}

// A leader that dies without releasing (kill -9) is replaced once its lease
// expires, and not before.
func TestDeadLeaderReplaced(t *testing.T) {
	t.Parallel()
	const ttl = testTTL
	tests := []struct {
		name string
		// die makes replica a lead and then die; it returns a's epoch and,
		// when known, the earliest its lease can expire.
		die func(t *testing.T, chain string, tr *tracker) (epoch uint64, expiresAfter time.Time)
	}{
		{
			name: "abandoned acquire",
			die: func(t *testing.T, chain string, _ *tracker) (uint64, time.Time) {
				a := newElector(t, newRedis(t), chain, "a", ttl)
				sent := time.Now()
				epoch, ok, err := a.Acquire(t.Context())
				if err != nil || !ok {
					t.Fatalf("Acquire = %v, %v", ok, err)
				}
				// Redis counts the TTL in whole milliseconds from receipt.
				return epoch, sent.Add(ttl - 2*time.Millisecond)
			},
		},
		{
			name: "client closed under Run",
			die: func(t *testing.T, chain string, tr *tracker) (uint64, time.Time) {
				rdb := newRedis(t)
				campaign(t, newElector(t, rdb, chain, "a", ttl), tr.lead("a", 0))
				var cur term
				eventually(t, time.Second, func() (ok bool) { cur, ok = tr.current(); return ok }, "a to lead")
				// When a last renewed is unknown: the overlap check covers it.
				_ = rdb.Close()
				return cur.epoch, time.Time{}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rdb := newRedis(t)
			chain := testChain(t, rdb)
			var tr tracker
			epochA, expiresAfter := tt.die(t, chain, &tr)
			t0 := time.Now()
			campaign(t, newElector(t, rdb, chain, "b", ttl), tr.lead("b", 0))

			var b term
			// Within about TTL + TTL/4 (b's retry), with time to spare.
			eventually(t, 2*ttl, func() bool {
				var ok bool
				b, ok = tr.current()
				return ok && b.who == "b"
			}, "b to take over")
			if tr.overlap.Load() {
				t.Fatal("a still led when b took over")
			}
			if b.epoch <= epochA {
				t.Errorf("b's epoch %d, a's %d", b.epoch, epochA)
			}
			if !expiresAfter.IsZero() && b.start.Before(expiresAfter) {
				t.Errorf("b took over %v before a's lease could expire", expiresAfter.Sub(b.start))
			}
			t.Logf("replaced after %v", b.start.Sub(t0))
		})
	}
}

// A leader that pauses past its TTL finds its lease gone: its renew fails,
// its release leaves the new lease alone, and the new epoch is higher. The
// same holds for a restart under the same replica ID.
func TestPausedLeader(t *testing.T) {
	t.Parallel()
	const ttl = testTTL
	tests := []struct {
		name string
		idA  string
		idB  string
	}{
		{name: "other replica", idA: "a", idB: "b"},
		{name: "same replica restarted", idA: "a", idB: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rdb := newRedis(t)
			chain := testChain(t, rdb)
			ctx := t.Context()
			a := newElector(t, rdb, chain, tt.idA, ttl)
			b := newElector(t, rdb, chain, tt.idB, ttl)

			epochA, ok, err := a.Acquire(ctx)
			if err != nil || !ok {
				t.Fatalf("a.Acquire = %v, %v", ok, err)
			}
			if _, ok, err := b.Acquire(ctx); err != nil || ok {
				t.Fatalf("b.Acquire while a holds = %v, %v; want false", ok, err)
			}
			if ok, err := a.Renew(ctx, epochA); err != nil || !ok {
				t.Fatalf("a.Renew while it holds = %v, %v", ok, err)
			}

			// a pauses; b polls until the lease expires.
			var epochB uint64
			eventually(t, 2*ttl, func() bool {
				var err error
				epochB, ok, err = b.Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return ok
			}, "b to acquire")

			if ok, err := a.Renew(ctx, epochA); err != nil || ok {
				t.Errorf("a.Renew after b acquired = %v, %v; want false", ok, err)
			}
			if epochB <= epochA {
				t.Errorf("epoch b %d, a %d", epochB, epochA)
			}
			if err := a.Release(ctx, epochA); err != nil {
				t.Fatal(err)
			}
			if ok, err := b.Renew(ctx, epochB); err != nil || !ok {
				t.Errorf("b.Renew after a's release = %v, %v; want true", ok, err)
			}
			if err := b.Release(ctx, epochB); err != nil {
				t.Fatal(err)
			}
			if n, _ := rdb.Exists(ctx, keyspace.For(chain).Lease).Result(); n != 0 {
				t.Error("lease still there after b's release")
			}
		})
	}
}

// Redis loses its data (a restart without persistence): the leader steps
// down at its next renew and a leader is elected again, with an epoch above
// the old one's (the counter restarts from Redis's clock), so the old
// leader's writes are fenced even while the two overlap, until the old
// one's next renew.
func TestRedisDataLoss(t *testing.T) {
	t.Parallel()
	const ttl = testTTL
	rdb := newRedis(t)
	chain := testChain(t, rdb)
	var tr tracker
	for _, id := range []string{"a", "b"} {
		campaign(t, newElector(t, rdb, chain, id, ttl), tr.lead(id, 0))
	}
	var old term
	eventually(t, 2*time.Second, func() (ok bool) { old, ok = tr.current(); return ok }, "a leader")

	t0 := time.Now()
	if err := rdb.Del(t.Context(), keyspace.For(chain).Lease, keyspace.For(chain).Epoch).Err(); err != nil {
		t.Fatal(err)
	}
	eventually(t, ttl, func() bool { return !tr.snapshot()[0].end.IsZero() }, "the old leader to step down")
	if got := tr.snapshot()[0]; !errors.Is(got.cause, errLeaseLost) {
		t.Errorf("old leader stepped down with %v, want %v", got.cause, errLeaseLost)
	} else {
		t.Logf("old leader %s stepped down after %v", old.who, got.end.Sub(t0))
	}

	var next term
	eventually(t, 2*ttl, func() bool {
		terms := tr.snapshot()
		next = terms[len(terms)-1]
		return len(terms) > 1 && next.end.IsZero()
	}, "a new leader")
	if next.epoch <= old.epoch {
		t.Errorf("new epoch %d after %d: the old leader's writes would pass the fence", next.epoch, old.epoch)
	}
	v, err := rdb.Get(t.Context(), keyspace.For(chain).Lease).Result()
	if want := next.who + ":" + strconv.FormatUint(next.epoch, 10); err != nil || v != want {
		t.Errorf("lease = %q, %v; want %q", v, err, want)
	}
}

// blackhole makes a Redis connection drop every write once it is on, as a
// dead network would: requests hang until their deadline.
type blackhole struct{ on atomic.Bool }

func (b *blackhole) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &holeConn{Conn: c, b: b}, nil
}

type holeConn struct {
	net.Conn
	b *blackhole
}

func (c *holeConn) Write(p []byte) (int, error) {
	if c.b.on.Load() {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// A leader that cannot renew (its requests hang) steps down by its own clock
// while Redis still holds its lease: before anyone else can lead. It does so
// on time even when the client ignores the deadlines it is given.
func TestDeposedByClock(t *testing.T) {
	t.Parallel()
	const ttl = testTTL
	tests := []struct {
		name string
		opts func(*redis.Options)
	}{
		{name: "client honours deadlines", opts: func(o *redis.Options) { o.ContextTimeoutEnabled = true }},
		{name: "client ignores deadlines", opts: func(o *redis.Options) {
			o.ContextTimeoutEnabled = false
			o.ReadTimeout = ttl // a renew hangs past the step-down deadline
			o.MaxRetries = -1
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rdb := newRedis(t)
			chain := testChain(t, rdb)
			var hole blackhole
			a := newElector(t, newRedis(t, tt.opts, func(o *redis.Options) { o.Dialer = hole.dial }), chain, "a", ttl)

			type stepDown struct {
				at    time.Time
				cause error
				pttl  time.Duration
				lease string
			}
			down := make(chan stepDown, 1)
			leading := make(chan uint64, 1)
			campaign(t, a, func(ctx context.Context, epoch uint64) {
				select {
				case leading <- epoch:
				default: // only the first term is watched
					return
				}
				<-ctx.Done()
				// What Redis holds at the moment a stops leading.
				s := stepDown{at: time.Now(), cause: context.Cause(ctx)}
				s.pttl = rdb.PTTL(context.Background(), keyspace.For(chain).Lease).Val()
				s.lease = rdb.Get(context.Background(), keyspace.For(chain).Lease).Val()
				down <- s
			})
			var epoch uint64
			select {
			case epoch = <-leading:
			case <-time.After(2 * time.Second):
				t.Fatal("a did not lead")
			}

			t0 := time.Now()
			hole.on.Store(true)
			var s stepDown
			select {
			case s = <-down:
			case <-time.After(2 * ttl):
				t.Fatal("a still leads after 2 TTL without a renew")
			}
			if took := s.at.Sub(t0); took >= ttl {
				t.Errorf("a stepped down %v after renews stopped, want < TTL %v", took, ttl)
			}
			if !errors.Is(s.cause, errRenewDeadline) {
				t.Errorf("cause %v, want %v", s.cause, errRenewDeadline)
			}
			if want := a.value(epoch); s.lease != want || s.pttl <= 0 {
				t.Errorf("when a stepped down Redis held %q for %v more; want %q still alive", s.lease, s.pttl, want)
			}
		})
	}
}

// A lead that panics: Run panics too, after it stopped renewing and freed
// the lease.
func TestLeadPanics(t *testing.T) {
	t.Parallel()
	rdb := newRedis(t)
	chain := testChain(t, rdb)
	e := newElector(t, rdb, chain, "a", time.Second)
	recovered := make(chan any, 1)
	go func() {
		defer func() { recovered <- recover() }()
		e.Run(t.Context(), func(context.Context, uint64) { panic("boom") })
	}()
	select {
	case got := <-recovered:
		if got != "boom" {
			t.Fatalf("Run panicked with %v, want boom", got)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not panic")
	}
	if n, _ := rdb.Exists(t.Context(), keyspace.For(chain).Lease).Result(); n != 0 {
		t.Error("lease not released after lead panicked")
	}
}

// Each chain elects its own leader, and a healthy leader keeps leading
// across many TTLs.
func TestChainsIndependent(t *testing.T) {
	t.Parallel()
	const ttl = testTTL
	rdb := newRedis(t)
	chains := []string{testChain(t, rdb), testChain(t, rdb)}
	trackers := make([]*tracker, len(chains))
	for i, chain := range chains {
		trackers[i] = &tracker{}
		for _, id := range []string{"a", "b"} {
			campaign(t, newElector(t, rdb, chain, id, ttl), trackers[i].lead(id, 0))
		}
	}
	for i, tr := range trackers {
		eventually(t, 2*time.Second, func() bool { return tr.leading.Load() == 1 }, "a leader of "+chains[i])
	}
	during(3*ttl, func() {
		for i, tr := range trackers {
			if n := tr.leading.Load(); n != 1 {
				t.Fatalf("%s has %d leaders", chains[i], n)
			}
		}
	})
	for i, tr := range trackers {
		if terms := tr.snapshot(); len(terms) != 1 {
			t.Errorf("%s: %d terms over 3 TTLs, want 1 that lasts", chains[i], len(terms))
		}
	}
}

func TestMemoryElector(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := NewMemoryElector(ElectionConfig{Chain: "mem", TTL: 40 * time.Millisecond, Metrics: NewElectionMetrics(reg), Logger: testLogger(t)})
	calls := make(chan uint64, 10)
	var n atomic.Int32
	stop := campaign(t, e, func(ctx context.Context, epoch uint64) {
		calls <- epoch
		if n.Add(1) == 1 {
			return // the first lead returns early: it is started again
		}
		<-ctx.Done()
	})
	for range 2 {
		select {
		case epoch := <-calls:
			if epoch != 1 {
				t.Errorf("epoch %d, want 1", epoch)
			}
		case <-time.After(time.Second):
			t.Fatal("memory elector did not lead")
		}
	}
	eventually(t, time.Second, func() bool { return metricValue(t, reg, "venn_leader", "mem") == 1 }, "venn_leader 1")
	stop()
	if got := metricValue(t, reg, "venn_leader", "mem"); got != 0 {
		t.Errorf("venn_leader = %v after Run returned, want 0", got)
	}
	if got := metricValue(t, reg, "venn_leader_changes_total", "mem"); got != 2 {
		t.Errorf("venn_leader_changes_total = %v, want 2", got)
	}
}

// metricValue reads the series name{chain} from reg; -1 when it is missing.
func metricValue(t *testing.T, reg *prometheus.Registry, name, chain string) float64 {
	t.Helper()
	if v, ok := testkit.Value(t, reg, name, map[string]string{"chain": chain}); ok {
		return v
	}
	return -1
}
func TestLeaderMetrics(t *testing.T) {
	t.Parallel()
	const ttl = testTTL
	rdb := newRedis(t)
	chain := testChain(t, rdb)
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	var tr tracker
	a := NewRedisElector(rdb, ElectionConfig{Chain: chain, ReplicaID: "a", TTL: ttl, Metrics: NewElectionMetrics(regA), Logger: testLogger(t)})
	b := NewRedisElector(rdb, ElectionConfig{Chain: chain, ReplicaID: "b", TTL: ttl, Metrics: NewElectionMetrics(regB), Logger: testLogger(t)})

	// A follower shows 0 rather than no series.
	if got := metricValue(t, regB, "venn_leader", chain); got != 0 {
		t.Errorf("b's venn_leader before it ran = %v, want 0", got)
	}
	stopA := campaign(t, a, tr.lead("a", 0))
	eventually(t, 2*time.Second, func() bool { return tr.leading.Load() == 1 }, "a to lead")
	campaign(t, b, tr.lead("b", 0))

	tests := []struct {
		reg  *prometheus.Registry
		name string
		want float64
	}{
		{regA, "venn_leader", 1},
		{regA, "venn_leader_changes_total", 1},
		{regB, "venn_leader", 0},
		{regB, "venn_leader_changes_total", 0},
	}
	for _, tt := range tests {
		if got := metricValue(t, tt.reg, tt.name, chain); got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, got, tt.want)
		}
	}

	stopA()
	eventually(t, ttl, func() bool { return metricValue(t, regB, "venn_leader", chain) == 1 }, "b's venn_leader to be 1")
	tests = []struct {
		reg  *prometheus.Registry
		name string
		want float64
	}{
		{regA, "venn_leader", 0},
		{regA, "venn_leader_changes_total", 1},
		{regB, "venn_leader_changes_total", 1},
	}
	for _, tt := range tests {
		if got := metricValue(t, tt.reg, tt.name, chain); got != tt.want {
			t.Errorf("after hand-over %s = %v, want %v", tt.name, got, tt.want)
		}
	}
}
