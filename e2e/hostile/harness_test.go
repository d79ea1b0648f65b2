//go:build linux

// Package hostile is venn's fault-injection suite: venn replicas run as
// real processes on a private, real Redis, in front of in-process fake
// nodes (internal/fakenode) that a test switches to another network,
// reorgs, slows, breaks or makes lie, while it kills, pauses and reloads
// the replicas. Every test ends with the replicas' answers checked against
// a node's own answers to the same calls.
//
// This file is the harness every test of the suite shares: start a world
// (startWorld), break it (the world's and the replicas' methods, and the
// nodes' own fault switches), then check it (checkAnswers).
package hostile

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	harness "github.com/venn-gateway/venn/internal/cluster"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/freeport"
	"github.com/venn-gateway/venn/internal/testkit"
)

// The world's defaults.
const (
	chain   = "dev"
	chainID = 1337
	// otherChainID is the network a switched node moves to.
	otherChainID = 4242
	blockTime    = 200 * time.Millisecond
	window       = 32
	waitLimit    = 20 * time.Second
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// vennBinary builds cmd/venn once per test run.
func vennBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "venn-hostile-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "venn")
		binErr = harness.BuildVenn(context.Background(), binPath)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// options shape a world; zero fields take the defaults.
type options struct {
	replicas int // 2
	nodes    int // 2, all on chainID
	// tweak changes every replica's config (before it is written).
	tweak func(*harness.Config)
	// node changes the options of node i before it starts.
	node func(i int, o *fakenode.Options)
}

// world is venn replicas on one private Redis in front of fake nodes that
// serve one chain.
type world struct {
	t        *testing.T
	redis    *harness.Redis
	nodes    []*fakenode.Node
	replicas []*replica
}

// replica is one venn process. Its admin API is on its metrics listener.
type replica struct {
	id      string
	rpc     string // host:port
	metrics string // host:port, with /admin/
	cfgPath string
	logPath string
	conf    harness.Config

	mu   sync.Mutex
	proc *harness.Proc
}

// startWorld starts the nodes, the Redis and the replicas, and waits for a
// leader and for every replica to serve the nodes' head.
func startWorld(t *testing.T, o options) *world {
	t.Helper()
	if o.replicas == 0 {
		o.replicas = 2
	}
	if o.nodes == 0 {
		o.nodes = 2
	}
	ports, err := freeport.Ports(1 + 2*o.replicas)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := harness.StartRedis(context.Background(), t.TempDir(), ports[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rd.Close)
	w := &world{t: t, redis: rd}
	for i := range o.nodes {
		no := fakenode.Options{ChainID: chainID, Head: 200}
		if o.node != nil {
			o.node(i, &no)
		}
		n := fakenode.New(no)
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		w.nodes = append(w.nodes, n)
	}
	for i := range o.replicas {
		r := w.newReplica(t, fmt.Sprintf("r%d", i), ports[1+2*i], ports[2+2*i], o.tweak)
		w.replicas = append(w.replicas, r)
	}
	for _, r := range w.replicas {
		r.start(t)
	}
	w.waitLeader(t, "")
	w.waitServing(t, w.replicas)
	return w
}

func (w *world) newReplica(t *testing.T, id string, rpcPort, metricsPort int, tweak func(*harness.Config)) *replica {
	t.Helper()
	dir := t.TempDir()
	r := &replica{id: id, rpc: "127.0.0.1:" + strconv.Itoa(rpcPort),
		metrics: "127.0.0.1:" + strconv.Itoa(metricsPort),
		cfgPath: filepath.Join(dir, "venn.yaml"), logPath: filepath.Join(dir, "venn.log")}
	r.conf = harness.Config{Listen: r.rpc, MetricsListen: r.metrics, RedisAddr: w.redis.Addr(), ReplicaID: id,
		Chain: chain, ChainID: chainID, BlockTime: blockTime, Window: window,
		Extra: "shutdown_timeout: 5s\nadmin: {on_metrics_listen: true}"}
	for i, n := range w.nodes {
		r.conf.Remotes = append(r.conf.Remotes, harness.Remote{Name: fmt.Sprintf("n%d", i), URL: n.URL(),
			WSURL: n.WSURL(), Timeout: time.Second})
	}
	if tweak != nil {
		tweak(&r.conf)
	}
	r.writeConfig(t)
	t.Cleanup(func() {
		r.kill()
		if t.Failed() {
			b, _ := os.ReadFile(r.logPath)
			t.Logf("replica %s log tail:\n%s", r.id, tail(string(b), 6000))
		}
	})
	return r
}

// writeConfig writes r.conf to r's config file: a running replica reads it
// at its next reload (r.reload).
func (r *replica) writeConfig(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(r.cfgPath, []byte(r.conf.YAML()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// start starts r's process; r must not be running.
func (r *replica) start(t *testing.T) {
	t.Helper()
	logFile, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	p, err := harness.Start("venn "+r.id, logFile, logFile, vennBinary(t), "serve", "--config", r.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	r.proc = p
	r.mu.Unlock()
}

// kill is kill -9 (paused or not): no lease release, no cleanup. It waits
// for the process to be gone; a replica not running is left alone.
func (r *replica) kill() {
	r.mu.Lock()
	p := r.proc
	r.proc = nil
	r.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// pause stops r with SIGSTOP, as a VM pause or a long stop-the-world does,
// and returns once the kernel says it is stopped: its sockets stay open
// and fill. resume continues it.
func (r *replica) pause(t *testing.T) {
	t.Helper()
	r.signal(syscall.SIGSTOP)
	r.mu.Lock()
	stat := fmt.Sprintf("/proc/%d/stat", r.proc.Pid())
	r.mu.Unlock()
	testkit.WaitFor(t, waitLimit, "replica "+r.id+" stopped", func() bool {
		b, err := os.ReadFile(stat)
		// The state follows the command's closing parenthesis.
		i := bytes.LastIndexByte(b, ')')
		return err == nil && i > 0 && i+2 < len(b) && b[i+2] == 'T'
	})
}

func (r *replica) resume() { r.signal(syscall.SIGCONT) }

// reload asks r to re-read its config file (SIGHUP).
func (r *replica) reload() { r.signal(syscall.SIGHUP) }

func (r *replica) signal(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc != nil {
		r.proc.Signal(sig)
	}
}

// replica returns the replica with id.
func (w *world) replica(id string) *replica {
	for _, r := range w.replicas {
		if r.id == id {
			return r
		}
	}
	w.t.Fatalf("no replica %q", id)
	return nil
}

// others are the replicas but id.
func (w *world) others(id string) []*replica {
	var out []*replica
	for _, r := range w.replicas {
		if r.id != id {
			out = append(out, r)
		}
	}
	return out
}

// leader is the replica holding the chain's lease and its epoch ("" none).
func (w *world) leader() (string, uint64) {
	id, epoch, _ := w.redis.Leader(context.Background(), chain)
	return id, epoch
}

// waitLeader waits for a leader other than not (any when "").
func (w *world) waitLeader(t *testing.T, not string) *replica {
	t.Helper()
	var id string
	testkit.WaitFor(t, waitLimit, "a leader other than "+strconv.Quote(not), func() bool {
		id, _ = w.leader()
		return id != "" && id != not
	})
	return w.replica(id)
}

// mine mines a block on every node each blockTime until stop (or the test
// ends).
func (w *world) mine(t *testing.T) (stop func()) {
	return fakenode.MineEvery(t, blockTime, w.nodes...)
}

// reorg replaces the top depth blocks of every node but those in skip with
// the same new branch (depth 1: a sibling at the same height), and returns
// the orphaned hashes, lowest first.
func (w *world) reorg(depth uint64, skip ...*fakenode.Node) []string {
	head := w.nodes[0].Head()
	var orphans []string
	for n := head - depth + 1; n <= head; n++ {
		orphans = append(orphans, w.nodes[0].BlockHash(n))
	}
	salt := uint64(time.Now().UnixNano())
nodes:
	for _, n := range w.nodes {
		for _, s := range skip {
			if s == n {
				continue nodes
			}
		}
		n.SetFork(head-depth+1, salt)
	}
	return orphans
}

// waitServing waits until every replica in rs holds the node's head in
// its window and serves it as latest, with its hash.
func (w *world) waitServing(t *testing.T, rs []*replica) {
	t.Helper()
	node := w.nodes[0]
	for _, r := range rs {
		testkit.WaitFor(t, waitLimit, "replica "+r.id+" serves the node's head from its window", func() bool {
			head := node.Head()
			var got block
			inWindow, _ := r.metric("venn_head_number", `chain="dev"`)
			return uint64(inWindow) >= head && r.call("eth_getBlockByNumber", &got, "latest", false) == nil &&
				got.number() >= head && got.Hash == node.BlockHash(got.number())
		})
	}
}

// block is the part of a block the tests read.
type block struct {
	Number string `json:"number"`
	Hash   string `json:"hash"`
	Parent string `json:"parentHash"`
}

func (b block) number() uint64 { return parseQ(b.Number) }

var client = &http.Client{Timeout: 10 * time.Second}

// call calls method on r's chain and decodes the result into out (a nil
// out skips it); a JSON-RPC error is an error.
func (r *replica) call(method string, out any, params ...any) error {
	res, _, err := r.callRaw(method, params...)
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(res, out)
}

// callRaw calls method on r's chain: the result's bytes and the part of
// venn that answered (X-Venn-Source).
func (r *replica) callRaw(method string, params ...any) (json.RawMessage, string, error) {
	return post(client, "http://"+r.rpc+"/"+chain, method, params...)
}

// nodeCall calls method on node n directly.
func nodeCall(n *fakenode.Node, method string, params ...any) (json.RawMessage, error) {
	res, _, err := post(client, n.URL(), method, params...)
	return res, err
}

func post(c *http.Client, url, method string, params ...any) (json.RawMessage, string, error) {
	if params == nil {
		params = []any{}
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		return nil, "", fmt.Errorf("%s: %w", method, err)
	}
	if msg.Error != nil {
		return nil, "", fmt.Errorf("%s: %s", method, msg.Error)
	}
	return msg.Result, resp.Header.Get("X-Venn-Source"), nil
}

// metric reads one series of r's /metrics: the first line of name whose
// labels contain label.
func (r *replica) metric(name, label string) (float64, bool) {
	resp, err := client.Get("http://" + r.metrics + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(body), "\n") {
		if strings.HasPrefix(line, name+"{") && strings.Contains(line, label) {
			f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			return f, err == nil
		}
	}
	return 0, false
}

// chainStatus is r's GET /admin/chains/dev: the chain's head as r's own
// pool sees the remotes (not its window).
func (r *replica) chainStatus() (head uint64, hash string, ok bool) {
	resp, err := client.Get("http://" + r.metrics + "/admin/chains/" + chain)
	if err != nil {
		return 0, "", false
	}
	defer resp.Body.Close()
	var v struct {
		Head     uint64 `json:"head"`
		HeadHash string `json:"head_hash"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&v) != nil {
		return 0, "", false
	}
	return v.Head, v.HeadHash, true
}

// checkAnswers asks r and node the same calls about the top of node's
// chain (its head, the blocks below it by number and by hash, a receipt,
// the logs, a balance) and fails t where r's answer is not the node's. The
// chain must not move meanwhile: stop mining first.
func checkAnswers(t *testing.T, r *replica, node *fakenode.Node) {
	t.Helper()
	head := node.Head()
	calls := [][]any{
		{"eth_blockNumber"},
		{"eth_getBlockByNumber", "latest", false},
		{"eth_getBalance", fakenode.Senders()[0], "latest"},
		{"eth_getLogs", map[string]string{"fromBlock": hexq(head - 8), "toBlock": hexq(head)}},
	}
	for n := head - 8; n <= head; n++ {
		calls = append(calls,
			[]any{"eth_getBlockByNumber", hexq(n), false},
			[]any{"eth_getBlockByHash", node.BlockHash(n), true},
			[]any{"eth_getTransactionReceipt", node.TxHash(n, 0)})
	}
	for _, c := range calls {
		method, params := c[0].(string), c[1:]
		want, err := nodeCall(node, method, params...)
		if err != nil {
			t.Fatalf("node: %s%v: %v", method, params, err)
		}
		got, src, err := r.callRaw(method, params...)
		if err != nil {
			t.Fatalf("replica %s: %s%v: %v", r.id, method, params, err)
		}
		if !jsonEqual(got, want) {
			t.Fatalf("replica %s answers %s%v (from %s) with %.300s, the node with %.300s",
				r.id, method, params, src, got, want)
		}
	}
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func hexq(n uint64) string { return "0x" + strconv.FormatUint(n, 16) }

func parseQ(s string) uint64 {
	n, _ := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
	return n
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
