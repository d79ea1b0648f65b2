package subcenter_test

import (
	"github.com/redis/go-redis/v9"

	"github.com/venn-gateway/venn/subcenter"
	"github.com/venn-gateway/venn/subcenter/redisstore"
)

func init() {
	subcenter.RedisStores = func(rdb redis.UniversalClient) (subcenter.FilterStore, subcenter.PendingFeed) {
		return redisstore.NewFilters(rdb, "test"), redisstore.NewPending(rdb, "test")
	}
}
