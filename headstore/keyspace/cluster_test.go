package keyspace_test

import (
	"context"
	"errors"
	"fmt"
	"net"
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
	"github.com/venn-gateway/venn/headstore/keyspace"
	harness "github.com/venn-gateway/venn/internal/cluster"
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

// TestScriptsStayInOneSlot runs every part of venn that writes Redis (the
// lease, the head window's publish, snapshot and follow, the cache, the
// rate limiter) for two chains on a real Redis Cluster of three masters,
// and checks the slot of every key each script and multi-key command was
// called with: all in one slot per call (the cluster refuses any other,
// so every call must also succeed), the keys the publish script builds
// from its block prefix too. Every script of the keyspace is seen.
func TestScriptsStayInOneSlot(t *testing.T) {
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
	for name, s := range map[string]*redis.Script{"Acquire": keyspace.Acquire, "Renew": keyspace.Renew,
		"Release": keyspace.Release, "Publish": keyspace.Publish, "Snapshot": keyspace.Snapshot,
		"Limit": keyspace.Limit, "Unlimit": keyspace.Unlimit, "CacheSet": keyspace.CacheSet, "CacheSize": keyspace.CacheSize} {
		if !seen[s.Hash()] {
			t.Errorf("script %s was never run", name)
		}
	}
}

// exerciseChain runs a leadership, three blocks and a reorg, a follower
// and the cache for chain.
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

	store := headstore.NewRedis(rdb, chain, 8)
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
	if err := el.Release(ctx, epoch); err != nil {
		t.Fatalf("%s: release: %v", chain, err)
	}

	c := cache.NewRedis(rdb, chain, cache.RedisOptions{Timeout: 5 * time.Second})
	k := cache.Key{1, 2, 3}
	if ok, err := c.Claim(ctx, k, time.Second); err != nil || !ok {
		t.Fatalf("%s: cache claim = %v, %v", chain, ok, err)
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
