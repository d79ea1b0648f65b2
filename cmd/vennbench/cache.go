package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// `vennbench cache` replays simulated indexers' state reads through a
// 2-replica venn cluster, against the same workload sent direct and
// through the plain proxy in the same run.

// The cache bench's goals (issue 13).
const (
	// goalHitThroughput: hit-served calls at least this many times the
	// plain proxy's pass-through throughput at the top concurrency.
	goalHitThroughput = 3.5
)

// Defaults of the cache bench's flags.
const (
	defaultCacheConc      = "1,128"
	defaultIndexers       = 4
	defaultPerIndexer     = 8
	defaultCacheBlocks    = 100
	defaultCacheEvents    = 10
	defaultCacheHolders   = 2000
	defaultCacheFill      = 100_000
	defaultCacheBlockTime = time.Second
	// defaultCacheFrom is the first block of round 1; every round reads
	// the next -blocks, so each round's replay starts with a cold cache.
	defaultCacheFrom = 50_000
	// cacheHeadMargin is how far above the last block read the upstream's
	// head starts: every block read is far below finalized (head - 64).
	cacheHeadMargin = 10_000
)

const cacheUsage = `vennbench cache — the response cache: indexers' state reads through a venn cluster

Starts a private redis-server, the upstream (the fake node, mining a block
every -block-time, counting the state calls that reach it), a plain
ReverseProxy in front of it, and a leader and a follower venn sharing
Redis. Each round builds a workload at fresh settled blocks (-blocks
blocks × -events events, each event an eth_call balanceOf, an
eth_getBalance and an eth_getCode at its block) and, for each target in
turn (direct, proxy, venn):

  1. replay: -indexers indexers each send the whole sequence once, the
     i-th starting i/n of the way in; on venn they alternate between the
     two replicas;
  2. hits: after -warmup, a -duration window of the same sequence at each
     -conc, on venn against the follower alone (every answer cached).

Then it fills the follower with -fill distinct entries and reads its
memory. Every answer is checked byte for byte against the fake chain's.

Usage:
  vennbench cache [flags]

Flags:
`

// cacheConfig is the parsed command line of a cache run.
type cacheConfig struct {
	Duration   time.Duration
	Warmup     time.Duration
	Rounds     int
	Conc       []int
	Venn       string
	BlockTime  time.Duration
	Indexers   int
	PerIndexer int // workers per indexer in the replay
	Spec       workloadSpec
	Fill       int
	// Cache is the chain's cache settings, a YAML line under the chain
	// ("" keeps venn's defaults).
	Cache string
	// Profile, when set, is where the follower's CPU and allocation
	// profiles of each venn hit window go (PREFIX.rROUND.cCONC.cpu and
	// .allocs), taken from its admin API.
	Profile string
}

func parseCacheFlags(args []string, stderr io.Writer) (cacheConfig, int) {
	fs := newFlags("cache", cacheUsage, stderr)
	var cfg cacheConfig
	fs.DurationVar(&cfg.Duration, "duration", defaultDuration, "measured window of the hit phase per target and concurrency")
	fs.DurationVar(&cfg.Warmup, "warmup", defaultWarmup, "unmeasured load before each hit window")
	fs.IntVar(&cfg.Rounds, "rounds", defaultRounds, "rounds; each replays fresh blocks on every target")
	conc := fs.String("conc", defaultCacheConc, "comma-separated concurrencies of the hit phase")
	fs.StringVar(&cfg.Venn, "venn", "", "venn binary (default: go build ./cmd/venn into a temp dir)")
	fs.DurationVar(&cfg.BlockTime, "block-time", defaultCacheBlockTime, "the upstream mines a block this often")
	fs.IntVar(&cfg.Indexers, "indexers", defaultIndexers, "simulated indexers replaying the workload")
	fs.IntVar(&cfg.PerIndexer, "per-indexer", defaultPerIndexer, "calls each indexer keeps in flight in the replay")
	fs.IntVar(&cfg.Spec.Blocks, "blocks", defaultCacheBlocks, "blocks of the workload per round")
	fs.IntVar(&cfg.Spec.Events, "events", defaultCacheEvents, "events per block (3 calls each)")
	fs.IntVar(&cfg.Spec.Holders, "holders", defaultCacheHolders, "accounts the events are drawn from (Zipf)")
	fs.Uint64Var(&cfg.Spec.From, "from", defaultCacheFrom, "first block of round 1")
	fs.Uint64Var(&cfg.Spec.Seed, "seed", 1, "seed of the workload")
	fs.IntVar(&cfg.Fill, "fill", defaultCacheFill, "distinct entries the memory phase adds (0: no memory phase)")
	fs.StringVar(&cfg.Profile, "profile", "", "write the follower's CPU and allocation profiles of each venn hit window to PREFIX.rROUND.cCONC.{cpu,allocs} (go tool pprof)")
	fs.StringVar(&cfg.Cache, "cache", "", "the chain's cache settings as one YAML line, e.g. 'cache: {memory_bytes: 536870912}'")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return cfg, code
	}
	var err error
	if cfg.Conc, err = parseConc(*conc); err != nil {
		fmt.Fprintf(stderr, "vennbench: -conc: %v\n", err)
		return cfg, exitUsage
	}
	if msg := cfg.invalid(); msg != "" {
		fmt.Fprintf(stderr, "vennbench: %s\n", msg)
		return cfg, exitUsage
	}
	return cfg, -1
}

// invalid names the first flag out of range; "" when all are fine.
func (c cacheConfig) invalid() string {
	switch {
	case c.Duration <= 0 || c.Duration > maxDuration:
		return fmt.Sprintf("-duration must be in (0, %v]", maxDuration)
	case c.Warmup < 0 || c.Warmup > maxDuration:
		return fmt.Sprintf("-warmup must be in [0, %v]", maxDuration)
	case c.Rounds < 1 || c.Rounds > maxRounds:
		return fmt.Sprintf("-rounds must be in [1, %d]", maxRounds)
	case c.BlockTime <= 0:
		return "-block-time must be positive"
	case c.Indexers < 1 || c.Indexers > 64:
		return "-indexers must be in [1, 64]"
	case c.PerIndexer < 1 || c.Indexers*c.PerIndexer > maxConcurrency:
		return fmt.Sprintf("-per-indexer must be at least 1, and indexers × per-indexer at most %d", maxConcurrency)
	case c.Spec.Blocks < 1 || c.Spec.Events < 1 || c.Spec.Blocks*c.Spec.Events > 1_000_000:
		return "-blocks and -events must be at least 1, and blocks × events at most 1,000,000"
	case c.Spec.Holders < 2:
		return "-holders must be at least 2"
	case c.Spec.From < 1:
		return "-from must be at least 1"
	case c.Fill < 0 || c.Fill > 10_000_000:
		return "-fill must be in [0, 10,000,000]"
	}
	return ""
}

// upstreamHead is the upstream's first head: every block of every round
// far below it.
func (c cacheConfig) upstreamHead() uint64 {
	return c.Spec.From + uint64(c.Rounds*c.Spec.Blocks) + cacheHeadMargin
}

// roundSpec is the workload of round r (from 1): the blocks after the
// previous round's.
func (c cacheConfig) roundSpec(r int) workloadSpec {
	s := c.Spec
	s.From += uint64((r - 1) * s.Blocks)
	return s
}

// cacheTarget is one thing the cache bench sends its workload to.
type cacheTarget struct {
	name    string
	replay  []string // the replay's URLs, indexers alternating over them
	hits    string   // the hit phase's URL
	proc    *child   // whose CPU the hit phase reads; nil for direct
	pprof   string   // the hits' replica's profiles' URL; "" for none
	cluster bool
}

// cacheBench runs the cache bench and prints the report on stdout.
func cacheBench(ctx context.Context, cfg cacheConfig, stdout, stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("own executable: %w", err)
	}
	bc, err := startBenchCluster(ctx, clusterOpts{name: "cache", venn: cfg.Venn, chainExtra: cfg.Cache,
		extra:     profileExtra(cfg.Profile),
		followers: []string{followerID}, upstreamArgs: []string{"-block-time", cfg.BlockTime.String(),
			"-head", strconv.FormatUint(cfg.upstreamHead(), 10)}}, stderr)
	if err != nil {
		return err
	}
	defer bc.stop()
	p, pURL, err := startProxy(ctx, bc.l, exe, bc.upURL)
	if err != nil {
		return err
	}
	defer p.Stop()
	follower := bc.followers[0]
	targets := []cacheTarget{
		{name: targetDirect, replay: []string{bc.upURL}, hits: bc.upURL},
		{name: targetProxy, replay: []string{pURL}, hits: pURL, proc: p},
		{name: targetVenn, replay: []string{bc.leader.url, follower.url}, hits: follower.url, proc: follower.proc, cluster: true,
			pprof: strings.TrimSuffix(follower.metrics, "/metrics") + "/admin/debug/pprof/"},
	}
	c := &cacheRun{cfg: cfg, bc: bc}

	env := machineInfo()
	loadBefore := loadAvg()
	fmt.Fprintf(stderr, "%s; %d rounds; replay of %d indexers × %d blocks × %d events × 3 calls; hits %v (+%v warm-up) × conc %v\n",
		env, cfg.Rounds, cfg.Indexers, cfg.Spec.Blocks, cfg.Spec.Events, cfg.Duration, cfg.Warmup, cfg.Conc)
	rep := &cacheReport{cfg: cfg}
	for round := 1; round <= cfg.Rounds; round++ {
		w, err := newWorkload(cfg.roundSpec(round), cfg.upstreamHead())
		if err != nil {
			return err
		}
		rep.calls, rep.distinct = len(w.calls), w.distinct
		for _, t := range targets {
			if err := c.measureTarget(ctx, t, w, round, rep, stderr); err != nil {
				return err
			}
		}
	}
	if cfg.Fill > 0 {
		if rep.mem, err = c.measureMemory(ctx, follower); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "memory: %s\n", rep.mem)
	}
	return finish(stdout, rep, env, loadBefore)
}

// cacheRun is what every phase of a cache run measures against.
type cacheRun struct {
	cfg cacheConfig
	bc  *benchCluster
}

// measureTarget runs round's replay on t, then its hit windows.
func (c *cacheRun) measureTarget(ctx context.Context, t cacheTarget, w *workload, round int, rep *cacheReport, stderr io.Writer) error {
	rs, err := c.replay(ctx, t, w)
	if err != nil {
		return err
	}
	rs.Round = round
	rep.replays = append(rep.replays, rs)
	fmt.Fprintf(stderr, "round %d/%d replay %s\n", round, c.cfg.Rounds, rs)
	for _, conc := range c.cfg.Conc {
		hs, err := c.hits(ctx, t, w, conc, c.profileFile(t, round, conc))
		if err != nil {
			return err
		}
		hs.Round = round
		rep.hits = append(rep.hits, hs)
		fmt.Fprintf(stderr, "round %d/%d hits   %s\n", round, c.cfg.Rounds, hs)
	}
	return nil
}

// clusterSnap is what a phase is the difference of: the state calls that
// reached the upstream, and the replicas' metrics.
type clusterSnap struct {
	up       stats
	replicas []metrics
}

func (c *cacheRun) snap(ctx context.Context, withReplicas bool) (clusterSnap, error) {
	var s clusterSnap
	var err error
	if s.up, err = c.bc.l.upstreamStats(ctx, c.bc.upURL); err != nil {
		return s, err
	}
	if !withReplicas {
		return s, nil
	}
	for _, r := range c.bc.replicas() {
		m, err := scrape(ctx, c.bc.l.statsClient, r.metrics)
		if err != nil {
			return s, fmt.Errorf("venn %s: %w", r.id, err)
		}
		s.replicas = append(s.replicas, m)
	}
	return s, nil
}

// cacheHits sums, over the replicas, the hits of each tier between two
// snaps.
func cacheHits(before, after clusterSnap) map[string]float64 {
	out := map[string]float64{}
	for i := range after.replicas {
		a, b := after.replicas[i].cacheRequests(), before.replicas[i].cacheRequests()
		for k, v := range a {
			if k.outcome == "hit" {
				out[k.tier] += v - b[k]
			}
		}
	}
	return out
}

// cacheKey is one series of venn_cache_requests_total, methods summed.
type cacheKey struct{ tier, outcome string }

// cacheRequests sums venn_cache_requests_total of the bench chain over
// methods.
func (m metrics) cacheRequests() map[cacheKey]float64 {
	const name = "venn_cache_requests_total{"
	out := map[cacheKey]float64{}
	for series, v := range m {
		if !strings.HasPrefix(series, name) {
			continue
		}
		l := labels(strings.TrimSuffix(series[len(name):], "}"))
		if l["chain"] == clusterChain {
			out[cacheKey{l["tier"], l["outcome"]}] += v
		}
	}
	return out
}

// labels parses a series' label pairs (`a="x",b="y"`); venn's label
// values never hold quotes or commas.
func labels(s string) map[string]string {
	out := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		if k, v, ok := strings.Cut(pair, `="`); ok {
			out[k] = strings.TrimSuffix(v, `"`)
		}
	}
	return out
}

// gauge sums the series of name whose labels include all of want.
func (m metrics) gauge(name string, want map[string]string) (float64, bool) {
	var sum float64
	found := false
	for series, v := range m {
		inner, ok := strings.CutPrefix(series, name)
		if !ok || (inner != "" && inner[0] != '{') {
			continue
		}
		l := labels(strings.TrimSuffix(strings.TrimPrefix(inner, "{"), "}"))
		if !mapContains(l, want) {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}

func mapContains(m, want map[string]string) bool {
	for k, v := range want {
		if m[k] != v {
			return false
		}
	}
	return true
}

// hitConc splits conc workers over at most n indexers.
func hitConc(conc, n int) (indexers, per int) {
	indexers = min(conc, n)
	return indexers, conc / indexers
}

// sortedTiers are the tiers of m, memory first, then by name.
func sortedTiers(m map[string]float64) []string {
	var out []string
	for t := range m {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == "memory":
			return -1
		case b == "memory":
			return 1
		}
		return strings.Compare(a, b)
	})
	return out
}

// profileExtra is the replicas' admin setting when a profile is asked
// for: the admin API on the metrics listener, loopback, without tokens.
func profileExtra(file string) string {
	if file == "" {
		return ""
	}
	return "admin: {on_metrics_listen: true}"
}

// profileFile is the prefix t's hit window at conc in round is profiled
// to; "" for none.
func (c *cacheRun) profileFile(t cacheTarget, round, conc int) string {
	if c.cfg.Profile == "" || t.pprof == "" {
		return ""
	}
	return fmt.Sprintf("%s.r%d.c%d", c.cfg.Profile, round, conc)
}
