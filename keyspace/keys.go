// Package keyspace owns venn's Redis keyspace: the name of every key a
// replica reads or writes, and every Lua script that moves them (the
// leader's lease, the head window's publish and snapshot, the edge's rate
// limits, the cache's entries). The stalker, the headstore, the edge and
// the cache run these scripts on their own Redis clients; none of them
// spells a key.
//
// It lives under headstore, whose Redis adapter holds most of the
// keyspace, as its own package so that the stalker and the edge use it
// without the head window.
package keyspace

// Chain is the keys of one chain. They share the hash tag {CHAIN}, so they
// sit in one Redis Cluster slot and one script may touch all of them:
//
//	venn:{CHAIN}:leader    the leader's lease: "replica:epoch", with a TTL
//	venn:{CHAIN}:epoch     fencing epoch: bumped by Acquire, checked by Publish
//	venn:{CHAIN}:state     HASH gen, seq, head, safe, finalized
//	venn:{CHAIN}:canon     ZSET block hash scored by number: the window
//	venn:{CHAIN}:blk:HASH  JSON of one Block
//	venn:{CHAIN}:events    STREAM, entry ID SEQ-0, fields e (event with refs
//	                       only) and g (the gen it belongs to)
//	venn:{CHAIN}:headers   pub/sub channel: each new header the leader
//	                       announces ahead of its block (package headstore)
//	venn:{CHAIN}:cordons   HASH remote name -> JSON of an operator's cordon
//	                       (package admin); expired ones are ignored
//	venn:{CHAIN}:cordons:changed  pub/sub channel: the cordons changed
//	venn:{CHAIN}:heads     JSON of the leader's last report of its remotes'
//	                       heads (package stalker), with a TTL: gone when stale
//	venn:{CHAIN}:heads:changed  pub/sub channel: each report, as published
//	venn:{CHAIN}:c:KEY     one cached answer (package cache's envelope),
//	                       always with a TTL; KEY is the cache key in hex
//	venn:{CHAIN}:cc:KEY    a claim on KEY's miss: the replica asking
//	                       upstream for it, with a TTL
//	venn:{CHAIN}:cn:SLOT   HASH n, b: cache entries and bytes written that
//	                       expire in that slot: mMINUTE (unix minutes) for
//	                       TTLs under an hour, hHOUR (unix hours) for the
//	                       rest; it expires with them, so the live ones sum
//	                       what the cache holds (CacheSize)
//	venn:{CHAIN}:cache:purged  pub/sub channel: each purge of the cache
//	                       (package cache's Purge, as JSON), for every
//	                       replica to drop from its memory tier
//	venn:{CHAIN}:avail     HASH remote name -> JSON of its last availability
//	                       probe (package remotes' Probed)
//	venn:{CHAIN}:availc:REMOTE  the claim of the replica probing REMOTE,
//	                       with a TTL
//	venn:{CHAIN}:f:ID      HASH of one polled filter (package subcenter):
//	                       k kind, c criteria, n and h its cursor's number
//	                       and hash, p its place in the pending feed, x
//	                       full transactions, o its owner; its TTL is the
//	                       idle deadline
//	venn:{CHAIN}:filters   ZSET filter ID scored by its deadline (unix ms):
//	                       the chain's filters, for the per-chain cap
//	venn:{CHAIN}:fo:OWNER  ZSET the same, of one owner (an API key's name
//	                       or a client address), for the per-client cap
//	venn:{CHAIN}:ptx:MODE  STREAM of pending transactions relayed for
//	                       filters (MODE h: hashes, f: full objects), field t
//	venn:{CHAIN}:ptxs:MODE:HASH  a transaction already on that stream, with
//	                       a TTL, so replicas relaying it too add it once
type Chain struct {
	Lease         string
	Epoch         string
	State         string
	Canon         string
	Events        string
	BlockPrefix   string // + a block's hash
	Headers       string // a channel, not a key
	Cordons       string
	CordonsNotify string // a channel, not a key
	Heads         string
	HeadsNotify   string // a channel, not a key

	CachePrefix      string // + a cache key in hex
	CacheClaimPrefix string // + a cache key in hex
	CacheSizePrefix  string // + "m" and a unix minute, or "h" and a unix hour
	CachePurged      string // a channel, not a key

	Avail            string
	AvailClaimPrefix string // + a remote's name

	FilterPrefix      string // + a filter's ID
	Filters           string
	FilterOwnerPrefix string // + an owner
	PendingPrefix     string // + a mode: the pending stream
	PendingSeenPrefix string // + a mode, ":" and a transaction's hash
}

// For returns the keys of chain.
func For(chain string) Chain {
	p := "venn:{" + chain + "}:"
	return Chain{
		Lease:         p + "leader",
		Epoch:         p + "epoch",
		State:         p + "state",
		Canon:         p + "canon",
		Events:        p + "events",
		BlockPrefix:   p + "blk:",
		Headers:       p + "headers",
		Cordons:       p + "cordons",
		CordonsNotify: p + "cordons:changed",
		Heads:         p + "heads",
		HeadsNotify:   p + "heads:changed",

		CachePrefix:      p + "c:",
		CacheClaimPrefix: p + "cc:",
		CacheSizePrefix:  p + "cn:",
		CachePurged:      p + "cache:purged",

		Avail:            p + "avail",
		AvailClaimPrefix: p + "availc:",

		FilterPrefix:      p + "f:",
		Filters:           p + "filters",
		FilterOwnerPrefix: p + "fo:",
		PendingPrefix:     p + "ptx:",
		PendingSeenPrefix: p + "ptxs:",
	}
}

// FilterKeys are FilterCreate's, FilterAdvance's and FilterRemove's KEYS
// for filter id of owner: the filter, the chain's set and the owner's.
func (c Chain) FilterKeys(id, owner string) []string {
	return []string{c.FilterPrefix + id, c.Filters, c.FilterOwnerPrefix + owner}
}

// LeaseKeys are Acquire's KEYS.
func (c Chain) LeaseKeys() []string { return []string{c.Lease, c.Epoch} }

// PublishKeys are Publish's KEYS.
func (c Chain) PublishKeys() []string { return []string{c.Epoch, c.State, c.Canon, c.Events} }

// SnapshotKeys are Snapshot's KEYS.
func (c Chain) SnapshotKeys() []string { return []string{c.State, c.Canon} }

// HeadsKeys are PublishHeads's KEYS.
func (c Chain) HeadsKeys() []string { return []string{c.Epoch, c.Heads} }

// CacheSetKeys are CacheSet's KEYS for cache key key (hex) expiring in
// slot: the entry, the slot's counters and the key's claim.
func (c Chain) CacheSetKeys(key, slot string) []string {
	return []string{c.CachePrefix + key, c.CacheSizePrefix + slot, c.CacheClaimPrefix + key}
}

// RateLimitPrefix starts the key of every rate-limit bucket ("key:NAME",
// "ip:ADDRESS"), unless the edge is given another.
const RateLimitPrefix = "venn:ratelimit:"

// RateLimitKey is the key of bucket under prefix. Each bucket is its own
// hash tag, so that a Redis Cluster spreads the buckets over its slots
// instead of holding every client's on one node.
func RateLimitKey(prefix, bucket string) string { return prefix + "{" + bucket + "}" }

// Replicas is a HASH of the cluster's replicas: replica ID -> JSON of its
// heartbeat (version, start and last-seen times), written every few
// seconds by each replica's admin package; entries whose presence key
// (ReplicaPresence) has expired are deleted by whoever reads them.
const Replicas = "venn:replicas"

// ReplicaPresence is the key that says replica id is alive: a string set
// with a TTL at each heartbeat, so that a replica killed without cleanup
// disappears when it expires, measured by Redis's clock alone.
func ReplicaPresence(id string) string { return "venn:replica:" + id }
