package cache_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/internal/pgtest"
	"github.com/venn-gateway/venn/internal/testkit"
)

// TestSettledSurviveRedisRestart: a private redis-server, killed and
// started again empty as one without persistence comes back after a
// crash: the Redis tier lost the settled answer and misses (an error
// while it is down), and the Postgres tier still has it, byte for byte.
func TestSettledSurviveRedisRestart(t *testing.T) {
	ctx := t.Context()
	rs := testkit.StartRedisServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	pool, err := cache.OpenPool(pgtest.New(t), 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// Patient bounds: the restart, not a slow first query, is the test.
	rt := cache.NewRedis(rdb, "restart", cache.RedisOptions{Timeout: 10 * time.Second})
	pt := cache.NewPostgres(pool, 1, cache.PostgresOptions{ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second})

	k := cache.Key{1, 2, 3}
	e := cache.Entry{Value: []byte(`{"structLogs":[],"gas":21000}`), Settled: true, Method: "debug_traceTransaction", Block: 7}
	for _, tier := range []cache.Tier{rt, pt} {
		if err := tier.Set(ctx, k, e, time.Hour); err != nil {
			t.Fatalf("%s: Set: %v", tier.Name(), err)
		}
	}
	rs.Stop()
	if _, ok, err := rt.Get(ctx, k); ok || err == nil {
		t.Fatalf("Redis tier with Redis killed: %v, %v; want an error", ok, err)
	}
	rs.Start()
	testkit.WaitFor(t, 10*time.Second, "the Redis tier answering again", func() bool {
		_, _, err := rt.Get(ctx, k)
		return err == nil
	})
	if _, ok, err := rt.Get(ctx, k); ok || err != nil {
		t.Fatalf("Redis tier after the restart: %v, %v; want a miss", ok, err)
	}
	got, ok, err := pt.Get(ctx, k)
	if err != nil || !ok || !bytes.Equal(got.Value, e.Value) || !got.Settled || got.Method != e.Method || got.Block != e.Block {
		t.Fatalf("Postgres tier after the restart: %+v, %v, %v; want %+v", got, ok, err, e)
	}
}
