package stalker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/keyspace"
)

// Leader is who leads a chain: the replica whose lease is in Redis and the
// epoch of its leadership.
type Leader struct {
	Replica string `json:"replica"`
	Epoch   uint64 `json:"epoch"`
}

// ReadLeader reads chain's lease; ok is false while no replica holds it.
func ReadLeader(ctx context.Context, rdb redis.UniversalClient, chain string) (l Leader, ok bool, err error) {
	key := keyspace.For(chain).Lease
	v, err := rdb.Get(ctx, key).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return Leader{}, false, nil
	case err != nil:
		return Leader{}, false, fmt.Errorf("read lease %s: %w", key, err)
	}
	// "replica:epoch" (RedisElector.value); a replica ID may hold colons.
	i := strings.LastIndexByte(v, ':')
	if i < 0 {
		return Leader{}, false, fmt.Errorf("read lease %s: malformed", key)
	}
	epoch, err := strconv.ParseUint(v[i+1:], 10, 64)
	if err != nil {
		return Leader{}, false, fmt.Errorf("read lease %s: malformed epoch", key)
	}
	return Leader{Replica: v[:i], Epoch: epoch}, true, nil
}
