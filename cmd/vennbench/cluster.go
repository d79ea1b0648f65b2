package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/venn-gateway/venn/internal/cluster"
	"github.com/venn-gateway/venn/internal/freeport"
)

// The cluster benches (head, propagation) run venn as a real cluster: a
// private redis-server, one leader and followers, all child processes on
// 127.0.0.1, in front of the upstream child.

const (
	// clusterChain is the chain's name: its URL path and its Redis keys.
	clusterChain = "bench"
	// headWindow is the chain's head: {window: ...}.
	headWindow = 128
	// leaderID is the replica started first, which takes the lease.
	leaderID = "leader"
	// leaseTimeout bounds the wait for the leader to take the lease and
	// for a replica to serve from its window.
	leaseTimeout = 30 * time.Second
	clusterPoll  = 20 * time.Millisecond
)

// replicaConfig is one cluster replica's configuration: the chain follows
// the upstream's newHeads over WebSocket (detection does not wait for a
// poll), metrics on their own port for the bench to scrape.
func replicaConfig(port, mport int, s vennSpec, id string) cluster.Config {
	c := cluster.Config{
		Listen: "127.0.0.1:" + strconv.Itoa(port), MetricsListen: "127.0.0.1:" + strconv.Itoa(mport),
		RedisAddr: s.redisAddr, ReplicaID: id, Chain: clusterChain, ChainID: benchChainID,
		BlockTime: time.Second, Window: headWindow,
		Remotes: []cluster.Remote{{Name: "up", URL: s.upURL, WSURL: "ws" + strings.TrimPrefix(s.upURL, "http"),
			MaxInFlight: proxyIdlePerHost}},
		Extra:      "limits: {max_connections: 30000, max_connections_per_ip: 30000}\n" + s.extra,
		ChainExtra: s.chainExtra,
	}
	if s.httpOnly {
		c.Remotes[0].WSURL = ""
	}
	if s.learnBlockTime {
		c.BlockTime = 0
	}
	if s.window > 0 {
		c.Window = s.window
	}
	return c
}

// vennSpec is what every replica of a bench cluster shares.
type vennSpec struct {
	bin       string // the venn binary
	dir       string // where the configs go
	redisAddr string
	upURL     string
	// chainExtra is more of the chain's YAML, one field a line (the cache
	// bench's cache: {...}); "" keeps venn's defaults.
	chainExtra string
	// extra is more top-level YAML ("admin: {...}"); "" adds none.
	extra string
	// httpOnly leaves the remote's ws_url out: heads are polled.
	httpOnly bool
	// learnBlockTime leaves block_time unset (0s): venn learns it from
	// the block timestamps, as a new user's does.
	learnBlockTime bool
	// window is the head window; 0 keeps headWindow.
	window int
}

// checkLeader fails unless the chain's lease is held by leaderID: a run
// whose load went to a replica that had become leader measured the wrong
// thing. The error carries the log tails of replicas, which say why.
func checkLeader(ctx context.Context, rs *cluster.Redis, replicas ...*replica) error {
	id, _, err := rs.Leader(ctx, clusterChain)
	if err != nil {
		return err
	}
	if id != leaderID {
		var logs strings.Builder
		for _, rep := range replicas {
			logs.WriteString(rep.proc.StderrNote())
		}
		return fmt.Errorf("the lease is held by %q, not %q: leadership moved during the run%s", id, leaderID, logs.String())
	}
	return nil
}

func cutLast(s string, sep byte) (string, string, bool) {
	i := strings.LastIndexByte(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}

// replica is one venn process of the cluster.
type replica struct {
	id      string
	proc    *child
	url     string // the chain's JSON-RPC endpoint
	metrics string // its /metrics
}

func (r *replica) stop() {
	if r != nil {
		r.proc.Stop()
	}
}

// startReplica writes id's config and starts it, retrying when a port
// picked for it was taken in between; it returns once the process
// answers eth_blockNumber (from the remotes or its window).
func startReplica(ctx context.Context, l *loader, s vennSpec, id string) (*replica, error) {
	var lastErr error
	for range vennStartAttempts {
		ports, err := freeport.Ports(2) // two calls could pick one port for both
		if err != nil {
			return nil, err
		}
		port, mport := ports[0], ports[1]
		path := filepath.Join(s.dir, id+".yaml")
		conf := replicaConfig(port, mport, s, id).YAML()
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			return nil, fmt.Errorf("write %s config: %w", id, err)
		}
		proc, _, err := startChild(ctx, "venn "+id, false, s.bin, "serve", "--config", path)
		if err != nil {
			return nil, err
		}
		r := &replica{id: id, proc: proc,
			url:     "http://127.0.0.1:" + strconv.Itoa(port) + "/" + clusterChain,
			metrics: "http://127.0.0.1:" + strconv.Itoa(mport) + "/metrics"}
		lastErr = l.waitServes(ctx, r.url, proc, vennReadyTimeout, blockNumberCall)
		if lastErr == nil {
			return r, nil
		}
		r.stop()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if done, _ := proc.Exited(); !done || !strings.Contains(proc.Stderr(), "address already in use") {
			break
		}
	}
	return nil, fmt.Errorf("start venn %s: %w", id, lastErr)
}

// waitWindow waits until r answers eth_blockNumber from its head window
// (not from the remotes): its venn_answers_total{source="head"} moves.
func waitWindow(ctx context.Context, l *loader, r *replica) error {
	err := waitFor(ctx, r.proc, leaseTimeout, func() error {
		if err := l.waitServes(ctx, r.url, r.proc, time.Second, blockNumberCall); err != nil {
			return err
		}
		m, err := scrape(ctx, l.statsClient, r.metrics)
		if err != nil {
			return err
		}
		if m.answers("head") == 0 {
			return errors.New("not answering from its window yet")
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("venn %s: %w", r.id, err)
	}
	return nil
}

// startCluster starts the leader, waits until it holds the lease and
// serves from its window, then starts the followers and waits the same of
// each. On error, whatever it started is stopped.
func startCluster(ctx context.Context, l *loader, s vennSpec, rs *cluster.Redis, followers []string) (leader *replica, fs []*replica, err error) {
	defer func() {
		if err != nil {
			leader.stop()
			for _, f := range fs {
				f.stop()
			}
			leader, fs = nil, nil
		}
	}()
	s.redisAddr = rs.Addr()
	if leader, err = startReplica(ctx, l, s, leaderID); err != nil {
		return nil, nil, err
	}
	if err = waitFor(ctx, leader.proc, leaseTimeout, func() error { return checkLeader(ctx, rs, leader) }); err != nil {
		return leader, nil, err
	}
	if err = waitWindow(ctx, l, leader); err != nil {
		return leader, nil, err
	}
	for _, id := range followers {
		f, err := startReplica(ctx, l, s, id)
		if err != nil {
			return leader, fs, err
		}
		fs = append(fs, f)
		if err = waitWindow(ctx, l, f); err != nil {
			return leader, fs, err
		}
	}
	return leader, fs, checkLeader(ctx, rs, append([]*replica{leader}, fs...)...)
}

// waitFor polls cond until it returns nil, c exits, or timeout passes.
func waitFor(ctx context.Context, c *child, timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if c != nil {
			if done, werr := c.Exited(); done {
				return fmt.Errorf("%s exited: %v%s", c.Name, werr, c.StderrNote())
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(clusterPoll):
		}
	}
}

// buildVennIfNeeded returns bin, or builds cmd/venn into dir when it is "".
func buildVennIfNeeded(ctx context.Context, bin, dir string, stderr io.Writer) (string, error) {
	if bin != "" {
		return bin, nil
	}
	bin = filepath.Join(dir, "venn")
	fmt.Fprintf(stderr, "building %s ...\n", cluster.VennPackage)
	return bin, cluster.BuildVenn(ctx, bin)
}

// metrics is one scrape of a replica's /metrics: series (name with its
// labels, as printed) to value.
type metrics map[string]float64

// scrape reads url's Prometheus text exposition.
func scrape(ctx context.Context, c *http.Client, url string) (metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scrape: %w", err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape: HTTP %d", resp.StatusCode)
	}
	m := metrics{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		series, val, ok := cutLast(line, ' ')
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(val, 64)
		if err != nil {
			continue
		}
		m[series] = f
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scrape: %w", err)
	}
	return m, nil
}

// answers is venn_answers_total of the bench chain from source.
func (m metrics) answers(source string) float64 {
	return m[`venn_answers_total{chain="`+clusterChain+`",source="`+source+`"}`]
}

// histogram is one Prometheus histogram of the bench chain.
type histogram struct {
	les    []float64 // upper bounds, ascending, +Inf last
	counts []float64 // cumulative
	sum    float64
	count  float64
}

// histogram reads name's histogram; empty when absent.
func (m metrics) histogram(name string) histogram {
	var h histogram
	prefix := name + `_bucket{chain="` + clusterChain + `",le="`
	type bucket struct{ le, n float64 }
	var bs []bucket
	for k, v := range m {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		le, err := strconv.ParseFloat(strings.TrimSuffix(k[len(prefix):], `"}`), 64)
		if err != nil {
			continue
		}
		bs = append(bs, bucket{le, v})
	}
	slices.SortFunc(bs, func(a, b bucket) int {
		switch {
		case a.le < b.le:
			return -1
		case a.le > b.le:
			return 1
		}
		return 0
	})
	for _, b := range bs {
		h.les = append(h.les, b.le)
		h.counts = append(h.counts, b.n)
	}
	h.sum = m[name+`_sum{chain="`+clusterChain+`"}`]
	h.count = m[name+`_count{chain="`+clusterChain+`"}`]
	return h
}

// since is h minus an earlier scrape of the same histogram: what was
// observed in between.
func (h histogram) since(before histogram) histogram {
	out := histogram{les: h.les, counts: slices.Clone(h.counts), sum: h.sum - before.sum, count: h.count - before.count}
	if slices.Equal(h.les, before.les) {
		for i := range out.counts {
			out.counts[i] -= before.counts[i]
		}
	}
	return out
}

// mean is the average observation; NaN when empty.
func (h histogram) mean() float64 {
	if h.count <= 0 {
		return math.NaN()
	}
	return h.sum / h.count
}

// quantile estimates the q-quantile (0..1) as Prometheus's
// histogram_quantile does: linear within the bucket it falls in. It is
// only as fine as the buckets.
func (h histogram) quantile(q float64) float64 {
	if h.count <= 0 || len(h.counts) == 0 {
		return math.NaN()
	}
	rank := q * h.count
	lower, below := 0.0, 0.0
	for i, c := range h.counts {
		if c >= rank {
			if math.IsInf(h.les[i], 1) {
				return lower // above the last finite bound: its bound
			}
			if c == below {
				return h.les[i]
			}
			return lower + (h.les[i]-lower)*(rank-below)/(c-below)
		}
		lower, below = h.les[i], c
	}
	return lower
}

// benchCluster is what the cluster benches run: a private redis-server, the
// upstream child (started with upstreamArgs) and venn replicas, a leader
// and followers, all in a temp dir removed by stop.
type benchCluster struct {
	l         *loader
	rs        *cluster.Redis
	up        *child
	upURL     string
	leader    *replica
	followers []*replica
	tmp       string
}

// clusterOpts say what startBenchCluster starts.
type clusterOpts struct {
	name         string   // of the bench: its temp dir
	venn         string   // venn binary; "" builds ./cmd/venn
	chainExtra   string   // see vennSpec
	extra        string   // see vennSpec
	followers    []string // replica ids after the leader
	upstreamArgs []string // the upstream child's flags after -listen
	// httpOnly, learnBlockTime and window: see vennSpec.
	httpOnly       bool
	learnBlockTime bool
	window         int
}

// startBenchCluster starts a benchCluster; on error, whatever it started is
// stopped.
func startBenchCluster(ctx context.Context, o clusterOpts, stderr io.Writer) (_ *benchCluster, err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("own executable: %w", err)
	}
	b := &benchCluster{}
	if b.tmp, err = os.MkdirTemp("", "vennbench-"+o.name+"-"); err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	defer func() {
		if err != nil {
			b.stop()
		}
	}()
	vennBin, err := buildVennIfNeeded(ctx, o.venn, b.tmp, stderr)
	if err != nil {
		return nil, err
	}
	if b.l, err = newLoader(); err != nil {
		return nil, err
	}
	if b.rs, err = cluster.StartRedis(ctx, b.tmp, 0); err != nil {
		return nil, err
	}
	args := append([]string{"upstream", "-listen", "127.0.0.1:0"}, o.upstreamArgs...)
	if b.up, b.upURL, err = startChild(ctx, "upstream", true, exe, args...); err != nil {
		return nil, err
	}
	if err = b.l.waitReady(ctx, b.upURL, b.up, childReadyTimeout); err != nil {
		return nil, err
	}
	spec := vennSpec{bin: vennBin, dir: b.tmp, upURL: b.upURL, chainExtra: o.chainExtra, extra: o.extra,
		httpOnly: o.httpOnly, learnBlockTime: o.learnBlockTime, window: o.window}
	b.leader, b.followers, err = startCluster(ctx, b.l, spec, b.rs, o.followers)
	return b, err
}

// replicas are the leader, then the followers.
func (b *benchCluster) replicas() []*replica { return append([]*replica{b.leader}, b.followers...) }

// exited reports the first process of the run that is gone.
func (b *benchCluster) exited() error {
	for _, c := range append([]*child{b.up, {Proc: b.rs.Proc}}, procsOf(b.replicas())...) {
		if done, werr := c.Exited(); done {
			return fmt.Errorf("%s exited during the run: %v%s", c.Name, werr, c.StderrNote())
		}
	}
	return nil
}

func (b *benchCluster) stop() {
	for _, f := range b.followers {
		f.stop()
	}
	b.leader.stop()
	if b.up != nil {
		b.up.Stop()
	}
	if b.rs != nil {
		b.rs.Close()
	}
	if b.l != nil {
		b.l.close()
	}
	os.RemoveAll(b.tmp)
}
