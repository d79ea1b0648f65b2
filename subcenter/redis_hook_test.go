package subcenter

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// RedisStores makes chain "test"'s filter store and pending feed on rdb.
// It is subcenter/redisstore's, set by redisstore_test.go (package
// subcenter_test): a test of package subcenter cannot import a package
// that imports subcenter.
var RedisStores func(rdb redis.UniversalClient) (FilterStore, PendingFeed)

func redisStores(t *testing.T, rdb redis.UniversalClient) (FilterStore, PendingFeed) {
	t.Helper()
	if RedisStores == nil {
		t.Fatal("RedisStores is not set: redisstore_test.go sets it")
	}
	return RedisStores(rdb)
}

// newRedisReplica is newReplica on chain "test"'s Redis stores in rdb.
func newRedisReplica(t *testing.T, rdb redis.UniversalClient, cfg FilterConfig) *replica {
	t.Helper()
	store, pending := redisStores(t, rdb)
	return newReplica(t, store, pending, cfg)
}
