package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes"
)

// TestShareRoundTrip: a stored probe loads back; the claim is one
// replica's until it expires.
func TestShareRoundTrip(t *testing.T) {
	rdb, token := testkit.Redis(t, func(tok string) string { return "venn:{avail-" + tok + "}:*" })
	chain := "avail-" + token
	a, b := NewShare(rdb, "a"), NewShare(rdb, "b")
	ctx := context.Background()
	if _, ok, err := a.Load(ctx, chain, "n1"); ok || err != nil {
		t.Fatalf("Load before any Store = %v, %v; want none", ok, err)
	}
	want := remotes.Probed{At: time.Unix(1700000000, 0).UTC(), Head: 5000, Oldest: map[string]uint64{"state": 4872, "blocks": 0}}
	if err := a.Store(ctx, chain, "n1", want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := b.Load(ctx, chain, "n1")
	if err != nil || !ok || !got.At.Equal(want.At) || got.Head != want.Head || fmt.Sprint(got.Oldest) != fmt.Sprint(want.Oldest) {
		t.Fatalf("Load = %+v, %v, %v; want %+v", got, ok, err, want)
	}
	if won, err := a.Claim(ctx, chain, "n1", time.Minute); !won || err != nil {
		t.Fatalf("first Claim = %v, %v; want won", won, err)
	}
	if won, err := b.Claim(ctx, chain, "n1", time.Minute); won || err != nil {
		t.Fatalf("second Claim = %v, %v; want lost", won, err)
	}
	if won, err := b.Claim(ctx, chain, "n2", time.Minute); !won || err != nil {
		t.Fatalf("Claim of another remote = %v, %v; want won", won, err)
	}
}

// TestClusterProbesOnce: two pools of one chain sharing through Redis, as
// two replicas do, probe a pruned remote once between them; both route
// on the result.
func TestClusterProbesOnce(t *testing.T) {
	rdb, token := testkit.Redis(t, func(tok string) string { return "venn:{avail-" + tok + "}:*" })
	chain := "avail-" + token
	const chainID = 1337
	archive := fakenode.Start(t, fakenode.Options{ChainID: chainID, Head: 3000})
	full := fakenode.Start(t, fakenode.Options{ChainID: chainID, Head: 3000})
	full.SetStateWindow(128)
	// Each probe of the full node starts with the zero address's balance
	// at block 1, which nothing else asks.
	var probes atomic.Int64
	full.SetHook(func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method == "eth_getBalance" && strings.Contains(string(params), `"0x0000000000000000000000000000000000000000","0x1"`) {
			probes.Add(1)
		}
		return nil, nil, false
	})
	rs := []remotes.Config{{Name: "archive", URL: archive.URL()}, {Name: "full", URL: full.URL()}}
	pools := make([]*remotes.Pool, 2)
	for i := range pools {
		cfg := remotes.PoolConfig{Chain: chain, ChainID: chainID, BlockTime: time.Hour,
			Availability: remotes.AvailabilityConfig{Share: NewShare(rdb, fmt.Sprint("r", i))}}
		p, err := remotes.NewPool(cfg, rs, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := p.Stop(ctx); err != nil {
				t.Error(err)
			}
		})
		pools[i] = p
		testkit.WaitFor(t, 5*time.Second, "both remotes in rotation", func() bool {
			for _, s := range p.Status() {
				if !s.InRotation {
					return false
				}
			}
			return true
		})
	}
	for _, p := range pools {
		if _, err := p.Call(context.Background(), "eth_getBalance",
			[]byte(`["0x0000000000000000000000000000000000000001","0x10"]`)); err != nil {
			t.Fatal(err)
		}
	}
	probedBy := func(p *remotes.Pool) bool {
		for _, s := range p.Status() {
			for _, a := range s.Availability {
				if a.Kind == "state" && a.Source != "probe" {
					return false
				}
			}
		}
		return true
	}
	testkit.WaitFor(t, 15*time.Second, "both replicas know the windows", func() bool {
		return probedBy(pools[0]) && probedBy(pools[1])
	})
	state := full.Calls("eth_getBalance")
	for _, p := range pools {
		if _, err := p.Call(context.Background(), "eth_getBalance",
			[]byte(`["0x0000000000000000000000000000000000000002","0x20"]`)); err != nil {
			t.Fatal(err)
		}
	}
	if after := full.Calls("eth_getBalance"); after != state {
		t.Errorf("the full node got %d old-state calls after the shared probe, want 0", after-state)
	}
	if n := probes.Load(); n != 1 {
		t.Errorf("the full node was probed %d times by the two replicas, want once", n)
	}
}
