package cache

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// pinRecorder answers every fetch with the same balance and remembers the
// hash the last one was pinned to.
type pinRecorder struct{ pinned string }

func (r *pinRecorder) fetch(_ context.Context, pinned string) (json.RawMessage, error) {
	r.pinned = pinned
	return json.RawMessage(`"0x7"`), nil
}

// TestServeOneOffNearHeadMissesWhileTheyFlood: past admitFree unseen
// near-head misses in a generation, a near-head miss asked for the first
// time is sent as the client sent it and served, not stored; asked again
// it is pinned and stored, and then a hit. Settled misses and a client's
// fresh read are stored as ever, and once the flood's generation is over
// a one-off is stored again.
func TestServeOneOffNearHeadMissesWhileTheyFlood(t *testing.T) {
	c, _ := newTestCache(t, testConfig())
	clk := &fakeClock{t: time.Unix(1_000_000, 0)}
	c.admit = newAdmission(c.cfg.RecentTTL, clk.now)
	v := newView(100, map[uint64]string{0x65: hashA})
	ctx := context.Background()
	up := &pinRecorder{}
	balance := func(i int, block string) (json.RawMessage, Outcome) {
		t.Helper()
		res, err, o := c.Serve(ctx, call("eth_getBalance", fmt.Sprintf(`["0x%040x",%q]`, i, block)), v, false, up.fetch)
		if err != nil || string(res) != `"0x7"` {
			t.Fatalf("address %d at %s: %s %v, want the upstream's answer", i, block, res, err)
		}
		return res, o
	}
	for i := range admitFree {
		if _, o := balance(i, "0x65"); o != Miss || up.pinned != hashA {
			t.Fatalf("unseen near-head miss %d of the generation: %v pinned to %q, want a miss pinned to %s", i, o, up.pinned, hashA)
		}
	}
	if _, o := balance(0, "0x65"); o != Hit {
		t.Fatalf("a miss admitted before the flood asked again: %v, want a hit", o)
	}

	oneOff := admitFree
	if _, o := balance(oneOff, "0x65"); o != Miss || up.pinned != "" {
		t.Fatalf("a one-off past admitFree: %v pinned to %q, want a miss sent as the client sent it", o, up.pinned)
	}
	if got := testutil.ToFloat64(c.m.requests.WithLabelValues("dev", "eth_getBalance", "any", "unadmitted")); got != 1 {
		t.Errorf("unadmitted misses counted %v, want 1", got)
	}
	if _, o := balance(oneOff, "0x65"); o != Miss || up.pinned != hashA {
		t.Fatalf("the one-off asked again: %v pinned to %q, want a miss pinned and stored", o, up.pinned)
	}
	if _, o := balance(oneOff, "0x65"); o != Hit {
		t.Fatalf("the one-off asked a third time: %v, want a hit", o)
	}

	if _, o := balance(oneOff+1, "0x10"); o != Miss {
		t.Fatalf("a settled miss: %v", o)
	}
	if _, o := balance(oneOff+1, "0x10"); o != Hit {
		t.Fatalf("a settled miss during the flood asked again: %v, want a hit (stored at once)", o)
	}
	fresh := call("eth_getBalance", fmt.Sprintf(`["0x%040x","0x65"]`, oneOff+2))
	if _, _, o := c.Serve(ctx, fresh, v, true, up.fetch); o != Bypass || up.pinned != hashA {
		t.Fatalf("a fresh read: %v pinned to %q", o, up.pinned)
	}
	if _, _, o := c.Serve(ctx, fresh, v, false, up.fetch); o != Hit {
		t.Fatalf("after a fresh read during the flood: %v, want its answer stored", o)
	}

	// The flood stops: after recent_ttl a one-off is stored again, once
	// the clock is read (every doorClockEvery unseen keys).
	clk.t = clk.t.Add(c.cfg.RecentTTL)
	next, stored := oneOff+3, false
	for range doorClockEvery {
		if _, o := balance(next, "0x65"); o != Miss {
			t.Fatalf("unseen address %d: %v", next, o)
		}
		if up.pinned == hashA {
			stored = true
			break
		}
		next++
	}
	if !stored {
		t.Fatalf("no one-off stored in %d misses after the generation's recent_ttl", doorClockEvery)
	}
	if _, o := balance(next, "0x65"); o != Hit {
		t.Fatalf("the one-off of the new generation asked again: %v, want a hit", o)
	}
}
