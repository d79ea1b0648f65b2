package cache

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/venn-gateway/venn/internal/pgtest"
)

// benchValue is an eth_call answer of a typical size (an ABI-encoded
// struct or two).
var benchValue = bytes.Repeat([]byte("0123456789abcdef"), 64) // 1 KiB

// benchTimeout replaces the tiers' timeouts, which a loaded machine's
// slowest calls pass: the benchmarks time calls, not misses.
const benchTimeout = 5 * time.Second

func benchKey(i int) Key {
	var k Key
	binary.BigEndian.PutUint64(k[:], uint64(i))
	return k
}

// BenchmarkRedis times the tier's Get and Set of 1 KiB on the machine's
// Redis, against a bare GET and SET of the same bytes on the same client:
// the difference is the tier's (envelope, script, counters).
func BenchmarkRedis(b *testing.B) {
	r, rdb, chain := redisTier(b, RedisOptions{Timeout: benchTimeout})
	ctx := b.Context()
	e := Entry{Value: benchValue, Settled: true, Method: "eth_call", Block: 19_000_000}
	k := benchKey(0)
	if err := r.Set(ctx, k, e, time.Hour); err != nil {
		b.Fatal(err)
	}
	raw := "venn:{" + chain + "}:raw"
	b.Run("tier-get", func(b *testing.B) {
		for b.Loop() {
			if _, ok, err := r.Get(ctx, k); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("tier-set", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if err := r.Set(ctx, benchKey(i%1000), e, time.Hour); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bare-set", func(b *testing.B) {
		for b.Loop() {
			if err := rdb.Set(ctx, raw, benchValue, time.Hour).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bare-get", func(b *testing.B) {
		for b.Loop() {
			if err := rdb.Get(ctx, raw).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPostgres times the tier's Get and Set (a new key each time) of
// 1 KiB on the machine's Postgres, against a bare SELECT 1 on the same
// pool (the round trip every statement pays) and a Set on a pool that
// commits synchronously (what OpenPool's synchronous_commit off saves).
func BenchmarkPostgres(b *testing.B) {
	u := pgtest.New(b)
	pool := pgPool(b, u)
	p := NewPostgres(pool, 1, PostgresOptions{ReadTimeout: benchTimeout, WriteTimeout: benchTimeout})
	ctx := b.Context()
	e := Entry{Value: benchValue, Settled: true, Method: "debug_traceTransaction", Block: 19_000_000}
	if err := p.Set(ctx, benchKey(-1), e, 0); err != nil {
		b.Fatal(err)
	}
	b.Run("tier-get", func(b *testing.B) {
		for b.Loop() {
			if _, ok, err := p.Get(ctx, benchKey(-1)); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("tier-set", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if err := p.Set(ctx, benchKey(i), e, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tier-set-sync-commit", func(b *testing.B) {
		sync, err := pgxpool.New(ctx, u)
		if err != nil {
			b.Fatal(err)
		}
		defer sync.Close()
		ps := NewPostgres(sync, 2, PostgresOptions{ReadTimeout: benchTimeout, WriteTimeout: benchTimeout})
		for i := 0; b.Loop(); i++ {
			if err := ps.Set(ctx, benchKey(i), e, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bare-select-1", func(b *testing.B) {
		var one int
		for b.Loop() {
			if err := pool.QueryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
				b.Fatal(err)
			}
		}
	})
}
