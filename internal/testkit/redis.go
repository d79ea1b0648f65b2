package testkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisAddr is the machine's Redis, which scripts/test.sh starts.
const RedisAddr = "127.0.0.1:6379"

// Redis connects to the machine's Redis, failing the test if it does not
// answer, and returns a random token the test names its keys with. At
// cleanup the keys matching glob(token) are deleted and the client closed.
func Redis(t testing.TB, glob func(token string) string) (*redis.Client, string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: RedisAddr})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		t.Fatalf("redis at %s: %v (scripts/test.sh starts one)", RedisAddr, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if keys, _ := rdb.Keys(ctx, glob(token)).Result(); len(keys) > 0 {
			_ = rdb.Del(ctx, keys...).Err()
		}
		_ = rdb.Close()
	})
	return rdb, token
}
