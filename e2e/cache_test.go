package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"

	"github.com/venn-gateway/venn/internal/gethtest"
	"github.com/venn-gateway/venn/internal/simnode"
	"github.com/venn-gateway/venn/internal/testkit"
	"github.com/venn-gateway/venn/jrpc"
)

// cacheSettle bounds the wait for venn's head window to reach the node's.
const cacheSettle = 20 * time.Second

// cacheReply is one single call's answer over HTTP, with the cache's word.
type cacheReply struct {
	Result json.RawMessage `json:"result"`
	Error  *jrpc.Error     `json:"error"`
	word   string          // X-Venn-Cache
	source string          // X-Venn-Source
}

// cacheCall sends one call to url with the headers given as name, value
// pairs.
func cacheCall(t *testing.T, url, method, params string, headers ...string) cacheReply {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := rpcClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, params, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var r cacheReply
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%s %s: %.200s: %v", method, params, raw, err)
	}
	r.word, r.source = resp.Header.Get("X-Venn-Cache"), resp.Header.Get("X-Venn-Source")
	return r
}

// want fails the test unless the reply has result res (or, for res
// starting "error ", an error with that message) and the cache's word.
func (r cacheReply) want(t *testing.T, what, res, word string) {
	t.Helper()
	got := string(r.Result)
	if r.Error != nil {
		got = "error " + r.Error.Message
	}
	if got != res || r.word != word {
		t.Fatalf("%s: %s (X-Venn-Cache %q), want %s (%q)", what, got, r.word, res, word)
	}
}

// waitHead waits until venn's head window holds block n and serves hash
// as latest (windowAt).
func waitHead(t *testing.T, v *venn, chain string, n uint64, hash common.Hash) {
	t.Helper()
	var why string
	if !testkit.Poll(cacheSettle, func() bool {
		var ok bool
		ok, why = windowAt(t, v, chain, n, hash)
		return ok
	}) {
		t.Fatalf("not within %v: venn's head window at %d, %s: %s", cacheSettle, n, hash, why)
	}
}

// windowAt reports whether venn's head window holds block n and serves
// hash as latest: /readyz says the window is at n, and latest is answered
// from it (the remotes' head is n too); if not, why.
func windowAt(t *testing.T, v *venn, chain string, n uint64, hash common.Hash) (bool, string) {
	t.Helper()
	_, body, err := httpGet("http://" + v.metricsAddr + "/readyz")
	var r struct {
		Chains []struct {
			Chain      string `json:"chain"`
			WindowHead uint64 `json:"window_head"`
		} `json:"chains"`
	}
	if err != nil || json.Unmarshal(body, &r) != nil {
		return false, fmt.Sprintf("/readyz: %v %.300s", err, body)
	}
	at := false
	for _, c := range r.Chains {
		at = at || c.Chain == chain && c.WindowHead == n
	}
	if !at {
		return false, fmt.Sprintf("/readyz: %.300s", body)
	}
	res := cacheCall(t, v.URL(chain), "eth_getBlockByNumber", `["latest",false]`)
	var b struct{ Hash string }
	if res.Error != nil || json.Unmarshal(res.Result, &b) != nil || b.Hash != strings.ToLower(hash.Hex()) || res.source != "head" {
		return false, fmt.Sprintf("latest: %+v %.100s from %q", res.Error, res.Result, res.source)
	}
	return true, ""
}

// TestCacheFollowsAReorgOnEveryReplica: two replicas on one Redis (one
// leader, one head window each, from the feed) cache a state call at a
// near-head number, the second finding the first's answer in the Redis
// tier; a reorg replaces that block with one where the state differs, and
// both then answer the new branch's state, never the orphan's. The
// orphan's state stays what its hash asks for; asked with EIP-1898's
// requireCanonical, cached while canonical, it is the node's refusal
// after the reorg, never the cached answer.
func TestCacheFollowsAReorgOnEveryReplica(t *testing.T) {
	sim := simnode.Start(t)
	_, token := testkit.Redis(t, func(tok string) string { return "venn:{c" + tok + "}*" })
	chain := "c" + token
	start := func(id string) *venn {
		return startVenn(t, nil, vennOptions{blockTime: "200ms", chain: chain,
			urls: [][2]string{{sim.HTTPURL(), sim.WSURL()}},
			top:  fmt.Sprintf("redis: {url: \"redis://%s/0\", replica_id: %s}", testkit.RedisAddr, id)})
	}
	replicas := []*venn{start("r1"), start("r2")}

	sim.Commit()
	other := common.HexToAddress("0x00000000000000000000000000000000000000c1")
	sim.Send(t, other, nil)
	orphan := sim.Commit()
	head := sim.Head(t)
	n := head.Number.Uint64()
	for _, v := range replicas {
		waitHead(t, v, chain, n, orphan)
	}
	from := strings.ToLower(sim.From().Hex())
	byNumber := `["` + from + `","` + hex(n) + `"]`
	// The sender's nonce at n: every transaction sent so far is mined.
	before := cacheCall(t, replicas[0].URL(chain), "eth_getTransactionCount", byNumber)
	if before.Error != nil {
		t.Fatal(before.Error)
	}
	nonceA := string(before.Result)
	if before.word != "miss" {
		t.Fatalf("first call: X-Venn-Cache %q, want miss", before.word)
	}
	for i, v := range replicas {
		if i > 0 {
			cacheCall(t, v.URL(chain), "eth_getTransactionCount", byNumber).want(t, "replica 2, first (from Redis)", nonceA, "hit")
		}
		cacheCall(t, v.URL(chain), "eth_getTransactionCount", byNumber).want(t, fmt.Sprintf("replica %d, again", i+1), nonceA, "hit")
	}
	canonOrphan := `["` + from + `",{"blockHash":"` + strings.ToLower(orphan.Hex()) + `","requireCanonical":true}]`
	cacheCall(t, replicas[0].URL(chain), "eth_getTransactionCount", canonOrphan).want(t, "requireCanonical while canonical", nonceA, "miss")
	cacheCall(t, replicas[0].URL(chain), "eth_getTransactionCount", canonOrphan).want(t, "requireCanonical again", nonceA, "hit")

	// The new branch at n holds the orphan's transaction and one more.
	sim.Fork(t, head.ParentHash)
	sim.Send(t, other, nil)
	replaced := sim.Commit()
	if sim.Head(t).Number.Uint64() != n {
		t.Fatalf("the new branch's head is %d, want %d", sim.Head(t).Number.Uint64(), n)
	}
	for _, v := range replicas {
		waitHead(t, v, chain, n, replaced)
	}
	a, _ := strconv.ParseUint(strings.Trim(nonceA, `"`)[2:], 16, 64)
	nonceB := strconv.Quote(hex(a + 1))
	for i, v := range replicas {
		what := fmt.Sprintf("replica %d after the reorg", i+1)
		word := "miss"
		if i > 0 {
			word = "hit" // replica 1's answer on the new branch, from Redis
		}
		cacheCall(t, v.URL(chain), "eth_getTransactionCount", byNumber).want(t, what, nonceB, word)
		cacheCall(t, v.URL(chain), "eth_getTransactionCount", byNumber).want(t, what+", again", nonceB, "hit")
	}
	for i, v := range replicas {
		if r := cacheCall(t, v.URL(chain), "eth_getTransactionCount", canonOrphan); r.Error == nil || r.word == "hit" {
			t.Fatalf("replica %d, the orphan with requireCanonical: %s (X-Venn-Cache %q), want the node's refusal", i+1, r.Result, r.word)
		}
	}
	byHash := `["` + from + `",{"blockHash":"` + strings.ToLower(orphan.Hex()) + `"}]`
	r := cacheCall(t, replicas[0].URL(chain), "eth_getTransactionCount", byHash)
	if r.Error == nil && string(r.Result) != nonceA {
		t.Fatalf("the orphan by hash: %s, want its own state %s", r.Result, nonceA)
	}
	cacheCall(t, replicas[0].URL(chain), "eth_getTransactionCount", byNumber).want(t, "by number after the orphan by hash", nonceB, "hit")
}

// reverter's runtime reverts with one word of data: MSTORE(0, 1);
// REVERT(0, 32).
const reverter = "600160005260206000fd"

// TestCacheAtSettledBlocks: at a settled block, an empty code and a revert
// are cached (the revert only where cache_reverts.settled is on), a
// missing block's error never is, a client's no-cache bypasses the read,
// and calls the cache does not keep say none.
func TestCacheAtSettledBlocks(t *testing.T) {
	sim := simnode.Start(t)
	addr := strings.ToLower(sim.Deploy(t, common.FromHex(gethtest.DeployCode(reverter))).Hex())
	for range 3 {
		sim.Commit()
	}
	urls := [][2]string{{sim.HTTPURL(), sim.WSURL()}}
	on := startVenn(t, nil, vennOptions{blockTime: "200ms", urls: urls, inChain: "    history: {confirmations: 2}"})
	off := startVenn(t, nil, vennOptions{blockTime: "200ms", urls: urls,
		inChain: "    history: {confirmations: 2}\n    cache: {cache_reverts: {settled: false}}"})
	head := sim.Head(t)
	waitHead(t, on, chainName, head.Number.Uint64(), head.Hash())
	waitHead(t, off, chainName, head.Number.Uint64(), head.Hash())
	settled := hex(head.Number.Uint64() - 2)

	code := `["0x00000000000000000000000000000000000000c2","` + settled + `"]`
	cacheCall(t, on.URL(chainName), "eth_getCode", code).want(t, "empty code", `"0x"`, "miss")
	cacheCall(t, on.URL(chainName), "eth_getCode", code).want(t, "empty code again", `"0x"`, "hit")
	cacheCall(t, on.URL(chainName), "eth_getCode", code, "Cache-Control", "no-cache").want(t, "no-cache", `"0x"`, "bypass")
	cacheCall(t, on.URL(chainName), "eth_getCode", code, "X-Venn-Skip-Cache", "true").want(t, "skip", `"0x"`, "bypass")

	call := `[{"to":"` + addr + `"},"` + settled + `"]`
	for _, c := range []struct {
		v     *venn
		again string
	}{{on, "hit"}, {off, "miss"}} {
		first := cacheCall(t, c.v.URL(chainName), "eth_call", call)
		if first.Error == nil || first.Error.Code != 3 || first.word != "miss" {
			t.Fatalf("revert: %+v %q, want code 3, a miss", first.Error, first.word)
		}
		again := cacheCall(t, c.v.URL(chainName), "eth_call", call)
		if again.Error == nil || !bytes.Equal(again.Error.Data, first.Error.Data) || again.word != c.again {
			t.Fatalf("revert again: %+v %q, want the same revert, %s", again.Error, again.word, c.again)
		}
	}

	missing := `["` + addr + `",{"blockHash":"0x` + strings.Repeat("ab", 32) + `"}]`
	for range 2 {
		r := cacheCall(t, on.URL(chainName), "eth_getBalance", missing)
		if r.Error == nil || r.word != "miss" {
			t.Fatalf("a missing block: %s %+v %q, want an error and a miss each time", r.Result, r.Error, r.word)
		}
	}
	if r := cacheCall(t, on.URL(chainName), "eth_gasPrice", `[]`); r.word != "none" {
		t.Fatalf("eth_gasPrice: X-Venn-Cache %q, want none", r.word)
	}
	if hits, _ := on.metric(t, "venn_answers_total", `source="cache"`); hits != 2 {
		t.Errorf("venn_answers_total{source=cache} = %v, want 2 (the code and the revert)", hits)
	}
}

// TestCacheMatchesGeth: in front of real geth, cached answers at a settled
// block are geth's own, and the second asking is a hit.
func TestCacheMatchesGeth(t *testing.T) {
	g := gethtest.Start(t, gethtest.Options{})
	var accounts []string
	mustUnmarshal(t, g.MustCall(t, "eth_accounts"), &accounts)
	dev := accounts[0]
	for range 3 {
		waitReceipt(t, g, gethtest.Send(t, g, map[string]any{"from": dev, "to": dev, "value": "0x1"}))
	}
	v := startVenn(t, []*gethtest.Geth{g}, vennOptions{inChain: "    history: {confirmations: 1}"})
	// geth --dev may seal an empty block of its own a while after the last
	// transaction's, so its head is read again until venn's window holds it.
	var (
		head uint64
		why  string
	)
	if !testkit.Poll(cacheSettle, func() bool {
		var latest struct {
			Number hexutil.Uint64
			Hash   common.Hash
		}
		mustUnmarshal(t, g.MustCall(t, "eth_getBlockByNumber", "latest", false), &latest)
		head = uint64(latest.Number)
		var ok bool
		ok, why = windowAt(t, v, chainName, head, latest.Hash)
		return ok
	}) {
		t.Fatalf("not within %v: venn's head window at geth's head %d: %s", cacheSettle, head, why)
	}
	for _, c := range []struct{ method, params string }{
		{"eth_getBalance", `["` + dev + `","` + hex(head-1) + `"]`},
		{"eth_getTransactionCount", `["` + dev + `","` + hex(head-1) + `"]`},
		{"eth_getCode", `["` + dev + `","` + hex(head-1) + `"]`},
		{"eth_getStorageAt", `["` + dev + `","0x0","` + hex(head-1) + `"]`},
	} {
		want, err := g.CallJSON(t.Context(), c.method, c.params)
		if err != nil {
			t.Fatal(err)
		}
		cacheCall(t, v.URL(chainName), c.method, c.params).want(t, c.method, string(want), "miss")
		cacheCall(t, v.URL(chainName), c.method, c.params).want(t, c.method+" again", string(want), "hit")
	}
}
