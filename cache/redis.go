package cache

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/keyspace"
)

// Defaults of RedisOptions.
const (
	// DefaultRedisTimeout bounds one call: a Redis on the same network
	// answers a hit of a few hundred kB in a few milliseconds, and a call
	// that misses waits this long at most before it asks upstream. The app
	// sets it to the chain's tier_timeout.
	DefaultRedisTimeout = 150 * time.Millisecond
	// DefaultRedisMaxEntryBytes caps one value: larger answers (big
	// traces) would crowd out many small ones and stall Redis's single
	// thread while they are copied.
	DefaultRedisMaxEntryBytes = 1 << 20
	// DefaultRedisMaxTTL is the TTL of a Set without one, and the longest
	// any entry gets: every entry expires, so that volatile-lru can evict
	// any of them and nothing stays for ever.
	DefaultRedisMaxTTL = 7 * 24 * time.Hour
)

// The size counters (keyspace.CacheSet) count an entry in the slot it
// expires in, until the slot ends: a minute for TTLs under an hour
// (near-head answers), so that they are not counted long after they
// expired, an hour for the rest, so that Size reads few keys.
const (
	sizeMinute = 60
	sizeHour   = 3600
)

// sizeSlot is the counters' slot of an entry that expires at exp after
// ttl, and the slot's end in unix seconds.
func sizeSlot(exp time.Time, ttl time.Duration) (slot string, end int64) {
	width, mark := int64(sizeHour), "h"
	if ttl < time.Hour {
		width, mark = sizeMinute, "m"
	}
	n := exp.Unix() / width
	return mark + strconv.FormatInt(n, 10), (n + 1) * width
}

// sizeSlots are every slot an entry stored now, for at most maxTTL, may
// still be counted in.
func sizeSlots(now time.Time, maxTTL time.Duration) []string {
	var slots []string
	for m := now.Unix() / sizeMinute; m <= now.Add(time.Hour).Unix()/sizeMinute; m++ {
		slots = append(slots, "m"+strconv.FormatInt(m, 10))
	}
	for h := now.Unix() / sizeHour; h <= now.Add(maxTTL).Unix()/sizeHour; h++ {
		slots = append(slots, "h"+strconv.FormatInt(h, 10))
	}
	return slots
}

// RedisOptions configure a Redis tier; zero fields take defaults.
type RedisOptions struct {
	// MaxEntryBytes caps an entry's value; a larger one is not stored
	// (ErrTooLarge).
	MaxEntryBytes int
	// Timeout bounds one call (Get, Set, Claim, Size).
	Timeout time.Duration
	// MaxTTL caps every entry's TTL and is the TTL of a Set without one.
	MaxTTL time.Duration
}

// Redis is the cache tier the replicas share: one chain's entries in
// Redis, under the chain's hash tag (keyspace.Chain: c:KEY, cc:KEY,
// cn:HOUR), so that Redis Cluster keeps a chain's cache on one slot and one
// script touches an entry and its counters. Every entry has a TTL. Every
// call is bounded by the tier's timeout: the client must have
// ContextTimeoutEnabled, as the app's has, so that a deadline cuts a
// stalled read. After a failure the tier does not ask Redis for a short
// pause (ErrDown), so an outage costs calls nothing.
type Redis struct {
	rdb      redis.UniversalClient
	keys     keyspace.Chain
	maxEntry int
	timeout  time.Duration
	maxTTL   time.Duration
	token    string // this tier's claims' value
	out      outage
}

var (
	_ Tier      = (*Redis)(nil)
	_ Claimer   = (*Redis)(nil)
	_ Sizer     = (*Redis)(nil)
	_ Deleter   = (*Redis)(nil)
	_ Purger    = (*Redis)(nil)
	_ PurgeFeed = (*Redis)(nil)
)

// NewRedis returns chain's cache tier in rdb. It does no I/O.
func NewRedis(rdb redis.UniversalClient, chain string, opts RedisOptions) *Redis {
	if opts.MaxEntryBytes <= 0 {
		opts.MaxEntryBytes = DefaultRedisMaxEntryBytes
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultRedisTimeout
	}
	if opts.MaxTTL <= 0 {
		opts.MaxTTL = DefaultRedisMaxTTL
	}
	var t [8]byte
	_, _ = rand.Read(t[:])
	return &Redis{
		rdb:      rdb,
		keys:     keyspace.For(chain),
		maxEntry: opts.MaxEntryBytes,
		timeout:  opts.Timeout,
		maxTTL:   opts.MaxTTL,
		token:    hex.EncodeToString(t[:]),
	}
}

// Name implements Tier.
func (r *Redis) Name() string { return "redis" }

// Get implements Tier. An entry that does not decode is an error, and a
// miss.
func (r *Redis) Get(ctx context.Context, k Key) (Entry, bool, error) {
	if err := r.out.allow(); err != nil {
		return Entry{}, false, fmt.Errorf("cache redis get: %w", err)
	}
	tctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	b, err := r.rdb.Get(tctx, r.keys.CachePrefix+k.String()).Bytes()
	if errors.Is(err, redis.Nil) {
		r.out.ok()
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, r.failed(ctx, "get", err)
	}
	r.out.ok()
	e, err := decodeEntry(b)
	if err != nil {
		return Entry{}, false, fmt.Errorf("cache redis get %s: %w", k, err)
	}
	return e, true, nil
}

// Set implements Tier: e under k for ttl, capped at the tier's max TTL
// (ttl 0: that max). Storing k also ends its claim: a later miss of k
// (the entry evicted) need not wait for a claim nobody answers.
func (r *Redis) Set(ctx context.Context, k Key, e Entry, ttl time.Duration) error {
	if len(e.Value) > r.maxEntry {
		return ErrTooLarge
	}
	if ttl <= 0 || ttl > r.maxTTL {
		ttl = r.maxTTL
	}
	if err := r.out.allow(); err != nil {
		return fmt.Errorf("cache redis set: %w", err)
	}
	slot, end := sizeSlot(time.Now().Add(ttl), ttl)
	keys := r.keys.CacheSetKeys(k.String(), slot)
	tctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	err := keyspace.CacheSet.Run(tctx, r.rdb, keys, encodeEntry(e), ttl.Milliseconds(), end).Err()
	if err != nil {
		return r.failed(ctx, "set", err)
	}
	r.out.ok()
	return nil
}

// Delete drops k's entry: the cache drops the near-head entries of a block
// a reorg orphaned (unreachable already), to free their room at once.
// Its size counter keeps counting it until its slot ends.
func (r *Redis) Delete(ctx context.Context, k Key) error {
	if err := r.out.allow(); err != nil {
		return fmt.Errorf("cache redis delete: %w", err)
	}
	tctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if err := r.rdb.Del(tctx, r.keys.CachePrefix+k.String()).Err(); err != nil {
		return r.failed(ctx, "delete", err)
	}
	r.out.ok()
	return nil
}

// Claim implements Claimer on k's claim key (keyspace.CacheClaim): the
// first replica to claim a miss asks upstream, the others wait up to hold
// for its answer to appear, or its claim to end. A claim this tier still
// holds (its Release failed) is its own again: a replica never waits on
// itself. On an error mine is true: a Redis that does not answer must not
// hold a miss back.
func (r *Redis) Claim(ctx context.Context, k Key, hold time.Duration) (bool, error) {
	if err := r.out.allow(); err != nil {
		return true, fmt.Errorf("cache redis claim: %w", err)
	}
	hold = max(hold, time.Millisecond)
	tctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	n, err := keyspace.CacheClaim.Run(tctx, r.rdb, []string{r.keys.CacheClaimPrefix + k.String()}, r.token, hold.Milliseconds()).Int()
	if err != nil {
		return true, r.failed(ctx, "claim", err)
	}
	r.out.ok()
	return n == 1, nil
}

// Release implements Claimer: it ends this tier's claim on k
// (keyspace.CacheRelease), whose fetch stored nothing here.
func (r *Redis) Release(ctx context.Context, k Key) error {
	if err := r.out.allow(); err != nil {
		return fmt.Errorf("cache redis release: %w", err)
	}
	tctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if err := keyspace.CacheRelease.Run(tctx, r.rdb, []string{r.keys.CacheClaimPrefix + k.String()}, r.token).Err(); err != nil {
		return r.failed(ctx, "release", err)
	}
	r.out.ok()
	return nil
}

// Watch implements Claimer with one MGET of k's entry and claim (one
// slot: the chain's hash tag).
func (r *Redis) Watch(ctx context.Context, k Key) (e Entry, ok, claimed bool, err error) {
	if err := r.out.allow(); err != nil {
		return Entry{}, false, false, fmt.Errorf("cache redis watch: %w", err)
	}
	tctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	v, err := r.rdb.MGet(tctx, r.keys.CachePrefix+k.String(), r.keys.CacheClaimPrefix+k.String()).Result()
	if err == nil && len(v) != 2 {
		err = fmt.Errorf("MGET answered %d values", len(v))
	}
	if err != nil {
		return Entry{}, false, false, r.failed(ctx, "watch", err)
	}
	r.out.ok()
	if s, isStr := v[0].(string); isStr {
		e, err := decodeEntry([]byte(s))
		if err != nil {
			return Entry{}, false, false, fmt.Errorf("cache redis watch %s: %w", k, err)
		}
		return e, true, true, nil
	}
	return Entry{}, false, v[1] != nil, nil
}

// Size implements Sizer from the size counters (keyspace.CacheSet): one
// script over the slots an entry may still expire in (61 minutes and
// MaxTTL/1h + 1 hours: 86 keys for a day). It is approximate: an entry
// Redis evicted under maxmemory counts until its slot ends, one replaced
// with a later TTL in its first slot only.
func (r *Redis) Size(ctx context.Context) (entries, bytes int64, err error) {
	if err := r.out.allow(); err != nil {
		return 0, 0, fmt.Errorf("cache redis size: %w", err)
	}
	slots := sizeSlots(time.Now(), r.maxTTL)
	keys := make([]string, len(slots))
	for i, slot := range slots {
		keys[i] = r.keys.CacheSizePrefix + slot
	}
	tctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	v, err := keyspace.CacheSize.Run(tctx, r.rdb, keys).Int64Slice()
	if err == nil && len(v) != 2 {
		err = fmt.Errorf("script answered %v", v)
	}
	if err != nil {
		return 0, 0, r.failed(ctx, "size", err)
	}
	r.out.ok()
	return v[0], v[1], nil
}

// failed wraps a failed call's error and, unless the caller gave up
// (Redis may be fine), starts the pause. A caller's deadline that passed
// first is Redis's failure as much as the tier's own.
func (r *Redis) failed(ctx context.Context, op string, err error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return fmt.Errorf("cache redis %s: %w", op, ctx.Err())
	}
	r.out.failed()
	return fmt.Errorf("cache redis %s: %w", op, err)
}

// purgeScanCount is how many keys one SCAN step of a purge asks for.
const purgeScanCount = 512

// Purge implements Purger: it scans the chain's entries (on every master
// of a Redis Cluster: the chain's keys are in one slot, on one of them),
// reads each batch with one MGET (one slot: the chain's hash tag) and
// deletes those p selects. Off the calls' path: an operator's action, or
// a remote's answers dropped.
func (r *Redis) Purge(ctx context.Context, p Purge) (int64, error) {
	var n atomic.Int64
	scan := func(ctx context.Context, rdb redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := rdb.Scan(ctx, cursor, r.keys.CachePrefix+"*", purgeScanCount).Result()
			if err != nil {
				return err
			}
			if len(keys) > 0 {
				vals, err := rdb.MGet(ctx, keys...).Result()
				if err != nil {
					return err
				}
				var drop []string
				for i, v := range vals {
					s, ok := v.(string)
					if !ok {
						continue
					}
					if e, err := decodeEntry([]byte(s)); err == nil && p.Matches(e) {
						drop = append(drop, keys[i])
					}
				}
				if len(drop) > 0 {
					d, err := rdb.Del(ctx, drop...).Result()
					if err != nil {
						return err
					}
					n.Add(d)
				}
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	var err error
	if cc, ok := r.rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, r.rdb)
	}
	if err != nil {
		return n.Load(), fmt.Errorf("cache redis purge: %w", err)
	}
	return n.Load(), nil
}

// PublishPurge implements PurgeFeed on the chain's purge channel.
func (r *Redis) PublishPurge(ctx context.Context, p Purge) error {
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("cache redis publish purge: %w", err)
	}
	tctx, cancel := context.WithTimeout(ctx, max(r.timeout, time.Second))
	defer cancel()
	if err := r.rdb.Publish(tctx, r.keys.CachePurged, b).Err(); err != nil {
		return fmt.Errorf("cache redis publish purge: %w", err)
	}
	return nil
}

// maxPurgeMessage bounds a purge message read from the channel.
const maxPurgeMessage = 4 << 10

// FollowPurges implements PurgeFeed: it subscribes to the chain's purge
// channel and calls fn with each purge, until ctx ends or the
// subscription fails.
func (r *Redis) FollowPurges(ctx context.Context, fn func(Purge)) error {
	sub := r.rdb.Subscribe(ctx, r.keys.CachePurged)
	defer sub.Close()
	// A blocked read ends when the subscription closes, whatever the
	// client's context handling.
	stop := context.AfterFunc(ctx, func() { _ = sub.Close() })
	defer stop()
	if _, err := sub.Receive(ctx); err != nil {
		return fmt.Errorf("cache redis follow purges: %w", err)
	}
	for {
		msg, err := sub.ReceiveMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("cache redis follow purges: %w", err)
		}
		var p Purge
		if len(msg.Payload) > maxPurgeMessage || json.Unmarshal([]byte(msg.Payload), &p) != nil || p.Validate() != nil {
			continue
		}
		fn(p)
	}
}
