package admin

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	harness "github.com/venn-gateway/venn/internal/cluster"
	"github.com/venn-gateway/venn/keyspace"
	"github.com/venn-gateway/venn/remotes"
)

// TestCordonsNotifyAcrossClusterFailover: on a Redis Cluster, a replica
// watching the cordons' channel hears another's change, and hears it
// again after the master serving the channel's slot was killed and its
// replica took over: go-redis's classic pub/sub reconnects by itself.
func TestCordonsNotifyAcrossClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster of six nodes")
	}
	rc, err := harness.StartRedisCluster(context.Background(), t.TempDir(), 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	client := func() *redis.ClusterClient {
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Addrs(), ClusterStateReloadInterval: time.Second})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	watcher, writer := &redisCordons{rdb: client()}, &redisCordons{rdb: client()}

	ctx, cancel := context.WithCancel(t.Context())
	changed := make(chan string, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		watcher.watch(ctx, func() []string { return []string{"dev"} }, nil, func(c string) { changed <- c })
	}()
	t.Cleanup(func() { cancel(); <-done })

	// heard puts cordons until the watcher hears one: the first may go out
	// before its subscription (or its new connection) is up.
	heard := func(what string) {
		t.Helper()
		deadline := time.Now().Add(harness.ClusterReadyTimeout)
		for time.Now().Before(deadline) {
			_ = writer.put(ctx, "dev", remotes.ManualCordon{Remote: "n0", By: "test", At: time.Now()})
			select {
			case c := <-changed:
				if c != "dev" {
					t.Fatalf("%s: heard chain %q", what, c)
				}
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
		t.Fatalf("%s: no change heard within %v", what, harness.ClusterReadyTimeout)
	}
	heard("before the failover")
	killed, err := rc.KillMaster(ctx, keyspace.For("dev").CordonsNotify)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed %s, the master of the channel's slot", killed.Addr())
	// What was heard late from before is not what the next check wants.
	for len(changed) > 0 {
		<-changed
	}
	heard("after the failover")
}
