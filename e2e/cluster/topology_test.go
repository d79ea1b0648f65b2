//go:build linux

package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	harness "github.com/venn-gateway/venn/internal/cluster"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/freeport"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/keyspace"
	"github.com/venn-gateway/venn/stalker"
)

// haChain is one chain of an haCluster and the node behind it.
type haChain struct {
	name string
	node *fakenode.Node
}

// haCluster is venn replicas serving chains on a Redis Cluster or a
// Sentinel set: rdb reaches the same Redis as they do.
type haCluster struct {
	rdb      redis.UniversalClient
	chains   []haChain
	replicas []*replica
}

// startHA starts a node per chain name and n replicas serving them all,
// with redisFields as their config's redis section and extra as more of
// its top level.
func startHA(t *testing.T, rdb redis.UniversalClient, redisFields, extra string, names []string, n int) *haCluster {
	t.Helper()
	c := &haCluster{rdb: rdb}
	for i, name := range names {
		node := fakenode.New(fakenode.Options{ChainID: uint64(chainID + i), Head: 200})
		if err := node.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(node.Close)
		c.chains = append(c.chains, haChain{name: name, node: node})
	}
	ports, err := freeport.Ports(2 * n)
	if err != nil {
		t.Fatal(err)
	}
	remote := func(node *fakenode.Node) []harness.Remote {
		return []harness.Remote{{Name: "n0", URL: node.URL(), WSURL: node.WSURL(), Timeout: time.Second}}
	}
	for i := range n {
		dir := t.TempDir()
		r := &replica{id: fmt.Sprintf("r%d", i), rpc: "127.0.0.1:" + strconv.Itoa(ports[2*i]),
			metrics: "127.0.0.1:" + strconv.Itoa(ports[2*i+1]),
			cfgPath: filepath.Join(dir, "venn.yaml"), logPath: filepath.Join(dir, "venn.log")}
		conf := harness.Config{Listen: r.rpc, MetricsListen: r.metrics, Redis: redisFields, ReplicaID: r.id,
			Chain: names[0], ChainID: chainID, BlockTime: blockTime, Window: window,
			Remotes: remote(c.chains[0].node), Extra: "shutdown_timeout: 5s\n" + extra}
		for j, ch := range c.chains[1:] {
			conf.MoreChains = append(conf.MoreChains, harness.Chain{Name: ch.name, ChainID: uint64(chainID + 1 + j), Remotes: remote(ch.node)})
		}
		if err := os.WriteFile(r.cfgPath, []byte(conf.YAML()), 0o600); err != nil {
			t.Fatal(err)
		}
		r.killAtEnd(t)
		r.start(t)
		c.replicas = append(c.replicas, r)
	}
	return c
}

// leader is the replica holding name's lease and its epoch.
func (c *haCluster) leader(name string) (string, uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l, ok, err := stalker.ReadLeader(ctx, c.rdb, name)
	if err != nil || !ok {
		return "", 0
	}
	return l.Replica, l.Epoch
}

// waitLeader waits for a leader of name other than not (any when "").
func (c *haCluster) waitLeader(t *testing.T, name, not string) (*replica, uint64) {
	t.Helper()
	var id string
	var epoch uint64
	if !testkit.Poll(waitLimit, func() bool {
		id, epoch = c.leader(name)
		return id != "" && id != not
	}) {
		t.Fatalf("%s: no leader (other than %q) within %v", name, not, waitLimit)
	}
	for _, r := range c.replicas {
		if r.id == id {
			return r, epoch
		}
	}
	t.Fatalf("%s: leader %q is none of the replicas", name, id)
	return nil, 0
}

// waitServed waits until every replica serves ch's node head from its
// window.
func (c *haCluster) waitServed(t *testing.T, ch haChain) {
	t.Helper()
	want := ch.node.Head()
	for _, r := range c.replicas {
		var got, inWindow float64
		if !testkit.Poll(waitLimit, func() bool {
			res, err := postTo(r, ch.name, "eth_blockNumber")
			if err != nil {
				return false
			}
			n, _ := strconv.ParseUint(strings.Trim(string(res), `"0x`), 16, 64)
			got = float64(n)
			inWindow, _ = metric(r, "venn_head_number", `chain="`+ch.name+`"`)
			return got >= float64(want) && inWindow >= float64(want)
		}) {
			t.Fatalf("replica %s, %s: block number %v, window head %v, want %d", r.id, ch.name, got, inWindow, want)
		}
	}
}

// mine advances every chain's node each blockTime until stop or the
// test's end.
func (c *haCluster) mine(t *testing.T) (stop func()) {
	nodes := make([]*fakenode.Node, 0, len(c.chains))
	for _, ch := range c.chains {
		nodes = append(nodes, ch.node)
	}
	return fakenode.MineEvery(t, blockTime, nodes...)
}

// follower is a replica that does not lead name.
func (c *haCluster) follower(t *testing.T, name string) *replica {
	t.Helper()
	lead, _ := c.waitLeader(t, name, "")
	for _, r := range c.replicas {
		if r != lead {
			return r
		}
	}
	t.Fatalf("%s: every replica leads", name)
	return nil
}

// apartChains picks two chain names whose keys' hash tags land on
// different masters of rc.
func apartChains(t *testing.T, rc *harness.RedisCluster) []string {
	t.Helper()
	ctx := t.Context()
	first, err := rc.MasterOf(ctx, keyspace.For("dev").Epoch)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 64 {
		name := fmt.Sprintf("dev%d", i)
		m, err := rc.MasterOf(ctx, keyspace.For(name).Epoch)
		if err != nil {
			t.Fatal(err)
		}
		if m != first {
			return []string{"dev", name}
		}
	}
	t.Fatal("no chain name lands off dev's master")
	return nil
}

// TestRedisClusterFailover: two replicas serve two chains on a Redis
// Cluster of three masters with a replica each, the chains' keys on
// different masters. Both chains get a leader, a window on every replica
// and subscriptions; then the master of the first chain's slot is killed,
// its replica takes over, and the subscribers of both chains get every
// block, once and in order, across it.
func TestRedisClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster of six nodes and two venn processes")
	}
	ctx := t.Context()
	rc, err := harness.StartRedisCluster(context.Background(), t.TempDir(), 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	names := apartChains(t, rc)
	c := startHA(t, rc.Client, `cluster: ["`+strings.Join(rc.Addrs(), `", "`)+`"]`, "", names, 2)
	for _, ch := range c.chains {
		c.waitLeader(t, ch.name, "")
		c.waitServed(t, ch)
	}

	stop := c.mine(t)
	defer stop()
	subs := make([]*subscriber, len(c.chains))
	from := make([]uint64, len(c.chains))
	for i, ch := range c.chains {
		subs[i] = subscribeTo(t, c.follower(t, ch.name), ch.name)
		from[i] = ch.node.Head() + 1
		subs[i].waitHead(t, from[i]+2)
	}
	killed, err := rc.KillMaster(ctx, keyspace.For(names[0]).Epoch)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed master %s; its replica serves %s's slot", killed.Addr(), names[0])
	for i, ch := range c.chains {
		subs[i].waitHead(t, ch.node.Head()+3)
	}
	stop()
	for i, ch := range c.chains {
		c.waitLeader(t, ch.name, "")
		subs[i].waitHead(t, ch.node.Head())
		subs[i].check(t, ch.node, from[i], ch.node.Head())
	}
}

// callLoad calls eth_blockNumber on every replica in turn until stop, and
// records the longest time calls kept failing: from a failed call to the
// next that succeeds.
type callLoad struct {
	wg      sync.WaitGroup
	cancel  context.CancelFunc
	mu      sync.Mutex
	longest time.Duration
	failed  int
	calls   int
	lastErr error
}

func startLoad(c *haCluster, name string) *callLoad {
	ctx, cancel := context.WithTimeout(context.Background(), 4*waitLimit)
	l := &callLoad{cancel: cancel}
	for _, r := range c.replicas {
		l.wg.Go(func() {
			var failingSince time.Time
			for ctx.Err() == nil {
				_, err := postTo(r, name, "eth_blockNumber")
				now := time.Now()
				l.mu.Lock()
				l.calls++
				switch {
				case err != nil:
					l.failed++
					l.lastErr = err
					if failingSince.IsZero() {
						failingSince = now
					}
				case !failingSince.IsZero():
					l.longest = max(l.longest, now.Sub(failingSince))
					failingSince = time.Time{}
				}
				l.mu.Unlock()
			}
			if !failingSince.IsZero() {
				l.mu.Lock()
				l.longest = max(l.longest, time.Since(failingSince))
				l.mu.Unlock()
			}
		})
	}
	return l
}

func (l *callLoad) stop() {
	l.cancel()
	l.wg.Wait()
}

// sentinelReconnect is what a client call may fail for past the
// failover itself: venn's client learns of the new master and dials it.
const sentinelReconnect = time.Second

// TestRedisSentinelFailover: two replicas on a Sentinel set (a master, a
// replica, three sentinels), rate limits in Redis failing closed, so that
// every client call needs Redis. A SENTINEL FAILOVER under a load of
// calls: the subscriber on the follower gets every block once and in
// order across it, no call fails for longer than the failover took (and
// a reconnect), and the fencing epoch still rises: the leader killed
// after it is replaced by one with a higher epoch, whose blocks the
// subscriber gets too.
func TestRedisSentinelFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Sentinel set of five processes and two venn processes")
	}
	ctx := t.Context()
	rs, err := harness.StartRedisSentinel(context.Background(), t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rs.Close)
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: harness.SentinelMaster, SentinelAddrs: rs.Addrs()})
	t.Cleanup(func() { _ = rdb.Close() })
	url := "redis+sentinel://" + strings.Join(rs.Addrs(), ",") + "/0?master=" + harness.SentinelMaster
	limits := "rate_limits: {ip: {rps: 1000000}, on_redis_error: closed, redis_timeout: 2s}"
	c := startHA(t, rdb, `url: "`+url+`"`, limits, []string{chain}, 2)
	ch := c.chains[0]
	c.waitLeader(t, chain, "")
	c.waitServed(t, ch)

	stop := c.mine(t)
	defer stop()
	var subs []*subscriber
	for _, r := range c.replicas {
		subs = append(subs, subscribeTo(t, r, chain))
	}
	from := ch.node.Head() + 1
	for _, s := range subs {
		s.waitHead(t, from+2)
	}
	load := startLoad(c, chain)
	defer load.stop()

	start := time.Now()
	master, err := rs.Failover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	t.Logf("failover to %s took %v", master.Addr(), took)
	for _, s := range subs {
		s.waitHead(t, ch.node.Head()+3)
	}
	load.stop()

	// The fencing epoch rises on the new master: a leader killed now is
	// replaced by one that takes a higher epoch.
	lead, epoch := c.waitLeader(t, chain, "")
	lead.kill()
	_, next := c.waitLeader(t, chain, lead.id)
	if next <= epoch {
		t.Errorf("the new leader's epoch %d is not above %d", next, epoch)
	}
	var live *subscriber
	for _, s := range subs {
		if s.r != lead {
			live = s
		}
	}
	live.waitHead(t, ch.node.Head()+3)
	stop()
	live.waitHead(t, ch.node.Head())
	live.check(t, ch.node, from, ch.node.Head())

	load.mu.Lock()
	defer load.mu.Unlock()
	t.Logf("%d calls, %d failed, the longest run of failures %v (last error: %v)", load.calls, load.failed, load.longest, load.lastErr)
	// took ends when the replica reports itself master; venn's client hears
	// of it from Sentinel's +switch-master and dials it after that.
	if bound := took + sentinelReconnect; load.longest > bound {
		t.Errorf("calls kept failing for %v, longer than the failover's %v and a reconnect (%v)", load.longest, took, bound)
	}
}
