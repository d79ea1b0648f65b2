package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/venn-gateway/venn/internal/cluster"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jsonscan"
)

// `vennbench head` measures calls a venn follower answers from its head
// window against the plain proxy passing the same calls to the upstream.

// The head bench's targets, in the order every round measures them.
const (
	// targetFollower is a venn replica that does not lead the chain: it
	// answers from the window the leader feeds through Redis.
	targetFollower = "follower"
	followerID     = "follower"
)

// goalHeadThroughput is the goal: a follower serves head calls at
// least this many times the plain proxy's throughput at the top
// concurrency.
const goalHeadThroughput = 3.0

// Defaults of the head bench's flags.
const (
	defaultHeadCalls     = "blockNumber,block,logs,logs-filter"
	defaultHeadTargets   = "proxy,follower"
	defaultHeadBlockTime = time.Second
	defaultHeadClient    = clientRaw
)

// The head bench's load clients.
const (
	clientRaw = "raw" // rawPoster: hand-spoken HTTP/1.1, a connection per worker
	clientStd = "std" // net/http's Client, as the gateway bench uses
)

const headUsage = `vennbench head — head-served calls: a venn follower against the plain proxy

Starts a private redis-server, the upstream (mining a block every
-block-time), a plain ReverseProxy in front of it, and a venn leader and a
venn follower sharing the chain's head window through Redis; drives the
head calls against the follower and through the proxy, interleaved.

Usage:
  vennbench head [flags]

Flags:
`

// Request params of the head calls. The filter picks two of the three
// contracts and two of the three events the fake chain's logs use, so it
// selects a real subset of each block's logs.
var (
	logsParams       = `[{"fromBlock":"latest","toBlock":"latest"}]`
	logsFilterParams = `[{"fromBlock":"latest","toBlock":"latest","address":["` +
		fakenode.Contracts()[0] + `","` + fakenode.Contracts()[1] + `"],"topics":[["` +
		fakenode.Topic0s()[0] + `","` + fakenode.Topic0s()[1] + `"]]}]`
)

// blockNumberCall is eth_blockNumber: the cheapest head call, also used to
// tell that a replica is up.
var blockNumberCall = callKind{name: "blockNumber", request: fixedRequest("eth_blockNumber", `[]`), check: checkQuantity}

// headCalls are the calls -calls picks from, by name.
var headCalls = []callKind{
	blockNumberCall,
	{name: "block", request: fixedRequest("eth_getBlockByNumber", `["latest",false]`), check: checkBlock},
	{name: "logs", request: fixedRequest("eth_getLogs", logsParams), check: checkLogs(true)},
	{name: "logs-filter", request: fixedRequest("eth_getLogs", logsFilterParams), check: checkLogs(false)},
}

// headCallText says what each call sends, for the report.
var headCallText = map[string]string{
	"blockNumber": "eth_blockNumber",
	"block":       `eth_getBlockByNumber("latest", false)`,
	"logs":        `eth_getLogs({"fromBlock":"latest","toBlock":"latest"})`,
	"logs-filter": "eth_getLogs of the latest block with 2 addresses and 2 topic0 alternatives",
}

// fixedRequest appends a call of method with params that never change.
func fixedRequest(method, params string) func([]byte, uint64) []byte {
	return func(b []byte, n uint64) []byte {
		b = append(b, `{"jsonrpc":"2.0","id":`...)
		b = strconv.AppendUint(b, n, 10)
		b = append(b, `,"method":"`...)
		b = append(b, method...)
		b = append(b, `","params":`...)
		b = append(b, params...)
		return append(b, '}')
	}
}

// checkBlock accepts a block object with a number and a hash.
func checkBlock(result []byte) error {
	if len(result) == 0 || result[0] != '{' {
		return fmt.Errorf("result is not a block: %.200s", result)
	}
	var number, hash []byte
	members := jsonscan.Object{Data: result, I: 1}
	for {
		k, v, ok := members.Next()
		if !ok {
			break
		}
		switch string(k) {
		case "number":
			number = v
		case "hash":
			hash = v
		}
	}
	if !isQuantity(number) || len(hash) != 2+66 {
		return fmt.Errorf("result is not a block: %.200s", result)
	}
	return nil
}

// checkLogs accepts an array of logs; with nonEmpty, at least one (every
// block of the fake chain past genesis has logs).
func checkLogs(nonEmpty bool) func([]byte) error {
	return func(result []byte) error {
		if len(result) < 2 || result[0] != '[' {
			return fmt.Errorf("result is not a list of logs: %.200s", result)
		}
		it := jsonscan.Array{Data: result, I: 1}
		first, ok := it.Next()
		switch {
		case !ok && nonEmpty:
			return errors.New("no logs in the latest block")
		case ok && first[0] != '{':
			return fmt.Errorf("result is not a list of logs: %.200s", result)
		}
		return nil
	}
}

// headConfig is the parsed command line of a head run.
type headConfig struct {
	Duration  time.Duration
	Warmup    time.Duration
	Rounds    int
	Conc      []int
	Calls     []callKind
	Targets   []string // subset of direct, proxy, follower, in this order
	Venn      string
	BlockTime time.Duration
	Client    string // clientRaw or clientStd
}

func parseHeadFlags(args []string, stderr io.Writer) (headConfig, int) {
	fs := newFlags("head", headUsage, stderr)
	var cfg headConfig
	fs.DurationVar(&cfg.Duration, "duration", defaultDuration, "measured window per call, target and concurrency")
	fs.DurationVar(&cfg.Warmup, "warmup", defaultWarmup, "unmeasured load before each window")
	fs.IntVar(&cfg.Rounds, "rounds", defaultRounds, "rounds; each measures every call, target and concurrency")
	conc := fs.String("conc", defaultConc, "comma-separated concurrencies")
	calls := fs.String("calls", defaultHeadCalls, "comma-separated calls (blockNumber, block, logs, logs-filter)")
	targets := fs.String("targets", defaultHeadTargets, "comma-separated targets (direct, proxy, follower)")
	fs.StringVar(&cfg.Venn, "venn", "", "venn binary (default: go build ./cmd/venn into a temp dir)")
	fs.DurationVar(&cfg.BlockTime, "block-time", defaultHeadBlockTime, "the upstream mines a block this often")
	fs.StringVar(&cfg.Client, "client", defaultHeadClient, "load client: raw (hand-spoken HTTP/1.1, cheap) or std (net/http's Client)")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return cfg, code
	}
	var err error
	if cfg.Conc, err = parseConc(*conc); err != nil {
		fmt.Fprintf(stderr, "vennbench head: -conc: %v\n", err)
		return cfg, exitUsage
	}
	if cfg.Calls, err = parseHeadCalls(*calls); err != nil {
		fmt.Fprintf(stderr, "vennbench head: -calls: %v\n", err)
		return cfg, exitUsage
	}
	if cfg.Targets, err = parseNames(*targets, []string{targetDirect, targetProxy, targetFollower}); err != nil {
		fmt.Fprintf(stderr, "vennbench head: -targets: %v\n", err)
		return cfg, exitUsage
	}
	switch {
	case cfg.Duration <= 0 || cfg.Duration > maxDuration:
		fmt.Fprintf(stderr, "vennbench head: -duration must be in (0, %v]\n", maxDuration)
		return cfg, exitUsage
	case cfg.Warmup < 0 || cfg.Warmup > maxDuration:
		fmt.Fprintf(stderr, "vennbench head: -warmup must be in [0, %v]\n", maxDuration)
		return cfg, exitUsage
	case cfg.Rounds < 1 || cfg.Rounds > maxRounds:
		fmt.Fprintf(stderr, "vennbench head: -rounds must be in [1, %d]\n", maxRounds)
		return cfg, exitUsage
	case cfg.BlockTime < 10*time.Millisecond || cfg.BlockTime > time.Minute:
		fmt.Fprintln(stderr, "vennbench head: -block-time must be in [10ms, 1m]")
		return cfg, exitUsage
	case cfg.Client != clientRaw && cfg.Client != clientStd:
		fmt.Fprintf(stderr, "vennbench head: -client must be %s or %s\n", clientRaw, clientStd)
		return cfg, exitUsage
	}
	return cfg, -1
}

func parseHeadCalls(s string) ([]callKind, error) {
	var names []string
	for _, c := range headCalls {
		names = append(names, c.name)
	}
	picked, err := parseNames(s, names)
	if err != nil {
		return nil, err
	}
	var out []callKind
	for _, c := range headCalls {
		if slices.Contains(picked, c.name) {
			out = append(out, c)
		}
	}
	return out, nil
}

// parseNames keeps the canonical order of known, whatever the order given.
func parseNames(s string, known []string) ([]string, error) {
	want := map[string]bool{}
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(known, f) {
			return nil, fmt.Errorf("unknown name %q (known: %s)", f, strings.Join(known, ", "))
		}
		want[f] = true
	}
	var out []string
	for _, k := range known {
		if want[k] {
			out = append(out, k)
		}
	}
	return out, nil
}

// headTarget is one thing the head load is pointed at.
type headTarget struct {
	name string
	url  string
	proc *child   // nil for direct
	venn *replica // the follower, for its metrics
}

// headBench runs the head bench and prints the report on stdout.
func headBench(ctx context.Context, cfg headConfig, stdout, stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("own executable: %w", err)
	}
	tmp, err := os.MkdirTemp("", "vennbench-head-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	wantFollower := slices.Contains(cfg.Targets, targetFollower)
	vennBin := cfg.Venn
	if wantFollower {
		if vennBin, err = buildVennIfNeeded(ctx, vennBin, tmp, stderr); err != nil {
			return err
		}
	}

	l, err := newLoader()
	if err != nil {
		return err
	}
	defer l.close()

	up, upURL, err := startChild(ctx, "upstream", true, exe, "upstream", "-listen", "127.0.0.1:0",
		"-block-time", cfg.BlockTime.String())
	if err != nil {
		return err
	}
	defer up.Stop()
	if err := l.waitReady(ctx, upURL, up, childReadyTimeout); err != nil {
		return err
	}

	var (
		rs      *cluster.Redis
		leader  *replica
		targets []headTarget
	)
	for _, name := range cfg.Targets {
		switch name {
		case targetDirect:
			targets = append(targets, headTarget{name: name, url: upURL})
		case targetProxy:
			p, pURL, err := startProxy(ctx, l, exe, upURL)
			if err != nil {
				return err
			}
			defer p.Stop()
			targets = append(targets, headTarget{name: name, url: pURL, proc: p})
		case targetFollower:
			if rs, err = cluster.StartRedis(ctx, tmp, 0); err != nil {
				return err
			}
			defer rs.Close()
			var fs []*replica
			leader, fs, err = startCluster(ctx, l, vennSpec{bin: vennBin, dir: tmp, upURL: upURL}, rs, []string{followerID})
			if err != nil {
				return err
			}
			defer leader.stop()
			defer fs[0].stop()
			targets = append(targets, headTarget{name: name, url: fs[0].url, proc: fs[0].proc, venn: fs[0]})
		}
	}
	h := &headRun{cfg: cfg, l: l, up: up, leader: leader, redis: rs}

	env := machineInfo()
	loadBefore := loadAvg()
	var names []string
	for _, c := range cfg.Calls {
		names = append(names, c.name)
	}
	fmt.Fprintf(stderr, "%s; %d rounds × %v (+%v warm-up) × calls %v × conc %v × %v; a block every %v; %s client\n",
		env, cfg.Rounds, cfg.Duration, cfg.Warmup, names, cfg.Conc, cfg.Targets, cfg.BlockTime, cfg.Client)

	var samples []headSample
	for round := 1; round <= cfg.Rounds; round++ {
		for _, call := range cfg.Calls {
			for _, conc := range cfg.Conc {
				for _, t := range targets {
					s, err := h.measure(ctx, t, call, conc)
					if err != nil {
						return err
					}
					s.Round = round
					samples = append(samples, s)
					fmt.Fprintf(stderr, "round %d/%d %-11s %s\n", round, cfg.Rounds, call.name, s)
				}
			}
		}
	}

	return finish(stdout, newHeadReport(samples, cfg), env, loadBefore)
}

// headRun is what every window of a head run measures against.
type headRun struct {
	cfg    headConfig
	l      *loader
	up     *child
	leader *replica       // nil without the follower target
	redis  *cluster.Redis // nil without the follower target
}

// load runs one window of call against url with the configured client.
// The raw client's connections live for the window: the next one, warm-up
// or measured, opens its own, as the std client's closeIdle makes it do.
func (h *headRun) load(ctx context.Context, url string, conc int, d time.Duration, call callKind) loadResult {
	if h.cfg.Client == clientStd {
		return h.l.runCalls(ctx, url, conc, d, call)
	}
	return h.l.runWith(ctx, conc, d, call, rawPosters(url))
}

// headSample is one window of the head bench.
type headSample struct {
	sample
	Call string
	// ClusterCPUPer is the leader's and redis-server's CPU per call during
	// a follower window: what keeps the window fed. -1 for other targets.
	ClusterCPUPer time.Duration
	// FromWindow is the share of the follower's calls it answered from the
	// head window (venn_answers_total{source="head"}); -1 for other
	// targets.
	FromWindow float64
	// LoadCPUPer is this process's CPU per call: the load generator shares
	// the machine's cores with the targets, so it bounds what they can
	// show.
	LoadCPUPer time.Duration
}

func (s headSample) String() string {
	b := s.sample.String()
	if s.FromWindow >= 0 {
		b += fmt.Sprintf(", leader+redis cpu %s/req, %.4f from window", us(s.ClusterCPUPer), s.FromWindow)
	}
	return b + fmt.Sprintf(", load cpu %s/req", us(s.LoadCPUPer))
}

// measure warms t up, then measures one window of call at conc.
func (h *headRun) measure(ctx context.Context, t headTarget, call callKind, conc int) (headSample, error) {
	h.l.closeIdle()
	if h.cfg.Warmup > 0 {
		h.load(ctx, t.url, conc, h.cfg.Warmup, call)
	}
	if err := ctx.Err(); err != nil {
		return headSample{}, err
	}
	follower := t.venn != nil
	var clusterProcs []*child
	if follower {
		clusterProcs = []*child{h.leader.proc, {Proc: h.redis.Proc}}
	}

	// snapshot is every counter a window is the difference of.
	type snapshot struct {
		target, up, cluster, load time.Duration
		upStats                   stats
		answers                   metrics
	}
	read := func() (snapshot, error) {
		var s snapshot
		var err error
		if s.target, err = cpuOf(t.proc); err != nil {
			return s, err
		}
		if s.up, err = cpuOf(h.up); err != nil {
			return s, err
		}
		if s.load, err = cpuTime(os.Getpid()); err != nil {
			return s, err
		}
		for _, c := range clusterProcs {
			d, err := cpuOf(c)
			if err != nil {
				return s, err
			}
			s.cluster += d
		}
		if s.upStats, err = h.l.upstreamStats(ctx, h.up.url); err != nil {
			return s, err
		}
		if follower {
			if s.answers, err = scrape(ctx, h.l.statsClient, t.venn.metrics); err != nil {
				return s, err
			}
		}
		return s, nil
	}
	before, err := read()
	if err != nil {
		return headSample{}, err
	}
	res := h.load(ctx, t.url, conc, h.cfg.Duration, call)
	after, err := read()
	if err != nil {
		return headSample{}, err
	}
	if err := ctx.Err(); err != nil {
		return headSample{}, err
	}
	for _, c := range append([]*child{h.up, t.proc}, clusterProcs...) {
		if c == nil {
			continue
		}
		if done, werr := c.Exited(); done {
			return headSample{}, fmt.Errorf("%s exited during the run: %v%s", c.Name, werr, c.StderrNote())
		}
	}
	if follower {
		if err := checkLeader(ctx, h.redis, h.leader, t.venn); err != nil {
			return headSample{}, err
		}
	}

	s := headSample{
		sample: sample{
			Target:   t.name,
			Conc:     conc,
			OK:       res.OK,
			Errors:   res.Errors,
			ErrText:  res.ErrSample,
			RPS:      float64(res.OK) / res.Elapsed.Seconds(),
			P50:      percentile(res.Latencies, 50),
			P99:      percentile(res.Latencies, 99),
			CPUPer:   -1,
			UpCPUPer: -1,
			UpConns:  after.upStats.Conns - before.upStats.Conns,
		},
		Call:          call.name,
		ClusterCPUPer: -1,
		FromWindow:    -1,
	}
	if calls := res.OK + res.Errors; calls > 0 {
		s.UpReqPer = float64(after.upStats.Requests-before.upStats.Requests) / float64(calls)
		s.UpCPUPer = (after.up - before.up) / time.Duration(calls)
		s.LoadCPUPer = (after.load - before.load) / time.Duration(calls)
		if t.proc != nil {
			s.CPUPer = (after.target - before.target) / time.Duration(calls)
		}
		if follower {
			s.ClusterCPUPer = (after.cluster - before.cluster) / time.Duration(calls)
			s.FromWindow = (after.answers.answers("head") - before.answers.answers("head")) / float64(calls)
		}
	}
	return s, nil
}

// headReport holds every window of a head run.
type headReport struct {
	cfg     headConfig
	samples []headSample
	by      map[headKey]headSample
}

type headKey struct {
	round  int
	call   string
	target string
	conc   int
}

func newHeadReport(samples []headSample, cfg headConfig) *headReport {
	r := &headReport{cfg: cfg, samples: samples, by: map[headKey]headSample{}}
	for _, s := range samples {
		r.by[headKey{s.Round, s.Call, s.Target, s.Conc}] = s
	}
	return r
}

func (r *headReport) errors() int {
	n := 0
	for _, s := range r.samples {
		n += s.Errors
	}
	return n
}

// perRound applies f to the windows of each round that measured every one
// of targets for call at conc.
func (r *headReport) perRound(call string, conc int, targets []string, f func(map[string]headSample) (float64, bool)) []float64 {
	return perRound(r.cfg.Rounds, targets, func(round int, t string) (headSample, bool) {
		s, ok := r.by[headKey{round, call, t, conc}]
		return s, ok
	}, f)
}

// medianOf is the median over rounds of one field; fields below zero are
// "not measured" and left out.
func (r *headReport) medianOf(call, target string, conc int, field func(headSample) float64) float64 {
	return median(r.perRound(call, conc, []string{target}, func(m map[string]headSample) (float64, bool) {
		v := field(m[target])
		return v, v >= 0
	}))
}

// ratio is the median over rounds of follower ÷ proxy of one field.
func (r *headReport) ratio(call string, conc int, field func(headSample) float64) float64 {
	return median(r.perRound(call, conc, []string{targetFollower, targetProxy}, func(m map[string]headSample) (float64, bool) {
		f, p := field(m[targetFollower]), field(m[targetProxy])
		return f / p, p > 0 && f >= 0
	}))
}

func (r *headReport) write(w io.Writer, env string) {
	fmt.Fprintf(w, "Machine: %s\n\n", env)
	client := "hand-spoken HTTP/1.1, a keep-alive connection per worker (-client raw)"
	if r.cfg.Client == clientStd {
		client = "net/http's Client, a keep-alive connection per worker (-client std)"
	}
	fmt.Fprintf(w, "Head calls; the upstream mines a block every %v; %d rounds of %v windows (after %v warm-up each), targets interleaved per round; medians across rounds. Load client: %s.\n\n",
		r.cfg.BlockTime, r.cfg.Rounds, r.cfg.Duration, r.cfg.Warmup, client)
	for _, c := range r.cfg.Calls {
		fmt.Fprintf(w, "- %s: %s\n", c.name, headCallText[c.name])
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| call | target | conc | req/s | p50 µs | p99 µs | target CPU µs/req | upstream CPU µs/req | leader+redis CPU µs/req | load generator CPU µs/req | upstream HTTP req/call | answered from window | errors |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, c := range r.cfg.Calls {
		for _, conc := range r.cfg.Conc {
			for _, t := range r.cfg.Targets {
				errs := 0
				for _, s := range r.samples {
					if s.Call == c.name && s.Target == t && s.Conc == conc {
						errs += s.Errors
					}
				}
				med := func(f func(headSample) float64) float64 { return r.medianOf(c.name, t, conc, f) }
				cpu, cluster, window := "—", "—", "—"
				if t != targetDirect {
					cpu = fmt.Sprintf("%.1f", med(func(s headSample) float64 { return micros(s.CPUPer) }))
				}
				if t == targetFollower {
					cluster = fmt.Sprintf("%.2f", med(func(s headSample) float64 { return micros(s.ClusterCPUPer) }))
					window = fmt.Sprintf("%.4f", med(func(s headSample) float64 { return s.FromWindow }))
				}
				fmt.Fprintf(w, "| %s | %s | %d | %.0f | %.1f | %.1f | %s | %.1f | %s | %.1f | %.4f | %s | %d |\n", c.name, t, conc,
					med(func(s headSample) float64 { return s.RPS }),
					med(func(s headSample) float64 { return micros(s.P50) }),
					med(func(s headSample) float64 { return micros(s.P99) }),
					cpu,
					med(func(s headSample) float64 { return micros(s.UpCPUPer) }),
					cluster,
					med(func(s headSample) float64 { return micros(s.LoadCPUPer) }),
					med(func(s headSample) float64 { return s.UpReqPer }),
					window, errs)
			}
		}
	}
	fmt.Fprintln(w)
	r.writeGoals(w)
	fmt.Fprintln(w)
	r.writeErrors(w)
}

// writeGoals compares the follower with the plain proxy: every ratio pairs
// windows of the same round, call and concurrency, then takes the median
// over rounds.
func (r *headReport) writeGoals(w io.Writer) {
	if !slices.Contains(r.cfg.Targets, targetFollower) || !slices.Contains(r.cfg.Targets, targetProxy) {
		fmt.Fprintln(w, "Goals: not evaluated (needs both the proxy and follower targets).")
		return
	}
	rps := func(s headSample) float64 { return s.RPS }
	p50 := func(s headSample) float64 { return micros(s.P50) }
	cpu := func(s headSample) float64 { return micros(s.CPUPer) }
	fmt.Fprintln(w, "Follower ÷ proxy, medians of per-round ratios (CPU: the follower's own CPU per call against the proxy's; the proxy's calls also cost the upstream its CPU, the follower's do not):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| call | conc | req/s | p50 | CPU/req | CPU/req vs proxy+upstream |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|")
	for _, c := range r.cfg.Calls {
		for _, conc := range r.cfg.Conc {
			withUp := median(r.perRound(c.name, conc, []string{targetFollower, targetProxy}, func(m map[string]headSample) (float64, bool) {
				f, p := m[targetFollower], m[targetProxy]
				d := p.CPUPer + p.UpCPUPer
				return float64(f.CPUPer) / float64(d), d > 0 && f.CPUPer >= 0
			}))
			fmt.Fprintf(w, "| %s | %d | %.2f | %.2f | %.2f | %.2f |\n", c.name, conc,
				r.ratio(c.name, conc, rps), r.ratio(c.name, conc, p50), r.ratio(c.name, conc, cpu), withUp)
		}
	}
	fmt.Fprintln(w)
	top := slices.Max(r.cfg.Conc)
	fmt.Fprintln(w, "| goal | measured (median over rounds) | limit | result |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, c := range r.cfg.Calls {
		v := r.ratio(c.name, top, rps)
		fmt.Fprintf(w, "| throughput follower ÷ proxy at c=%d, %s | %.2f (follower %.0f req/s, proxy %.0f req/s) | ≥ %.2f | %s |\n",
			top, c.name, v,
			r.medianOf(c.name, targetFollower, top, rps), r.medianOf(c.name, targetProxy, top, rps),
			goalHeadThroughput, verdict(v >= goalHeadThroughput, v))
	}
}

func (r *headReport) writeErrors(w io.Writer) {
	n := r.errors()
	if n == 0 {
		fmt.Fprintln(w, "Errors: none (every reply was checked: valid JSON-RPC, its own id, a result of the call's shape).")
		return
	}
	fmt.Fprintf(w, "Errors: %d failed calls.\n", n)
	for _, s := range r.samples {
		if s.Errors > 0 {
			fmt.Fprintf(w, "- round %d %s %s c=%d: %d errors: %s\n", s.Round, s.Call, s.Target, s.Conc, s.Errors, strings.Join(s.ErrText, " | "))
		}
	}
}
