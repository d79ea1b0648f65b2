package keyspace_test

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/edge"
	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/headstore"
	headredis "github.com/venn-gateway/venn/headstore/redisstore"
	harness "github.com/venn-gateway/venn/internal/cluster"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/keyspace"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/remotes/budget"
	"github.com/venn-gateway/venn/remotes/redisstore"
	"github.com/venn-gateway/venn/stalker"
)

// scriptCall is one EVAL or EVALSHA as the client sent it.
type scriptCall struct {
	sha  string
	keys []string
	args []any
}

// scriptRecorder is a go-redis hook that keeps every script call and
// every multi-key command.
type scriptRecorder struct {
	mu       sync.Mutex
	scripts  []scriptCall
	multiKey [][]string // MGET, DEL with more than one key
}

func (r *scriptRecorder) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *scriptRecorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			r.record(c)
		}
		return next(ctx, cmds)
	}
}

func (r *scriptRecorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.record(cmd)
		return next(ctx, cmd)
	}
}

func (r *scriptRecorder) record(cmd redis.Cmder) {
	args := cmd.Args()
	r.mu.Lock()
	defer r.mu.Unlock()
	switch strings.ToLower(cmd.Name()) {
	case "eval", "evalsha", "eval_ro", "evalsha_ro":
		n, _ := strconv.Atoi(redisArg(args[2]))
		c := scriptCall{sha: redisArg(args[1]), args: args[3+n:]}
		if strings.HasPrefix(strings.ToLower(cmd.Name()), "eval") && !strings.Contains(strings.ToLower(cmd.Name()), "sha") {
			c.sha = redis.NewScript(redisArg(args[1])).Hash()
		}
		for _, k := range args[3 : 3+n] {
			c.keys = append(c.keys, redisArg(k))
		}
		r.scripts = append(r.scripts, c)
	case "mget", "del":
		if len(args) > 2 {
			keys := make([]string, 0, len(args)-1)
			for _, k := range args[1:] {
				keys = append(keys, redisArg(k))
			}
			r.multiKey = append(r.multiKey, keys)
		}
	}
}

func redisArg(a any) string {
	switch v := a.(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return fmt.Sprint(a)
}

// scripts are the keyspace's scripts by their names in the package, so
// that the test can say which one was never run.
var scripts = map[string]*redis.Script{"Acquire": keyspace.Acquire, "Renew": keyspace.Renew,
	"Release": keyspace.Release, "Publish": keyspace.Publish, "Snapshot": keyspace.Snapshot,
	"Limit": keyspace.Limit, "Unlimit": keyspace.Unlimit, "CacheSet": keyspace.CacheSet,
	"CacheSize": keyspace.CacheSize, "CacheClaim": keyspace.CacheClaim, "CacheRelease": keyspace.CacheRelease, "PublishHeads": keyspace.PublishHeads,
	"PublishHeader": keyspace.PublishHeader,
	"FilterCreate":  keyspace.FilterCreate, "FilterAdvance": keyspace.FilterAdvance, "FilterRemove": keyspace.FilterRemove,
	"PendingAdd": keyspace.PendingAdd}

// packageScripts are the names of the exported package-level variables
// that the keyspace package's own (non-test) source sets to
// redis.NewScript.
func packageScripts(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var names []string
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				v := spec.(*ast.ValueSpec)
				for i, name := range v.Names {
					if i < len(v.Values) && name.IsExported() && isNewScript(v.Values[i]) {
						names = append(names, name.Name)
					}
				}
			}
		}
	}
	slices.Sort(names)
	return names
}

func isNewScript(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "redis" && sel.Sel.Name == "NewScript"
}

// TestScriptsStayInOneSlot runs every part of venn that writes Redis (the
// lease, the head window's publish, snapshot and follow, the remotes' head
// feed, the cache, the budget counters, the availability share, the rate
// limiter) for two chains on a real Redis Cluster of three masters, and
// checks the slot of every key each script and multi-key command was
// called with: all in one slot per call (the cluster refuses any other,
// so every call must also succeed), the keys the publish script builds
// from its block prefix too. Every script the keyspace package declares
// is seen: one added without being run here fails the test.
func TestScriptsStayInOneSlot(t *testing.T) {
	declared := packageScripts(t)
	if len(declared) == 0 {
		t.Fatal("no scripts found in the keyspace package's source")
	}
	for _, name := range declared {
		if scripts[name] == nil {
			t.Errorf("script %s is declared by the keyspace package but not exercised by this test: add it to scripts and run it", name)
		}
	}

	ctx := t.Context()
	rc, err := harness.StartRedisCluster(context.Background(), t.TempDir(), 3, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	rec := &scriptRecorder{}
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Addrs()})
	t.Cleanup(func() { _ = rdb.Close() })
	rdb.AddHook(rec)

	chains := []string{"mainnet", "base"}
	var tags []*harness.Redis
	for _, chain := range chains {
		m, err := rc.MasterOf(ctx, keyspace.For(chain).Epoch)
		if err != nil {
			t.Fatal(err)
		}
		tags = append(tags, m)
		exerciseChain(t, rdb, chain)
	}
	if tags[0] == tags[1] {
		t.Errorf("chains %v share master %s: pick names whose tags land apart", chains, tags[0].Addr())
	}
	exerciseLimiter(t, rdb)

	slot := func(key string) int64 {
		s, err := rc.Slot(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	seen := map[string]bool{}
	for _, c := range rec.scripts {
		seen[c.sha] = true
		keys := c.keys
		if len(keys) == 0 {
			t.Errorf("script %s called with no keys", c.sha[:8])
			continue
		}
		if c.sha == keyspace.Publish.Hash() {
			keys = append(keys, redisArg(c.args[4])+"0xanyhash") // the blk keys it writes
		}
		for _, k := range keys[1:] {
			if slot(k) != slot(keys[0]) {
				t.Errorf("script %s called with keys in slots %d (%s) and %d (%s)", c.sha[:8], slot(keys[0]), keys[0], slot(k), k)
			}
		}
	}
	for _, keys := range rec.multiKey {
		for _, k := range keys[1:] {
			if slot(k) != slot(keys[0]) {
				t.Errorf("command on keys in slots %d (%s) and %d (%s)", slot(keys[0]), keys[0], slot(k), k)
			}
		}
	}
	if len(rec.multiKey) == 0 {
		t.Error("no MGET of block bodies was seen")
	}
	for name, s := range scripts {
		if !seen[s.Hash()] {
			t.Errorf("script %s was never run", name)
		}
	}
}

// exerciseChain runs a leadership, three blocks and a reorg, a follower,
// the remotes' head feed, the cache, the budget counters and the
// availability share for chain.
func exerciseChain(t *testing.T, rdb redis.UniversalClient, chain string) {
	t.Helper()
	ctx := t.Context()
	el := stalker.NewRedisElector(rdb, stalker.ElectionConfig{Chain: chain, ReplicaID: "r1", TTL: 10 * time.Second})
	epoch, ok, err := el.Acquire(ctx)
	if err != nil || !ok {
		t.Fatalf("%s: acquire = %v, %v", chain, ok, err)
	}
	if ok, err := el.Renew(ctx, epoch); err != nil || !ok {
		t.Fatalf("%s: renew = %v, %v", chain, ok, err)
	}

	store := headredis.New(rdb, chain, 8)
	block := func(n uint64, fork string) *evm.Block {
		h := func(n uint64) string { return "0x" + fork + strconv.FormatUint(n, 16) }
		if n == 1 {
			return &evm.Block{Number: n, Hash: h(n), Parent: "0x0", Raw: []byte(`{}`)}
		}
		return &evm.Block{Number: n, Hash: h(n), Parent: "0x" + strconv.FormatUint(n-1, 16), Raw: []byte(`{}`)}
	}
	for n := uint64(1); n <= 3; n++ {
		if err := store.Publish(ctx, epoch, &headstore.Event{Added: []*evm.Block{block(n, "")}}); err != nil {
			t.Fatalf("%s: publish %d: %v", chain, n, err)
		}
	}
	snap, err := store.Snapshot(ctx)
	if err != nil || len(snap.Blocks) != 3 {
		t.Fatalf("%s: snapshot = %+v, %v", chain, snap, err)
	}
	errDone := errors.New("done")
	var heads []uint64
	err = store.Follow(ctx, snap.Gen, 0, func(ev *headstore.Event) error {
		heads = append(heads, ev.Head())
		if ev.Seq == snap.Seq {
			return errDone
		}
		return nil
	})
	if !errors.Is(err, errDone) || len(heads) != 3 {
		t.Fatalf("%s: follow saw heads %v, %v", chain, heads, err)
	}
	reorg := &headstore.Event{Dropped: []headstore.Ref{{Number: 3, Hash: "0x3"}}, Added: []*evm.Block{block(3, "f")}}
	if err := store.Publish(ctx, epoch, reorg); err != nil {
		t.Fatalf("%s: reorg: %v", chain, err)
	}
	if snap, err = store.Snapshot(ctx); err != nil || len(snap.Blocks) != 3 || snap.Blocks[2].Hash != "0xf3" {
		t.Fatalf("%s: snapshot after the reorg = %+v, %v", chain, snap, err)
	}
	if err := store.PublishHeader(ctx, epoch, &headstore.Header{Number: 4, Hash: "0xf4", Parent: "0xf3",
		Raw: []byte(`{"number":"0x4"}`)}); err != nil {
		t.Fatalf("%s: publish header: %v", chain, err)
	}
	exerciseHeadFeed(t, rdb, chain, epoch)
	if err := el.Release(ctx, epoch); err != nil {
		t.Fatalf("%s: release: %v", chain, err)
	}

	c := cache.NewRedis(rdb, chain, cache.RedisOptions{Timeout: 5 * time.Second})
	k := cache.Key{1, 2, 3}
	if ok, err := c.Claim(ctx, k, time.Second); err != nil || !ok {
		t.Fatalf("%s: cache claim = %v, %v", chain, ok, err)
	}
	if err := c.Release(ctx, k); err != nil {
		t.Fatalf("%s: cache release: %v", chain, err)
	}
	if _, ok, claimed, err := c.Watch(ctx, k); err != nil || ok || claimed {
		t.Fatalf("%s: cache watch after the release = %v, %v, %v", chain, ok, claimed, err)
	}
	if err := c.Set(ctx, k, cache.Entry{Value: []byte(`"0x1"`), Settled: true}, time.Minute); err != nil {
		t.Fatalf("%s: cache set: %v", chain, err)
	}
	if e, ok, err := c.Get(ctx, k); err != nil || !ok || string(e.Value) != `"0x1"` {
		t.Fatalf("%s: cache get = %s, %v, %v", chain, e.Value, ok, err)
	}
	if n, _, err := c.Size(ctx); err != nil || n != 1 {
		t.Fatalf("%s: cache size = %d, %v", chain, n, err)
	}
	exerciseBudgets(t, rdb, chain)
	exerciseAvail(t, rdb, chain)
	exerciseFilters(t, rdb, chain)
}

// exerciseFilters makes, advances and removes a polled filter, and adds
// to the pending feed, as package subcenter's Redis stores do.
func exerciseFilters(t *testing.T, rdb redis.UniversalClient, chain string) {
	t.Helper()
	ctx := t.Context()
	k := keyspace.For(chain)
	keys := k.FilterKeys("0xabc", "key:test")
	if r, err := keyspace.FilterCreate.Run(ctx, rdb, keys, "0xabc", 60000, 10, 10,
		"k", "l", "c", "{}", "x", "0", "o", "key:test", "n", "5", "h", "0x5", "p", "").Int(); err != nil || r != 1 {
		t.Fatalf("%s: filter create = %d, %v", chain, r, err)
	}
	if r, err := keyspace.FilterAdvance.Run(ctx, rdb, keys, "0xabc", 60000, "5", "0x5", "", "6", "0x6", "").Int(); err != nil || r != 1 {
		t.Fatalf("%s: filter advance = %d, %v", chain, r, err)
	}
	if r, err := keyspace.FilterRemove.Run(ctx, rdb, keys, "0xabc").Int(); err != nil || r != 1 {
		t.Fatalf("%s: filter remove = %d, %v", chain, r, err)
	}
	if err := keyspace.PendingAdd.Run(ctx, rdb, []string{k.PendingPrefix + "h"}, k.PendingSeenPrefix+"h:", 60000, 100,
		`"0x1"`, `"0x1"`).Err(); err != nil {
		t.Fatalf("%s: pending add: %v", chain, err)
	}
}

// headPool is a pool's head side for the head feed: the heads it would
// publish as leader, and those fed to it as follower.
type headPool struct {
	mu     sync.Mutex
	heads  []remotes.RemoteHead
	claims chan struct{}
	fed    []remotes.RemoteHead
}

func (p *headPool) RemoteHeads() []remotes.RemoteHead {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.heads)
}

func (p *headPool) ClaimsChanged() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.claims
}

// report is a remote reporting head n.
func (p *headPool) report(n uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.heads = []remotes.RemoteHead{{Remote: "n0", Number: n, Hash: "0x" + strconv.FormatUint(n, 16)}}
	close(p.claims)
	p.claims = make(chan struct{})
}

func (p *headPool) FeedHeads(hs []remotes.RemoteHead) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fed = slices.Clone(hs)
}

func (p *headPool) TrackHeads() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fed = nil
}

func (p *headPool) Fed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.fed)
}

// fedHead is the head number fed for the one remote; 0: none.
func (p *headPool) fedHead() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.fed) != 1 {
		return 0
	}
	return p.fed[0].Number
}

// BlockTime is long, so that the leader publishes only on start and on a
// report: the follower's first head can only come from the snapshot.
func (p *headPool) BlockTime() time.Duration { return time.Hour }

// exerciseHeadFeed leads chain's head feed under epoch: the follower,
// started after the first report, takes it from the snapshot, and the
// next from the channel.
func exerciseHeadFeed(t *testing.T, rdb redis.UniversalClient, chain string, epoch uint64) {
	t.Helper()
	lp := &headPool{claims: make(chan struct{})}
	lp.report(1)
	fp := &headPool{claims: make(chan struct{})}
	leader := stalker.NewHeadShare(rdb, chain, lp, nil, nil)
	follower := stalker.NewHeadShare(rdb, chain, fp, nil, nil)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()

	wg.Go(func() { leader.Lead(ctx, epoch) })
	heads := keyspace.For(chain).Heads
	testkit.WaitFor(t, 10*time.Second, chain+": the leader's first report stored", func() bool {
		return rdb.Exists(ctx, heads).Val() == 1
	})
	wg.Go(func() { follower.Run(ctx) })
	testkit.WaitFor(t, 10*time.Second, chain+": the follower fed head 1 from the snapshot", func() bool {
		return fp.fedHead() == 1
	})
	lp.report(2)
	testkit.WaitFor(t, 10*time.Second, chain+": the follower fed head 2 from the channel", func() bool {
		return fp.fedHead() == 2
	})
	if m := follower.Mode(); m != stalker.HeadsFeed {
		t.Errorf("%s: follower's head tracking = %s, want %s", chain, m, stalker.HeadsFeed)
	}
}

// exerciseBudgets flushes two remotes' counters for two periods twice, in
// one pipeline each: all of a chain's counters in one slot, the totals
// summed.
func exerciseBudgets(t *testing.T, rdb redis.UniversalClient, chain string) {
	t.Helper()
	ctx := t.Context()
	b := redisstore.NewBudgets(rdb)
	expire := time.Now().Add(time.Hour)
	counts := func() []budget.Count {
		return []budget.Count{
			{Remote: "alchemy", Period: "h2026120100", N: 3, Expire: expire},
			{Remote: "alchemy", Period: "d20261201", N: 3, Expire: expire},
			{Remote: "infura", Period: "m202612", N: 5, Expire: expire},
		}
	}
	if err := b.Add(ctx, chain, counts()); err != nil {
		t.Fatalf("%s: budgets: %v", chain, err)
	}
	got := counts()
	if err := b.Add(ctx, chain, got); err != nil {
		t.Fatalf("%s: budgets again: %v", chain, err)
	}
	for _, c := range got {
		if c.Total != 2*c.N {
			t.Errorf("%s: budget %s %s total = %d, want %d", chain, c.Remote, c.Period, c.Total, 2*c.N)
		}
	}
	first, err := rdb.ClusterKeySlot(ctx, keyspace.BudgetKey(chain, got[0].Remote, got[0].Period)).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range got[1:] {
		k := keyspace.BudgetKey(chain, c.Remote, c.Period)
		if s := rdb.ClusterKeySlot(ctx, k).Val(); s != first {
			t.Errorf("%s: budget key %s in slot %d, the chain's first in %d", chain, k, s, first)
		}
	}
}

// exerciseAvail loads, claims and stores a remote's availability probe.
func exerciseAvail(t *testing.T, rdb redis.UniversalClient, chain string) {
	t.Helper()
	ctx := t.Context()
	a, b := redisstore.NewShare(rdb, "r1"), redisstore.NewShare(rdb, "r2")
	if _, ok, err := a.Load(ctx, chain, "alchemy"); err != nil || ok {
		t.Fatalf("%s: avail load before any store = %v, %v", chain, ok, err)
	}
	if ok, err := a.Claim(ctx, chain, "alchemy", time.Minute); err != nil || !ok {
		t.Fatalf("%s: avail claim = %v, %v", chain, ok, err)
	}
	if ok, err := b.Claim(ctx, chain, "alchemy", time.Minute); err != nil || ok {
		t.Fatalf("%s: second replica's avail claim = %v, %v, want refused", chain, ok, err)
	}
	want := remotes.Probed{At: time.Unix(1_700_000_000, 0).UTC(), Head: 100, Oldest: map[string]uint64{"state": 90}}
	if err := a.Store(ctx, chain, "alchemy", want); err != nil {
		t.Fatalf("%s: avail store: %v", chain, err)
	}
	got, ok, err := b.Load(ctx, chain, "alchemy")
	if err != nil || !ok || got.Head != want.Head || !got.At.Equal(want.At) || got.Oldest["state"] != 90 {
		t.Fatalf("%s: avail load = %+v, %v, %v, want %+v", chain, got, ok, err, want)
	}
}

// exerciseLimiter takes a key's and an address's buckets together until
// the address's refuses, so that the key's is given back; and checks that
// buckets spread over the three masters.
func exerciseLimiter(t *testing.T, rdb *redis.ClusterClient) {
	t.Helper()
	ctx := t.Context()
	l := edge.NewRedisLimiter(rdb, edge.RedisLimiterOptions{Timeout: 5 * time.Second})
	if err := l.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	key := edge.Bucket{ID: "key:alice", Rate: edge.Rate{RPS: 0.001, Burst: 10}}
	ip := edge.Bucket{ID: "ip:192.0.2.1", Rate: edge.Rate{RPS: 1, Burst: 2}}
	for i := range 3 {
		v, err := l.Take(ctx, 1, []edge.Bucket{key, ip})
		if err != nil {
			t.Fatalf("take %d: %v", i, err)
		}
		if want := i < 2; v.OK != want || (!v.OK && v.Refused != 1) {
			t.Fatalf("take %d = %+v, want OK %v (else the address refusing)", i, v, want)
		}
	}
	// The key was given back its refused call: 2 spent of its 10.
	for i := range 8 {
		if v, err := l.Take(ctx, 1, []edge.Bucket{key}); err != nil || !v.OK {
			t.Fatalf("key alone, take %d = %+v, %v: the refused call was not given back", i, v, err)
		}
	}

	perMaster := map[string]int{}
	const buckets = 300
	for i := range buckets {
		m, err := rdb.MasterForKey(ctx, keyspace.RateLimitKey(keyspace.RateLimitPrefix, "ip:"+net.IPv4(10, 0, byte(i/256), byte(i)).String()))
		if err != nil {
			t.Fatal(err)
		}
		perMaster[m.Options().Addr]++
	}
	if len(perMaster) != 3 {
		t.Fatalf("%d buckets on %d masters, want all 3: %v", buckets, len(perMaster), perMaster)
	}
	for addr, n := range perMaster {
		if n < buckets/6 {
			t.Errorf("master %s holds %d of %d buckets: %v", addr, n, buckets, perMaster)
		}
	}
}
