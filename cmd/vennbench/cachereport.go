package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// cacheReport holds every phase of a cache run.
type cacheReport struct {
	cfg      cacheConfig
	calls    int // calls of one indexer's pass (the last round's)
	distinct int // distinct among them
	replays  []replaySample
	hits     []hitSample
	mem      memSample // zero without the memory phase
}

func (r *cacheReport) errors() int {
	n := r.mem.Errors
	for _, s := range r.replays {
		n += s.Errors
	}
	for _, s := range r.hits {
		n += s.Errors
	}
	return n
}

// replayMedian is the median over rounds of one field of target's replay.
func (r *cacheReport) replayMedian(target string, f func(replaySample) float64) float64 {
	var xs []float64
	for _, s := range r.replays {
		if s.Target == target {
			xs = append(xs, f(s))
		}
	}
	return median(xs)
}

// hitMedian is the median over rounds of one field of target's window at
// conc; fields below zero are "not measured" and left out.
func (r *cacheReport) hitMedian(target string, conc int, f func(hitSample) float64) float64 {
	var xs []float64
	for _, s := range r.hits {
		if v := f(s); s.Target == target && s.Conc == conc && v >= 0 {
			xs = append(xs, v)
		}
	}
	return median(xs)
}

// hitRatios are venn ÷ proxy of one field at conc, per round.
func (r *cacheReport) hitRatios(conc int, f func(hitSample) float64) []float64 {
	by := map[int]map[string]hitSample{}
	for _, s := range r.hits {
		if s.Conc == conc {
			if by[s.Round] == nil {
				by[s.Round] = map[string]hitSample{}
			}
			by[s.Round][s.Target] = s
		}
	}
	var out []float64
	for round := 1; round <= r.cfg.Rounds; round++ {
		v, ok1 := by[round][targetVenn]
		p, ok2 := by[round][targetProxy]
		if ok1 && ok2 && f(p) > 0 {
			out = append(out, f(v)/f(p))
		}
	}
	return out
}

// tiers are the cache tiers any phase saw hits in, memory first.
func (r *cacheReport) tiers() []string {
	seen := map[string]float64{}
	for _, s := range r.replays {
		for t := range s.Hits {
			seen[t] = 1
		}
	}
	for _, s := range r.hits {
		for t := range s.Hits {
			seen[t] = 1
		}
	}
	return sortedTiers(seen)
}

func (r *cacheReport) write(w io.Writer, env string) {
	fmt.Fprintf(w, "Machine: %s\n\n", env)
	r.writeWorkload(w)
	r.writeReplay(w)
	r.writeHits(w)
	r.writeMemory(w)
	r.writeGoals(w)
	r.writeErrors(w)
}

func (r *cacheReport) writeWorkload(w io.Writer) {
	c := r.cfg
	n := c.Indexers
	fmt.Fprintf(w, "Workload per round: %d settled blocks × %d events × 3 calls (eth_call balanceOf, eth_getBalance, eth_getCode at the event's block) = %d calls per indexer, %d of them distinct (%.1f%% repeat an earlier call of the same indexer); %d indexers replay it, the i-th starting i/%d of the way in; on venn they alternate between the leader and the follower. Each round reads the next %d blocks, so every round's replay starts cold. A cluster-wide cache asks upstream at best distinct ÷ (indexers × calls) = %.4f per client call.\n\n",
		c.Spec.Blocks, c.Spec.Events, r.calls, r.distinct, 100*(1-float64(r.distinct)/float64(max(r.calls, 1))),
		n, n, c.Spec.Blocks, float64(r.distinct)/float64(max(n*r.calls, 1)))
}

func (r *cacheReport) writeReplay(w io.Writer) {
	tiers := r.tiers()
	fmt.Fprintf(w, "Replay (%d calls in flight per indexer; medians over %d rounds):\n\n", r.cfg.PerIndexer, r.cfg.Rounds)
	head := "| target | client calls | upstream state calls | upstream calls per client call | calls/s | p50 µs | p99 µs |"
	rule := "|---|---:|---:|---:|---:|---:|---:|"
	for _, t := range tiers {
		head += " " + t + " hits |"
		rule += "---:|"
	}
	fmt.Fprintln(w, head+" errors |")
	fmt.Fprintln(w, rule+"---:|")
	for _, t := range []string{targetDirect, targetProxy, targetVenn} {
		med := func(f func(replaySample) float64) float64 { return r.replayMedian(t, f) }
		row := fmt.Sprintf("| %s | %.0f | %.0f | %.4f | %.0f | %.1f | %.1f |", t,
			med(func(s replaySample) float64 { return float64(s.Calls) }),
			med(func(s replaySample) float64 { return float64(s.Upstream) }),
			med(func(s replaySample) float64 { return s.UpPer() }),
			med(func(s replaySample) float64 { return s.RPS }),
			med(func(s replaySample) float64 { return micros(s.P50) }),
			med(func(s replaySample) float64 { return micros(s.P99) }))
		for _, tier := range tiers {
			row += cellOr(t == targetVenn, "%.4f", med(func(s replaySample) float64 { return s.HitsPer(tier) }))
		}
		errs := 0
		for _, s := range r.replays {
			if s.Target == t {
				errs += s.Errors
			}
		}
		fmt.Fprintf(w, "%s %d |\n", row, errs)
	}
	fmt.Fprintln(w)
}

// cellOr is a table cell of v, or "—" when not measured.
func cellOr(measured bool, format string, v float64) string {
	if !measured {
		return " — |"
	}
	return " " + fmt.Sprintf(format, v) + " |"
}

func (r *cacheReport) writeHits(w io.Writer) {
	fmt.Fprintf(w, "Hit phase (the same sequence after the replay; venn: the follower alone; %v windows after %v warm-up, medians over rounds):\n\n",
		r.cfg.Duration, r.cfg.Warmup)
	fmt.Fprintln(w, "| target | conc | req/s | p50 µs | p99 µs | target CPU µs/req | upstream CPU µs/req | load generator CPU µs/req | upstream calls per client call | memory hits | errors |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, conc := range r.cfg.Conc {
		for _, t := range []string{targetDirect, targetProxy, targetVenn} {
			med := func(f func(hitSample) float64) float64 { return r.hitMedian(t, conc, f) }
			errs := 0
			for _, s := range r.hits {
				if s.Target == t && s.Conc == conc {
					errs += s.Errors
				}
			}
			fmt.Fprintf(w, "| %s | %d | %.0f | %.1f | %.1f |%s %.1f | %.1f | %.4f |%s %d |\n", t, conc,
				med(func(s hitSample) float64 { return s.RPS }),
				med(func(s hitSample) float64 { return micros(s.P50) }),
				med(func(s hitSample) float64 { return micros(s.P99) }),
				cellOr(t != targetDirect, "%.1f", med(func(s hitSample) float64 { return micros(s.CPUPer) })),
				med(func(s hitSample) float64 { return micros(s.UpCPUPer) }),
				med(func(s hitSample) float64 { return micros(s.LoadCPUPer) }),
				med(func(s hitSample) float64 { return s.UpPer() }),
				cellOr(t == targetVenn, "%.4f", med(func(s hitSample) float64 { return s.HitsPer("memory") })),
				errs)
		}
	}
	fmt.Fprintln(w)
}

func (r *cacheReport) writeMemory(w io.Writer) {
	m := r.mem
	if m.Calls == 0 {
		return
	}
	entries := "the fill's calls (venn has no entries gauge)"
	if !math.IsNaN(m.Entries) {
		entries = fmt.Sprintf("%.0f (%s{tier=\"memory\"} growth)", m.Entries, cacheEntriesGauge)
	}
	fmt.Fprintf(w, "Memory: the follower took in %d distinct eth_call answers (%d upstream calls); entries: %s. Growth scaled to 100,000 entries:\n\n",
		m.Calls-m.Errors, m.Upstream, entries)
	fmt.Fprintln(w, "| measure | MiB per 100k entries |")
	fmt.Fprintln(w, "|---|---:|")
	for _, row := range []struct {
		name string
		v    float64
	}{
		{cacheBytesGauge + `{tier="memory"}`, m.CacheBytes},
		{rssGauge, m.RSS},
		{heapGauge, m.Heap},
	} {
		v := m.per100k(row.v)
		fmt.Fprintf(w, "| %s |%s\n", row.name, cellOr(!math.IsNaN(v), "%.1f", mib(v)))
	}
	fmt.Fprintln(w)
}

func (r *cacheReport) writeGoals(w io.Writer) {
	top := slices.Max(r.cfg.Conc)
	rps := func(s hitSample) float64 { return s.RPS }
	ratios := r.hitRatios(top, rps)
	tput := median(ratios)
	up := r.replayMedian(targetVenn, func(s replaySample) float64 { return s.UpPer() })
	limit := 1 / float64(r.cfg.Indexers)
	fmt.Fprintln(w, "| goal | measured (median over rounds) | limit | result |")
	fmt.Fprintln(w, "|---|---|---|---|")
	fmt.Fprintf(w, "| throughput of venn's hits ÷ the proxy's pass-through at c=%d | %.2f (venn %.0f req/s, proxy %.0f req/s; per round %s) | ≥ %.2f | %s |\n",
		top, tput, r.hitMedian(targetVenn, top, rps), r.hitMedian(targetProxy, top, rps), joinFloats(ratios),
		goalHitThroughput, verdict(tput >= goalHitThroughput, tput))
	fmt.Fprintf(w, "| the cluster's upstream calls per client call, %d indexers' replay | %.4f | ≤ 1/%d = %.4f | %s |\n",
		r.cfg.Indexers, up, r.cfg.Indexers, limit, verdict(up <= limit, up))
	fmt.Fprintln(w)
	// The servers' own capacity, whatever share of the cores the load
	// generator takes: a hit costs the follower its CPU; a pass-through
	// call costs the proxy its CPU and the upstream its own.
	capRatio := median(r.hitRatios(top, func(s hitSample) float64 { return 1 / micros(s.CPUPer+s.UpCPUPer) }))
	fmt.Fprintf(w, "CPU per call at c=%d, venn's hit against the proxy's pass-through plus the upstream's answer: %.2f× the calls per CPU second (median of per-round ratios).\n\n",
		top, capRatio)
}

func joinFloats(xs []float64) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%.2f", x)
	}
	return b.String()
}

func (r *cacheReport) writeErrors(w io.Writer) {
	if r.errors() == 0 {
		fmt.Fprintln(w, "Errors: none (every answer was checked byte for byte against the fake chain's).")
		return
	}
	fmt.Fprintf(w, "Errors: %d failed calls.\n", r.errors())
	for _, s := range r.replays {
		if s.Errors > 0 {
			fmt.Fprintf(w, "- round %d replay %s: %d errors: %s\n", s.Round, s.Target, s.Errors, strings.Join(s.ErrText, " | "))
		}
	}
	for _, s := range r.hits {
		if s.Errors > 0 {
			fmt.Fprintf(w, "- round %d hits %s c=%d: %d errors: %s\n", s.Round, s.Target, s.Conc, s.Errors, strings.Join(s.ErrText, " | "))
		}
	}
	if r.mem.Errors > 0 {
		fmt.Fprintf(w, "- memory fill: %d errors: %s\n", r.mem.Errors, strings.Join(r.mem.ErrText, " | "))
	}
}
