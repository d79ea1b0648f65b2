package e2e

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/crypto"

	"github.com/venn-gateway/venn/internal/gethtest"
	"github.com/venn-gateway/venn/internal/testkit"
)

// The viem test runs e2e/viem/watch.mjs, a Node script using viem over
// WebSocket, against venn in front of geth --dev.
const (
	viemDir    = "viem"
	viemScript = "watch.mjs"
	// viemEvents is how many Ping transactions the test sends while viem
	// watches, each mined in a block of its own.
	viemEvents = 10
	// Bounds: the script's own deadline, and the test's for the whole
	// node process (its start on a loaded machine included).
	viemScriptTimeout = 60 * time.Second
	viemRunTimeout    = 90 * time.Second
	viemSubscribeWait = 30 * time.Second
	npmCITimeout      = 5 * time.Minute
	minNodeMajor      = 18
)

// pingSignature is the event the viem test's contract emits; watch.mjs
// watches the same one.
const pingSignature = "Ping(address,uint256)"

// pingCode deploys a contract whose every call emits
// Ping(address indexed sender, uint256 value) with value the first 32
// bytes of the calldata, as a Solidity contract would. The e2e fixtures'
// contracts log constant topics, which no ABI event selects.
//
// Runtime:
//
//	6000 35 6000 52          MSTORE(0, CALLDATALOAD(0))
//	33 7f<topic0>            CALLER, the event's selector
//	6020 6000 a2 00          LOG2(0, 32, selector, CALLER); STOP
//
// Init code: CODECOPY the runtime from offset 0x0b and return it (the
// emitter's init code, see gethtest.EmitterCode).
func pingCode() string {
	topic := fmt.Sprintf("%x", crypto.Keccak256([]byte(pingSignature)))
	runtime := "600035600052" + "33" + "7f" + topic + "60206000a2" + "00"
	return gethtest.DeployCode(runtime)
}

// viemBlock is a block as watch.mjs reports it.
type viemBlock struct {
	Number     string `json:"number"`
	Hash       string `json:"hash"`
	ParentHash string `json:"parentHash"`
}

// viemResult is what watch.mjs prints.
type viemResult struct {
	Blocks []viemBlock `json:"blocks"` // watchBlocks' onBlock calls
	Heads  []viemBlock `json:"heads"`  // newHeads notifications as they came
	Events []struct {
		EventName       string `json:"eventName"`
		Address         string `json:"address"`
		BlockNumber     string `json:"blockNumber"`
		BlockHash       string `json:"blockHash"`
		TransactionHash string `json:"transactionHash"`
		LogIndex        int    `json:"logIndex"`
		Removed         bool   `json:"removed"`
		Args            struct {
			Sender string `json:"sender"`
			Value  string `json:"value"`
		} `json:"args"`
	} `json:"events"`
	Errors   []string `json:"errors"`
	TimedOut bool     `json:"timedOut"`
}

// TestViemOverWebSocket: viem's watchBlocks (poll: false) and watchEvent,
// through venn over WebSocket, see every block geth mines once, in order,
// with geth's hashes, and every Ping event with its args and block.
func TestViemOverWebSocket(t *testing.T) {
	dir := viemProject(t)
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

	v := startVenn(t, []*gethtest.Geth{g}, vennOptions{})
	waitVennHead(t, v, quantity(t, g.MustCall(t, "eth_blockNumber")))

	// viem watches from here.
	ctx, cancel := context.WithTimeout(context.Background(), viemRunTimeout)
	defer cancel()
	var stdout bytes.Buffer
	stderr := &testkit.Buffer{}
	cmd := exec.CommandContext(ctx, "node", viemScript)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"VENN_WS_URL="+v.WSURL(chainName),
		"CONTRACT="+contract,
		"TIMEOUT_MS="+strconv.FormatInt(viemScriptTimeout.Milliseconds(), 10))
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe() // where the test says how far to watch
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node %s: %v", viemScript, err)
	}
	done := make(chan struct{})
	var runErr error
	go func() { runErr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cancel() // kills node if it still runs
		<-done
	})
	exited := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}

	// viem's subscriptions (watchBlocks' and the raw newHeads, watchEvent's
	// logs) must be open in venn before the first block.
	if !testkit.Poll(viemSubscribeWait, func() bool {
		heads, _ := v.metric(t, "venn_subscriptions", `kind="newHeads"`)
		logs, _ := v.metric(t, "venn_subscriptions", `kind="logs"`)
		return heads >= 2 && logs >= 1 || exited()
	}) {
		t.Fatalf("viem's subscriptions did not reach venn within %v; node stderr:\n%s", viemSubscribeWait, stderr.String())
	}
	if exited() {
		t.Fatalf("node %s exited before subscribing: %v; stdout %q; stderr:\n%s", viemScript, runErr, truncate(stdout.String()), stderr.String())
	}

	// Every block from the one after start is viem's to see: its
	// subscriptions are open, and venn has delivered up to start.
	start := quantity(t, g.MustCall(t, "eth_blockNumber"))
	waitVennHead(t, v, start)

	// One Ping per transaction, then a plain transfer that closes the run.
	// geth --dev may seal empty blocks of its own in between: viem must
	// see those too.
	type ping struct {
		number   uint64
		hash, tx string
		value    uint64
	}
	var pings []ping
	var end uint64
	for i := range viemEvents + 1 {
		tx := map[string]any{"from": dev, "to": contract, "data": gethtest.Topic(uint64(1000 + i))}
		if i == viemEvents {
			tx = map[string]any{"from": dev, "to": dev, "value": "0x1"}
		}
		var h string
		mustUnmarshal(t, g.MustCall(t, "eth_sendTransaction", tx), &h)
		rc := waitReceipt(t, g, h)
		end = quantity(t, rc.BlockNumber)
		if i < viemEvents {
			pings = append(pings, ping{number: end, hash: rc.BlockHash, tx: h, value: uint64(1000 + i)})
		}
	}
	if _, err := fmt.Fprintf(stdin, "{\"until\": %d, \"events\": %d}\n", end, viemEvents); err != nil {
		t.Fatalf("tell node %s how far to watch: %v; stderr:\n%s", viemScript, err, stderr.String())
	}
	_ = stdin.Close()

	select {
	case <-done:
	case <-ctx.Done():
		<-done
		t.Fatalf("node %s did not finish within %v; stderr:\n%s", viemScript, viemRunTimeout, stderr.String())
	}
	var res viemResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("node %s: %v; output %q; stderr:\n%s", viemScript, runErr, truncate(stdout.String()), stderr.String())
	}
	if res.TimedOut || runErr != nil || len(res.Errors) > 0 {
		t.Errorf("node %s: exit %v, timed out %v, errors %q; stderr:\n%s", viemScript, runErr, res.TimedOut, res.Errors, stderr.String())
	}

	t.Logf("viem saw %d heads, %d blocks and %d Ping events through venn (geth mined blocks %d..%d)",
		len(res.Heads), len(res.Blocks), len(res.Events), start+1, end)

	// venn sent every head once, in order, as geth has it.
	checkViemChain(t, "newHeads notifications", res.Heads, g, start, end)
	// viem's watchBlocks fetches the block of each head and calls onBlock
	// when the answer comes: two heads close together may swap there,
	// whatever order they came in. Each block still comes once. (Those
	// past end may still have been on their way when the script ended.)
	blocks := slices.DeleteFunc(slices.Clone(res.Blocks), func(b viemBlock) bool {
		n, _ := strconv.ParseUint(b.Number, 10, 64)
		return n > end
	})
	slices.SortStableFunc(blocks, byNumber)
	if !slices.IsSortedFunc(res.Blocks, byNumber) {
		t.Logf("viem's onBlock calls came out of order (viem's own fetches answered out of order): %v", blockNumbers(res.Blocks))
	}
	checkViemChain(t, "watchBlocks", blocks, g, start, end)

	// Every event once, with its args and block.
	if len(res.Events) != len(pings) {
		t.Errorf("viem got %d Ping events, want %d", len(res.Events), len(pings))
	}
	for i, e := range res.Events {
		if i >= len(pings) {
			t.Errorf("event %d: extra event in block %s tx %s", i, e.BlockNumber, e.TransactionHash)
			continue
		}
		w := pings[i]
		ok := e.EventName == "Ping" && strings.EqualFold(e.Address, contract) &&
			e.BlockNumber == strconv.FormatUint(w.number, 10) && strings.EqualFold(e.BlockHash, w.hash) &&
			strings.EqualFold(e.TransactionHash, w.tx) && e.LogIndex == 0 && !e.Removed &&
			strings.EqualFold(e.Args.Sender, dev) && e.Args.Value == strconv.FormatUint(w.value, 10)
		if !ok {
			t.Errorf("event %d: viem got %+v; want Ping(sender %s, value %d) from %s in block %d %s, tx %s, log 0",
				i, e, dev, w.value, contract, w.number, w.hash, w.tx)
		}
	}
}

// checkViemChain asserts that list is geth's chain from at most start+1
// (a block venn delivered while the test read start may come first) up to
// end or past it (geth --dev may seal empty blocks of its own while the
// script finishes): consecutive numbers, geth's hashes, each the child of
// the one before. who names the list in failures.
func checkViemChain(t *testing.T, who string, list []viemBlock, g *gethtest.Geth, start, end uint64) {
	t.Helper()
	if len(list) == 0 {
		t.Errorf("%s: none; geth mined %d..%d", who, start+1, end)
		return
	}
	first, err := strconv.ParseUint(list[0].Number, 10, 64)
	if err != nil || first > start+1 || first == 0 {
		t.Errorf("%s: the first block is %s, want at most %d", who, list[0].Number, start+1)
		return
	}
	if want := end - first + 1; uint64(len(list)) < want {
		t.Errorf("%s: %d blocks %v, want %d or more (%d..%d, then any geth sealed since)", who, len(list), blockNumbers(list), want, first, end)
	}
	prev := blockHash(t, g, first-1)
	for i, b := range list {
		n := first + uint64(i)
		if b.Number != strconv.FormatUint(n, 10) {
			t.Errorf("%s: #%d is block %s, want %d (all: %v)", who, i, b.Number, n, blockNumbers(list))
			return
		}
		if want := blockHash(t, g, n); !strings.EqualFold(b.Hash, want) {
			t.Errorf("%s: block %d is %s, geth's is %s", who, n, b.Hash, want)
		}
		if !strings.EqualFold(b.ParentHash, prev) {
			t.Errorf("%s: block %d has parentHash %s, the block before is %s", who, n, b.ParentHash, prev)
		}
		prev = b.Hash
	}
}

func byNumber(a, b viemBlock) int {
	x, _ := strconv.ParseUint(a.Number, 10, 64)
	y, _ := strconv.ParseUint(b.Number, 10, 64)
	return cmp.Compare(x, y)
}

func blockNumbers(list []viemBlock) []string {
	out := make([]string, len(list))
	for i, b := range list {
		out[i] = b.Number
	}
	return out
}

// blockHash is geth's canonical hash of block n.
func blockHash(t *testing.T, g *gethtest.Geth, n uint64) string {
	t.Helper()
	var b struct {
		Hash string `json:"hash"`
	}
	mustUnmarshal(t, g.MustCall(t, "eth_getBlockByNumber", hex(n), false), &b)
	return b.Hash
}

// viemProject returns a folder holding watch.mjs and the viem that
// package-lock.json pins (see nodeProject).
func viemProject(t *testing.T) string {
	t.Helper()
	return nodeProject(t, viemDir, "viem", viemScript)
}

// nodeProject returns a folder holding script and the version of pkg
// that dir's package-lock.json pins: dir itself once `npm ci` ran there
// (scripts/test.sh does), else a cache folder where the test runs `npm ci`
// once per lock file. node and npm must be installed: without them the
// test fails, saying what to install.
func nodeProject(t *testing.T, dir, pkg, script string) string {
	t.Helper()
	checkNode(t)
	src, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	pinned := pinnedVersion(t, src, pkg)
	if installedVersion(src, pkg) == pinned {
		return src
	}
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		t.Fatalf("%s project: %v", pkg, err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("%s project: no cache folder for npm ci: %v", pkg, err)
	}
	sum := sha256.Sum256(lock)
	cached := filepath.Join(cache, "venn-"+dir, fmt.Sprintf("%x", sum[:8]))
	if err := os.MkdirAll(cached, 0o755); err != nil {
		t.Fatalf("%s project: %v", pkg, err)
	}
	for _, f := range []string{"package.json", "package-lock.json", script} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err == nil {
			err = os.WriteFile(filepath.Join(cached, f), b, 0o644)
		}
		if err != nil {
			t.Fatalf("%s project: copy %s: %v", pkg, f, err)
		}
	}
	if installedVersion(cached, pkg) == pinned {
		return cached
	}
	ctx, cancel := context.WithTimeout(context.Background(), npmCITimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = cached
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s (run `npm ci` in e2e/%s, or scripts/test.sh, to install %s): %v\n%s", cached, dir, pkg, err, out)
	}
	if got := installedVersion(cached, pkg); got != pinned {
		t.Fatalf("npm ci in %s installed %s %q, package.json pins %q", cached, pkg, got, pinned)
	}
	return cached
}

// checkNode fails the test unless node (new enough for viem, ethers and
// grpc-js) and npm are on PATH.
func checkNode(t *testing.T) {
	t.Helper()
	const how = "the Node.js tests (viem, ethers, grpc-js) need Node.js 18 or newer and npm: apt-get install -y nodejs npm"
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s not found on PATH: %s", bin, how)
		}
	}
	out, err := exec.Command("node", "--version").Output()
	if err != nil {
		t.Fatalf("node --version: %v: %s", err, how)
	}
	ver := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	major, err := strconv.Atoi(strings.SplitN(ver, ".", 2)[0])
	if err != nil || major < minNodeMajor {
		t.Fatalf("node %s is too old: %s", ver, how)
	}
}

// pinnedVersion is the version of pkg that dir's package.json names.
func pinnedVersion(t *testing.T, dir, pkg string) string {
	t.Helper()
	var p struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "package.json"))
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil {
		t.Fatalf("%s project: package.json: %v", pkg, err)
	}
	v := p.Dependencies[pkg]
	if v == "" {
		t.Fatalf("%s project: package.json does not depend on %s", pkg, pkg)
	}
	return v
}

// installedVersion is the version of pkg in dir's node_modules, "" when
// there is none.
func installedVersion(dir, pkg string) string {
	var p struct {
		Version string `json:"version"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", pkg, "package.json"))
	if err != nil || json.Unmarshal(b, &p) != nil {
		return ""
	}
	return p.Version
}
