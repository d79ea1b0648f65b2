package remotes

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes/avail"
)

// availHead is the test chain's head: deep enough for a state window of
// availWindow blocks to leave most of it pruned.
const (
	availHead   = 2000
	availWindow = 128
	availAddr   = "0x7435ed30a8b4aeb0877cef0c6e8cffe834eb865f"
)

// availNodes are an archive (n0) and two full nodes keeping availWindow
// blocks of state (n1, n2).
func availNodes(t testing.TB) []*fakenode.Node {
	nodes := make([]*fakenode.Node, 3)
	for i := range nodes {
		nodes[i] = fakenode.Start(t, fakenode.Options{ChainID: testChainID, Head: availHead})
		if i > 0 {
			nodes[i].SetStateWindow(availWindow)
		}
	}
	return nodes
}

func balanceAt(n uint64) string { return fmt.Sprintf(`["%s","0x%x"]`, availAddr, n) }

func noProbe() AvailabilityConfig {
	off := false
	return AvailabilityConfig{Probe: &off}
}

func probeOn() AvailabilityConfig {
	on := true
	return AvailabilityConfig{Probe: &on}
}

// availOf is remote name's window of kind k in the pool's status.
func availOf(p *Pool, name string, k DataKind) Availability {
	for _, s := range p.Status() {
		if s.Name == name {
			for _, a := range s.Availability {
				if a.Kind == k.String() {
					return a
				}
			}
		}
	}
	return Availability{}
}

// TestAvailabilityProbe: once probed, old-state calls go to the archive
// only, and the full nodes' windows show in status and metrics.
func TestAvailabilityProbe(t *testing.T) {
	nodes := availNodes(t)
	m := NewMetrics(nil)
	p := startPool(t, PoolConfig{Availability: probeOn()}, testConfigs([]string{nodes[0].URL(), nodes[1].URL(), nodes[2].URL()}, nil), m)
	for _, n := range nodes {
		if got := n.Calls("eth_getBalance"); got != 0 {
			t.Fatalf("%d probe calls before any call for old data, want 0", got)
		}
	}
	// The first call for old data starts the probes.
	if _, err := call(t, p, "eth_getBalance", balanceAt(100)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every remote probed", func() bool {
		for _, name := range []string{"n0", "n1", "n2"} {
			if availOf(p, name, KindState).Source != "probe" {
				return false
			}
		}
		return true
	})
	if a := availOf(p, "n0", KindState); a.Oldest != 0 {
		t.Errorf("archive n0: state oldest %d, want 0", a.Oldest)
	}
	for _, name := range []string{"n1", "n2"} {
		a := availOf(p, name, KindState)
		if a.Oldest < availHead-availWindow || a.Oldest > availHead-avail.Depth {
			t.Errorf("%s: state oldest %d, want in [%d, %d]", name, a.Oldest, availHead-availWindow, availHead-avail.Depth)
		}
		if b := availOf(p, name, KindBlocks); b.Oldest != 0 || b.Source != "probe" {
			t.Errorf("%s: blocks %+v, want oldest 0 by probe (only state is pruned)", name, b)
		}
		if got := testutil.ToFloat64(m.oldest.WithLabelValues("test", name, "state")); got != float64(a.Oldest) {
			t.Errorf("%s: venn_remote_oldest_block{kind=state} = %v, want %d", name, got, a.Oldest)
		}
	}
	for _, n := range nodes {
		n.ResetCalls()
	}
	for i := range 30 {
		if _, err := call(t, p, "eth_getBalance", balanceAt(uint64(100+i))); err != nil {
			t.Fatalf("old state call %d: %v", i, err)
		}
	}
	if got := nodes[0].Calls("eth_getBalance"); got != 30 {
		t.Errorf("archive got %d old-state calls, want 30", got)
	}
	for i, n := range nodes[1:] {
		if got := n.Calls("eth_getBalance"); got != 0 {
			t.Errorf("pruned n%d got %d old-state calls after probing, want 0", i+1, got)
		}
	}
	// Recent state still goes anywhere.
	for range 30 {
		if _, err := call(t, p, "eth_getBalance", balanceAt(availHead-2)); err != nil {
			t.Fatal(err)
		}
	}
	if nodes[1].Calls("eth_getBalance")+nodes[2].Calls("eth_getBalance") == 0 {
		t.Error("no recent-state call reached a full node")
	}
}

// TestAvailabilityFromAnswers: without a probe, a pruned node's "missing
// trie node" teaches the pool that it lacks that block and every older
// one: it gets no second call for them.
func TestAvailabilityFromAnswers(t *testing.T) {
	nodes := availNodes(t)
	p := testPool(t, PoolConfig{MaxAttempts: 3}, nodes, nil)
	for i := range 40 {
		if _, err := call(t, p, "eth_getBalance", balanceAt(uint64(500-i*10))); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	for i, n := range nodes[1:] {
		if got := n.Calls("eth_getBalance"); got > 1 {
			t.Errorf("pruned n%d got %d old-state calls, want at most 1 (the one it taught with)", i+1, got)
		}
		if a := availOf(p, fmt.Sprintf("n%d", i+1), KindState); n.Calls("eth_getBalance") == 1 && (a.Source != "answers" || a.Oldest <= 110) {
			t.Errorf("n%d taught %+v, want an oldest above 110 from answers", i+1, a)
		}
	}
}

// TestAvailabilityNoRemote: a block older than every remote keeps is
// refused at once, naming the block and the oldest served, with no
// upstream call.
func TestAvailabilityNoRemote(t *testing.T) {
	nodes := availNodes(t)[1:]
	p := testPool(t, PoolConfig{Availability: noProbe()}, nodes, func(_ int, c *Config) { c.MaxBlockLookback = availWindow })
	before := nodes[0].Calls("eth_getBalance") + nodes[1].Calls("eth_getBalance")
	_, err := call(t, p, "eth_getBalance", balanceAt(100))
	je := jrpc.ToWire(err)
	if err == nil || je.Code != jrpc.CodeBlockUnavailable {
		t.Fatalf("err = %v, want code %d", err, jrpc.CodeBlockUnavailable)
	}
	oldest := fmt.Sprint(p.members()[0].Oldest(KindState))
	if !strings.Contains(je.Message, "block 100") || !strings.Contains(je.Message, oldest) {
		t.Errorf("message %q names neither block 100 nor the oldest served (%s)", je.Message, oldest)
	}
	if after := nodes[0].Calls("eth_getBalance") + nodes[1].Calls("eth_getBalance"); after != before {
		t.Errorf("%d upstream calls for a block no remote keeps, want 0", after-before)
	}
	// Blocks are not state: max_block_lookback covers every kind.
	if _, err := call(t, p, "eth_getBlockByNumber", `["0x64",false]`); err == nil || !strings.Contains(err.Error(), "blocks at block 100") {
		t.Errorf("old block: err %v, want blocks unavailable", err)
	}
	if _, err := call(t, p, "eth_getBalance", balanceAt(availHead-5)); err != nil {
		t.Errorf("recent state: %v", err)
	}
}

// TestAvailabilityConfigWins: archive: true keeps a remote in play for old
// state whatever its answers say; what config states is shown as such.
func TestAvailabilityConfigWins(t *testing.T) {
	nodes := availNodes(t)[1:]
	p := testPool(t, PoolConfig{MaxAttempts: 1, Availability: probeOn()}, nodes, func(i int, c *Config) { c.Archive = i == 0 })
	for range 5 {
		_, _ = call(t, p, "eth_getBalance", balanceAt(100)) // n0 "missing trie node"s, n1 learns
	}
	if a := availOf(p, "n0", KindState); a.Source != "config" || a.Oldest != 0 {
		t.Errorf("n0 %+v, want oldest 0 from config", a)
	}
	if got := nodes[0].Calls("eth_getBalance"); got < 4 {
		t.Errorf("archive-by-config n0 got %d of 5 old-state calls, want every one after n1 learnt", got)
	}
	bad := Config{Name: "x", URL: "http://127.0.0.1:1", Archive: true, MaxBlockLookback: 5}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "max_block_lookback") {
		t.Errorf("Validate(archive and max_block_lookback) = %v, want a max_block_lookback problem", err)
	}
}

func TestHistOf(t *testing.T) {
	tests := []struct {
		method, params string
		kind           DataKind
		at             uint64
	}{
		{"eth_getBalance", balanceAt(5), KindState, 5},
		{"eth_call", `[{"to":"` + availAddr + `"},"0x10"]`, KindState, 16},
		{"eth_getBalance", `["` + availAddr + `","latest"]`, KindNone, 0},
		{"eth_getBalance", `["` + availAddr + `","earliest"]`, KindState, 0},
		{"eth_getBlockByNumber", `["0x7",false]`, KindBlocks, 7},
		{"eth_getBlockByHash", `["0x` + strings.Repeat("ab", 32) + `",false]`, KindNone, 0},
		{"eth_getLogs", `[{"fromBlock":"0x3","toBlock":"0x9"}]`, KindLogs, 3},
		{"trace_block", `["0x8"]`, KindTraces, 8},
		{"eth_chainId", `[]`, KindNone, 0},
	}
	for _, tt := range tests {
		var rt route
		rt.histRoute(tt.method, []byte(tt.params))
		if rt.hist != tt.kind || rt.histAt != tt.at {
			t.Errorf("%s %s: %v at %d, want %v at %d", tt.method, tt.params, rt.hist, rt.histAt, tt.kind, tt.at)
		}
	}
}

// TestAvailabilityUnsureGap: a block between where a remote is known to
// lack data and where it is known to keep it (the probe's search stopped
// between) is tried when no remote is known to keep it, and refused once
// the answer settled it.
func TestAvailabilityUnsureGap(t *testing.T) {
	node := availNodes(t)[1] // keeps blocks above availHead-availWindow
	p := testPool(t, PoolConfig{}, []*fakenode.Node{node}, nil)
	r := p.members()[0]
	r.setProbed(KindState, availHead-20, availHead-1000, r.Head(), time.Now())
	inGap, below := uint64(availHead-500), uint64(availHead-1500)

	if _, err := call(t, p, "eth_getBalance", balanceAt(below)); err == nil || !strings.Contains(err.Error(), "not available") {
		t.Fatalf("below what it lacks: err %v, want refused", err)
	}
	if got := node.Calls("eth_getBalance"); got != 0 {
		t.Fatalf("%d calls for a block the remote is known to lack", got)
	}
	// In the gap: tried, and the node's own answer comes back.
	if _, err := call(t, p, "eth_getBalance", balanceAt(inGap)); err == nil || !strings.Contains(err.Error(), "missing trie node") {
		t.Fatalf("in the gap: err %v, want the node's missing trie node", err)
	}
	if got := node.Calls("eth_getBalance"); got != 1 {
		t.Fatalf("%d calls for a block in the gap, want 1", got)
	}
	// Settled: refused at once now.
	if _, err := call(t, p, "eth_getBalance", balanceAt(inGap)); err == nil || !strings.Contains(err.Error(), "not available") {
		t.Fatalf("in the gap, once settled: err %v, want refused", err)
	}
	// Inside the known window: served.
	if _, err := call(t, p, "eth_getBalance", balanceAt(availHead-10)); err != nil {
		t.Fatalf("recent: %v", err)
	}
	if got := node.Calls("eth_getBalance"); got != 2 {
		t.Errorf("%d calls in all, want 2", got)
	}
}
