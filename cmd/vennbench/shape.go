package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/venn-gateway/venn/internal/fakenode"
)

// `vennbench shape` times heads of real size, released on a chain's own
// schedule, from the node's release of each block to an ethclient
// SubscribeNewHead subscriber on each of two replicas (a leader and a
// follower on one Redis), with the remote over HTTP (heads polled) and
// over WebSocket (newHeads). With -baseline, another venn binary (today's
// code, say) runs the same shapes and remotes in the same invocation,
// each run right before the new binary's, so the two are measured side
// by side on the same noisy machine.

const (
	defaultShapeDuration = 60 * time.Second
	minShapeBlocks       = 10
	defaultShapeSkip     = 5
	// shapeWarmup caps the warm-up of slow chains: -skip blocks, or this
	// much chain time when that is shorter (at least a block).
	shapeWarmup = 15 * time.Second
	// shapeWindow is the bench cluster's head window: real-sized blocks
	// take ~0.7 MB each in every replica and in Redis.
	shapeWindow = 64
	// shapeLate bounds how long after its release a block may take to
	// reach every subscriber before the run fails.
	shapeLate = 30 * time.Second
	// releasedPath is where the upstream child says when it released each
	// block.
	releasedPath = "/vennbench/released"
)

const shapeUsage = `vennbench shape — heads of real size on a chain's schedule, release to every subscriber

For each -shapes chain and each -remotes kind, starts a private
redis-server, the upstream releasing that chain's blocks on its schedule
(real go-ethereum blocks, receipts and logs), a venn leader and one
follower whose remote is the upstream over HTTP only (heads polled) or
with its ws_url (newHeads), and one ethclient SubscribeNewHead subscriber
on each replica. Each block is timed from its release on the upstream to
its header reaching every subscriber. With -baseline, that binary runs
each case first, then -venn.

Usage:
  vennbench shape [flags]

Flags:
`

type shapeConfig struct {
	Shapes   []fakenode.Shape
	Remotes  []string // "http", "ws"
	Duration time.Duration
	Skip     int
	Venn     string
	Baseline string
	Profile  string
}

func shapeNames() string {
	var names []string
	for _, s := range fakenode.Shapes {
		names = append(names, s.Name)
	}
	return strings.Join(names, ",")
}

func parseShapeFlags(args []string, stderr io.Writer) (shapeConfig, int) {
	fs := newFlags("shape", shapeUsage, stderr)
	var cfg shapeConfig
	shapes := fs.String("shapes", shapeNames(), "chain shapes to run")
	remotes := fs.String("remotes", "http,ws", "how venn reaches the remote: http (polled), ws (newHeads)")
	fs.DurationVar(&cfg.Duration, "duration", defaultShapeDuration, "measured chain time per case (at least 10 blocks)")
	fs.IntVar(&cfg.Skip, "skip", defaultShapeSkip, "blocks released after the cluster is up and not measured")
	fs.StringVar(&cfg.Venn, "venn", "", "venn binary (default: go build ./cmd/venn into a temp dir)")
	fs.StringVar(&cfg.Baseline, "baseline", "", "another venn binary run before -venn in every case (today's code)")
	fs.StringVar(&cfg.Profile, "profile", "", "write the leader's and the follower's CPU profiles over each measured run (at most its first 20 s) to PREFIX.SHAPE.REMOTE.BUILD.{leader,follower}.cpu")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return cfg, code
	}
	for name := range strings.SplitSeq(*shapes, ",") {
		s, ok := fakenode.ShapeByName(strings.TrimSpace(name))
		if !ok {
			fmt.Fprintf(stderr, "vennbench shape: no shape %q (%s)\n", name, shapeNames())
			return cfg, exitUsage
		}
		cfg.Shapes = append(cfg.Shapes, s)
	}
	for r := range strings.SplitSeq(*remotes, ",") {
		r = strings.TrimSpace(r)
		if r != "http" && r != "ws" {
			fmt.Fprintf(stderr, "vennbench shape: -remotes: %q is neither http nor ws\n", r)
			return cfg, exitUsage
		}
		cfg.Remotes = append(cfg.Remotes, r)
	}
	switch {
	case cfg.Duration <= 0 || cfg.Duration > maxDuration:
		fmt.Fprintf(stderr, "vennbench shape: -duration must be in (0, %v]\n", maxDuration)
		return cfg, exitUsage
	case cfg.Skip < 0 || cfg.Skip > 1000:
		fmt.Fprintln(stderr, "vennbench shape: -skip must be in [0, 1000]")
		return cfg, exitUsage
	}
	return cfg, -1
}

// shapeResult is one case's figures.
type shapeResult struct {
	shape  fakenode.Shape
	remote string
	build  string
	blocks int
	// every: release to the last subscriber, per block; leader and
	// follower: to each replica's subscriber.
	every, leader, follower []time.Duration
	missed                  int     // blocks some subscriber never got
	calls, heads            float64 // upstream calls per block: all, head tracking
	leaderCPU, followerCPU  time.Duration
}

func shapeBench(ctx context.Context, cfg shapeConfig, stdout, stderr io.Writer) error {
	builds := []struct{ name, bin string }{{"new", cfg.Venn}}
	if cfg.Baseline != "" {
		builds = append([]struct{ name, bin string }{{"baseline", cfg.Baseline}}, builds...)
	}
	if cfg.Venn == "" {
		// Built once, not once per case.
		dir, err := os.MkdirTemp("", "vennbench-shape-bin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		bin, err := buildVennIfNeeded(ctx, "", dir, stderr)
		if err != nil {
			return err
		}
		builds[len(builds)-1].bin = bin
	}
	env := machineInfo()
	loadBefore := loadAvg()
	var results []shapeResult
	for _, shape := range cfg.Shapes {
		for _, remote := range cfg.Remotes {
			for _, b := range builds {
				fmt.Fprintf(stderr, "shape %s, %s remote, %s venn ...\n", shape.Name, remote, b.name)
				r, err := shapeRun(ctx, cfg, shape, remote, b.name, b.bin, stderr)
				if err != nil {
					if len(results) > 0 {
						// What was measured is kept: a case that failed late
						// must not cost the others.
						writeShape(stdout, env+"; the run stopped early", cfg, results)
					}
					return fmt.Errorf("shape %s, %s remote, %s venn: %w", shape.Name, remote, b.name, err)
				}
				results = append(results, r)
				fmt.Fprintf(stderr, "  every subscriber p50 %s ms, p99 %s ms; %.1f upstream calls per block\n",
					ms(percentile(r.every, 50).Seconds()), ms(percentile(r.every, 99).Seconds()), r.calls)
			}
		}
	}
	writeShape(stdout, fmt.Sprintf("%s; load average %s before, %s after", env, loadBefore, loadAvg()), cfg, results)
	return nil
}

// shapeBlocks is how many blocks a case measures.
func shapeBlocks(cfg shapeConfig, s fakenode.Shape) int {
	return max(minShapeBlocks, int(cfg.Duration/s.BlockTime))
}

// shapeRun measures one case on a cluster of its own.
func shapeRun(ctx context.Context, cfg shapeConfig, shape fakenode.Shape, remote, build, bin string, stderr io.Writer) (shapeResult, error) {
	res := shapeResult{shape: shape, remote: remote, build: build}
	bc, err := startBenchCluster(ctx, clusterOpts{name: "shape", venn: bin, followers: []string{"f1"},
		upstreamArgs: []string{"-shape", shape.Name}, httpOnly: remote == "http", learnBlockTime: true,
		window: shapeWindow, extra: profileExtra(cfg.Profile)}, stderr)
	if err != nil {
		return res, err
	}
	defer bc.stop()
	replicas := bc.replicas()

	subs := make([]*headSub, len(replicas))
	for i, r := range replicas {
		if subs[i], err = subscribeHeads(ctx, r); err != nil {
			return res, err
		}
		defer subs[i].close()
	}
	// Warm-up: the subscriptions see skip blocks before the count starts.
	first, err := subs[0].next(ctx, shape.BlockTime+shapeLate)
	if err != nil {
		return res, err
	}
	// A slow chain's warm-up is shorter: a block or two is enough there.
	skip := min(cfg.Skip, max(1, int(shapeWarmup/shape.BlockTime)))
	start := first + uint64(skip)
	n := shapeBlocks(cfg, shape)
	end := start + uint64(n) - 1
	if err := waitHead(ctx, subs[0], start-1, time.Duration(skip+1)*shape.BlockTime+shapeLate); err != nil {
		return res, err
	}
	st0, err := upstreamStatsOf(ctx, bc)
	if err != nil {
		return res, err
	}
	cpu0, err := replicasCPU(replicas)
	if err != nil {
		return res, err
	}
	var stopProf func() error
	if cfg.Profile != "" {
		stopProf = profileReplicas(ctx, replicas, fmt.Sprintf("%s.%s.%s.%s", cfg.Profile, shape.Name, remote, build),
			time.Duration(n)*shape.BlockTime)
	}
	for _, s := range subs {
		if err := waitHead(ctx, s, end, time.Duration(n)*shape.BlockTime+shapeLate); err != nil {
			return res, fmt.Errorf("venn %s: %w", s.r.id, err)
		}
	}
	cpu1, err := replicasCPU(replicas)
	if err != nil {
		return res, err
	}
	st1, err := upstreamStatsOf(ctx, bc)
	if err != nil {
		return res, err
	}
	if stopProf != nil {
		if err := stopProf(); err != nil {
			fmt.Fprintf(stderr, "profile: %v\n", err)
		}
	}
	released, err := releasedOf(ctx, bc)
	if err != nil {
		return res, err
	}
	if err := checkLeader(ctx, bc.rs, replicas...); err != nil {
		return res, err
	}
	if err := bc.exited(); err != nil {
		return res, err
	}

	for num := start; num <= end; num++ {
		at, ok := released[num]
		if !ok {
			return res, fmt.Errorf("block %d: the upstream has no release time", num)
		}
		var worst time.Duration
		missed := false
		for i, s := range subs {
			got, ok := s.at(num)
			if !ok {
				missed = true
				continue
			}
			d := got.Sub(time.Unix(0, at))
			worst = max(worst, d)
			if i == 0 {
				res.leader = append(res.leader, d)
			} else {
				res.follower = append(res.follower, d)
			}
		}
		if missed {
			res.missed++
			continue
		}
		res.every = append(res.every, worst)
	}
	for _, ds := range [][]time.Duration{res.every, res.leader, res.follower} {
		slices.Sort(ds)
	}
	res.blocks = n
	// The window spans n block times: from start-1's release to end's.
	res.calls = float64(st1.Calls-st0.Calls) / float64(n)
	res.heads = float64(st1.Heads-st0.Heads) / float64(n)
	res.leaderCPU = (cpu1[0] - cpu0[0]) / time.Duration(n)
	res.followerCPU = (cpu1[1] - cpu0[1]) / time.Duration(n)
	return res, nil
}

func replicasCPU(rs []*replica) ([]time.Duration, error) {
	out := make([]time.Duration, len(rs))
	for i, r := range rs {
		d, err := cpuTime(r.proc.Pid())
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

// profileReplicas profiles each replica's CPU for d, in the background;
// the function returned waits for the files.
func profileReplicas(ctx context.Context, rs []*replica, prefix string, d time.Duration) func() error {
	// The metrics listener answers within 30 s: a longer profile is cut.
	secs := max(1, int(min(d, maxSubsProfile).Round(time.Second)/time.Second))
	errs := make(chan error, len(rs))
	for i, r := range rs {
		role := "leader"
		if i > 0 {
			role = "follower"
		}
		url := strings.TrimSuffix(r.metrics, "/metrics") + "/admin/debug/pprof/profile?seconds=" + strconv.Itoa(secs)
		go func() { errs <- fetchProfile(ctx, url, prefix+"."+role+".cpu") }()
	}
	return func() error {
		var all []error
		for range rs {
			all = append(all, <-errs)
		}
		return errors.Join(all...)
	}
}

func upstreamStatsOf(ctx context.Context, bc *benchCluster) (stats, error) {
	var st stats
	return st, getJSON(ctx, bc.l.statsClient, strings.TrimSuffix(bc.upURL, "/")+statsPath, &st)
}

// releasedOf reads when the upstream released each block it keeps.
func releasedOf(ctx context.Context, bc *benchCluster) (map[uint64]int64, error) {
	var rel releasedReply
	if err := getJSON(ctx, bc.l.statsClient, strings.TrimSuffix(bc.upURL, "/")+releasedPath, &rel); err != nil {
		return nil, err
	}
	out := make(map[uint64]int64, len(rel.Released))
	for k, v := range rel.Released {
		n, err := strconv.ParseUint(k, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a block number", releasedPath, k)
		}
		out[n] = v
	}
	return out, nil
}

// releasedReply is releasedPath's answer: block number (decimal) to Unix
// ns of its release.
type releasedReply struct {
	Head     uint64           `json:"head"`
	Released map[string]int64 `json:"released"`
}

func serveReleased(w http.ResponseWriter, sc *fakenode.ShapeChain) {
	head := sc.Head()
	rel := releasedReply{Head: head, Released: map[string]int64{}}
	for n := head; n > 0 && head-n < fakenode.ShapeReleases; n-- {
		at := sc.Released(n)
		if at.IsZero() {
			break
		}
		rel.Released[strconv.FormatUint(n, 10)] = at.UnixNano()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(rel)
}

func getJSON(ctx context.Context, c *http.Client, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxReplyBytes)).Decode(out); err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	return nil
}

// headSub is one ethclient newHeads subscriber on a replica: it stamps
// each header as it arrives.
type headSub struct {
	r      *replica
	client *ethclient.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	seen  map[uint64]time.Time // first arrival of each number
	top   uint64
	moved chan struct{} // closed and replaced at each header
	err   error
}

func subscribeHeads(ctx context.Context, r *replica) (*headSub, error) {
	ws := "ws" + strings.TrimPrefix(r.url, "http")
	client, err := ethclient.DialContext(ctx, ws)
	if err != nil {
		return nil, fmt.Errorf("venn %s: dial %s: %w", r.id, ws, err)
	}
	heads := make(chan *types.Header, 1024)
	sub, err := client.SubscribeNewHead(ctx, heads)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("venn %s: subscribe: %w", r.id, err)
	}
	sctx, cancel := context.WithCancel(ctx)
	s := &headSub{r: r, client: client, cancel: cancel, done: make(chan struct{}),
		seen: map[uint64]time.Time{}, moved: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer sub.Unsubscribe()
		for {
			select {
			case <-sctx.Done():
				return
			case err := <-sub.Err():
				s.fail(fmt.Errorf("venn %s: subscription: %v", r.id, err))
				return
			case h := <-heads:
				now := time.Now()
				s.mu.Lock()
				n := h.Number.Uint64()
				if _, ok := s.seen[n]; !ok {
					s.seen[n] = now
				}
				s.top = max(s.top, n)
				close(s.moved)
				s.moved = make(chan struct{})
				s.mu.Unlock()
			}
		}
	}()
	return s, nil
}

func (s *headSub) fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		s.err = err
	}
	close(s.moved)
	s.moved = make(chan struct{})
}

func (s *headSub) close() {
	s.cancel()
	<-s.done
	s.client.Close()
}

func (s *headSub) at(n uint64) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.seen[n]
	return t, ok
}

// next waits for the next header and returns its number.
func (s *headSub) next(ctx context.Context, timeout time.Duration) (uint64, error) {
	s.mu.Lock()
	top := s.top
	s.mu.Unlock()
	if err := waitHead(ctx, s, top+1, timeout); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.top, nil
}

// waitHead waits until s has seen a header numbered n or above.
func waitHead(ctx context.Context, s *headSub, n uint64, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		s.mu.Lock()
		top, err, moved := s.top, s.err, s.moved
		s.mu.Unlock()
		switch {
		case err != nil:
			return err
		case top >= n:
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return fmt.Errorf("venn %s: no head %d after %v (last %d)", s.r.id, n, timeout, top)
		case <-moved:
		}
	}
}

// writeShape prints the table of every case.
func writeShape(w io.Writer, env string, cfg shapeConfig, rs []shapeResult) {
	fmt.Fprintf(w, "Machine: %s\n\n", env)
	fmt.Fprintf(w, "Each case: a leader and a follower on one Redis, an ethclient SubscribeNewHead subscriber on each; %v of blocks measured (at least %d) after %d unmeasured (at most %v of them). Latency is from the upstream's release of a block to its header at the subscriber; \"every\" is the later of the two subscribers.\n\n",
		cfg.Duration, minShapeBlocks, cfg.Skip, shapeWarmup)
	fmt.Fprintln(w, "| shape | remote | venn | blocks | every p50 ms | every p99 ms | every max ms | leader sub p50 ms | follower sub p50 ms | upstream calls / block | head polls / block | leader CPU ms / block | follower CPU ms / block |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		name := fmt.Sprintf("%s (%v, %d tx)", r.shape.Name, r.shape.BlockTime, r.shape.Txs)
		blocks := strconv.Itoa(r.blocks)
		if r.missed > 0 {
			blocks += fmt.Sprintf(" (%d missed)", r.missed)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.1f | %.1f | %.1f | %.1f |\n",
			name, r.remote, r.build, blocks,
			ms(percentile(r.every, 50).Seconds()), ms(percentile(r.every, 99).Seconds()), ms(slices.Max(append(r.every, 0)).Seconds()),
			ms(percentile(r.leader, 50).Seconds()), ms(percentile(r.follower, 50).Seconds()),
			r.calls, r.heads, float64(r.leaderCPU)/float64(time.Millisecond), float64(r.followerCPU)/float64(time.Millisecond))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Goals: over ws, p50 ≤ 1/10 and p99 ≤ 1/4 of the block time; over http, p50 ≤ 1/5 and p99 ≤ one block time; at most 4 head polls per block over http.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| shape | remote | venn | p50 / block time | p99 / block time | goal met |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---|")
	for _, r := range rs {
		bt := float64(r.shape.BlockTime)
		p50, p99 := float64(percentile(r.every, 50))/bt, float64(percentile(r.every, 99))/bt
		ok := p50 <= 0.1 && p99 <= 0.25
		if r.remote == "http" {
			ok = p50 <= 0.2 && p99 <= 1 && r.heads <= 4
		}
		verdict := "no"
		if ok && r.missed == 0 {
			verdict = "yes"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %.3f | %.3f | %s |\n", r.shape.Name, r.remote, r.build, p50, p99, verdict)
	}
}
