package remotes

import (
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
)

// A remote whose first head poll fails (a timeout on a busy machine, a
// provider's hiccup) has no head, and so is out of rotation: it is polled
// again within health.RetryEvery, not a block time later.
func TestFirstHeadPollRetried(t *testing.T) {
	n := fakenode.Start(t, fakenode.Options{ChainID: testChainID})
	var polls atomic.Int64
	n.SetHook(func(m string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if m == "eth_getBlockByNumber" && string(params) == string(latestHeader) && polls.Add(1) == 1 {
			return nil, &jrpc.Error{Code: -32603, Message: "internal error"}, true
		}
		return nil, nil, false
	})
	// startPool waits a few seconds for every remote's head: with polls an
	// hour apart, only a brisk retry brings it.
	p := startPool(t, PoolConfig{BlockTime: time.Hour}, testConfigs([]string{n.URL()}, nil), nil)
	if got := p.members()[0].Head(); got != fakenode.DefaultHead {
		t.Fatalf("head %d, want %d", got, fakenode.DefaultHead)
	}
	if got := polls.Load(); got != 2 {
		t.Errorf("head after %d polls, want the failed one and one retry", got)
	}
}
