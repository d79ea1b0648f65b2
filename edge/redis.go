package edge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/keyspace"
)

// Defaults of RedisLimiterOptions.
const (
	DefaultRateLimitPrefix = keyspace.RateLimitPrefix
	// DefaultRedisLimitTimeout bounds one decision: a Redis on the same
	// network answers in well under a millisecond, and every call waits for
	// it.
	DefaultRedisLimitTimeout = 100 * time.Millisecond
)

// redisRetryAfter is how long a RedisLimiter stops asking Redis after a
// timeout: with Redis not answering, calls must not each wait out a
// timeout before failing open (or closed). A quick failure (refused, a
// demoted master's READONLY) costs the next call nothing, so it pauses
// nothing: a Sentinel or Cluster failover refuses calls no longer than
// the failover itself.
const redisRetryAfter = 500 * time.Millisecond

// ErrLimiterDown is returned, wrapped, by a RedisLimiter that has just
// timed out and is not asking Redis until a short pause has passed.
var ErrLimiterDown = errors.New("rate limiter: redis recently failed")

// RedisLimiterOptions configure a RedisLimiter; zero fields take defaults.
type RedisLimiterOptions struct {
	// Prefix starts every bucket's Redis key (default "venn:ratelimit:").
	Prefix string
	// Timeout bounds one decision (default 100ms).
	Timeout time.Duration
	// Clock, when set, times the buckets instead of Redis's clock; for
	// tests, which cannot wait on Redis's.
	Clock func() time.Time
}

// RedisLimiter keeps rate-limit state in Redis, so that the replicas
// sharing it count against the same buckets: a key allowed 10 calls a
// second gets 10 a second across the cluster, not 10 per replica. Each
// decision is one round trip (one Lua script, atomic, for every bucket of
// the request).
//
// Each bucket is a hash tag of its own (keyspace.RateLimitKey), so that a
// Redis Cluster spreads them over its nodes. There a call's buckets (its
// key's and its address's) sit in different slots, which no script may
// span: they are taken one script each, in order, and the first to refuse
// is the answer, the earlier ones given back (keyspace.Unlimit).
type RedisLimiter struct {
	rdb     redis.Scripter
	cluster bool // rdb is a Redis Cluster: one script per bucket
	prefix  string
	timeout time.Duration
	clock   func() time.Time

	retryAt atomic.Int64 // unix ns; after a failure, Redis is not asked before it
}

var _ Limiter = (*RedisLimiter)(nil)

// NewRedisLimiter returns a limiter on rdb. It does no I/O.
func NewRedisLimiter(rdb redis.Scripter, opts RedisLimiterOptions) *RedisLimiter {
	if opts.Prefix == "" {
		opts.Prefix = DefaultRateLimitPrefix
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultRedisLimitTimeout
	}
	_, cluster := rdb.(*redis.ClusterClient)
	return &RedisLimiter{rdb: rdb, cluster: cluster, prefix: opts.Prefix, timeout: opts.Timeout, clock: opts.Clock}
}

// Warm loads the script into Redis (and so opens a connection), so that
// the first calls need not: each has only the limiter's timeout.
func (l *RedisLimiter) Warm(ctx context.Context) error {
	if err := keyspace.Limit.Load(ctx, l.rdb).Err(); err != nil {
		return fmt.Errorf("rate limiter: load script: %w", err)
	}
	if l.cluster {
		if err := keyspace.Unlimit.Load(ctx, l.rdb).Err(); err != nil {
			return fmt.Errorf("rate limiter: load script: %w", err)
		}
	}
	return nil
}

// Take implements Limiter.
func (l *RedisLimiter) Take(ctx context.Context, n int, buckets []Bucket) (Verdict, error) {
	if at := l.retryAt.Load(); at != 0 && time.Now().UnixNano() < at {
		return Verdict{}, ErrLimiterDown
	}
	var now any = ""
	if l.clock != nil {
		now = l.clock().UnixMicro()
	}
	tctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	var res []int64
	var err error
	if l.cluster && len(buckets) > 1 {
		res, err = l.takeEach(tctx, n, now, buckets)
	} else {
		res, err = l.take(tctx, n, now, buckets)
	}
	if err != nil {
		if ctx.Err() != nil {
			return Verdict{}, ctx.Err() // the client left; Redis may be fine
		}
		if timedOut(err) {
			l.retryAt.Store(time.Now().Add(redisRetryAfter).UnixNano())
		}
		return Verdict{}, fmt.Errorf("rate limiter: redis: %w", err)
	}
	if l.retryAt.Load() != 0 {
		l.retryAt.Store(0)
	}
	switch {
	case res[0] == 0:
		return Verdict{OK: true}, nil
	case res[1] < 0:
		return Verdict{Refused: int(res[0]) - 1, RetryAfter: Never}, nil
	default:
		return Verdict{Refused: int(res[0]) - 1, RetryAfter: time.Duration(res[1]) * time.Microsecond}, nil
	}
}

// take runs keyspace.Limit over buckets at once: {0, 0}, or the 1-based
// bucket that refused and its wait in µs (-1: never).
func (l *RedisLimiter) take(ctx context.Context, n int, now any, buckets []Bucket) ([]int64, error) {
	keys := make([]string, len(buckets))
	args := make([]any, 2, 2+2*len(buckets))
	args[0], args[1] = n, now
	for i, b := range buckets {
		keys[i] = keyspace.RateLimitKey(l.prefix, b.ID)
		args = append(args, interval(b.Rate), b.Rate.burst())
	}
	res, err := keyspace.Limit.Run(ctx, l.rdb, keys, args...).Int64Slice()
	if err == nil && (len(res) != 2 || res[0] < 0 || res[0] > int64(len(buckets))) {
		err = fmt.Errorf("script answered %v", res)
	}
	return res, err
}

// takeEach takes buckets one script each, as take answers; a refusal
// gives back what the buckets before it took.
func (l *RedisLimiter) takeEach(ctx context.Context, n int, now any, buckets []Bucket) ([]int64, error) {
	for i := range buckets {
		res, err := l.take(ctx, n, now, buckets[i:i+1])
		if err != nil {
			l.giveBack(ctx, n, now, buckets[:i])
			return nil, err
		}
		if res[0] != 0 {
			l.giveBack(ctx, n, now, buckets[:i])
			return []int64{int64(i + 1), res[1]}, nil
		}
	}
	return []int64{0, 0}, nil
}

// giveBack returns n calls to buckets. It is best effort: a failed
// return leaves the calls spent, as a refused call's would be.
func (l *RedisLimiter) giveBack(ctx context.Context, n int, now any, buckets []Bucket) {
	for _, b := range buckets {
		_ = keyspace.Unlimit.Run(ctx, l.rdb, []string{keyspace.RateLimitKey(l.prefix, b.ID)}, n, now, interval(b.Rate)).Err()
	}
}

// timedOut reports whether err is a deadline's: the limiter's own or a
// connection's.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// interval is r's interval in µs, as the scripts take it.
func interval(r Rate) string {
	return strconv.FormatFloat(r.interval()/float64(time.Microsecond), 'f', -1, 64)
}
