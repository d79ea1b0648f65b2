package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/keyspace"
	"github.com/venn-gateway/venn/remotes"
)

// opTimeout bounds one Redis operation: a probe that cannot share goes on
// alone rather than wait.
const opTimeout = 2 * time.Second

// maxProbedBytes bounds a stored probe read back: a handful of numbers.
const maxProbedBytes = 4096

// Share is remotes.AvailShare on a Redis client: the probes in one hash
// per chain, the right to probe a remote as a short claim (SET NX PX).
type Share struct {
	rdb     redis.UniversalClient
	replica string // written into claims, for an operator reading them
}

var _ remotes.AvailShare = (*Share)(nil)

// NewShare shares probes on rdb; replica names this process in its claims.
func NewShare(rdb redis.UniversalClient, replica string) *Share {
	return &Share{rdb: rdb, replica: replica}
}

// Load is the probe of remote last stored for chain.
func (s *Share) Load(ctx context.Context, chain, remote string) (remotes.Probed, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	b, err := s.rdb.HGet(ctx, keyspace.For(chain).Avail, remote).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return remotes.Probed{}, false, nil
	case err != nil:
		return remotes.Probed{}, false, fmt.Errorf("load availability: %w", err)
	case len(b) > maxProbedBytes:
		return remotes.Probed{}, false, fmt.Errorf("load availability: %d bytes stored for %s", len(b), remote)
	}
	var p remotes.Probed
	if err := json.Unmarshal(b, &p); err != nil {
		return remotes.Probed{}, false, fmt.Errorf("load availability of %s: %w", remote, err)
	}
	return p, true, nil
}

// Claim takes the right to probe remote of chain for ttl.
func (s *Share) Claim(ctx context.Context, chain, remote string, ttl time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	ok, err := s.rdb.SetNX(ctx, keyspace.For(chain).AvailClaimPrefix+remote, s.replica, ttl).Result()
	if err != nil {
		return false, fmt.Errorf("claim availability probe: %w", err)
	}
	return ok, nil
}

// Store shares a probe of remote of chain.
func (s *Share) Store(ctx context.Context, chain, remote string, p remotes.Probed) error {
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("store availability: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := s.rdb.HSet(ctx, keyspace.For(chain).Avail, remote, b).Err(); err != nil {
		return fmt.Errorf("store availability: %w", err)
	}
	return nil
}
