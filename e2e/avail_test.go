package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/gethtest"
	"github.com/venn-gateway/venn/internal/testkit"
)

// TestPrunedRemoteGetsNoOldState: venn in front of an archive (g1) and two
// pruned full nodes (g2, g3) that keep 128 blocks of state. The first call
// for old state starts the probe; once /readyz shows the full nodes'
// windows, no old-state call reaches them, and every one is answered.
func TestPrunedRemoteGetsNoOldState(t *testing.T) {
	const head, window = 5000, 128
	nodes := make([]*fakenode.Node, 3)
	var urls [][2]string
	for i := range nodes {
		nodes[i] = fakenode.Start(t, fakenode.Options{ChainID: gethtest.ChainID, Head: head})
		if i > 0 {
			nodes[i].SetStateWindow(window)
		}
		urls = append(urls, [2]string{nodes[i].URL(), nodes[i].WSURL()})
	}
	stop := fakenode.MineEvery(t, 200*time.Millisecond, nodes...)
	defer stop()
	v := startVenn(t, nil, vennOptions{urls: urls})

	balance := func(holder, block uint64) error {
		addr := fmt.Sprintf("0x%040x", holder)
		_, err := tryCall(v.URL(chainName), "eth_getBalance", addr, fmt.Sprintf("0x%x", block))
		return err
	}
	if err := balance(1, 100); err != nil {
		t.Fatalf("first old-state call: %v", err)
	}
	var avail map[string]map[string]availability
	if !testkit.Poll(20*time.Second, func() bool {
		avail = readyAvailability(t, v)
		for _, g := range []string{"g1", "g2", "g3"} {
			if avail[g]["state"].Source != "probe" {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("the probes' results never showed in /readyz: %v", avail)
	}
	if o := avail["g1"]["state"].Oldest; o != 0 {
		t.Errorf("archive g1: oldest state %d in /readyz, want 0", o)
	}
	for _, g := range []string{"g2", "g3"} {
		if o := avail[g]["state"].Oldest; o < head-window {
			t.Errorf("full node %s: oldest state %d in /readyz, want at least %d", g, o, head-window)
		}
	}
	if got, ok := v.metric(t, "venn_remote_oldest_block", `remote="g2"`, `kind="state"`); !ok || got < head-window {
		t.Errorf("venn_remote_oldest_block{remote=g2,kind=state} = %v (found %v), want at least %d", got, ok, head-window)
	}

	for _, n := range nodes {
		n.ResetCalls()
	}
	const calls = 60
	for i := range calls {
		// Distinct holders and blocks: every call misses the cache.
		if err := balance(uint64(1000+i), uint64(50+i*37)); err != nil {
			t.Fatalf("old-state call %d: %v", i, err)
		}
	}
	if got := nodes[0].Calls("eth_getBalance"); got != calls {
		t.Errorf("archive got %d of %d old-state calls", got, calls)
	}
	for i, n := range nodes[1:] {
		if got := n.Calls("eth_getBalance"); got != 0 {
			t.Errorf("pruned g%d got %d old-state calls after probing, want 0", i+2, got)
		}
	}
}

// availability is one remote's window of one kind in /readyz.
type availability struct {
	Oldest uint64 `json:"oldest_block"`
	Source string `json:"source"`
}

// readyAvailability is /readyz's availability of the chain, by remote then
// kind.
func readyAvailability(t *testing.T, v *venn) map[string]map[string]availability {
	t.Helper()
	status, body, err := httpGet("http://" + v.metricsAddr + "/readyz")
	if err != nil || status != http.StatusOK {
		t.Fatalf("/readyz: HTTP %d: %v", status, err)
	}
	var r struct {
		Chains []struct {
			Chain        string `json:"chain"`
			Availability map[string][]struct {
				Kind string `json:"kind"`
				availability
			} `json:"availability"`
		} `json:"chains"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("/readyz: %v: %s", err, body)
	}
	for _, c := range r.Chains {
		if c.Chain != chainName {
			continue
		}
		out := make(map[string]map[string]availability)
		for name, kinds := range c.Availability {
			out[name] = make(map[string]availability)
			for _, k := range kinds {
				out[name][k.Kind] = k.availability
			}
		}
		return out
	}
	return nil
}
