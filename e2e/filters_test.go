package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/venn-gateway/venn/internal/freeport"
	"github.com/venn-gateway/venn/internal/gethtest"
	"github.com/venn-gateway/venn/internal/simnode"
	"github.com/venn-gateway/venn/internal/testkit"
)

const (
	filtersScript  = "filters.mjs"
	filtersEvents  = 8
	filtersTimeout = 60 * time.Second
	// filtersWait bounds the wait for the clients' filters to be made.
	filtersWait = 30 * time.Second
)

// startHAProxy starts haproxy on a free port in front of backends (host:
// port), round robin per request, and returns its address. It is killed
// when the test ends. Without haproxy the test fails, saying how to
// install it.
func startHAProxy(t *testing.T, backends ...string) string {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Fatal("haproxy not found on PATH: the filter tests put a real load balancer in front of the replicas: " +
			"apt-get install -y haproxy (scripts/test.sh does, as root)")
	}
	ports, err := freeport.Ports(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "global\n  maxconn 512\ndefaults\n  mode http\n  timeout connect 2s\n  timeout client 60s\n  timeout server 60s\n")
	fmt.Fprintf(&cfg, "frontend rpc\n  bind %s\n  default_backend venn\nbackend venn\n  balance roundrobin\n", addr)
	for i, b := range backends {
		fmt.Fprintf(&cfg, "  server r%d %s\n", i, b)
	}
	path := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &testkit.Buffer{}
	cmd := exec.Command(bin, "-db", "-f", path)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start haproxy: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("haproxy output:\n%s", logs.String())
		}
	})
	if !testkit.Poll(10*time.Second, func() bool {
		resp, err := (&http.Client{Timeout: 2 * time.Second}).Post("http://"+addr+"/"+chainName, "application/json", strings.NewReader(`{}`))
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	}) {
		t.Fatalf("haproxy did not listen on %s:\n%s", addr, logs.String())
	}
	return addr
}

// waitWindowAt waits until v's head window for chain holds block n.
func waitWindowAt(t *testing.T, v *venn, chain string, n uint64) {
	t.Helper()
	var got float64
	if !testkit.Poll(readyTimeout, func() bool {
		got, _ = v.metric(t, "venn_head_number", `chain="`+chain+`"`)
		return got >= float64(n)
	}) {
		t.Fatalf("venn's head window for %s is at %v, want %d", chain, got, n)
	}
}

// filterClient is one Node script polling filters through the load
// balancer.
type filterClient struct {
	name   string
	cmd    *exec.Cmd
	stdin  interface{ Write([]byte) (int, error) }
	stdout bytes.Buffer
	stderr *testkit.Buffer
	done   chan struct{}
	err    error
}

func startFilterClient(t *testing.T, name, dir, url, contract string) *filterClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), filtersTimeout+30*time.Second)
	c := &filterClient{name: name, stderr: &testkit.Buffer{}, done: make(chan struct{})}
	c.cmd = exec.CommandContext(ctx, "node", filtersScript)
	c.cmd.Dir = dir
	c.cmd.Env = append(os.Environ(), "VENN_URL="+url, "CONTRACT="+contract,
		"TIMEOUT_MS="+strconv.FormatInt(filtersTimeout.Milliseconds(), 10))
	c.cmd.Stdout, c.cmd.Stderr = &c.stdout, c.stderr
	c.cmd.WaitDelay = 5 * time.Second
	stdin, err := c.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.stdin = stdin
	if err := c.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start node %s/%s: %v", name, filtersScript, err)
	}
	go func() { c.err = c.cmd.Wait(); close(c.done) }()
	t.Cleanup(func() {
		cancel()
		<-c.done
	})
	return c
}

// result tells the script how far to watch and decodes what it prints.
func (c *filterClient) result(t *testing.T, until uint64, events int, out any) {
	t.Helper()
	if _, err := fmt.Fprintf(c.stdin, "{\"until\": %d, \"events\": %d}\n", until, events); err != nil {
		t.Fatalf("%s: tell it how far to watch: %v; stderr:\n%s", c.name, err, c.stderr.String())
	}
	select {
	case <-c.done:
	case <-time.After(filtersTimeout + 20*time.Second):
		t.Fatalf("%s did not finish; stderr:\n%s", c.name, c.stderr.String())
	}
	if err := json.Unmarshal(c.stdout.Bytes(), out); err != nil {
		t.Fatalf("%s: %v; exit %v; output %q; stderr:\n%s", c.name, err, c.err, truncate(c.stdout.String()), c.stderr.String())
	}
	if c.err != nil {
		t.Errorf("%s exited with %v; output %s; stderr:\n%s", c.name, c.err, truncate(c.stdout.String()), c.stderr.String())
	}
}

// filterEvent is a log as the scripts report it.
type filterEvent struct {
	BlockHash       string `json:"blockHash"`
	TransactionHash string `json:"transactionHash"`
	LogIndex        int    `json:"logIndex"`
	Removed         bool   `json:"removed"`
}

func (e filterEvent) key() string {
	return strings.ToLower(e.TransactionHash) + "/" + strconv.Itoa(e.LogIndex) + "@" + strings.ToLower(e.BlockHash)
}

// TestFilterClientsThroughALoadBalancer: ethers v6 (contract.on and
// provider.on("block")) and viem (watchContractEvent and watchBlocks in
// polling mode, and a block filter of its own) poll venn over HTTP through
// haproxy, round robin across three replicas on one Redis, in front of geth
// --dev: every poll lands on another replica than the one before, which
// without shared filters answers "filter not found" two times in three.
// Each client gets every Ping event exactly once, the same as geth's own
// filter, and every block.
func TestFilterClientsThroughALoadBalancer(t *testing.T) {
	ethersProject := nodeProject(t, ethersDir, "ethers", filtersScript)
	viemProject := nodeProject(t, viemDir, "viem", filtersScript)
	g := gethtest.Start(t, gethtest.Options{})
	var accounts []string
	mustUnmarshal(t, g.MustCall(t, "eth_accounts"), &accounts)
	if len(accounts) == 0 {
		t.Fatal("geth --dev has no dev account")
	}
	dev := accounts[0]
	var deploy string
	mustUnmarshal(t, g.MustCall(t, "eth_sendTransaction", map[string]any{"from": dev, "data": pingCode()}), &deploy)
	contract := waitReceipt(t, g, deploy).ContractAddress

	rdb, token := testkit.Redis(t, func(tok string) string { return "venn:{f" + tok + "}*" })
	chain := "f" + token
	start := func(id string) *venn {
		return startVenn(t, []*gethtest.Geth{g}, vennOptions{blockTime: "200ms", chain: chain,
			top: fmt.Sprintf("redis: {url: \"redis://%s/0\", replica_id: %s}", testkit.RedisAddr, id)})
	}
	replicas := []*venn{start("r1"), start("r2"), start("r3")}
	head := quantity(t, g.MustCall(t, "eth_blockNumber"))
	backends := make([]string, len(replicas))
	for i, v := range replicas {
		waitWindowAt(t, v, chain, head)
		backends[i] = v.rpcAddr
	}
	lb := startHAProxy(t, backends...)
	url := "http://" + lb + "/" + chain

	// geth's own filter, to compare with.
	var gethFilter string
	mustUnmarshal(t, g.MustCall(t, "eth_newFilter", map[string]any{"address": contract}), &gethFilter)

	ethers := startFilterClient(t, "ethers", ethersProject, url, contract)
	viem := startFilterClient(t, "viem", viemProject, url, contract)
	// ethers' event filter, viem's event filter and its block filter.
	if !testkit.Poll(filtersWait, func() bool {
		n, _ := rdb.ZCard(context.Background(), "venn:{"+chain+"}:filters").Result()
		return n >= 3
	}) {
		t.Fatalf("the clients' filters were not made within %v; ethers stderr:\n%s\nviem stderr:\n%s",
			filtersWait, ethers.stderr.String(), viem.stderr.String())
	}
	first := quantity(t, g.MustCall(t, "eth_blockNumber"))
	for _, v := range replicas {
		waitWindowAt(t, v, chain, first)
	}

	var end uint64
	for i := range filtersEvents + 1 {
		tx := map[string]any{"from": dev, "to": contract, "data": gethtest.Topic(uint64(2000 + i))}
		if i == filtersEvents {
			tx = map[string]any{"from": dev, "to": dev, "value": "0x1"}
		}
		var h string
		mustUnmarshal(t, g.MustCall(t, "eth_sendTransaction", tx), &h)
		end = quantity(t, waitReceipt(t, g, h).BlockNumber)
	}
	var gethLogs []struct {
		BlockHash       string `json:"blockHash"`
		TransactionHash string `json:"transactionHash"`
		LogIndex        string `json:"logIndex"`
	}
	mustUnmarshal(t, g.MustCall(t, "eth_getFilterChanges", gethFilter), &gethLogs)
	if len(gethLogs) != filtersEvents {
		t.Fatalf("geth's own filter has %d logs, want %d", len(gethLogs), filtersEvents)
	}
	var want []string
	for _, l := range gethLogs {
		i, _ := strconv.ParseUint(strings.TrimPrefix(l.LogIndex, "0x"), 16, 64)
		want = append(want, filterEvent{BlockHash: l.BlockHash, TransactionHash: l.TransactionHash, LogIndex: int(i)}.key())
	}

	var ethersOut struct {
		Blocks   []uint64      `json:"blocks"`
		Events   []filterEvent `json:"events"`
		Errors   []string      `json:"errors"`
		TimedOut bool          `json:"timedOut"`
	}
	var viemOut struct {
		Blocks []struct {
			Number string `json:"number"`
			Hash   string `json:"hash"`
		} `json:"blocks"`
		Hashes   []string      `json:"hashes"`
		Events   []filterEvent `json:"events"`
		Errors   []string      `json:"errors"`
		TimedOut bool          `json:"timedOut"`
	}
	var wg sync.WaitGroup
	wg.Go(func() { ethers.result(t, end, filtersEvents, &ethersOut) })
	wg.Go(func() { viem.result(t, end, filtersEvents, &viemOut) })
	wg.Wait()
	if t.Failed() {
		return
	}
	check := func(who string, events []filterEvent, errs []string, timedOut bool) {
		t.Helper()
		if timedOut || len(errs) > 0 {
			t.Errorf("%s: timed out %v, errors %q", who, timedOut, errs)
		}
		var got []string
		for _, e := range events {
			if e.Removed {
				t.Errorf("%s: removed log %+v on a chain that never reorged", who, e)
			}
			got = append(got, e.key())
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s got events\n%v\ngeth's own filter has\n%v", who, got, want)
		}
	}
	check("ethers contract.on", ethersOut.Events, ethersOut.Errors, ethersOut.TimedOut)
	check("viem watchContractEvent", viemOut.Events, viemOut.Errors, viemOut.TimedOut)

	// Blocks: ethers' and viem's block sources, and viem's block filter,
	// each every block from first+1 to end, the block filter's once each.
	hashOf := func(n uint64) string {
		var b struct {
			Hash string `json:"hash"`
		}
		mustUnmarshal(t, g.MustCall(t, "eth_getBlockByNumber", "0x"+strconv.FormatUint(n, 16), false), &b)
		return strings.ToLower(b.Hash)
	}
	seenHash := map[string]int{}
	for _, h := range viemOut.Hashes {
		seenHash[strings.ToLower(h)]++
	}
	for n := first + 1; n <= end; n++ {
		if !slices.Contains(ethersOut.Blocks, n) {
			t.Errorf("ethers provider.on(\"block\") never saw block %d: %v", n, ethersOut.Blocks)
		}
		if !slices.ContainsFunc(viemOut.Blocks, func(b struct {
			Number string `json:"number"`
			Hash   string `json:"hash"`
		}) bool {
			return b.Number == strconv.FormatUint(n, 10)
		}) {
			t.Errorf("viem watchBlocks never saw block %d", n)
		}
		if c := seenHash[hashOf(n)]; c != 1 {
			t.Errorf("viem's block filter delivered block %d %d times", n, c)
		}
	}
	// Every replica served polls: round robin gives each a third of the
	// calls, and at least half of that. It is the calls of every method
	// that are spread: the clients poll in a cycle, which round robin can
	// keep landing one method's calls on the same replicas.
	answered := make([]float64, len(replicas))
	var total float64
	for i, v := range replicas {
		answered[i] = v.metricSum(t, "venn_requests_total", `chain="`+chain+`"`)
		total += answered[i]
	}
	for i, n := range answered {
		if n < 1 || n < total/float64(2*len(replicas)) {
			t.Errorf("replica %d answered %v of %v calls: the load balancer did not spread the polls", i+1, n, total)
		}
	}
	t.Logf("blocks %d..%d: ethers saw %d events and %d blocks, viem %d events, %d blocks and %d block-filter hashes; the replicas answered %v calls",
		first+1, end, len(ethersOut.Events), len(ethersOut.Blocks), len(viemOut.Events), len(viemOut.Blocks), len(viemOut.Hashes), answered)
}

// TestPendingFiltersAcrossReplicas: pending-transaction filters, hashes
// and full transactions, made through one replica and polled through both
// in turn, get each transaction sent after them exactly once.
func TestPendingFiltersAcrossReplicas(t *testing.T) {
	g := gethtest.Start(t, gethtest.Options{})
	dev := newDevSender(t, g)
	dev.send(t) // a first block, so that venn sees a head
	_, token := testkit.Redis(t, func(tok string) string { return "venn:{p" + tok + "}*" })
	chain := "p" + token
	start := func(id string) *venn {
		return startVenn(t, []*gethtest.Geth{g}, vennOptions{blockTime: "200ms", chain: chain,
			top: fmt.Sprintf("redis: {url: \"redis://%s/0\", replica_id: %s}", testkit.RedisAddr, id)})
	}
	replicas := []*venn{start("r1"), start("r2")}
	for _, v := range replicas {
		waitWindowAt(t, v, chain, 1)
	}
	var hashes, full string
	mustUnmarshal(t, call(t, replicas[0].URL(chain), "eth_newPendingTransactionFilter"), &hashes)
	mustUnmarshal(t, call(t, replicas[1].URL(chain), "eth_newPendingTransactionFilter", true), &full)

	var want []string
	for range 5 {
		want = append(want, dev.send(t))
	}
	for _, f := range []struct {
		name, id string
		full     bool
	}{{"hashes", hashes, false}, {"full", full, true}} {
		got := map[string]int{}
		turn := 0
		done := func() bool {
			for _, h := range want {
				if got[h] == 0 {
					return false
				}
			}
			return true
		}
		if !testkit.Poll(filtersWait, func() bool {
			v := replicas[turn%2]
			turn++
			var items []json.RawMessage
			mustUnmarshal(t, call(t, v.URL(chain), "eth_getFilterChanges", f.id), &items)
			for _, it := range items {
				if f.full != (len(it) > 0 && it[0] == '{') {
					t.Fatalf("%s filter: %s", f.name, it)
				}
				got[pendingKey(it)]++
			}
			return done()
		}) {
			t.Fatalf("%s filter: got %v, want each of %v", f.name, got, want)
		}
		for h, n := range got {
			if n != 1 {
				t.Fatalf("%s filter: %s delivered %d times", f.name, h, n)
			}
		}
	}
}

// TestFilterReorgAsGethDeliversIt: a log filter made through one replica
// and polled through the other, next to the node's own filter, while the
// simulated backend forks two blocks away and seals a longer branch: venn
// delivers what geth's filter system does, in the same order: the logs,
// then the orphaned ones again with removed: true, then the new branch's
// (but for a log geth sends twice, see below).
func TestFilterReorgAsGethDeliversIt(t *testing.T) {
	sim := simnode.Start(t)
	contract := sim.Deploy(t, common.FromHex(pingCode()))
	_, token := testkit.Redis(t, func(tok string) string { return "venn:{r" + tok + "}*" })
	chain := "r" + token
	start := func(id string) *venn {
		return startVenn(t, nil, vennOptions{blockTime: "200ms", chain: chain,
			urls: [][2]string{{sim.HTTPURL(), sim.WSURL()}},
			top:  fmt.Sprintf("redis: {url: \"redis://%s/0\", replica_id: %s}", testkit.RedisAddr, id)})
	}
	replicas := []*venn{start("r1"), start("r2")}
	settle := func() {
		t.Helper()
		head := sim.Head(t)
		for _, v := range replicas {
			waitHead(t, v, chain, head.Number.Uint64(), head.Hash())
		}
	}
	settle()
	crit := map[string]any{"address": contract.Hex()}
	var gethID, vennID string
	mustUnmarshal(t, call(t, sim.HTTPURL(), "eth_newFilter", crit), &gethID)
	mustUnmarshal(t, call(t, replicas[0].URL(chain), "eth_newFilter", crit), &vennID)

	var fromGeth, fromVenn []string
	turn := 0
	poll := func() {
		t.Helper()
		settle()
		var g, v []struct {
			BlockHash       string `json:"blockHash"`
			TransactionHash string `json:"transactionHash"`
			LogIndex        string `json:"logIndex"`
			Removed         bool   `json:"removed"`
		}
		mustUnmarshal(t, call(t, sim.HTTPURL(), "eth_getFilterChanges", gethID), &g)
		mustUnmarshal(t, call(t, replicas[turn%2].URL(chain), "eth_getFilterChanges", vennID), &v)
		turn++
		for _, l := range g {
			fromGeth = append(fromGeth, fmt.Sprintf("%s/%s/%s removed=%v", l.BlockHash, l.TransactionHash, l.LogIndex, l.Removed))
		}
		for _, l := range v {
			fromVenn = append(fromVenn, fmt.Sprintf("%s/%s/%s removed=%v", l.BlockHash, l.TransactionHash, l.LogIndex, l.Removed))
		}
	}
	ping := func(n uint64) {
		sim.Send(t, contract, common.FromHex(gethtest.Topic(n)))
		sim.Commit()
	}
	ping(1)
	forkAt := sim.Head(t).Hash()
	ping(2)
	poll()
	ping(3)
	poll()
	// Blocks 2 and 3 (of the pings) leave; their transactions return to
	// the pool and are sealed again, on a longer branch.
	sim.Fork(t, forkAt)
	sim.Commit()
	ping(4)
	ping(5)
	poll()
	poll()
	// geth's Fork is SetCanonical(parent), which announces the parent as
	// the new head and sends its logs again, never taken back: a log a
	// client already has. venn delivers each log once (the parent never
	// left the chain); every other change is geth's, in geth's order.
	var once []string
	live := map[string]bool{}
	for _, l := range fromGeth {
		key, removed := strings.TrimSuffix(strings.TrimSuffix(l, " removed=true"), " removed=false"), strings.HasSuffix(l, "removed=true")
		if !removed && live[key] {
			continue
		}
		live[key] = !removed
		once = append(once, l)
	}
	if !slices.Equal(fromVenn, once) {
		t.Fatalf("venn's filter delivered\n%s\ngeth's own filter (each log once)\n%s", strings.Join(fromVenn, "\n"), strings.Join(once, "\n"))
	}
	removed := 0
	for _, l := range fromGeth {
		if strings.HasSuffix(l, "removed=true") {
			removed++
		}
	}
	if removed == 0 {
		t.Fatalf("geth's filter delivered no removed log: the fork did not reorg\n%s", strings.Join(fromGeth, "\n"))
	}
	t.Logf("%d changes, %d removed, as geth delivered them", len(fromGeth), removed)
}

// TestFilterFarBehindTheWindow: filters whose cursors fell below a small
// head window, on the simulated backend (blocks only when the test seals
// them). A log filter two blocks below the window gets those through the
// chain's eth_getLogs path (the remote), then the window's: the same logs
// as the node's own filter, each once. One behind by more than
// getlogs_limits.max_block_range gets the limit error whole, never part
// of its changes, and keeps its cursor: the next poll gets the same
// error. A block filter that far behind gets every hash.
func TestFilterFarBehindTheWindow(t *testing.T) {
	sim := simnode.Start(t)
	contract := sim.Deploy(t, common.FromHex(pingCode()))
	// A window of 8 blocks; a log range below it of more than 4 blocks is
	// refused.
	v := startVenn(t, nil, vennOptions{blockTime: "200ms",
		urls:    [][2]string{{sim.HTTPURL(), sim.WSURL()}},
		inChain: "    head: {window: 8}\n    getlogs_limits: {max_block_range: 4}"})
	url := v.URL(chainName)
	k := uint64(0)
	// ping seals n blocks, each with one Ping, and waits until venn's
	// window holds the last.
	ping := func(n int) uint64 {
		t.Helper()
		for range n {
			k++
			sim.Send(t, contract, common.FromHex(gethtest.Topic(3000+k)))
			sim.Commit()
		}
		head := sim.Head(t)
		waitHead(t, v, chainName, head.Number.Uint64(), head.Hash())
		return head.Number.Uint64()
	}
	start := ping(1)
	crit := map[string]any{"address": contract.Hex()}
	var far, blocks, near, nodeNear string
	mustUnmarshal(t, call(t, url, "eth_newFilter", crit), &far)
	mustUnmarshal(t, call(t, url, "eth_newBlockFilter"), &blocks)
	ping(6) // start+1..start+6
	mustUnmarshal(t, call(t, url, "eth_newFilter", crit), &near)
	mustUnmarshal(t, call(t, sim.HTTPURL(), "eth_newFilter", crit), &nodeNear)
	head := ping(10) // start+7..start+16: the window keeps start+9..start+16

	// near: start+7 and start+8 below the window (a range of 2), the rest
	// from it; what the node's own filter has.
	type logKey struct {
		BlockHash       string `json:"blockHash"`
		TransactionHash string `json:"transactionHash"`
		LogIndex        string `json:"logIndex"`
		Removed         bool   `json:"removed"`
	}
	var got, want []logKey
	mustUnmarshal(t, call(t, url, "eth_getFilterChanges", near), &got)
	mustUnmarshal(t, call(t, sim.HTTPURL(), "eth_getFilterChanges", nodeNear), &want)
	if len(want) != 10 || !slices.Equal(got, want) {
		t.Fatalf("a filter 10 blocks behind got\n%+v\nthe node's own filter has (%d)\n%+v", got, len(want), want)
	}
	mustUnmarshal(t, call(t, url, "eth_getFilterChanges", near), &got)
	if len(got) != 0 {
		t.Fatalf("polled again: %+v", got)
	}

	// far: start+1..start+8 below the window, a range of 8: refused whole,
	// twice (the cursor stays). The 8 also says the window starts at
	// start+9, so near's first two blocks did come from below it.
	for i := range 2 {
		_, err := tryCall(url, "eth_getFilterChanges", far)
		if err == nil || !strings.Contains(err.Error(), "JSON-RPC error -32052: exceed maximum block range: 4 (asked for 8 blocks)") {
			t.Fatalf("poll %d of a filter 16 blocks behind: %v, want the limit error", i+1, err)
		}
	}

	// blocks: every hash start+1..head, once.
	var hashes []string
	mustUnmarshal(t, call(t, url, "eth_getFilterChanges", blocks), &hashes)
	if uint64(len(hashes)) != head-start {
		t.Fatalf("the block filter got %d hashes, want %d (blocks %d..%d)", len(hashes), head-start, start+1, head)
	}
	for i, h := range hashes {
		if want := headerAt(t, sim, start+1+uint64(i)).Hex(); !strings.EqualFold(h, want) {
			t.Fatalf("block filter hash %d is %s, block %d is %s", i, h, start+1+uint64(i), want)
		}
	}
}
