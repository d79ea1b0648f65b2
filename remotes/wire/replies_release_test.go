package wire

import (
	"context"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/testkit"
)

// After a burst of big replies the process gives their memory back: the
// issue's replica stayed at 1.07 GB RSS after four 300 MB replies, since
// an idle process does not collect and the chunks stayed pooled.
func TestBigRepliesMemoryReturned(t *testing.T) {
	const mib = 1 << 20
	srv := hugeServer(t, 48e6, false)
	budget := NewReplyBudget(256*mib, nil, nil)
	tr, err := New(Options{Name: "alpha", URL: srv.URL, MaxResponseBytes: 64 * mib, Budget: budget})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	debug.FreeOSMemory()
	before := goMapped()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			res, _, err := tr.Call(context.Background(), "eth_huge", nil)
			if err != nil || len(res) < 48e6 {
				t.Errorf("a 48 MB reply: %d bytes, %v", len(res), err)
			}
		})
	}
	wg.Wait()
	if during := goMapped(); during < before+100*mib {
		t.Fatalf("the replies took %d MiB: the test's premise fails", (during-before)/mib)
	}
	testkit.WaitFor(t, 5*releaseDelay+5*time.Second, "the big replies' memory released", func() bool {
		return budget.releases.Load() > 0
	})
	if after := goMapped(); after > before+32*mib {
		t.Errorf("the runtime still holds %d MiB more than before the replies, %d MiB after", (after-before)/mib, after/mib)
	}
}
