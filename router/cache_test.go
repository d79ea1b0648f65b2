package router

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/cache"
	"github.com/venn-gateway/venn/headstore"
	"github.com/venn-gateway/venn/jrpc"
)

// canonicalHead is fakeHead with a canonical hash for every number.
type canonicalHead struct{ fakeHead }

func (canonicalHead) CanonicalHash(n uint64) (string, bool) { return fmt.Sprintf("0x%064x", n), true }

// TestRouterAsksTheCache: a state call is answered from the cache the
// second time (source cache), a pinned latest included; a call the cache
// does not keep goes to the remotes each time.
func TestRouterAsksTheCache(t *testing.T) {
	rec := &recorder{}
	head := canonicalHead{fakeHead{tags: headstore.Tags{Latest: 100}, ok: true}}
	c := cache.New(cache.Config{}.WithDefaults(time.Second, false), cache.Options{Chain: "dev"})
	t.Cleanup(c.Close)
	m := NewMetrics(nil)
	rt := New(Config{Chain: "dev", ChainID: 1, Cache: c, Settled: func() (uint64, bool) { return 36, true }}, head, rec, m)
	for _, params := range []string{
		`["0x00000000000000000000000000000000000000aa","0x20"]`, // settled
		`["0x00000000000000000000000000000000000000aa","0x20"]`,
		`["0x00000000000000000000000000000000000000AA","latest"]`, // pinned to 100, keyed by its hash
		`["0x00000000000000000000000000000000000000aa","0x64"]`,
	} {
		if _, err := rt.ServeRPC(context.Background(), &jrpc.Request{Method: "eth_getBalance", Params: []byte(params)}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		_, _ = rt.ServeRPC(context.Background(), &jrpc.Request{Method: "eth_gasPrice", Params: []byte(`[]`)})
	}
	if len(rec.sent) != 4 {
		t.Fatalf("remotes saw %d calls, want 4: two balances and two gas prices", len(rec.sent))
	}
	if got := testutil.ToFloat64(m.answers.WithLabelValues("dev", "cache")); got != 2 {
		t.Errorf("answers from the cache %v, want 2", got)
	}
}
