package cache

import (
	"crypto/sha256"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/internal/testkit"
)

// The shared tiers' tests run against the machine's Redis and Postgres
// (internal/testkit, internal/pgtest): each test's keys are named by a
// random token and deleted, each test's database dropped, when it ends.

// testKey is the key of a made-up call named s.
func testKey(s string) Key { return Key(sha256.Sum256([]byte(s))) }

// testOpTimeout bounds one operation of a shared tier in the tests that
// are not about its timeouts: on a machine busy with -race tests, the
// first query of a new connection can outlast the production bound, and
// the miss and the outage pause after it are not what those tests check.
const testOpTimeout = 10 * time.Second

// patient is opts with testOpTimeout where they leave the timeouts at
// their defaults.
func patient(opts PostgresOptions) PostgresOptions {
	if opts.ReadTimeout == 0 {
		opts.ReadTimeout = testOpTimeout
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = testOpTimeout
	}
	return opts
}

// redisTier returns a Redis tier on a chain of the test's own, its client
// and its keys; a zero Timeout is testOpTimeout.
func redisTier(t testing.TB, opts RedisOptions) (*Redis, *redis.Client, string) {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = testOpTimeout
	}
	name := func(token string) string { return "cache-test-" + token }
	rdb, token := testkit.Redis(t, func(token string) string { return "venn:{" + name(token) + "}:*" })
	return NewRedis(rdb, name(token), opts), rdb, name(token)
}

// pgPool returns a pool on the database at u, closed at cleanup.
func pgPool(t testing.TB, u string) *pgxpool.Pool {
	t.Helper()
	pool, err := OpenPool(u, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// stallServer accepts connections and reads them, never answering: a
// server that hangs. It is closed at cleanup, with its connections.
func stallServer(t testing.TB) string {
	t.Helper()
	addr, _ := testkit.ServeTCP(t, func(c net.Conn) {
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	})
	return addr
}

// boundedClient is a client as the app makes one: its calls bounded by
// their contexts.
func boundedClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// timed runs fn and returns how long it took.
func timed(fn func()) time.Duration {
	start := time.Now()
	fn()
	return time.Since(start)
}
