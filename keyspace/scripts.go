package keyspace

import "github.com/redis/go-redis/v9"

// The scripts, each atomic in Redis. The lease scripts and Publish meet at
// Chain.Epoch: Acquire bumps it, Publish refuses a writer whose epoch is
// not it. Their test (scripts_test.go) runs them in that order on a real
// Redis.

// Acquire takes the lease and bumps the epoch in one step, so no
// leader ever holds a lease without its own epoch. The lease value is
// "replica:epoch", unique per leadership, so renew and release by an old
// leader can never touch a newer lease, even one of the same replica.
//
// A missing epoch counter (a fresh Redis, or one that lost its data)
// starts from Redis's clock in microseconds, not from 1: a leader elected
// before the loss holds a smaller epoch than any elected after it, so its
// late writes are fenced even before its next renew finds the lease gone.
//
// KEYS: Chain.LeaseKeys (lease, epoch); ARGV[1] replica, ARGV[2] TTL in
// ms. It returns the new epoch, or nil when the lease is taken.
var Acquire = redis.NewScript(`
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
	return false
end
if redis.call('EXISTS', KEYS[2]) == 0 then
	local t = redis.call('TIME')
	redis.call('SET', KEYS[2], string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2])))
end
local epoch = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. string.format('%.0f', epoch), 'PX', ARGV[2])
return epoch
`)

// Renew extends the lease only while it is still ours.
//
// KEYS: Chain.Lease; ARGV[1] our value, ARGV[2] TTL in ms.
var Renew = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	return 1
end
return 0
`)

// Release deletes the lease only while it is still ours.
//
// KEYS: Chain.Lease; ARGV[1] our value.
var Release = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0
`)

// Publish applies one event of the head window, only if ARGV[1] is the
// chain's current fencing epoch (else an error reply starting FENCED, and
// nothing written). Redis does not roll a script back when
// it fails half way, so every check that can fail runs before the first
// write.
//
// ARGV[9], unless "0", is the seq the writer last saw: a state at another
// (an error reply starting STALE, nothing written) lost or gained events
// the writer does not know of, as a failed-over Redis that had not yet
// replicated the old master's last writes has.
//
// KEYS: Chain.PublishKeys (epoch, state, canon, events)
// ARGV: epoch, gen, window, maxlen, blk prefix, event JSON, safe, finalized,
// seq seen, ndropped, dropped hash..., nadded, (number, hash, parent, body)...
var Publish = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur ~= ARGV[1] then
  return redis.error_reply('FENCED epoch is ' .. (cur or 'unset') .. ', writer has ' .. ARGV[1])
end
local window = tonumber(ARGV[3])
local prefix = ARGV[5]
local function num(n) return string.format('%d', n) end

local st = redis.call('HMGET', KEYS[2], 'gen', 'seq')
if ARGV[9] ~= '0' and st[2] ~= ARGV[9] then
  return redis.error_reply('STALE seq is ' .. (st[2] or 'unset') .. ', writer saw ' .. ARGV[9])
end
-- A state without gen is a new history (fresh Redis, or one that lost its
-- data); so is a stream already past the next seq, which XADD would refuse.
local gen = st[1]
local fresh = not gen
if not fresh then
  local top = redis.call('XREVRANGE', KEYS[4], '+', '-', 'COUNT', 1)[1]
  if top and tonumber(string.match(top[1], '^%d+')) > (tonumber(st[2]) or 0) then
    fresh = true
  end
end
if fresh then
  gen = ARGV[2]
  redis.call('DEL', KEYS[4])
  redis.call('HSET', KEYS[2], 'gen', gen, 'seq', '0')
end

local i = 10
local ndropped = tonumber(ARGV[i]); i = i + 1
for _ = 1, ndropped do
  redis.call('ZREM', KEYS[3], ARGV[i])
  redis.call('DEL', prefix .. ARGV[i])
  i = i + 1
end

local nadded = tonumber(ARGV[i]); i = i + 1
local head = 0
if nadded > 0 then
  local n0, parent = tonumber(ARGV[i]), ARGV[i + 2]
  local readded = {}
  for j = 0, nadded - 1 do readded[ARGV[i + 4 * j + 1]] = true end
  local function cut(lo, hi)
    for _, h in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], lo, hi)) do
      if not readded[h] then redis.call('DEL', prefix .. h) end
    end
    redis.call('ZREMRANGEBYSCORE', KEYS[3], lo, hi)
  end
  -- The window stays contiguous and parent-linked: a gap below the new
  -- blocks, or a parent that is not the block there, drops all below.
  local linked = false
  if n0 > 0 then
    for _, h in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], num(n0 - 1), num(n0 - 1))) do
      if h == parent then linked = true end
    end
  end
  if not linked then cut('-inf', '(' .. num(n0)) end
  cut(num(n0), '+inf')
  for _ = 1, nadded do
    redis.call('SET', prefix .. ARGV[i + 1], ARGV[i + 3])
    redis.call('ZADD', KEYS[3], ARGV[i], ARGV[i + 1])
    head = tonumber(ARGV[i])
    i = i + 4
  end
else
  local top = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
  if top[2] then head = tonumber(top[2]) end
end

if head >= window then
  local lim = num(head - window)
  for _, h in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', lim)) do
    redis.call('DEL', prefix .. h)
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', lim)
end

local seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
redis.call('HSET', KEYS[2], 'head', num(head))
if ARGV[7] ~= '0' then redis.call('HSET', KEYS[2], 'safe', ARGV[7]) end
if ARGV[8] ~= '0' then redis.call('HSET', KEYS[2], 'finalized', ARGV[8]) end
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[4], num(seq) .. '-0', 'e', ARGV[6], 'g', gen)
return seq
`)

// Snapshot reads the state and the canonical window at one instant.
// KEYS: Chain.SnapshotKeys (state, canon)
var Snapshot = redis.NewScript(`
local st = redis.call('HMGET', KEYS[1], 'gen', 'seq', 'safe', 'finalized')
return {st[1], st[2], st[3], st[4], redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')}
`)

// Limit is GCRA (package edge, ratelimit.go) over every bucket in KEYS at once: all take n calls,
// or none does. Times are microseconds; Redis's own clock (TIME) is used
// unless ARGV[2] gives one (tests), so replicas' clocks need not agree.
// ARGV: n, now or "", then interval and burst per key. It returns {0, 0}
// when taken, else {i, wait}: the (1-based) bucket that would make the
// calls wait longest and its wait, -1 when they can never fit. A bucket's
// key expires when it would be full again: a full bucket and no key are
// the same.
var Limit = redis.NewScript(`
local n = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local nexts = {}
local worst, wait = 0, 0
for i, key in ipairs(KEYS) do
  local interval = tonumber(ARGV[2 * i + 1])
  local burst = tonumber(ARGV[2 * i + 2])
  if n > burst then
    return {i, -1}
  end
  local tat = tonumber(redis.call('GET', key)) or now
  if tat < now then
    tat = now
  end
  local nxt = tat + n * interval
  local over = nxt - now - burst * interval
  if over > 0 then
    if over > wait then
      worst, wait = i, over
    end
  else
    nexts[i] = nxt
  end
end
if worst > 0 then
  return {worst, math.ceil(wait)}
end
for i, key in ipairs(KEYS) do
  redis.call('SET', key, string.format('%.0f', nexts[i]), 'PX', math.ceil((nexts[i] - now) / 1000) + 1)
end
return {0, 0}
`)

// Unlimit gives n calls back to the bucket in KEYS[1], which Limit took
// them from: on a Redis Cluster a call's buckets sit in different slots,
// so they are taken one script each, and a later bucket's refusal returns
// what the earlier ones took. ARGV: n, now or "", interval.
var Unlimit = redis.NewScript(`
local now = tonumber(ARGV[2])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local tat = tonumber(redis.call('GET', KEYS[1]))
if not tat then
  return 0
end
tat = tat - tonumber(ARGV[1]) * tonumber(ARGV[3])
if tat <= now then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1)
end
return 1
`)

// CacheSet stores one cache entry with its TTL, ends the key's claim (the
// answer is there for whoever waited on it) and, when the key was not
// there, counts it in the counters of the slot it expires in, which
// expire at that slot's end: the live counters are what the cache holds,
// give or take entries that Redis evicted (counted until their slot
// ends) or that a Set replaced with a later TTL (not counted again).
//
// KEYS: Chain.CacheSetKeys (entry, slot, claim); ARGV: envelope, TTL in
// ms, the slot's end in unix seconds.
var CacheSet = redis.NewScript(`
local fresh = redis.call('EXISTS', KEYS[1]) == 0
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('DEL', KEYS[3])
if fresh then
  redis.call('HINCRBY', KEYS[2], 'n', 1)
  redis.call('HINCRBY', KEYS[2], 'b', string.len(ARGV[1]))
  redis.call('EXPIREAT', KEYS[2], ARGV[3])
end
return fresh and 1 or 0
`)

// CacheClaim claims a cache key's miss for the replica whose token is
// ARGV[1], for ARGV[2] ms: 1 when the claim is the caller's (new, or its
// own still held, which it renews: a replica never waits on itself), 0
// when another replica's claim holds it.
//
// KEYS: the claim (Chain.CacheClaimPrefix + key).
var CacheClaim = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and v ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`)

// CacheRelease ends the claim of the replica whose token is ARGV[1]
// (another's, taken after this one expired, is left alone): its fetch
// stored nothing, and the replicas waiting on it, which see neither an
// entry nor a claim, ask upstream themselves at once.
//
// KEYS: the claim (Chain.CacheClaimPrefix + key).
var CacheRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// CacheSize sums the cache's slot counters in KEYS (CacheSizePrefix +
// every slot an entry may still expire in); it returns {entries, bytes}.
var CacheSize = redis.NewScript(`
local n, b = 0, 0
for _, k in ipairs(KEYS) do
  local v = redis.call('HMGET', k, 'n', 'b')
  n = n + (tonumber(v[1]) or 0)
  b = b + (tonumber(v[2]) or 0)
end
return {n, b}
`)

// PublishHeads stores the leader's report of its remotes' heads with a
// TTL (it is stale after that) and announces it on the heads channel, only
// if ARGV[1] is the chain's current fencing epoch (else an error reply
// starting FENCED, and nothing written or announced): a deposed leader's
// late report never reaches a follower.
//
// KEYS: Chain.HeadsKeys (epoch, heads); ARGV[1] epoch, ARGV[2] the
// report, ARGV[3] TTL in ms, ARGV[4] the channel (Chain.HeadsNotify).
var PublishHeads = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur ~= ARGV[1] then
  return redis.error_reply('FENCED epoch is ' .. (cur or 'unset') .. ', writer has ' .. ARGV[1])
end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
redis.call('PUBLISH', ARGV[4], ARGV[2])
return 1
`)

// PublishHeader announces a new header on the headers channel ahead of
// its block, only if ARGV[1] is the chain's current fencing epoch (else an
// error reply starting FENCED, and nothing announced): a deposed leader's
// late header never reaches a subscriber. It returns the receivers.
//
// KEYS: Chain.Epoch; ARGV[1] epoch, ARGV[2] the header, ARGV[3] the
// channel (Chain.Headers).
var PublishHeader = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if cur ~= ARGV[1] then
  return redis.error_reply('FENCED epoch is ' .. (cur or 'unset') .. ', writer has ' .. ARGV[1])
end
return redis.call('PUBLISH', ARGV[3], ARGV[2])
`)

// FilterCreate makes a polled filter, unless the chain or its owner holds
// as many live filters as allowed: first the sets drop the filters whose
// deadline passed (their hashes expired on their own), then both are
// counted. Deadlines are Redis's clock, so replicas' clocks need not agree.
//
// KEYS: Chain.FilterKeys; ARGV: id, TTL in ms, chain cap, owner cap, then
// the filter's fields and values. It returns 1, or -1 (the chain is full)
// or -2 (the owner is).
var FilterCreate = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[3]) then return -1 end
if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[4]) then return -2 end
local fields = {}
for i = 5, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
redis.call('ZADD', KEYS[3], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[3], ttl)
return 1
`)

// FilterAdvance moves a filter's cursor from where the poll read it to
// where the poll's answer leaves it, only if no other poll moved it in
// between (a compare-and-set on n, h and p), and pushes its deadline
// back. Two polls of one filter at once thus never both deliver the same
// changes: the loser reads again from the winner's cursor.
//
// KEYS: Chain.FilterKeys; ARGV: id, TTL in ms, then the old n, h, p and
// the new n, h, p. It returns 1 (moved), 0 (another poll moved it) or -1
// (no such filter: expired, uninstalled, or lost with Redis's data).
var FilterAdvance = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'n', 'h', 'p')
if not cur[1] then return -1 end
if cur[1] ~= ARGV[3] or (cur[2] or '') ~= ARGV[4] or (cur[3] or '') ~= ARGV[5] then return 0 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'n', ARGV[6], 'h', ARGV[7], 'p', ARGV[8])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
redis.call('ZADD', KEYS[3], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[3], ttl)
return 1
`)

// FilterRemove uninstalls a filter. KEYS: Chain.FilterKeys; ARGV: id. It
// returns 1 when the filter existed.
var FilterRemove = redis.NewScript(`
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return redis.call('DEL', KEYS[1])
`)

// PendingAdd appends relayed pending transactions to a pending stream,
// each once however many replicas relay it: a transaction whose seen key
// exists is skipped.
//
// KEYS: the stream (Chain.PendingPrefix + mode); ARGV: the seen-key
// prefix (Chain.PendingSeenPrefix + mode + ":"), its TTL in ms, the
// stream's approximate length cap, then (hash, payload) pairs. It returns
// the last entry's ID, or false when every one was there.
var PendingAdd = redis.NewScript(`
local last = false
for i = 4, #ARGV, 2 do
  if redis.call('SET', ARGV[1] .. ARGV[i], '1', 'NX', 'PX', ARGV[2]) then
    last = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], '*', 't', ARGV[i + 1])
  end
end
return last
`)
