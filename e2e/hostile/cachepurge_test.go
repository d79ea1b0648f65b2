//go:build linux

package hostile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	harness "github.com/venn-gateway/venn/internal/cluster"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
)

// traceHook answers trace_block on node n as a node of the chain of
// hashes (n itself, or another network's) would: that chain's block hash
// at the height, up to n's head. The fake node does
// not trace; a trace of a settled block is the cached call a remote on
// another network can still answer (a trace's block param is a number,
// not EIP-1898's, so it cannot be pinned to the block's hash).
func traceHook(n, hashes *fakenode.Node) fakenode.Hook {
	return func(method string, params json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method != "trace_block" {
			return nil, nil, false
		}
		var args []string
		if json.Unmarshal(params, &args) != nil || len(args) != 1 {
			return nil, &jrpc.Error{Code: -32602, Message: "invalid params"}, true
		}
		num := parseQ(args[0])
		if num == 0 || num > n.Head() {
			return nil, &jrpc.Error{Code: -32000, Message: "header not found"}, true
		}
		return fmt.Appendf(nil, `[{"blockHash":%q,"blockNumber":%d,"type":"reward"}]`, hashes.BlockHash(num), num), nil, true
	}
}

// cachedCall is callRaw with the cache's word on the call (X-Venn-Cache).
func (r *replica) cachedCall(method string, params ...any) (json.RawMessage, string, error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	resp, err := client.Post("http://"+r.rpc+"/"+chain, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		return nil, "", err
	}
	if msg.Error != nil {
		return nil, resp.Header.Get("X-Venn-Cache"), fmt.Errorf("%s: %s", method, msg.Error)
	}
	return msg.Result, resp.Header.Get("X-Venn-Cache"), nil
}

// finalized is the node's finalized block number.
func finalized(t *testing.T, n *fakenode.Node) uint64 {
	t.Helper()
	res, err := nodeCall(n, "eth_getBlockByNumber", "finalized", false)
	var b block
	if err != nil || json.Unmarshal(res, &b) != nil {
		t.Fatalf("the node's finalized block: %v", err)
	}
	return b.number()
}

// A remote re-pointed at another network answers the traces of settled
// blocks (asked by number: nothing pins them to the chain's hashes) with
// the other network's until its chain is checked, and those answers were
// stored as settled, in Redis and in every replica's memory, for
// settled_ttl (24 h) after venn had found the remote out. Here the
// endpoint moves in two steps, as a provider's does when it routes traces
// to nodes of their own: its trace backend first, which no chain check
// sees, then the whole endpoint, which the next one does. Finding it out
// drops its answers since its last good check on every tier of every
// replica: once it is flagged, no replica serves one of them again, and
// every answer is the node's.
func TestChainSwitchLeavesNoCachedAnswer(t *testing.T) {
	w := startWorld(t, options{nodes: 3,
		// No periodic chain check between the steps: the remote is found
		// out by its heads once it has switched.
		// The remote to switch alone in the first tier: calls go to it
		// while it is in rotation.
		tweak: func(c *harness.Config) {
			c.ChainExtra = "chain_recheck: 1h"
			c.Remotes[0].Extra, c.Remotes[1].Extra = "tier: secondary", "tier: secondary"
		},
	})
	other := fakenode.New(fakenode.Options{ChainID: otherChainID}) // the other network's hashes; never listens
	honest, switched := w.nodes[0], w.nodes[2]
	for _, n := range w.nodes[:2] {
		n.SetHook(traceHook(n, n))
	}
	switched.SetHook(traceHook(switched, other))
	top := finalized(t, honest)

	// Traces of settled blocks, each asked of each replica: the ones the
	// switched remote answered are stored, and asked again are hits.
	foreign := map[uint64]bool{} // blocks whose trace a replica was served the other network's
	for n := top; n > top-24; n-- {
		for _, r := range w.replicas {
			if res, _, err := r.cachedCall("trace_block", hexq(n)); err == nil && !jsonEqual(res, mustTrace(t, honest, n)) {
				foreign[n] = true
			}
		}
	}
	stored := 0
	for n := range foreign {
		for _, r := range w.replicas {
			res, word, err := r.cachedCall("trace_block", hexq(n))
			if err == nil && word == "hit" && !jsonEqual(res, mustTrace(t, honest, n)) {
				stored++
			}
		}
	}
	t.Logf("the other network's traces of %d blocks served, %d of them again from the cache", len(foreign), stored)
	if stored == 0 {
		t.Fatal("no trace of the other network was stored: nothing was poisoned to test")
	}

	// The whole endpoint moves: its heads, siblings of the chain's, have
	// its chain checked at once (by the leader's walk-back, and by the
	// followers when the leader's feed drops it).
	switched.SwitchChain(otherChainID)
	stop := w.mine(t)
	for _, r := range w.replicas {
		testkit.WaitFor(t, waitLimit, "replica "+r.id+" finds the switched remote on another chain", func() bool {
			v, _ := r.metric("venn_remote_wrong_chain", `remote="n2"`)
			return v == 1
		})
	}
	stop()
	// The purge is done on the leader (Redis and its memory); another
	// replica's memory drops the entries on the purge's message. Until
	// then it may serve one for a moment: the answers are asked until
	// they are the node's, which without the purge they never are again
	// (the entries live for settled_ttl).
	var wrong string
	if !testkit.Poll(waitLimit, func() bool {
		for n := range foreign {
			want := mustTrace(t, honest, n)
			for _, r := range w.replicas {
				res, word, err := r.cachedCall("trace_block", hexq(n))
				if err != nil || !jsonEqual(res, want) {
					wrong = fmt.Sprintf("replica %s: block %d (cache: %s): %s %v, the node's %s", r.id, n, word, res, err, want)
					return false
				}
			}
		}
		return true
	}) {
		t.Errorf("the switched remote's traces are still served after it was found out: %s", wrong)
	}
	purges := 0.0
	for _, r := range w.replicas {
		v, _ := r.metric("venn_cache_distrust_purges_total", `cause="wrong_chain",chain="dev",remote="n2"`)
		purges += v
	}
	if purges == 0 {
		t.Error("no replica counted a purge of the switched remote's answers")
	}
	w.waitServing(t, w.replicas)
	for _, r := range w.replicas {
		checkAnswers(t, r, honest)
	}
}

// mustTrace is node n's trace of block num.
func mustTrace(t *testing.T, n *fakenode.Node, num uint64) json.RawMessage {
	t.Helper()
	res, err := nodeCall(n, "trace_block", hexq(num))
	if err != nil {
		t.Fatalf("node: trace_block %d: %v", num, err)
	}
	return res
}

// A remote answers "execution reverted" for eth_calls that succeed on the
// node, for a few seconds: the cheapest lie there is (no data to forge,
// every block check passes), and a revert at a settled block is cached
// like an answer, for settled_ttl. With eth_call put to a vote, the liar
// is outvoted: no client gets its reverts, none is stored, it is flagged
// as misbehaving (and cordoned), and its answers since its last good
// check leave the cache on every replica. After the window, every call of
// it asked again of every replica is the node's answer.
func TestFalseRevertWindow(t *testing.T) {
	w := startWorld(t, options{nodes: 3, tweak: func(c *harness.Config) {
		c.ChainExtra = "consensus: [{methods: [eth_call], remotes: 3, agree: 2}]"
	}})
	honest, liar := w.nodes[0], w.nodes[2]
	top := finalized(t, honest)
	contract := fakenode.Contracts()[0]
	callAt := func(i int) []any {
		return []any{map[string]string{"to": contract, "data": fmt.Sprintf("0xa9059cbb%064x", i)}, hexq(top - uint64(i%16))}
	}
	liar.SetHook(func(method string, _ json.RawMessage) (json.RawMessage, *jrpc.Error, bool) {
		if method != "eth_call" {
			return nil, nil, false
		}
		return nil, &jrpc.Error{Code: 3, Message: "execution reverted", Data: json.RawMessage(`"0x"`)}, true
	})
	const calls = 24
	reverted := 0
	for i := range calls {
		for _, r := range w.replicas {
			if _, _, err := r.cachedCall("eth_call", callAt(i)...); err != nil {
				reverted++
				t.Errorf("replica %s: eth_call %d in the window: %v", r.id, i, err)
			}
		}
	}
	liar.SetHook(nil)
	flagged := 0
	for _, r := range w.replicas {
		if v, _ := r.metric("venn_remote_misbehaviour_total", `kind="disagree",remote="n2"`); v > 0 {
			flagged++
			testkit.WaitFor(t, waitLimit, "replica "+r.id+"'s purge of the liar's answers", func() bool {
				v, _ := r.metric("venn_cache_distrust_purges_total", `remote="n2"`)
				return v >= 1
			})
		}
	}
	if flagged == 0 {
		t.Fatal("no replica flagged the remote that reverted falsely")
	}
	for i := range calls {
		want, err := nodeCall(honest, "eth_call", callAt(i)...)
		if err != nil {
			t.Fatalf("node: eth_call %d: %v", i, err)
		}
		for _, r := range w.replicas {
			got, word, err := r.cachedCall("eth_call", callAt(i)...)
			if err != nil || !jsonEqual(got, want) {
				t.Errorf("replica %s: eth_call %d after the window: %s %v (cache: %s), the node's: %s", r.id, i, got, err, word, want)
			}
		}
	}
	w.waitServing(t, w.replicas)
	for _, r := range w.replicas {
		checkAnswers(t, r, honest)
	}
}
