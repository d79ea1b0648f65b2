package remotes

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
)

// TestNotesServedRemote checks that every strategy tells the call's note
// the remote whose answer was served and the attempts made: single with a
// failover, hedged, voted, split eth_getLogs and broadcast.
func TestNotesServedRemote(t *testing.T) {
	const logs = `[{"fromBlock":"0x1","toBlock":"0xc8"}]`
	tests := []struct {
		name   string
		cfg    PoolConfig
		n      int
		fault  func(nodes []*fakenode.Node)
		method string
		params string
		// want is the note's remotes; "" any one remote; wantN the
		// attempts, or with minN at least that many.
		want  string
		wantN int
		minN  bool
	}{
		{name: "failover", n: 2, fault: func(ns []*fakenode.Node) { ns[0].SetFailStatus(503) },
			method: "eth_getBalance", params: balanceOf(0), want: "n1", wantN: 2},
		{name: "first", n: 2, method: "eth_getBalance", params: balanceOf(1), want: "n0", wantN: 1},
		{name: "revert", n: 2, fault: func(ns []*fakenode.Node) { ns[0].SetRPCError(3, "execution reverted") },
			method: "eth_call", params: `[{"to":"0x0000000000000000000000000000000000000001"},"latest"]`, want: "n0", wantN: 1},
		{name: "hedged", n: 2, cfg: PoolConfig{Hedge: HedgeConfig{Groups: []HedgeGroup{{Methods: []string{"*"}, Delay: time.Millisecond}}}},
			fault:  func(ns []*fakenode.Node) { ns[0].SetLatency(2 * time.Second) },
			method: "eth_getBalance", params: balanceOf(2), want: "n1", wantN: 2},
		{name: "voted", n: 3, cfg: PoolConfig{Consensus: []ConsensusRule{{Methods: []string{"eth_getBalance"}}}},
			method: "eth_getBalance", params: `["0x00000000000000000000000000000000000000aa","0x10"]`, wantN: 2, minN: true},
		{name: "split", n: 2, fault: func(ns []*fakenode.Node) {
			for _, n := range ns {
				n.SetMaxLogsRange(50)
			}
		}, method: "eth_getLogs", params: logs, want: "n0", wantN: 4, minN: true},
		{name: "broadcast", n: 3, cfg: PoolConfig{BroadcastFanout: 3}, method: "eth_sendRawTransaction",
			params: `["0x02f86b0180843b9aca00850df8475800825208940000000000000000000000000000000000000001880de0b6b3a764000080c0"]`, wantN: 3},
		{name: "no remote", n: 1, fault: func(ns []*fakenode.Node) { ns[0].SetRPCError(-32000, "header not found") },
			method: "eth_getBalance", params: balanceOf(4), want: "-", wantN: 1, minN: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := make([]*fakenode.Node, tt.n)
			for i := range nodes {
				nodes[i] = fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: 300})
			}
			tt.cfg.BlockTime = time.Hour
			p := testPool(t, tt.cfg, nodes, func(i int, c *Config) {
				if i > 0 && tt.cfg.Consensus == nil && tt.cfg.BroadcastFanout == 0 {
					c.Tier = TierSecondary // n0 is asked first
				}
				if tt.name == "split" {
					c.MaxLogsRange = 50
				}
			})
			if tt.fault != nil {
				tt.fault(nodes)
			}
			var n jrpc.Note
			_, _ = p.Call(jrpc.WithNote(context.Background(), &n), tt.method, json.RawMessage(tt.params))
			switch {
			case tt.want == "-":
				if n.Remote != "" {
					t.Errorf("no answer served, but the note names %q", n.Remote)
				}
			case tt.want == "":
				if n.Remote == "" || strings.Contains(n.Remote, ",") {
					t.Errorf("note names %q, want one remote", n.Remote)
				}
			case !strings.HasPrefix(n.Remote, tt.want):
				t.Errorf("note names %q, want %s", n.Remote, tt.want)
			}
			if tt.minN && n.Attempts < tt.wantN || !tt.minN && n.Attempts != tt.wantN {
				t.Errorf("note says %d attempts, want %d (at least: %v)", n.Attempts, tt.wantN, tt.minN)
			}
		})
	}
}
