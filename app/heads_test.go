package app

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
)

// Head tracking as a client sees it, through the whole of venn in process
// (config, pools, stalker, head window, router) in front of fake nodes.

// headsBlockTime is the fake chains' block time: short enough that the
// learned polling cadence keeps these tests quick.
const headsBlockTime = 200 * time.Millisecond

// vennOver starts venn with chain "test" in front of remotes, one YAML line
// each, and no block_time: it is learned.
func vennOver(t *testing.T, remotes ...string) (rpc, metrics string) {
	t.Helper()
	y := "listen: 127.0.0.1:0\nmetrics_listen: 127.0.0.1:0\nlog: {level: warn}\nshutdown_timeout: 5s\n" +
		"chains:\n  - name: test\n    chain_id: 1337\n    remotes:\n"
	for _, r := range remotes {
		y += "      - " + r + "\n"
	}
	s := startApp(t, mustParse(t, y))
	return "http://" + s.rpc.bound.String() + "/test", "http://" + s.metrics.bound.String()
}

func blockNumberOf(t *testing.T, c *http.Client, rpc string) uint64 {
	t.Helper()
	r := post(t, c, rpc, `{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`)
	var s string
	if r.Error != nil || json.Unmarshal(r.Result, &s) != nil {
		t.Fatalf("eth_blockNumber: %+v", r)
	}
	n, err := strconv.ParseUint(s[2:], 16, 64)
	if err != nil {
		t.Fatalf("eth_blockNumber %q: %v", s, err)
	}
	return n
}

func latestHash(t *testing.T, c *http.Client, rpc string) string {
	t.Helper()
	r := post(t, c, rpc, `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["latest",false]}`)
	var b struct {
		Hash string `json:"hash"`
	}
	if r.Error != nil || json.Unmarshal(r.Result, &b) != nil {
		t.Fatalf("latest block: %+v", r)
	}
	return b.Hash
}

// A remote that claims head 1,000,000,000 for a while: clients never see
// it in eth_blockNumber, during the lie or after, and the honest remote
// stays in rotation.
func TestLyingRemoteDoesNotTakeOver(t *testing.T) {
	const lie = 1_000_000_000
	opts := fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime}
	honest, liar := fakenode.Start(t, opts), fakenode.Start(t, opts)
	rpc, metrics := vennOver(t, "{name: honest, url: "+honest.URL()+"}", "{name: liar, url: "+liar.URL()+"}")
	fakenode.MineEvery(t, headsBlockTime, honest, liar)
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	testkit.WaitFor(t, 10*time.Second, "venn at the head", func() bool { return blockNumberOf(t, c, rpc) >= honest.Head()-2 })

	liar.SetBogusHead(lie)
	polls := liar.CallsAt("eth_getBlockByNumber", "latest")
	var last uint64
	for liar.CallsAt("eth_getBlockByNumber", "latest") < polls+10 { // ten polls of the lie, ~2 s
		n := blockNumberOf(t, c, rpc)
		if n >= lie {
			t.Fatalf("eth_blockNumber %d: the lie reached a client", n)
		}
		if n < last {
			t.Fatalf("eth_blockNumber went back from %d to %d", last, n)
		}
		last = n
		if v, _ := metricValue(t, c, metrics, `venn_remote_healthy{chain="test",remote="honest"}`); v != 1 {
			t.Fatalf("honest remote out of rotation during the lie (healthy %v)", v)
		}
	}
	liar.SetBogusHead(0)
	testkit.WaitFor(t, 10*time.Second, "venn following the head after the lie", func() bool {
		n := blockNumberOf(t, c, rpc)
		if n >= lie {
			t.Fatalf("eth_blockNumber %d after the lie ended", n)
		}
		return n >= honest.Head()-2
	})
}

// A tip replaced by a sibling at the same height is served promptly, polled
// or over newHeads, back and forth: once venn has served the new tip it
// never serves the replaced one again.
func TestSiblingTipServedPromptly(t *testing.T) {
	// Announced by the node at Reorg; venn polls at the learned 0.2 s or
	// hears newHeads: a few poll intervals is plenty, a block (which would
	// end a stale tip anyway) never comes here.
	const propagation = 3 * time.Second
	for _, ws := range []bool{false, true} {
		name := "polled"
		if ws {
			name = "newHeads"
		}
		t.Run(name, func(t *testing.T) {
			n := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime})
			remote := "{name: n0, url: " + n.URL() + "}"
			if ws {
				remote = "{name: n0, url: " + n.URL() + ", ws_url: " + n.WSURL() + "}"
			}
			rpc, metrics := vennOver(t, remote)
			c := &http.Client{Timeout: 10 * time.Second}
			defer c.CloseIdleConnections()
			// The window filled up to the head: not one within max_lag of it,
			// which serves its own head as latest.
			testkit.WaitFor(t, 10*time.Second, "the window at the head", func() bool { return readyzOf(t, c, metrics).WindowHead == n.Head() })
			testkit.WaitFor(t, 10*time.Second, "venn at the head", func() bool { return latestHash(t, c, rpc) == n.BlockHash(n.Head()) })

			for i := range 4 {
				old := n.BlockHash(n.Head())
				n.Reorg(1)
				want := n.BlockHash(n.Head())
				announced := time.Now()
				for {
					got := latestHash(t, c, rpc)
					if got == want {
						break
					}
					if got != old {
						t.Fatalf("reorg %d: latest %s, neither the old %s nor the new %s", i, got, old, want)
					}
					if time.Since(announced) > propagation {
						t.Fatalf("reorg %d: the replaced tip still served %v after the node announced its sibling", i, propagation)
					}
					time.Sleep(10 * time.Millisecond) // polling what a client sees, with a deadline
				}
				for range 20 {
					if got := latestHash(t, c, rpc); got != want {
						t.Fatalf("reorg %d: the replaced tip %s served again after the new one", i, got)
					}
				}
			}
		})
	}
}

// /readyz says how old the head is, what the block time is and where it
// comes from, how often heads are polled and where the head window is.
func TestReadyzShowsHeadDetail(t *testing.T) {
	n := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime})
	_, metrics := vennOver(t, "{name: n0, url: "+n.URL()+"}")
	c := &http.Client{Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	var cr chainReadiness
	testkit.WaitFor(t, 10*time.Second, "readyz with the learned block time and the window at the head", func() bool {
		cr = readyzOf(t, c, metrics)
		return cr.BlockTimeSource == "learned" && cr.WindowHead == n.Head()
	})
	if cr.Head != n.Head() || cr.HeadHash != n.BlockHash(n.Head()) {
		t.Errorf("head %d %s, want %d %s", cr.Head, cr.HeadHash, n.Head(), n.BlockHash(n.Head()))
	}
	if cr.BlockTimeSeconds < 0.15 || cr.BlockTimeSeconds > 0.25 || cr.PollIntervalSeconds != cr.BlockTimeSeconds {
		t.Errorf("block time %vs, poll interval %vs, want about 0.2s both", cr.BlockTimeSeconds, cr.PollIntervalSeconds)
	}
	// The fake chain's timestamps start in 2023.
	if age := time.Duration(cr.HeadAgeSeconds * float64(time.Second)); age < 24*time.Hour {
		t.Errorf("head age %v, want the time since the head block's timestamp", age)
	}
}

// readyzOf is the one chain's part of /readyz.
func readyzOf(t *testing.T, c *http.Client, metrics string) chainReadiness {
	t.Helper()
	_, body := get(t, c, metrics+"/readyz")
	var r readiness
	if err := json.Unmarshal([]byte(body), &r); err != nil || len(r.Chains) != 1 {
		t.Fatalf("readyz %s: %v", body, err)
	}
	return r.Chains[0]
}

// metricValue reads one series from /metrics.
func metricValue(t *testing.T, c *http.Client, metrics, series string) (float64, bool) {
	t.Helper()
	_, body := get(t, c, metrics+"/metrics")
	for _, line := range strings.Split(body, "\n") {
		if len(line) > len(series) && line[:len(series)] == series && line[len(series)] == ' ' {
			v, err := strconv.ParseFloat(line[len(series)+1:], 64)
			return v, err == nil
		}
	}
	return 0, false
}
