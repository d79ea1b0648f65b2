package keyspace

import (
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/venn-gateway/venn/internal/testkit"
)

// testChain returns a chain name no other test uses on the shared Redis,
// its keys deleted at cleanup, and a client for it.
func testChain(t *testing.T) (*redis.Client, Chain) {
	t.Helper()
	name := func(token string) string { return "keyspace-test-" + token }
	rdb, token := testkit.Redis(t, func(token string) string { return "venn:{" + name(token) + "}:*" })
	return rdb, For(name(token))
}

// acquire runs Acquire for replica and returns the epoch it took.
func acquire(t *testing.T, rdb *redis.Client, c Chain, replica string) uint64 {
	t.Helper()
	n, err := Acquire.Run(t.Context(), rdb, c.LeaseKeys(), replica, 10_000).Int64()
	if err != nil || n <= 0 {
		t.Fatalf("acquire as %s = %d, %v", replica, n, err)
	}
	return uint64(n)
}

// publish runs Publish for one block at number n under epoch, and returns
// the event's seq or the script's error.
func publish(t *testing.T, rdb *redis.Client, c Chain, epoch, n uint64) (int64, error) {
	t.Helper()
	hash := "0x" + strconv.FormatUint(n, 16)
	parent := "0x" + strconv.FormatUint(n-1, 16)
	ev := `{"epoch":` + strconv.FormatUint(epoch, 10) + `,"added":[{"number":` + strconv.FormatUint(n, 10) + `,"hash":"` + hash + `"}]}`
	args := []any{
		strconv.FormatUint(epoch, 10), "00000000000000aa", 8, 32, c.BlockPrefix, ev, "0", "0", "0",
		0,                                                                  // dropped
		1, strconv.FormatUint(n, 10), hash, parent, `{"n":"` + hash + `"}`, // added
	}
	return Publish.Run(t.Context(), rdb, c.PublishKeys(), args...).Int64()
}

// TestAcquireThenPublish runs the lease and the publish script as a
// leader change does, on a real Redis: the leader's epoch publishes; after
// another replica takes the lease, the old epoch is refused with nothing
// written, and the new one publishes.
func TestAcquireThenPublish(t *testing.T) {
	rdb, c := testChain(t)
	ctx := t.Context()

	first := acquire(t, rdb, c, "a")
	if seq, err := publish(t, rdb, c, first, 100); err != nil || seq != 1 {
		t.Fatalf("publish under the leader's epoch = %d, %v; want seq 1", seq, err)
	}
	if n, err := Acquire.Run(ctx, rdb, c.LeaseKeys(), "b", 10_000).Result(); err != redis.Nil {
		t.Fatalf("acquire of a held lease = %v, %v; want nil", n, err)
	}

	// The lease passes to b: a released, then b acquired.
	if n, err := Release.Run(ctx, rdb, []string{c.Lease}, "a:"+strconv.FormatUint(first, 10)).Int64(); err != nil || n != 1 {
		t.Fatalf("release = %d, %v", n, err)
	}
	second := acquire(t, rdb, c, "b")
	if second <= first {
		t.Fatalf("epoch after the handover = %d, want above %d", second, first)
	}
	if ok, err := Renew.Run(ctx, rdb, []string{c.Lease}, "a:"+strconv.FormatUint(first, 10), 10_000).Int64(); err != nil || ok != 0 {
		t.Errorf("renew by the old leader = %d, %v; want 0", ok, err)
	}

	_, err := publish(t, rdb, c, first, 101)
	if !redis.HasErrorPrefix(err, "FENCED") {
		t.Fatalf("publish under the stale epoch = %v, want a FENCED error", err)
	}
	if seq, _ := rdb.HGet(ctx, c.State, "seq").Int64(); seq != 1 {
		t.Errorf("seq after the fenced publish = %d, want 1: nothing written", seq)
	}
	if n, _ := rdb.Exists(ctx, c.BlockPrefix+"0x65").Result(); n != 0 {
		t.Error("the fenced publish stored its block")
	}
	if seq, err := publish(t, rdb, c, second, 101); err != nil || seq != 2 {
		t.Errorf("publish under the new epoch = %d, %v; want seq 2", seq, err)
	}
	snap, err := Snapshot.Run(ctx, rdb, c.SnapshotKeys()).Slice()
	if err != nil || len(snap) != 5 {
		t.Fatalf("snapshot = %v, %v", snap, err)
	}
	if canon, _ := snap[4].([]any); len(canon) != 4 || canon[0] != "0x64" || canon[2] != "0x65" {
		t.Errorf("window after both publishes = %v, want 0x64 and 0x65", snap[4])
	}
}
