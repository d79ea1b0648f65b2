package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
)

// `vennbench filters` measures polled log filters served by a venn
// cluster: many filters, each polled once a second, round robin over two
// replicas, against the same number of eth_getLogs a second through the
// plain proxy to the upstream (what a client polls without filters).

// Defaults of the filters bench's flags.
const (
	defaultFilters         = 1000
	defaultFiltersDuration = 20 * time.Second
	defaultFiltersWorkers  = 64
	maxFilters             = 100_000
)

const filtersUsage = `vennbench filters — log filters polled across a 2-replica cluster vs eth_getLogs through the plain proxy

Starts a private redis-server, the upstream (mining a block every
-block-time), a plain ReverseProxy in front of it, and a venn leader and a
follower on one Redis. Makes -filters log filters (each on one of the fake
chain's contracts), then each round: an idle window (the upstream's calls
with no client load), a window of eth_getLogs of the latest block through
the proxy at -filters calls a second, and a window polling every filter
once a second with eth_getFilterChanges, each poll on the other replica
from the one before.

Usage:
  vennbench filters [flags]

Flags:
`

// filtersConfig is the parsed command line of a filters run.
type filtersConfig struct {
	Filters   int
	Duration  time.Duration
	Rounds    int
	Workers   int
	BlockTime time.Duration
	Venn      string
}

func parseFiltersFlags(args []string, stderr io.Writer) (filtersConfig, int) {
	fs := newFlags("filters", filtersUsage, stderr)
	var cfg filtersConfig
	fs.IntVar(&cfg.Filters, "filters", defaultFilters, "log filters, each polled once a second")
	fs.DurationVar(&cfg.Duration, "duration", defaultFiltersDuration, "measured window per target and round")
	fs.IntVar(&cfg.Rounds, "rounds", defaultRounds, "rounds")
	fs.IntVar(&cfg.Workers, "workers", defaultFiltersWorkers, "calls in flight at most")
	fs.DurationVar(&cfg.BlockTime, "block-time", defaultHeadBlockTime, "the upstream mines a block this often")
	fs.StringVar(&cfg.Venn, "venn", "", "venn binary (default: go build ./cmd/venn into a temp dir)")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return cfg, code
	}
	switch {
	case cfg.Filters < 1 || cfg.Filters > maxFilters:
		fmt.Fprintf(stderr, "vennbench filters: -filters must be in [1, %d]\n", maxFilters)
		return cfg, exitUsage
	case cfg.Duration < time.Second || cfg.Duration > maxDuration:
		fmt.Fprintf(stderr, "vennbench filters: -duration must be in [1s, %v]\n", maxDuration)
		return cfg, exitUsage
	case cfg.Rounds < 1 || cfg.Rounds > maxRounds:
		fmt.Fprintf(stderr, "vennbench filters: -rounds must be in [1, %d]\n", maxRounds)
		return cfg, exitUsage
	case cfg.Workers < 1 || cfg.Workers > maxConcurrency:
		fmt.Fprintf(stderr, "vennbench filters: -workers must be in [1, %d]\n", maxConcurrency)
		return cfg, exitUsage
	case cfg.BlockTime < 10*time.Millisecond || cfg.BlockTime > time.Minute:
		fmt.Fprintln(stderr, "vennbench filters: -block-time must be in [10ms, 1m]")
		return cfg, exitUsage
	}
	return cfg, -1
}

// filtersSample is one window of the filters bench.
type filtersSample struct {
	Round    int
	Target   string // "proxy" or "venn"
	Calls    int
	Errors   int
	ErrText  []string
	P50, P99 time.Duration
	// UpPer is the upstream calls per client call over the idle window's
	// rate (the leader's own fetches); LogsPer the upstream eth_getLogs
	// and filter calls per client call.
	UpPer, LogsPer float64
	// CPUPer is the target's CPU per call: the proxy's, or the follower's
	// per poll it answered (half of them).
	CPUPer time.Duration
	// UpCPUPer is the upstream's CPU per call over the idle window's.
	UpCPUPer time.Duration
}

func (s filtersSample) String() string {
	e := ""
	if s.Errors > 0 {
		e = fmt.Sprintf("  ERRORS %d: %v", s.Errors, s.ErrText)
	}
	return fmt.Sprintf("%-5s %6d calls  p50 %s  p99 %s  cpu %s/call  upstream %.4f calls/call (%.4f getLogs/call), upstream cpu %s/call%s",
		s.Target, s.Calls, us(s.P50), us(s.P99), us(s.CPUPer), s.UpPer, s.LogsPer, us(s.UpCPUPer), e)
}

// filtersBench runs the filters bench and prints the report on stdout.
func filtersBench(ctx context.Context, cfg filtersConfig, stdout, stderr io.Writer) error {
	bc, err := startBenchCluster(ctx, clusterOpts{name: "filters", venn: cfg.Venn, followers: []string{followerID},
		upstreamArgs: []string{"-block-time", cfg.BlockTime.String()},
		chainExtra:   fmt.Sprintf("filters: {max_per_client: %d, max_per_chain: %d}", cfg.Filters+10, cfg.Filters+10)}, stderr)
	if err != nil {
		return err
	}
	defer bc.stop()
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("own executable: %w", err)
	}
	proxy, proxyURL, err := startProxy(ctx, bc.l, exe, bc.upURL)
	if err != nil {
		return err
	}
	defer proxy.Stop()
	replicas := bc.replicas() // leader, follower
	follower := bc.followers[0]

	// The filters: filter i watches contract i mod 3 and lives on both
	// replicas (made through the one i's parity names).
	contracts := fakenode.Contracts()
	ids := make([]string, cfg.Filters)
	var reply bytes.Buffer
	for i := range ids {
		body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"eth_newFilter","params":[{"address":"%s"}]}`,
			i+1, contracts[i%len(contracts)])
		if err := bc.l.call(ctx, replicas[i%2].url, body, &reply, uint64(i+1), func(res []byte) error {
			return json.Unmarshal(res, &ids[i])
		}); err != nil {
			return fmt.Errorf("eth_newFilter %d: %w", i, err)
		}
	}

	env := machineInfo()
	loadBefore := loadAvg()
	fmt.Fprintf(stderr, "%s; %d rounds × %v × {idle, proxy, venn}; %d filters, each polled once a second; a block every %v\n",
		env, cfg.Rounds, cfg.Duration, cfg.Filters, cfg.BlockTime)
	var samples []filtersSample
	for round := 1; round <= cfg.Rounds; round++ {
		idle, err := filtersIdle(ctx, bc, cfg.Duration)
		if err != nil {
			return err
		}
		for _, target := range []string{targetProxy, "venn"} {
			s, err := filtersWindow(ctx, bc, cfg, target, proxyURL, proxy, replicas, follower, ids, idle)
			if err != nil {
				return err
			}
			s.Round = round
			samples = append(samples, s)
			fmt.Fprintf(stderr, "round %d/%d %s\n", round, cfg.Rounds, s)
		}
		if err := bc.exited(); err != nil {
			return err
		}
	}
	return finish(stdout, &filtersReport{cfg: cfg, samples: samples}, env, loadBefore)
}

// idleRate is the upstream's calls and CPU per second with no client load:
// the leader's own fetches, which every window has too.
type idleRate struct {
	calls float64
	cpu   float64 // seconds per second
}

func filtersIdle(ctx context.Context, bc *benchCluster, d time.Duration) (idleRate, error) {
	before, err := bc.l.upstreamStats(ctx, bc.upURL)
	if err != nil {
		return idleRate{}, err
	}
	cpu0, _ := cpuOf(bc.up)
	start := time.Now()
	select {
	case <-ctx.Done():
		return idleRate{}, ctx.Err()
	case <-time.After(d):
	}
	el := time.Since(start).Seconds()
	after, err := bc.l.upstreamStats(ctx, bc.upURL)
	if err != nil {
		return idleRate{}, err
	}
	cpu1, _ := cpuOf(bc.up)
	return idleRate{calls: float64(after.Calls-before.Calls) / el, cpu: (cpu1 - cpu0).Seconds() / el}, nil
}

// filtersWindow runs one paced window: rate calls a second for d, either
// eth_getLogs of the latest block through the proxy or a poll of each
// filter in turn, alternating replicas.
func filtersWindow(ctx context.Context, bc *benchCluster, cfg filtersConfig, target, proxyURL string, proxy *child,
	replicas []*replica, follower *replica, ids []string, idle idleRate) (filtersSample, error) {
	bc.l.closeIdle()
	before, err := bc.l.upstreamStats(ctx, bc.upURL)
	if err != nil {
		return filtersSample{}, err
	}
	proc := proxy
	if target != targetProxy {
		proc = follower.proc
	}
	cpu0, _ := cpuOf(proc)
	up0, _ := cpuOf(bc.up)
	contracts := fakenode.Contracts()

	n := int(cfg.Duration.Seconds()) * cfg.Filters
	interval := time.Second / time.Duration(cfg.Filters)
	type result struct {
		lat time.Duration
		err error
	}
	results := make([]result, n)
	jobs := make(chan int)
	var wg sync.WaitGroup
	var followerCalls int
	for i := range n {
		if target != targetProxy && (i%len(ids)+i/len(ids))%2 == 1 {
			followerCalls++
		}
	}
	for range cfg.Workers {
		wg.Go(func() {
			var reply bytes.Buffer
			for i := range jobs {
				f := i % len(ids)
				var url string
				var body []byte
				if target == targetProxy {
					url = proxyURL
					body = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"eth_getLogs","params":[{"address":"%s","fromBlock":"latest","toBlock":"latest"}]}`,
						i+1, contracts[f%len(contracts)])
				} else {
					// Poll k of filter f goes to replica (f+k) mod 2.
					url = replicas[(f+i/len(ids))%2].url
					body = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"eth_getFilterChanges","params":["%s"]}`, i+1, ids[f])
				}
				t0 := time.Now()
				err := bc.l.call(ctx, url, body, &reply, uint64(i+1), checkLogs(false))
				results[i] = result{lat: time.Since(t0), err: err}
			}
		})
	}
	start := time.Now()
	for i := range n {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	el := time.Since(start).Seconds()
	if err := ctx.Err(); err != nil {
		return filtersSample{}, err
	}
	after, err := bc.l.upstreamStats(ctx, bc.upURL)
	if err != nil {
		return filtersSample{}, err
	}
	cpu1, _ := cpuOf(proc)
	up1, _ := cpuOf(bc.up)

	s := filtersSample{Target: target, Calls: n}
	var lats []time.Duration
	for _, r := range results {
		if r.err != nil {
			s.Errors++
			if len(s.ErrText) < 3 {
				s.ErrText = append(s.ErrText, r.err.Error())
			}
			continue
		}
		lats = append(lats, r.lat)
	}
	slices.Sort(lats)
	s.P50, s.P99 = percentile(lats, 50), percentile(lats, 99)
	s.UpPer = max(0, float64(after.Calls-before.Calls)-idle.calls*el) / float64(n)
	s.LogsPer = float64(after.Logs-before.Logs) / float64(n)
	s.UpCPUPer = time.Duration(max(0, (up1-up0).Seconds()-idle.cpu*el) / float64(n) * float64(time.Second))
	per := n
	if target != targetProxy {
		per = followerCalls
	}
	s.CPUPer = (cpu1 - cpu0) / time.Duration(max(1, per))
	return s, nil
}

// filtersReport is the medians of the rounds, venn against the proxy.
type filtersReport struct {
	cfg     filtersConfig
	samples []filtersSample
}

func (r *filtersReport) errors() int {
	n := 0
	for _, s := range r.samples {
		n += s.Errors
	}
	return n
}

func (r *filtersReport) med(target string, f func(filtersSample) float64) float64 {
	var xs []float64
	for _, s := range r.samples {
		if s.Target == target {
			xs = append(xs, f(s))
		}
	}
	return median(xs)
}

func (r *filtersReport) write(w io.Writer, env string) {
	fmt.Fprintf(w, "vennbench filters: %d log filters polled once a second, round robin over 2 replicas, vs eth_getLogs through the plain proxy\n%s\n\n",
		r.cfg.Filters, env)
	fmt.Fprintf(w, "medians of %d rounds of %v:\n\n", r.cfg.Rounds, r.cfg.Duration)
	fmt.Fprintln(w, "| | proxy eth_getLogs | venn eth_getFilterChanges | venn / proxy |")
	fmt.Fprintln(w, "|---|---|---|---|")
	row := func(name string, f func(filtersSample) float64, format func(float64) string) {
		p, v := r.med(targetProxy, f), r.med("venn", f)
		ratio := "—"
		if p > 0 {
			ratio = strconv.FormatFloat(v/p, 'f', 2, 64)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", name, format(p), format(v), ratio)
	}
	dur := func(x float64) string { return us(time.Duration(x)) }
	num := func(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }
	row("p50 latency", func(s filtersSample) float64 { return float64(s.P50) }, dur)
	row("p99 latency", func(s filtersSample) float64 { return float64(s.P99) }, dur)
	row("upstream calls per call (over idle)", func(s filtersSample) float64 { return s.UpPer }, num)
	row("upstream eth_getLogs/filter calls per call", func(s filtersSample) float64 { return s.LogsPer }, num)
	row("target CPU per call (venn: the follower's, per poll it answered)", func(s filtersSample) float64 { return float64(s.CPUPer) }, dur)
	row("upstream CPU per call (over idle)", func(s filtersSample) float64 { return float64(s.UpCPUPer) }, dur)
	if n := r.errors(); n > 0 {
		fmt.Fprintf(w, "\n%d calls failed\n", n)
	}
}
