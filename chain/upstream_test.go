package chain

import (
	"context"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/remotes/status"
)

// A node whose head is stamped minutes ahead of this host's clock (a dev
// chain mined in a burst) is not followed: a backfill waiting for a remote
// says which one and why, not only that none is ready.
func TestWaitHeadSaysWhyNoRemoteIsFollowed(t *testing.T) {
	const ahead = 300 // seconds
	opts := fakenode.Options{ChainID: 1337, Head: 100, BlockTime: 12 * time.Second}
	opts.GenesisTime = uint64(time.Now().Unix()) + ahead - 100*12
	node := fakenode.Start(t, opts)
	cc := testConfig(node)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	up, err := OpenUpstream(ctx, cc, 64<<20, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := up.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	testkit.WaitFor(t, 20*time.Second, "the node's head to be judged", func() bool {
		rs := status.ReasonsOf(up.pool.Status())
		return len(rs) == 1 && slices.Contains(rs[0].Out, status.OutHeadAhead)
	})

	_, err = up.WaitHead(ctx, time.Millisecond)
	if err == nil {
		t.Fatal("WaitHead succeeded with the only remote's head in the future")
	}
	// The clock moves on while the test runs: the figure is within a few
	// seconds of the stamp.
	re := regexp.MustCompile(`^chain test: no remote ready after 1ms: a: head 100 not followed: its timestamp is (\d+) s ahead of this host's clock \(more than 15s\)$`)
	m := re.FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("WaitHead: %v", err)
	}
	if n, _ := strconv.Atoi(m[1]); n > ahead || n < ahead-60 {
		t.Errorf("ahead by %d s, want about %d", n, ahead)
	}
}
