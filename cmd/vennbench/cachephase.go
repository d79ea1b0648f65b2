package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"time"

	"golang.org/x/sync/errgroup"
)

// The cache bench's phases: the indexers' replay, the hit windows, and the
// memory fill.

// phase is what one phase of one target saw: the load's view, the state
// calls that reached the upstream, and venn's cache hits.
type phase struct {
	Target   string
	Round    int
	Calls    int // client calls, OK or not
	Errors   int
	ErrText  []string
	RPS      float64
	P50, P99 time.Duration
	Upstream uint64             // state calls that reached the upstream
	Hits     map[string]float64 // venn's cache hits by tier, all replicas
}

// newPhase is what res saw between two snaps.
func newPhase(target string, res loadResult, before, after clusterSnap) phase {
	return phase{
		Target: target, Calls: res.OK + res.Errors, Errors: res.Errors, ErrText: res.ErrSample,
		RPS: float64(res.OK) / res.Elapsed.Seconds(),
		P50: percentile(res.Latencies, 50), P99: percentile(res.Latencies, 99),
		Upstream: after.up.State - before.up.State, Hits: cacheHits(before, after),
	}
}

// UpPer is the upstream state calls per client call.
func (s phase) UpPer() float64 { return ratioOf(float64(s.Upstream), s.Calls) }

// HitsPer is tier's hits per client call.
func (s phase) HitsPer(tier string) float64 { return ratioOf(s.Hits[tier], s.Calls) }

// tail is the progress line's end: hits by tier, errors.
func (s phase) tail() string {
	var b string
	for _, t := range sortedTiers(s.Hits) {
		b += fmt.Sprintf(", %s hits %.4f", t, s.HitsPer(t))
	}
	if s.Errors > 0 {
		b += fmt.Sprintf("  ERRORS %d: %v", s.Errors, s.ErrText)
	}
	return b
}

// replaySample is one target's replay in one round.
type replaySample struct{ phase }

func (s replaySample) String() string {
	return fmt.Sprintf("%-6s %6d calls  %8.0f calls/s  p50 %s  p99 %s  upstream %.4f/call",
		s.Target, s.Calls, s.RPS, us(s.P50), us(s.P99), s.UpPer()) + s.tail()
}

// hitSample is one hit window of one target at one concurrency.
type hitSample struct {
	phase
	Conc     int
	CPUPer   time.Duration // the target process's CPU per call; -1 for direct
	UpCPUPer time.Duration // the upstream's CPU per call
	// LoadCPUPer is this process's CPU per call: the load generator
	// shares the cores with the targets, which bounds what they can show.
	LoadCPUPer time.Duration
}

func (s hitSample) String() string {
	return fmt.Sprintf("c=%-3d %-6s %8.0f req/s  p50 %s  p99 %s  cpu %s/req  upstream cpu %s/req, %.4f/call, load cpu %s/req",
		s.Conc, s.Target, s.RPS, us(s.P50), us(s.P99), us(s.CPUPer), us(s.UpCPUPer), s.UpPer(), us(s.LoadCPUPer)) + s.tail()
}

func ratioOf(v float64, n int) float64 {
	if n == 0 {
		return 0
	}
	return v / float64(n)
}

// checkAlive fails when a process of the run is gone, or leadership moved
// during a cluster phase.
func (c *cacheRun) checkAlive(ctx context.Context, t cacheTarget) error {
	if err := c.bc.exited(); err != nil {
		return err
	}
	if t.proc != nil {
		if done, werr := t.proc.Exited(); done {
			return fmt.Errorf("%s exited during the run: %v%s", t.proc.Name, werr, t.proc.StderrNote())
		}
	}
	if t.cluster {
		return checkLeader(ctx, c.bc.rs, c.bc.replicas()...)
	}
	return nil
}

// replay has every indexer send the whole of w once to t.
func (c *cacheRun) replay(ctx context.Context, t cacheTarget, w *workload) (replaySample, error) {
	before, err := c.snap(ctx, t.cluster)
	if err != nil {
		return replaySample{}, err
	}
	ixs := newIndexers(w, c.cfg.Indexers, t.replay, true)
	res := c.bc.l.runIndexers(ctx, ixs, c.cfg.PerIndexer, 0, rawPosters)
	if err := ctx.Err(); err != nil {
		return replaySample{}, err
	}
	after, err := c.snap(ctx, t.cluster)
	if err != nil {
		return replaySample{}, err
	}
	if err := c.checkAlive(ctx, t); err != nil {
		return replaySample{}, err
	}
	return replaySample{newPhase(t.name, res, before, after)}, nil
}

// hits warms t up, then measures one window of w at conc against t's hit
// URL: on venn, calls the replay left in the follower's cache.
func (c *cacheRun) hits(ctx context.Context, t cacheTarget, w *workload, conc int, profile string) (hitSample, error) {
	n, per := hitConc(conc, c.cfg.Indexers)
	urls := []string{t.hits}
	if c.cfg.Warmup > 0 {
		c.bc.l.runIndexers(ctx, newIndexers(w, n, urls, false), per, c.cfg.Warmup, rawPosters)
	}
	cpu0, err := cpuOf(t.proc)
	if err != nil {
		return hitSample{}, err
	}
	upCPU0, err := cpuOf(c.bc.up)
	if err != nil {
		return hitSample{}, err
	}
	load0, err := cpuTime(os.Getpid())
	if err != nil {
		return hitSample{}, err
	}
	before, err := c.snap(ctx, t.cluster)
	if err != nil {
		return hitSample{}, err
	}
	prof := startProfile(ctx, t.pprof, profile, c.cfg.Duration)
	res := c.bc.l.runIndexers(ctx, newIndexers(w, n, urls, false), per, c.cfg.Duration, rawPosters)
	if err := ctx.Err(); err != nil {
		return hitSample{}, err
	}
	if err := prof(); err != nil {
		return hitSample{}, err
	}
	cpu1, err := cpuOf(t.proc)
	if err != nil {
		return hitSample{}, err
	}
	upCPU1, err := cpuOf(c.bc.up)
	if err != nil {
		return hitSample{}, err
	}
	load1, err := cpuTime(os.Getpid())
	if err != nil {
		return hitSample{}, err
	}
	after, err := c.snap(ctx, t.cluster)
	if err != nil {
		return hitSample{}, err
	}
	if err := c.checkAlive(ctx, t); err != nil {
		return hitSample{}, err
	}
	s := hitSample{phase: newPhase(t.name, res, before, after), Conc: conc, CPUPer: -1}
	if s.Calls > 0 {
		s.UpCPUPer = (upCPU1 - upCPU0) / time.Duration(s.Calls)
		s.LoadCPUPer = (load1 - load0) / time.Duration(s.Calls)
		if t.proc != nil {
			s.CPUPer = (cpu1 - cpu0) / time.Duration(s.Calls)
		}
	}
	return s, nil
}

// memSample is what the follower's memory grew by while it took in the
// fill's entries.
type memSample struct {
	Calls    int
	Errors   int
	ErrText  []string
	Upstream uint64
	// Entries is the growth of the memory tier's entries gauge; NaN when
	// venn has none (then the fill's calls stand in for it).
	Entries float64
	// CacheBytes is the growth of the memory tier's bytes gauge; NaN when
	// absent.
	CacheBytes float64
	RSS, Heap  float64 // process_resident_memory_bytes, go_memstats_heap_inuse_bytes
}

// per100k scales a growth to 100,000 entries; NaN when not measured. A
// process's memory can shrink over the fill (the collector returned what
// earlier phases left), which shows as a negative growth.
func (m memSample) per100k(v float64) float64 {
	n := m.Entries
	if math.IsNaN(n) || n <= 0 {
		n = float64(m.Calls - m.Errors)
	}
	if n <= 0 {
		return math.NaN()
	}
	return v * 100_000 / n
}

func (m memSample) String() string {
	return fmt.Sprintf("%d calls (%d errors), %.0f upstream, entries +%.0f, per 100k entries: cache bytes %.1f MiB, RSS %.1f MiB, heap %.1f MiB",
		m.Calls, m.Errors, float64(m.Upstream), m.Entries, mib(m.per100k(m.CacheBytes)), mib(m.per100k(m.RSS)), mib(m.per100k(m.Heap)))
}

// Names of the memory gauges the memory phase reads.
const (
	cacheEntriesGauge = "venn_cache_entries"
	cacheBytesGauge   = "venn_cache_bytes"
	rssGauge          = "process_resident_memory_bytes"
	heapGauge         = "go_memstats_heap_inuse_bytes"
	// fillWorkers is the memory phase's concurrency.
	fillWorkers = 64
)

// measureMemory sends r cfg.Fill distinct calls, each a new entry, and
// reads how its memory grew.
func (c *cacheRun) measureMemory(ctx context.Context, r *replica) (memSample, error) {
	fill, err := newFillWorkload(c.cfg.Fill, c.cfg.Spec.From-1, c.cfg.Spec.Holders, c.cfg.upstreamHead())
	if err != nil {
		return memSample{}, err
	}
	read := func() (metrics, uint64, error) {
		st, err := c.bc.l.upstreamStats(ctx, c.bc.upURL)
		if err != nil {
			return nil, 0, err
		}
		m, err := scrape(ctx, c.bc.l.statsClient, r.metrics)
		return m, st.State, err
	}
	m0, up0, err := read()
	if err != nil {
		return memSample{}, err
	}
	res := c.bc.l.runIndexers(ctx, newIndexers(fill, 1, []string{r.url}, true), fillWorkers, 0, rawPosters)
	if err := ctx.Err(); err != nil {
		return memSample{}, err
	}
	m1, up1, err := read()
	if err != nil {
		return memSample{}, err
	}
	memory := map[string]string{"chain": clusterChain, "tier": "memory"}
	growth := func(name string, want map[string]string) float64 {
		a, ok1 := m1.gauge(name, want)
		b, ok0 := m0.gauge(name, want)
		if !ok0 || !ok1 {
			return math.NaN()
		}
		return a - b
	}
	return memSample{
		Calls: res.OK + res.Errors, Errors: res.Errors, ErrText: res.ErrSample, Upstream: up1 - up0,
		Entries:    growth(cacheEntriesGauge, memory),
		CacheBytes: growth(cacheBytesGauge, memory),
		RSS:        growth(rssGauge, nil), Heap: growth(heapGauge, nil),
	}, nil
}

// startProfile asks the profiles at url for the CPU and the allocations
// over d and writes them to prefix.cpu and prefix.allocs; the func it
// returns waits for them and says how it went. prefix "" takes none.
func startProfile(ctx context.Context, url, prefix string, d time.Duration) func() error {
	if prefix == "" {
		return func() error { return nil }
	}
	secs := max(1, int(d.Round(time.Second)/time.Second))
	var g errgroup.Group
	for _, p := range []struct{ name, file string }{{"profile", ".cpu"}, {"allocs", ".allocs"}} {
		g.Go(func() error {
			return fetchProfile(ctx, fmt.Sprintf("%s%s?seconds=%d", url, p.name, secs), prefix+p.file)
		})
	}
	return g.Wait
}

func fetchProfile(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("cpu profile: %s", resp.Status)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("cpu profile: %w", err)
	}
	return f.Close()
}
