package remotes

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/breaker"
)

// A reply over max_response_bytes is the answer's size, not the remote's
// health: the client gets a clear error naming the limit, no remote with
// the same cap is tried, and breakers stay closed however often it
// happens. A remote allowed a larger reply serves it.
func TestPoolReplyOverCap(t *testing.T) {
	const mib = 1 << 20
	huge := json.RawMessage(`"0x` + strings.Repeat("ab", mib) + `"`) // 2 MiB
	hook := func(method string, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		return huge, nil, method == "eth_call"
	}
	tests := []struct {
		name    string
		maxByte [2]int64
		wantErr bool
	}{
		{name: "every remote has the cap", maxByte: [2]int64{mib, mib}, wantErr: true},
		{name: "one remote allows more", maxByte: [2]int64{mib, 4 * mib}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := []*fakenode.Node{
				fakenode.Start(t, fakenode.Options{ChainID: testChainID}),
				fakenode.Start(t, fakenode.Options{ChainID: testChainID}),
			}
			for _, n := range nodes {
				n.SetHook(hook)
			}
			p := testPool(t, PoolConfig{BlockTime: time.Hour}, nodes, func(i int, c *Config) {
				c.MaxResponseBytes = tt.maxByte[i]
				c.Tier = Tier(i) // n0 first
			})
			const calls = 2 * DefaultBreakerFailures
			for range calls {
				res, err := call(t, p, "eth_call", `[{"to":"0x0000000000000000000000000000000000000001"},"latest"]`)
				if !tt.wantErr {
					if err != nil || len(res) != len(huge) {
						t.Fatalf("call = %d bytes, %v; want the 2 MiB answer", len(res), err)
					}
					continue
				}
				je := jrpc.ToWire(err)
				if err == nil || je.Code != jrpc.CodeLimitExceeded ||
					!strings.Contains(je.Message, "max_response_bytes (1048576 bytes)") {
					t.Fatalf("err = %v; want -32052 naming max_response_bytes", err)
				}
			}
			if tt.wantErr {
				if got := nodes[0].Calls("eth_call") + nodes[1].Calls("eth_call"); got != calls {
					t.Errorf("%d upstream calls for %d client calls; want no failover to a remote with the same cap", got, calls)
				}
			}
			for _, r := range p.members() {
				if s := r.brk.State(); s != breaker.Closed {
					t.Errorf("%s: breaker state %d after answers over the cap; want closed", r.Name(), s)
				}
			}
			if _, err := call(t, p, "eth_blockNumber", `[]`); err != nil {
				t.Fatalf("the pool no longer serves: %v", err)
			}
		})
	}
}

// An eth_getLogs reply over the cap is split, as a remote's own "response
// too large" is: the parts fit, and the merged logs are the node's.
func TestGetLogsReplyOverCapSplits(t *testing.T) {
	const filter = `[{"fromBlock":"0x1","toBlock":"0x1f4"}]`
	want := refLogs(t, 500, filter)
	huge := json.RawMessage(`["` + strings.Repeat("a", 2<<20) + `"]`)
	n := fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 500})
	p := testPool(t, PoolConfig{}, []*fakenode.Node{n}, func(_ int, c *Config) { c.MaxResponseBytes = 1 << 20 })
	n.SetHook(logsHook(func(from, to uint64, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		return huge, nil, to-from+1 > 64 // wide ranges answer more than the cap
	}))
	got, err := call(t, p, "eth_getLogs", filter)
	if err != nil {
		t.Fatalf("eth_getLogs: %v", err)
	}
	if !jsonEqual(t, got, want) {
		t.Fatalf("got %d bytes, want the node's %d", len(got), len(want))
	}
	if s := p.members()[0].brk.State(); s != breaker.Closed {
		t.Errorf("breaker state %d; want closed", s)
	}
}
