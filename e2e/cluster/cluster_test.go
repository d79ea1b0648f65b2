//go:build linux

// Package cluster runs three venn processes against one real Redis and
// fake upstream nodes whose chain advances and reorgs, and breaks things
// the way production does: kill -9 of the leader, SIGSTOP past its lease,
// a Redis restart. It checks the head feed in Redis (no block missing or
// published twice) and what every replica serves (never an orphan).
package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	harness "github.com/venn-gateway/venn/internal/cluster"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/freeport"
	"github.com/venn-gateway/venn/internal/testkit"
)

const (
	chain     = "dev"
	chainID   = 1337
	leaseTTL  = 2 * time.Second // venn's default
	window    = 32
	blockTime = 150 * time.Millisecond
	waitLimit = 20 * time.Second
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
		binDir, binErr = os.MkdirTemp("", "venn-cluster-")
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

// startRedis starts the cluster's private redis-server, so that the test
// can restart it without touching the machine's shared one.
func startRedis(t *testing.T, port int) *harness.Redis {
	t.Helper()
	r, err := harness.StartRedis(context.Background(), t.TempDir(), port)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// restartRedis starts the killed redis-server again: empty, since it keeps
// nothing on disk.
func (c *cluster) restartRedis(t *testing.T) {
	t.Helper()
	if err := c.redis.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// leader returns the replica id holding the chain's lease and its epoch.
func (c *cluster) leader() (string, uint64) {
	id, epoch, _ := c.redis.Leader(context.Background(), chain)
	return id, epoch
}

// replica is one venn process.
type replica struct {
	id      string
	rpc     string
	metrics string
	cfgPath string
	logPath string
	proc    *harness.Proc
}

type cluster struct {
	redis    *harness.Redis
	nodes    []*fakenode.Node
	replicas []*replica
	tweak    func(*harness.Config) // changes every replica's config; nil: none
}

func startCluster(t *testing.T, n int) *cluster { return startClusterWith(t, n, nil) }

// startClusterWith is startCluster with every replica's config changed by
// tweak.
func startClusterWith(t *testing.T, n int, tweak func(*harness.Config)) *cluster {
	t.Helper()
	// All ports at once, so that no two processes are handed the same one.
	ports, err := freeport.Ports(1 + 2*n)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{redis: startRedis(t, ports[0]), tweak: tweak}
	for range 2 {
		node := fakenode.New(fakenode.Options{ChainID: chainID, Head: 200})
		if err := node.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(node.Close)
		c.nodes = append(c.nodes, node)
	}
	for i := range n {
		c.replicas = append(c.replicas, c.newReplica(t, fmt.Sprintf("r%d", i), ports[1+2*i], ports[2+2*i]))
	}
	for _, r := range c.replicas {
		r.start(t)
	}
	return c
}

func (c *cluster) newReplica(t *testing.T, id string, rpcPort, metricsPort int) *replica {
	t.Helper()
	dir := t.TempDir()
	r := &replica{id: id, rpc: "127.0.0.1:" + strconv.Itoa(rpcPort),
		metrics: "127.0.0.1:" + strconv.Itoa(metricsPort),
		cfgPath: filepath.Join(dir, "venn.yaml"), logPath: filepath.Join(dir, "venn.log")}
	if err := os.WriteFile(r.cfgPath, []byte(c.config(r, c.nodes).YAML()), 0o600); err != nil {
		t.Fatal(err)
	}
	r.killAtEnd(t)
	return r
}

// config is r's configuration in front of nodes.
func (c *cluster) config(r *replica, nodes []*fakenode.Node) harness.Config {
	conf := harness.Config{Listen: r.rpc, MetricsListen: r.metrics, RedisAddr: c.redis.Addr(), ReplicaID: r.id,
		Chain: chain, ChainID: chainID, BlockTime: blockTime, Window: window, Extra: "shutdown_timeout: 5s"}
	for i, n := range nodes {
		conf.Remotes = append(conf.Remotes, harness.Remote{Name: fmt.Sprintf("n%d", i), URL: n.URL(), WSURL: n.WSURL(), Timeout: time.Second})
	}
	if c.tweak != nil {
		c.tweak(&conf)
	}
	return conf
}

func (r *replica) start(t *testing.T) {
	t.Helper()
	logFile, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	if r.proc, err = harness.Start("venn "+r.id, logFile, logFile, vennBinary(t), "serve", "--config", r.cfgPath); err != nil {
		t.Fatal(err)
	}
}

// killAtEnd kills r when the test ends, logging the tail of its log if
// the test failed.
func (r *replica) killAtEnd(t *testing.T) {
	t.Cleanup(func() {
		r.kill()
		if t.Failed() {
			b, _ := os.ReadFile(r.logPath)
			t.Logf("replica %s log tail:\n%s", r.id, tail(string(b), 4000))
		}
	})
}

func (r *replica) signal(sig syscall.Signal) { r.proc.Signal(sig) }

// kill is kill -9, paused or not: no cleanup, no lease release.
func (r *replica) kill() {
	r.proc.Kill()
	r.proc = nil
}

func (c *cluster) replica(id string) *replica {
	for _, r := range c.replicas {
		if r.id == id {
			return r
		}
	}
	return nil
}

// mine advances both nodes every blockTime until the returned stop is
// called or the test ends.
func (c *cluster) mine(t *testing.T) (stop func()) {
	return fakenode.MineEvery(t, blockTime, c.nodes...)
}

// reorg replaces the top depth blocks of both nodes with the same new
// branch.
func (c *cluster) reorg(depth uint64) {
	head := c.nodes[0].Head()
	salt := uint64(time.Now().UnixNano())
	for _, n := range c.nodes {
		n.SetFork(head-depth+1, salt)
	}
}

// waitLeader waits for a leader other than not (any when "").
func (c *cluster) waitLeader(t *testing.T, not string) (string, uint64, time.Duration) {
	t.Helper()
	start := time.Now()
	var id string
	var epoch uint64
	if !testkit.Poll(waitLimit, func() bool {
		id, epoch = c.leader()
		return id != "" && id != not
	}) {
		t.Fatalf("no leader (other than %q) within %v", not, waitLimit)
	}
	return id, epoch, time.Since(start)
}

// waitConverged waits until every live replica serves the node's head (as
// of the call: the nodes may still be mining) from its window, not by
// forwarding to the nodes.
func (c *cluster) waitConverged(t *testing.T, live []*replica) {
	t.Helper()
	want := c.nodes[0].Head()
	for _, r := range live {
		var got, window float64
		if !testkit.Poll(waitLimit, func() bool {
			got = float64(blockNumber(r))
			window, _ = metric(r, "venn_head_number", `chain="dev"`)
			return got >= float64(want) && window >= float64(want)
		}) {
			t.Fatalf("replica %s serves head %v, its window is at %v; the node is at %d", r.id, got, window, want)
		}
	}
}

// checkServed asserts that every live replica serves the node's canonical
// blocks for the top of the window, by number and by hash.
func (c *cluster) checkServed(t *testing.T, live []*replica) {
	t.Helper()
	node := c.nodes[0]
	head := node.Head()
	for _, r := range live {
		for n := head - 10; n <= head; n++ {
			var b struct {
				Hash string `json:"hash"`
			}
			if err := rpc(r, "eth_getBlockByNumber", &b, hexq(n), false); err != nil {
				t.Fatalf("replica %s: block %d: %v", r.id, n, err)
			}
			if b.Hash != node.BlockHash(n) {
				t.Fatalf("replica %s serves block %d as %s, canonical is %s", r.id, n, b.Hash, node.BlockHash(n))
			}
		}
	}
}

// feedMark is a point in the head feed: the canonical window in Redis and
// the sequence number it is at, read together.
type feedMark struct {
	seq   uint64
	canon []ref
}

type ref struct {
	Number uint64 `json:"number"`
	Hash   string `json:"hash"`
}

// mark reads the feed's current point atomically.
func (c *cluster) mark(t *testing.T) feedMark {
	t.Helper()
	ctx := context.Background()
	var canon *redis.ZSliceCmd
	var state *redis.StringCmd
	if _, err := c.redis.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		canon = p.ZRangeWithScores(ctx, "venn:{"+chain+"}:canon", 0, -1)
		state = p.HGet(ctx, "venn:{"+chain+"}:state", "seq")
		return nil
	}); err != nil {
		t.Fatalf("mark the feed: %v", err)
	}
	m := feedMark{}
	m.seq, _ = strconv.ParseUint(state.Val(), 10, 64)
	for _, z := range canon.Val() {
		m.canon = append(m.canon, ref{Number: uint64(z.Score), Hash: z.Member.(string)})
	}
	return m
}

// checkFeed replays the head feed in Redis from a mark and asserts that it
// has no gap and no duplicate: sequence numbers are consecutive, each
// event's first new block sits right on top of what is left after its
// drops, no block is published twice without having been dropped, no event
// carries an epoch older than one before it (a deposed leader's write), and
// the result is the node's chain.
func (c *cluster) checkFeed(t *testing.T, from feedMark) {
	t.Helper()
	entries, err := c.redis.Client.XRange(context.Background(), "venn:{"+chain+"}:events",
		strconv.FormatUint(from.seq+1, 10)+"-0", "+").Result()
	if err != nil || len(entries) == 0 {
		t.Fatalf("read the head feed: %d entries, %v", len(entries), err)
	}
	var (
		model    = append([]ref(nil), from.canon...)
		seen     = map[string]bool{}
		lastSeq  = from.seq
		maxEpoch uint64
	)
	for _, m := range model {
		seen[m.Hash] = true
	}
	for i, e := range entries {
		seq, _ := strconv.ParseUint(strings.TrimSuffix(e.ID, "-0"), 10, 64)
		if seq != lastSeq+1 {
			t.Fatalf("feed: seq %d after %d", seq, lastSeq)
		}
		lastSeq = seq
		var ev struct {
			Epoch   uint64 `json:"epoch"`
			Dropped []ref  `json:"dropped"`
			Added   []ref  `json:"added"`
		}
		if err := json.Unmarshal([]byte(e.Values["e"].(string)), &ev); err != nil {
			t.Fatalf("feed entry %s: %v", e.ID, err)
		}
		if ev.Epoch < maxEpoch {
			t.Fatalf("feed entry %s has epoch %d after epoch %d: a deposed leader's write landed", e.ID, ev.Epoch, maxEpoch)
		}
		maxEpoch = ev.Epoch
		for _, d := range ev.Dropped {
			delete(seen, d.Hash)
			for j, m := range model {
				if m.Hash == d.Hash {
					model = append(model[:j:j], model[j+1:]...)
					break
				}
			}
		}
		if len(ev.Added) == 0 {
			continue
		}
		first := ev.Added[0]
		for len(model) > 0 && model[len(model)-1].Number >= first.Number {
			delete(seen, model[len(model)-1].Hash)
			model = model[:len(model)-1]
		}
		if len(model) > 0 && model[len(model)-1].Number+1 != first.Number {
			var dump strings.Builder
			for _, e := range entries[max(0, i-3):min(len(entries), i+3)] {
				fmt.Fprintf(&dump, "%s %.300s\n", e.ID, e.Values["e"])
			}
			t.Fatalf("feed entry %s: block %d follows %d: blocks missing; feed:\n%s", e.ID, first.Number, model[len(model)-1].Number, dump.String())
		}
		for _, a := range ev.Added {
			if seen[a.Hash] {
				t.Fatalf("feed entry %s: block %d %s published twice", e.ID, a.Number, a.Hash)
			}
			seen[a.Hash] = true
			model = append(model, a)
		}
	}
	node := c.nodes[0]
	for _, m := range model {
		if m.Hash != node.BlockHash(m.Number) {
			t.Fatalf("feed ends with block %d as %s, canonical is %s", m.Number, m.Hash, node.BlockHash(m.Number))
		}
	}
}

// heartbeat is the replicas' admin.heartbeat where a test reads
// /admin/replicas: a replica is gone from it three heartbeats after its
// last.
const heartbeat = 200 * time.Millisecond

// withAdmin serves each replica's admin API on its metrics listener, with
// heartbeats every heartbeat.
func withAdmin(c *harness.Config) {
	c.Extra += "\nadmin: {on_metrics_listen: true, heartbeat: " + heartbeat.String() + "}"
}

// replicasOf reads r's /admin/replicas: each replica listed, with the
// chains it is shown leading.
func replicasOf(r *replica) (map[string][]string, error) {
	resp, err := client.Get("http://" + r.metrics + "/admin/replicas")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Replicas []struct {
			Replica string   `json:"replica"`
			Leads   []string `json:"leads"`
		} `json:"replicas"`
		Error string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || body.Error != "" {
		return nil, fmt.Errorf("/admin/replicas: %s %s", resp.Status, body.Error)
	}
	out := map[string][]string{}
	for _, x := range body.Replicas {
		out[x.Replica] = x.Leads
	}
	return out, nil
}

// leadersIn lists the replicas shown leading the chain.
func leadersIn(rs map[string][]string) []string {
	var out []string
	for id, leads := range rs {
		if slices.Contains(leads, chain) {
			out = append(out, id)
		}
	}
	return out
}

func TestLeaderKilled(t *testing.T) {
	c := startClusterWith(t, 3, withAdmin)
	stop := c.mine(t)
	defer stop()
	leader, epoch, _ := c.waitLeader(t, "")
	c.waitConverged(t, c.replicas)
	mark := c.mark(t)
	survivor := c.without(leader)[0]
	var shown map[string][]string
	if !testkit.Poll(waitLimit, func() bool {
		shown, _ = replicasOf(survivor)
		return len(shown) == 3 && slices.Equal(leadersIn(shown), []string{leader})
	}) {
		t.Fatalf("replica %s lists %v; want all three, %s alone leading", survivor.id, shown, leader)
	}

	c.replica(leader).kill() // SIGKILL: no lease release
	killedAt := time.Now()
	// /admin/replicas: the killed replica gone within its presence TTL
	// (three heartbeats) of its last heartbeat, which was at most a
	// heartbeat before the kill; the rest is room for a loaded machine.
	// Leadership is as the lease says: never two leaders.
	if !testkit.Poll(waitLimit, func() bool {
		var err error
		if shown, err = replicasOf(survivor); err != nil {
			return false
		}
		if ls := leadersIn(shown); len(ls) > 1 {
			t.Fatalf("replica %s shows %v all leading %s", survivor.id, ls, chain)
		}
		_, listed := shown[leader]
		return !listed
	}) {
		t.Fatalf("replica %s still lists the killed %s after %v: %v", survivor.id, leader, time.Since(killedAt), shown)
	}
	gone := time.Since(killedAt)
	t.Logf("killed %s gone from /admin/replicas after %v", leader, gone)
	if bound := 4*heartbeat + time.Second; gone > bound {
		t.Errorf("the killed replica left /admin/replicas after %v, want within %v", gone, bound)
	}

	next, nextEpoch, _ := c.waitLeader(t, leader)
	took := time.Since(killedAt)
	t.Logf("leader %s killed; %s leads (epoch %d→%d) after %v", leader, next, epoch, nextEpoch, took)
	// The lease outlives its last renewal by up to a TTL, and followers
	// try every quarter TTL; the rest is room for a loaded machine.
	if bound := 2 * leaseTTL; took > bound {
		t.Errorf("new leader after %v, want within two TTLs (%v)", took, bound)
	}
	if nextEpoch <= epoch {
		t.Errorf("epoch went from %d to %d", epoch, nextEpoch)
	}
	if !testkit.Poll(waitLimit, func() bool {
		shown, _ = replicasOf(survivor)
		return len(shown) == 2 && slices.Equal(leadersIn(shown), []string{next})
	}) {
		t.Errorf("after the kill, replica %s lists %v; want the two others, %s alone leading", survivor.id, shown, next)
	}
	live := c.without(leader)
	waitBlocks(c.nodes[0], 10)
	stop()
	c.waitConverged(t, live)
	c.checkServed(t, live)
	c.checkFeed(t, mark)
}

func TestLeaderPausedPastItsLease(t *testing.T) {
	c := startCluster(t, 3)
	stop := c.mine(t)
	defer stop()
	leader, epoch, _ := c.waitLeader(t, "")
	c.waitConverged(t, c.replicas)
	mark := c.mark(t)

	paused := c.replica(leader)
	paused.signal(syscall.SIGSTOP)
	next, nextEpoch, took := c.waitLeader(t, leader)
	t.Logf("leader %s paused; %s leads (epoch %d→%d) after %v", leader, next, epoch, nextEpoch, took)
	waitBlocks(c.nodes[0], 10)
	paused.signal(syscall.SIGCONT)

	// The old leader wakes up mid-term: whatever it still writes is fenced,
	// and it steps down. It keeps serving, as a follower.
	waitBlocks(c.nodes[0], 10)
	stop()
	c.waitConverged(t, c.replicas)
	c.checkServed(t, c.replicas)
	c.checkFeed(t, mark)
	leaders := 0
	for _, r := range c.replicas {
		if v, _ := metric(r, "venn_leader", `chain="dev"`); v == 1 {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("%d replicas report leading the chain, want 1", leaders)
	}
	if id, _ := c.leader(); id == leader {
		t.Fatalf("the paused leader %s holds the lease again while %s's term is live", leader, next)
	}
}

func TestRedisRestarted(t *testing.T) {
	c := startCluster(t, 3)
	stop := c.mine(t)
	defer stop()
	c.waitLeader(t, "")
	c.waitConverged(t, c.replicas)

	c.redis.Kill() // it had the only copy of the feed: there is no mark to check from
	waitBlocks(c.nodes[0], 5)
	// Without the feed the windows go stale: the replicas forward instead,
	// and keep up with the chain.
	head := c.nodes[0].Head()
	for _, r := range c.replicas {
		var got uint64
		if !testkit.Poll(waitLimit, func() bool { got = blockNumber(r); return got >= head }) {
			t.Fatalf("Redis down: replica %s serves head %d, the chain is at %d", r.id, got, head)
		}
	}
	c.restartRedis(t)
	leader, _, took := c.waitLeader(t, "")
	t.Logf("Redis restarted; %s leads after %v", leader, took)
	waitBlocks(c.nodes[0], 10)
	stop()
	c.waitConverged(t, c.replicas)
	c.checkServed(t, c.replicas)
	c.checkFeed(t, feedMark{})
}

func TestReorgsNeverServeOrphans(t *testing.T) {
	c := startCluster(t, 3)
	c.waitLeader(t, "")
	c.nodes[0].Mine(1)
	c.nodes[1].Mine(1)
	c.waitConverged(t, c.replicas)
	mark := c.mark(t)

	for round, depth := range []uint64{1, 3, 7} {
		node := c.nodes[0]
		head := node.Head()
		var orphans, orphanTxs []string
		for n := head - depth + 1; n <= head; n++ {
			orphans = append(orphans, node.BlockHash(n))
			orphanTxs = append(orphanTxs, node.TxHash(n, 0))
		}
		c.reorg(depth)
		for _, n := range c.nodes {
			n.Mine(1)
		}
		c.waitConverged(t, c.replicas)
		c.checkServed(t, c.replicas)
		for _, r := range c.replicas {
			for i, h := range orphans {
				var b json.RawMessage
				if err := rpc(r, "eth_getBlockByHash", &b, h, false); err != nil || string(b) != "null" {
					t.Fatalf("round %d: replica %s serves orphan block %s: %.100s %v", round, r.id, h, b, err)
				}
				var rc json.RawMessage
				if err := rpc(r, "eth_getTransactionReceipt", &rc, orphanTxs[i]); err != nil || string(rc) != "null" {
					t.Fatalf("round %d: replica %s serves orphan receipt %s: %.100s %v", round, r.id, orphanTxs[i], rc, err)
				}
				var logs []json.RawMessage
				if err := rpc(r, "eth_getLogs", &logs, map[string]string{"blockHash": h}); err == nil && len(logs) > 0 {
					t.Fatalf("round %d: replica %s serves %d logs of orphan %s", round, r.id, len(logs), h)
				}
			}
		}
	}
	c.checkFeed(t, mark)
	var reorgs float64
	for _, r := range c.replicas {
		v, _ := metric(r, "venn_reorgs_total", `chain="dev"`)
		reorgs += v
	}
	if reorgs < 3 {
		t.Fatalf("venn_reorgs_total across replicas = %v, want 3", reorgs)
	}
}

func (c *cluster) without(id string) []*replica {
	var out []*replica
	for _, r := range c.replicas {
		if r.id != id {
			out = append(out, r)
		}
	}
	return out
}

// waitBlocks waits until node has mined k more blocks.
func waitBlocks(node *fakenode.Node, k uint64) {
	target := node.Head() + k
	testkit.Poll(waitLimit, func() bool { return node.Head() >= target })
}

var client = &http.Client{Timeout: 5 * time.Second}

func rpc(r *replica, method string, out any, params ...any) error {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	resp, err := client.Post("http://"+r.rpc+"/"+chain, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		return err
	}
	if msg.Error != nil {
		return fmt.Errorf("%s: %s", method, msg.Error)
	}
	return json.Unmarshal(msg.Result, out)
}

func blockNumber(r *replica) uint64 {
	var s string
	if rpc(r, "eth_blockNumber", &s) != nil {
		return 0
	}
	n, _ := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
	return n
}

func metric(r *replica, name, label string) (float64, bool) {
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

func hexq(n uint64) string { return "0x" + strconv.FormatUint(n, 16) }

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func TestRemoteDownOrLagging(t *testing.T) {
	c := startCluster(t, 3)
	stop := c.mine(t)
	defer stop()
	c.waitLeader(t, "")
	c.waitConverged(t, c.replicas)
	mark := c.mark(t)

	// One remote down: the leader follows through the other.
	c.nodes[0].SetDown(true)
	waitBlocks(c.nodes[1], 10)
	c.waitConverged(t, c.replicas)

	// Back, but lagging far behind: its stale view neither holds the
	// feed back nor reaches it.
	c.nodes[0].SetLag(20)
	c.nodes[0].SetDown(false)
	waitBlocks(c.nodes[1], 10)
	stop()
	c.waitConverged(t, c.replicas)
	c.checkServed(t, c.replicas)
	c.checkFeed(t, mark)
}
