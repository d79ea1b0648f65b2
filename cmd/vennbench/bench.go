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

	"github.com/venn-gateway/venn/internal/freeport"
)

// The targets, in the order every round measures them.
const (
	targetDirect = "direct" // the upstream itself
	targetProxy  = "proxy"  // plain httputil.ReverseProxy in front of it
	targetVenn   = "venn"   // venn in front of it
	// targetNoCache is venn with the chain's cache off: what the cache
	// costs a call it cannot help is venn's figures over these.
	targetNoCache = "venn-nocache"
)

const (
	// vennReadyTimeout covers venn's start: config load, the remote's
	// chain-id check and the first head.
	vennReadyTimeout = 30 * time.Second
	// childReadyTimeout is for the upstream and the proxy, which answer at
	// once.
	childReadyTimeout = 10 * time.Second
	// vennStartAttempts retries venn's start when the port picked for it was
	// taken in between.
	vennStartAttempts = 3
)

// vennConfig is the bench chain: one remote, the upstream child, with room
// for every in-flight call; metrics on a port of their own (read only
// after a window), warnings only. The verbs after the port are the admin
// section (profiles) and, last, the chain's cache section.
const vennConfig = `listen: 127.0.0.1:%d
metrics_listen: 127.0.0.1:%d
log: {level: warn}
%s
chains:
  - name: bench
    chain_id: %d
    block_time: 1s
    remotes:
      - name: up
        url: %s
        max_in_flight: %d
%s`

// noCacheSection turns the bench chain's cache off.
const noCacheSection = "    cache: {enabled: false}\n"

// target is one thing the load is pointed at.
type target struct {
	name    string
	url     string
	proc    *child // nil for direct: the client talks to the upstream itself
	metrics string // venn's /metrics; "" for the others
}

// bench runs the whole benchmark and prints the report on stdout; progress
// and child failures go to stderr.
func bench(ctx context.Context, cfg benchConfig, stdout, stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("own executable: %w", err)
	}
	tmp, err := os.MkdirTemp("", "vennbench-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(tmp)

	wantVenn := slices.Contains(cfg.Targets, targetVenn) || slices.Contains(cfg.Targets, targetNoCache)
	vennBin := cfg.Venn
	if wantVenn {
		if vennBin, err = buildVennIfNeeded(ctx, vennBin, tmp, stderr); err != nil {
			return err
		}
	}

	l, err := newLoader()
	if err != nil {
		return err
	}
	defer l.close()

	up, upURL, err := l.startUpstream(ctx, exe)
	if err != nil {
		return err
	}
	defer up.Stop()

	var targets []target
	for _, name := range cfg.Targets {
		switch name {
		case targetDirect:
			targets = append(targets, target{name: name, url: upURL})
		case targetProxy:
			p, pURL, err := startProxy(ctx, l, exe, upURL)
			if err != nil {
				return err
			}
			defer p.Stop()
			targets = append(targets, target{name: name, url: pURL, proc: p})
		case targetVenn, targetNoCache:
			section := ""
			if name == targetNoCache {
				section = noCacheSection
			}
			v, vURL, mURL, err := startVenn(ctx, l, vennBin, upURL, tmp, profileExtra(cfg.Profile), section)
			if err != nil {
				return err
			}
			defer v.Stop()
			targets = append(targets, target{name: name, url: vURL, proc: v, metrics: mURL})
		}
	}

	env := machineInfo()
	loadBefore := loadAvg()
	fmt.Fprintf(stderr, "%s; %d rounds × %v (+%v warm-up) × conc %v × %v\n",
		env, cfg.Rounds, cfg.Duration, cfg.Warmup, cfg.Conc, cfg.Targets)

	var samples []sample
	for round := 1; round <= cfg.Rounds; round++ {
		for _, conc := range cfg.Conc {
			for _, t := range roundOrder(targets, round) {
				s, err := measure(ctx, l, t, up, conc, round, cfg)
				if err != nil {
					return err
				}
				s.Round = round
				samples = append(samples, s)
				fmt.Fprintf(stderr, "round %d/%d %s\n", round, cfg.Rounds, s)
			}
		}
	}

	return finish(stdout, newReport(samples, cfg), env, loadBefore)
}

// roundOrder is the order round measures targets in: as given in odd
// rounds, reversed in even ones, so that a machine growing busier or
// quieter over a round favours no target over its neighbour.
func roundOrder(targets []target, round int) []target {
	if round%2 == 1 {
		return targets
	}
	out := slices.Clone(targets)
	slices.Reverse(out)
	return out
}

// measure warms t up at conc, then measures one window: the load's view
// plus the CPU the target and the upstream processes used during it.
func measure(ctx context.Context, l *loader, t target, up *child, conc, round int, cfg benchConfig) (sample, error) {
	l.closeIdle()
	if cfg.Warmup > 0 {
		l.run(ctx, t.url, conc, cfg.Warmup)
	}
	if err := ctx.Err(); err != nil {
		return sample{}, err
	}

	var tCPU0, tCPU1 time.Duration
	var err error
	if t.proc != nil {
		if tCPU0, err = cpuTime(t.proc.Pid()); err != nil {
			return sample{}, err
		}
	}
	upCPU0, err := cpuTime(up.Pid())
	if err != nil {
		return sample{}, err
	}
	upStats0, err := l.upstreamStats(ctx, up.url)
	if err != nil {
		return sample{}, err
	}
	var prof func() error = func() error { return nil }
	prefix := ""
	if cfg.Profile != "" && t.metrics != "" {
		prefix = fmt.Sprintf("%s.%s.r%d.c%d", cfg.Profile, t.name, round, conc)
		prof = startProfile(ctx, strings.TrimSuffix(t.metrics, "/metrics")+"/admin/debug/pprof/", prefix, cfg.Duration)
	}
	res := l.run(ctx, t.url, conc, cfg.Duration)
	if err := prof(); err != nil {
		return sample{}, err
	}
	if t.proc != nil {
		if tCPU1, err = cpuTime(t.proc.Pid()); err != nil {
			return sample{}, err
		}
	}
	upCPU1, err := cpuTime(up.Pid())
	if err != nil {
		return sample{}, err
	}
	upStats1, err := l.upstreamStats(ctx, up.url)
	if err != nil {
		return sample{}, err
	}
	if err := ctx.Err(); err != nil {
		return sample{}, err
	}
	for _, c := range []*child{up, t.proc} {
		if c == nil {
			continue
		}
		if done, werr := c.Exited(); done {
			return sample{}, fmt.Errorf("%s exited during the run: %v%s", c.Name, werr, c.StderrNote())
		}
	}
	rss, entries, cacheBytes := int64(-1), -1.0, -1.0
	if t.proc != nil {
		if rss, err = rssOf(t.proc.Pid()); err != nil {
			return sample{}, err
		}
	}
	if t.metrics != "" {
		m, err := scrape(ctx, l.statsClient, t.metrics)
		if err != nil {
			return sample{}, fmt.Errorf("%s: %w", t.name, err)
		}
		if v, ok := m.gauge("venn_cache_entries", map[string]string{"tier": "memory"}); ok {
			entries = v
		}
		if v, ok := m.gauge("venn_cache_bytes", map[string]string{"tier": "memory"}); ok {
			cacheBytes = v
		}
	}
	if prefix != "" {
		if err := fetchProfile(ctx, strings.TrimSuffix(t.metrics, "/metrics")+"/admin/debug/pprof/heap", prefix+".heap"); err != nil {
			return sample{}, err
		}
	}

	s := sample{
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
		UpConns:  upStats1.Conns - upStats0.Conns,
		RSS:      rss,
		Entries:  entries,
		CacheB:   cacheBytes,
	}
	if calls := res.OK + res.Errors; calls > 0 {
		s.UpReqPer = float64(upStats1.Requests-upStats0.Requests) / float64(calls)
		if t.proc != nil {
			s.CPUPer = (tCPU1 - tCPU0) / time.Duration(calls)
		}
		s.UpCPUPer = (upCPU1 - upCPU0) / time.Duration(calls)
	}
	return s, nil
}

// startProxy starts the plain reverse proxy child in front of upURL and
// waits until it serves.
func startProxy(ctx context.Context, l *loader, exe, upURL string) (*child, string, error) {
	p, pURL, err := startChild(ctx, "proxy", true, exe, "proxy", "-listen", "127.0.0.1:0", "-to", upURL)
	if err != nil {
		return nil, "", err
	}
	if err := l.waitReady(ctx, pURL, p, childReadyTimeout); err != nil {
		p.Stop()
		return nil, "", err
	}
	return p, pURL, nil
}

// startVenn writes the bench config, with admin at the top and section
// under the chain, and
// starts venn on free ports, then waits until it answers a balance call
// through the upstream: venn, its URL and its /metrics.
func startVenn(ctx context.Context, l *loader, bin, upURL, dir, admin, section string) (*child, string, string, error) {
	var lastErr error
	for range vennStartAttempts {
		port, err := freeport.Port() // startVenn retries if it is taken in between
		if err != nil {
			return nil, "", "", err
		}
		mport, err := freeport.Port()
		if err != nil {
			return nil, "", "", err
		}
		f, err := os.CreateTemp(dir, "venn-*.yaml")
		if err != nil {
			return nil, "", "", fmt.Errorf("venn config: %w", err)
		}
		path := f.Name()
		f.Close()
		conf := fmt.Sprintf(vennConfig, port, mport, admin, benchChainID, upURL, proxyIdlePerHost, section)
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			return nil, "", "", fmt.Errorf("write venn config: %w", err)
		}
		v, _, err := startChild(ctx, "venn", false, bin, "serve", "--config", path)
		if err != nil {
			return nil, "", "", err
		}
		url := "http://127.0.0.1:" + strconv.Itoa(port) + "/bench"
		lastErr = l.waitReady(ctx, url, v, vennReadyTimeout)
		if lastErr == nil {
			return v, url, "http://127.0.0.1:" + strconv.Itoa(mport) + "/metrics", nil
		}
		v.Stop()
		if ctx.Err() != nil {
			return nil, "", "", ctx.Err()
		}
		// Only a process that died (a lost port race) is worth a retry;
		// one that runs but never answers will not do better next time.
		if done, _ := v.Exited(); !done || !strings.Contains(v.Stderr(), "address already in use") {
			break
		}
	}
	return nil, "", "", fmt.Errorf("start venn: %w", lastErr)
}
