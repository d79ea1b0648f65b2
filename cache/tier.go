// Package cache keeps the answers of state and trace calls at a fixed
// block: by block hash, or at or below the settled line, forever; above
// it, keyed by the hash of the canonical block at the call's number, so
// that a reorg makes the entry unreachable and the window's reorg event
// evicts it. Tiers: memory per replica, Redis shared by the cluster,
// Postgres for settled answers of expensive methods.
package cache

import (
	"context"
	"encoding/hex"
	"time"
)

// Key names one answer: the digest of the chain, the method and the
// params with the block resolved (see the key derivation). Two calls that
// mean the same share a key; two that differ in meaning never do.
type Key [32]byte

// String is the key in hex, as the Redis tier names it (Postgres keeps
// the 32 bytes).
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// Entry is one stored answer.
type Entry struct {
	// Value is the JSON-RPC result, or, when Error, the error object
	// ({"code":…,"message":…,"data":…}) of a deterministic failure at a
	// fixed block (a revert).
	Value []byte
	Error bool
	// Settled is true when the answer can never change: by block hash,
	// or at or below the settled line. Only settled entries are kept
	// long (and in the Postgres tier).
	Settled bool
	// Method is the call's method, for the tiers' accounting and
	// retention (bounded: one of the cache's method set).
	Method string
	// Block is the number of the block the answer is at; 0: unknown.
	Block uint64
	// Remote names the remote whose answer this is (names joined by
	// commas when several made it; "" unknown), so that a remote's answers
	// can be dropped once it is found wrong (Purge).
	Remote string
	// Written is when the entry was made, in unix milliseconds.
	Written int64
}

// Tier is one level of the cache. A Get that fails or a Set that fails
// is a miss, never a client's error: the cache counts and logs it.
type Tier interface {
	// Name labels the tier in metrics: memory, redis or postgres.
	Name() string
	// Get returns the entry under k; ok is false on a miss.
	Get(ctx context.Context, k Key) (e Entry, ok bool, err error)
	// Set stores e under k for ttl (0: the tier's longest).
	Set(ctx context.Context, k Key, e Entry, ttl time.Duration) error
}

// Claimer is a tier that can share one miss across the cluster: Claim
// reports whether this replica is to ask upstream (mine: a claim it
// already holds is its own again), or another replica already is and its
// answer should appear in the tier within hold. A claim ends the moment
// its fetch does: storing the answer ends it, and Release ends one whose
// fetch stored nothing in the tier (a revert near the head, an error, an
// answer too large, one not pinned), so that the replicas waiting on it
// learn, by Watch, that nothing is coming, and ask upstream themselves.
type Claimer interface {
	Claim(ctx context.Context, k Key, hold time.Duration) (mine bool, err error)
	Release(ctx context.Context, k Key) error
	// Watch is k's entry (ok), or when there is none whether a claim on k
	// is still held.
	Watch(ctx context.Context, k Key) (e Entry, ok, claimed bool, err error)
}

// Sizer is a tier that can say how much it holds, for the bytes and
// entries gauges.
type Sizer interface {
	Size(ctx context.Context) (entries, bytes int64, err error)
}

// Deleter is a tier that can drop one entry: the cache drops the near-head
// entries of a block a reorg orphaned from the tiers that can (their keys
// are already unreachable; this frees their room at once).
type Deleter interface {
	Delete(ctx context.Context, k Key) error
}
