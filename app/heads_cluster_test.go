package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/fx"

	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/internal/testkit"
)

// Head tracking in a cluster of in-process replicas on the machine's
// Redis: the leader tracks the remotes' heads, the others take them from
// its feed (stalker/heads.go).

// replicaApp is one in-process replica of a cluster.
type replicaApp struct {
	app      *fx.App
	rpc      string // http://host:port/CHAIN
	metrics  string // http://host:port
	stopOnce sync.Once
}

// startReplica starts replica id of chain in front of nodes, with the
// chain's block_time set to bt, and stops it at cleanup.
func startReplica(tb testing.TB, id, chain string, bt time.Duration, nodes ...*fakenode.Node) *replicaApp {
	tb.Helper()
	y := "listen: 127.0.0.1:0\nmetrics_listen: 127.0.0.1:0\nlog: {level: warn}\nshutdown_timeout: 5s\n" +
		"redis: {url: " + testRedisURL + ", replica_id: " + id + ", lease_ttl: 1s}\n" +
		"chains:\n  - name: " + chain + "\n    chain_id: 1337\n    block_time: " + bt.String() + "\n    remotes:\n"
	for i, n := range nodes {
		y += fmt.Sprintf("      - {name: n%d, url: %s}\n", i, n.URL())
	}
	cfg, err := Parse([]byte(y))
	if err != nil {
		tb.Fatalf("Parse: %v", err)
	}
	var s *servers
	r := &replicaApp{app: fx.New(fx.Supply(cfg), Module, LogOutput(io.Discard), fx.Populate(&s), fx.NopLogger)}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := r.app.Start(ctx); err != nil {
		tb.Fatalf("start replica %s: %v", id, err)
	}
	r.rpc = "http://" + s.rpc.bound.String() + "/" + chain
	r.metrics = "http://" + s.metrics.bound.String()
	tb.Cleanup(r.stop)
	return r
}

// stop stops the replica (a clean shutdown: its leases are released).
func (r *replicaApp) stop() {
	r.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = r.app.Stop(ctx)
	})
}

var replicaClient = &http.Client{Timeout: 5 * time.Second}

// readiness is the replica's one chain's part of /readyz; zero when it
// does not answer.
func (r *replicaApp) readiness() chainReadiness {
	resp, err := replicaClient.Get(r.metrics + "/readyz")
	if err != nil {
		return chainReadiness{}
	}
	defer resp.Body.Close()
	var body readiness
	if json.NewDecoder(resp.Body).Decode(&body) != nil || len(body.Chains) != 1 {
		return chainReadiness{}
	}
	return body.Chains[0]
}

// metric reads one series from the replica's /metrics (0 when absent).
func (r *replicaApp) metric(series string) float64 {
	resp, err := replicaClient.Get(r.metrics + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// clusterChain is a chain name of its own on the shared Redis, its keys
// deleted at cleanup.
func clusterChain(tb testing.TB, prefix string) (chain, token string) {
	_, token = testkit.Redis(tb, func(token string) string { return "venn:{*" + token + "*}*" })
	return prefix + "-" + token, token
}

// A follower takes its remotes' heads from the leader's feed: while it is
// fed it sends the remote nothing, yet its view of the chain's head keeps
// up with the node. When the leader leaves, it leads and tracks the heads
// itself.
func TestFollowerTakesHeadsFromTheLeader(t *testing.T) {
	chain, token := clusterChain(t, "heads")
	node := fakenode.Start(t, fakenode.Options{ChainID: 1337, BlockTime: headsBlockTime})
	fakenode.MineEvery(t, headsBlockTime, node)
	a := startReplica(t, "a-"+token, chain, headsBlockTime, node)
	testkit.WaitFor(t, 10*time.Second, "a leads", func() bool { return a.readiness().HeadTracking == "leader" })
	b := startReplica(t, "b-"+token, chain, headsBlockTime, node)
	testkit.WaitFor(t, 10*time.Second, "b takes the heads from a's feed", func() bool { return b.readiness().HeadTracking == "feed" })

	calls := `venn_remote_calls_total{chain="` + chain + `",outcome="ok",remote="n0"}`
	before := b.metric(calls)
	polls := node.CallsAt("eth_getBlockByNumber", "latest")
	testkit.WaitFor(t, 20*time.Second, "ten more head polls by the leader", func() bool {
		return node.CallsAt("eth_getBlockByNumber", "latest") >= polls+10
	})
	if n := b.metric(calls) - before; n != 0 {
		t.Errorf("the fed follower sent the node %v calls of its own", n)
	}
	head := node.Head()
	testkit.WaitFor(t, 10*time.Second, "b's head at the node's", func() bool { return b.readiness().Head >= head })
	if v := b.metric(`venn_head_tracking{chain="` + chain + `",mode="feed"}`); v != 1 {
		t.Errorf("venn_head_tracking{mode=feed} = %v on the follower, want 1", v)
	}

	a.stop()
	testkit.WaitFor(t, 10*time.Second, "b leads", func() bool { return b.readiness().HeadTracking == "leader" })
	before = b.metric(calls)
	testkit.WaitFor(t, 10*time.Second, "b polling the node itself", func() bool { return b.metric(calls) >= before+5 })
	head = node.Head()
	testkit.WaitFor(t, 10*time.Second, "b's head at the node's", func() bool { return b.readiness().Head >= head })
}

// idleBlockTime is the block time of the idle-cost bench: short, so a run
// sees many blocks quickly; the cost per block does not depend on it.
const idleBlockTime = 200 * time.Millisecond

// BenchmarkIdleUpstreamCalls measures what an idle cluster costs its
// providers: the upstream calls per minute of 1 and of 5 in-process
// replicas on one Redis in front of 3 fake nodes, with no client traffic
// (head polls, the leader's block and receipt fetches, chain checks), in
// one run. Run it with -benchtime=1x:
//
//	go test -run '^$' -bench IdleUpstreamCalls -benchtime=1x ./app
func BenchmarkIdleUpstreamCalls(b *testing.B) {
	const blocks = 40 // measured, after the cluster settled
	for range b.N {
		one := idleCalls(b, 1, blocks)
		five := idleCalls(b, 5, blocks)
		b.ReportMetric(one, "calls/min-1-replica")
		b.ReportMetric(five, "calls/min-5-replicas")
		b.ReportMetric(one*idleBlockTime.Minutes(), "calls/block-1-replica")
		b.ReportMetric(five*idleBlockTime.Minutes(), "calls/block-5-replicas")
		b.ReportMetric(five/one, "ratio-5/1")
	}
}

// idleCalls runs n replicas in front of 3 mining nodes until they settle,
// then counts the calls the nodes receive over blocks blocks, per minute.
// It stops them all before it returns.
func idleCalls(b *testing.B, n int, blocks uint64) float64 {
	b.Helper()
	chain, token := clusterChain(b, "idle")
	var nodes []*fakenode.Node
	for range 3 {
		nodes = append(nodes, fakenode.Start(b, fakenode.Options{ChainID: 1337, BlockTime: idleBlockTime}))
	}
	stopMining := fakenode.MineEvery(b, idleBlockTime, nodes...)
	defer stopMining()
	lead := startReplica(b, fmt.Sprintf("r0-%s", token), chain, idleBlockTime, nodes...)
	testkit.WaitFor(b, 20*time.Second, "r0 leads", func() bool { return lead.metric(`venn_leader{chain="`+chain+`"}`) == 1 })
	rs := []*replicaApp{lead}
	defer func() {
		for _, r := range rs {
			r.stop()
		}
	}()
	for i := 1; i < n; i++ {
		rs = append(rs, startReplica(b, fmt.Sprintf("r%d-%s", i, token), chain, idleBlockTime, nodes...))
	}
	for i, r := range rs {
		testkit.WaitFor(b, 20*time.Second, fmt.Sprintf("r%d at the head", i), func() bool {
			return r.readiness().Head+1 >= nodes[0].Head()
		})
	}
	node := nodes[0]
	warm := node.Head() + 5
	testkit.WaitFor(b, 20*time.Second, "5 blocks of warm-up", func() bool { return node.Head() >= warm })
	for _, nd := range nodes {
		nd.ResetCalls()
	}
	from, start := node.Head(), time.Now()
	testkit.WaitFor(b, time.Minute, "the measured blocks", func() bool { return node.Head() >= from+blocks })
	took := time.Since(start)
	var total int64
	for _, nd := range nodes {
		total += nd.TotalCalls()
	}
	return float64(total) / took.Minutes()
}
