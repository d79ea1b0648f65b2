package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// The goals for venn against the plain proxy.
const (
	goalThroughput = 0.80 // venn req/s ÷ proxy req/s at the top concurrency, at least
	goalAddedP50   = 1.20 // venn added p50 ÷ proxy added p50 at concurrency 1, at most
	goalCPU        = 1.30 // venn CPU/req ÷ proxy CPU/req, at most
)

// sample is one measured window: one target at one concurrency in one round.
type sample struct {
	Target   string
	Conc     int
	Round    int
	OK       int
	Errors   int
	ErrText  []string
	RPS      float64
	P50, P99 time.Duration
	CPUPer   time.Duration // target process CPU per call; -1 for direct
	UpCPUPer time.Duration // upstream process CPU per call
	UpReqPer float64       // HTTP requests that reached the upstream per call
	UpConns  uint64        // connections the upstream accepted in the window
	RSS      int64         // the target's resident set at the window's end; -1 for direct
	Entries  float64       // venn's memory-tier entries at the window's end; -1 without a cache
	CacheB   float64       // the bytes they are weighed at; -1 without a cache
}

func (s sample) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "c=%-3d %-6s %8.0f req/s  p50 %s  p99 %s  cpu %s/req  upstream cpu %s/req, %.2f req/call, %d new conns",
		s.Conc, s.Target, s.RPS, us(s.P50), us(s.P99), us(s.CPUPer), us(s.UpCPUPer), s.UpReqPer, s.UpConns)
	if s.RSS >= 0 {
		fmt.Fprintf(&b, "  RSS %.1f MiB", mib(float64(s.RSS)))
	}
	if s.Entries >= 0 {
		fmt.Fprintf(&b, ", cache %.0f entries %.1f MiB", s.Entries, mib(s.CacheB))
	}
	if s.Errors > 0 {
		fmt.Fprintf(&b, "  ERRORS %d: %s", s.Errors, strings.Join(s.ErrText, " | "))
	}
	return b.String()
}

// percentile is the nearest-rank p-th percentile of sorted; 0 when empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// median of xs; NaN when empty. For an even count, the mean of the middle
// two.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// report holds every window of a run, indexed by round, target and
// concurrency.
type report struct {
	cfg     benchConfig
	samples []sample
	by      map[key]sample
}

type key struct {
	round  int
	target string
	conc   int
}

func newReport(samples []sample, cfg benchConfig) *report {
	r := &report{cfg: cfg, samples: samples, by: map[key]sample{}}
	for _, s := range samples {
		r.by[key{s.Round, s.Target, s.Conc}] = s
	}
	return r
}

func (r *report) errors() int {
	n := 0
	for _, s := range r.samples {
		n += s.Errors
	}
	return n
}

// perRound applies f to the windows of each round that measured all of
// targets at conc and returns the values f could compute.
func (r *report) perRound(conc int, targets []string, f func(map[string]sample) (float64, bool)) []float64 {
	return perRound(r.cfg.Rounds, targets, func(round int, t string) (sample, bool) {
		s, ok := r.by[key{round, t, conc}]
		return s, ok
	}, f)
}

// perRound applies f, in each of rounds, to the samples lookup finds for
// every one of targets, and returns the values f could compute; a round
// missing any target's sample is skipped.
func perRound[S any](rounds int, targets []string, lookup func(round int, target string) (S, bool),
	f func(map[string]S) (float64, bool)) []float64 {
	var out []float64
	for round := 1; round <= rounds; round++ {
		m := make(map[string]S, len(targets))
		for _, t := range targets {
			s, ok := lookup(round, t)
			if !ok {
				break
			}
			m[t] = s
		}
		if len(m) != len(targets) {
			continue
		}
		if v, ok := f(m); ok {
			out = append(out, v)
		}
	}
	return out
}

// medianOf is the median over rounds of one field of target at conc.
func (r *report) medianOf(target string, conc int, field func(sample) float64) float64 {
	return median(r.perRound(conc, []string{target}, func(m map[string]sample) (float64, bool) {
		v := field(m[target])
		return v, v >= 0
	}))
}

func (r *report) write(w io.Writer, env string) {
	fmt.Fprintf(w, "Machine: %s\n\n", env)
	fmt.Fprintf(w, "eth_getBalance, fresh address per call; %d rounds of %v windows (after %v warm-up each), targets interleaved per round; medians across rounds.\n\n",
		r.cfg.Rounds, r.cfg.Duration, r.cfg.Warmup)
	fmt.Fprintln(w, "| target | conc | req/s | p50 µs | p99 µs | target CPU µs/req | upstream CPU µs/req | upstream HTTP req/call | upstream conns opened | target RSS MiB | cache entries | errors |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, conc := range r.cfg.Conc {
		for _, t := range r.cfg.Targets {
			errs := 0
			for _, s := range r.samples {
				if s.Target == t && s.Conc == conc {
					errs += s.Errors
				}
			}
			cpu, rss, entries := "—", "—", "—"
			if t != targetDirect {
				cpu = fmt.Sprintf("%.1f", r.medianOf(t, conc, func(s sample) float64 { return micros(s.CPUPer) }))
				rss = fmt.Sprintf("%.1f", r.medianOf(t, conc, func(s sample) float64 { return mibOr(s.RSS) }))
			}
			if t == targetVenn {
				entries = fmt.Sprintf("%.0f", r.medianOf(t, conc, func(s sample) float64 { return s.Entries }))
			}
			fmt.Fprintf(w, "| %s | %d | %.0f | %.1f | %.1f | %s | %.1f | %.2f | %.0f | %s | %s | %d |\n", t, conc,
				r.medianOf(t, conc, func(s sample) float64 { return s.RPS }),
				r.medianOf(t, conc, func(s sample) float64 { return micros(s.P50) }),
				r.medianOf(t, conc, func(s sample) float64 { return micros(s.P99) }),
				cpu,
				r.medianOf(t, conc, func(s sample) float64 { return micros(s.UpCPUPer) }),
				r.medianOf(t, conc, func(s sample) float64 { return s.UpReqPer }),
				r.medianOf(t, conc, func(s sample) float64 { return float64(s.UpConns) }),
				rss, entries, errs)
		}
	}
	fmt.Fprintln(w)
	r.writeGoals(w)
	fmt.Fprintln(w)
	r.writeCacheCost(w)
	r.writeErrors(w)
}

// The goals for what the cache costs a call it cannot help.
const (
	goalCacheRSS = 1.20 // venn's RSS ÷ venn-nocache's, at most
	goalCacheCPU = 1.03 // venn's CPU/req ÷ venn-nocache's, at most
)

// writeCacheCost compares venn with venn-nocache: every call a miss, so
// whatever venn spends more is the cache's cost. Ratios pair windows of
// one round, medians over rounds.
func (r *report) writeCacheCost(w io.Writer) {
	if !slices.Contains(r.cfg.Targets, targetVenn) || !slices.Contains(r.cfg.Targets, targetNoCache) {
		return
	}
	vn := []string{targetVenn, targetNoCache}
	fmt.Fprintln(w, "| cache on ÷ off | measured (median over rounds; per-round ratios) | limit | result |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, conc := range r.cfg.Conc {
		per := r.perRound(conc, vn, func(m map[string]sample) (float64, bool) {
			return float64(m[targetVenn].CPUPer) / float64(m[targetNoCache].CPUPer), m[targetNoCache].CPUPer > 0
		})
		cpu := median(per)
		fmt.Fprintf(w, "| CPU/req at c=%d | %.3f (on %.1f µs, off %.1f µs; %s) | ≤ %.2f | %s |\n", conc, cpu,
			r.medianOf(targetVenn, conc, func(s sample) float64 { return micros(s.CPUPer) }),
			r.medianOf(targetNoCache, conc, func(s sample) float64 { return micros(s.CPUPer) }),
			joinRatios(per), goalCacheCPU, verdict(cpu <= goalCacheCPU, cpu))
	}
	// RSS only grows over a run, so the last concurrency of the last
	// round is where the cache holds the most.
	last := r.cfg.Conc[len(r.cfg.Conc)-1]
	per := r.perRound(last, vn, func(m map[string]sample) (float64, bool) {
		return float64(m[targetVenn].RSS) / float64(m[targetNoCache].RSS), m[targetNoCache].RSS > 0
	})
	on, ok1 := r.by[key{r.cfg.Rounds, targetVenn, last}]
	off, ok2 := r.by[key{r.cfg.Rounds, targetNoCache, last}]
	if ok1 && ok2 && off.RSS > 0 {
		ratio := float64(on.RSS) / float64(off.RSS)
		fmt.Fprintf(w, "| RSS at the end (c=%d, round %d) | %.2f (on %.1f MiB holding %.0f entries, %.1f MiB weighed; off %.1f MiB; earlier rounds %s) | ≤ %.2f | %s |\n",
			last, r.cfg.Rounds, ratio, mib(float64(on.RSS)), on.Entries, mib(on.CacheB), mib(float64(off.RSS)), joinRatios(per),
			goalCacheRSS, verdict(ratio <= goalCacheRSS, ratio))
	}
	fmt.Fprintln(w)
}

// joinRatios prints per-round ratios for the report.
func joinRatios(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.3f", x)
	}
	return strings.Join(parts, " ")
}

// mibOr is b in MiB; -1 when not measured.
func mibOr(b int64) float64 {
	if b < 0 {
		return -1
	}
	return mib(float64(b))
}

// writeGoals compares venn with the plain proxy. Every ratio pairs windows
// of the same round (measured seconds apart), then takes the median over
// rounds, so drift on a shared machine cancels out.
func (r *report) writeGoals(w io.Writer) {
	if !slices.Contains(r.cfg.Targets, targetVenn) || !slices.Contains(r.cfg.Targets, targetProxy) {
		fmt.Fprintln(w, "Goals: not evaluated (needs both the proxy and venn targets).")
		return
	}
	top, low := slices.Max(r.cfg.Conc), slices.Min(r.cfg.Conc)
	fmt.Fprintln(w, "| goal | measured (median over rounds) | limit | result |")
	fmt.Fprintln(w, "|---|---|---|---|")

	vp := []string{targetVenn, targetProxy}
	tput := median(r.perRound(top, vp, func(m map[string]sample) (float64, bool) {
		return m[targetVenn].RPS / m[targetProxy].RPS, m[targetProxy].RPS > 0
	}))
	fmt.Fprintf(w, "| throughput venn ÷ proxy at c=%d | %.2f (venn %.0f req/s, proxy %.0f req/s) | ≥ %.2f | %s |\n",
		top, tput,
		r.medianOf(targetVenn, top, func(s sample) float64 { return s.RPS }),
		r.medianOf(targetProxy, top, func(s sample) float64 { return s.RPS }),
		goalThroughput, verdict(tput >= goalThroughput, tput))

	if slices.Contains(r.cfg.Targets, targetDirect) {
		// Added latency is a difference of close numbers, so its ratio is
		// taken between the medians of the per-round differences rather
		// than as a median of per-round ratios, which a single round with
		// a tiny proxy difference would swing.
		added := func(t string) float64 {
			return median(r.perRound(low, []string{t, targetDirect}, func(m map[string]sample) (float64, bool) {
				return micros(m[t].P50) - micros(m[targetDirect].P50), true
			}))
		}
		av, ap := added(targetVenn), added(targetProxy)
		ratio := math.NaN()
		if ap > 0 {
			ratio = av / ap
		}
		fmt.Fprintf(w, "| added p50 venn ÷ proxy at c=%d | %.2f (venn +%.1f µs, proxy +%.1f µs over direct %.1f µs) | ≤ %.2f | %s |\n",
			low, ratio, av, ap,
			r.medianOf(targetDirect, low, func(s sample) float64 { return micros(s.P50) }),
			goalAddedP50, verdict(ratio <= goalAddedP50, ratio))
	} else {
		fmt.Fprintln(w, "| added p50 venn ÷ proxy | not evaluated (needs the direct target) | | |")
	}

	for _, conc := range r.cfg.Conc {
		cpu := median(r.perRound(conc, vp, func(m map[string]sample) (float64, bool) {
			return float64(m[targetVenn].CPUPer) / float64(m[targetProxy].CPUPer), m[targetProxy].CPUPer > 0
		}))
		fmt.Fprintf(w, "| CPU/req venn ÷ proxy at c=%d | %.2f (venn %.1f µs, proxy %.1f µs) | ≤ %.2f | %s |\n",
			conc, cpu,
			r.medianOf(targetVenn, conc, func(s sample) float64 { return micros(s.CPUPer) }),
			r.medianOf(targetProxy, conc, func(s sample) float64 { return micros(s.CPUPer) }),
			goalCPU, verdict(cpu <= goalCPU, cpu))
	}
}

// writeErrors lists every window that had failed calls, so a run with
// errors says so next to its numbers.
func (r *report) writeErrors(w io.Writer) {
	n := r.errors()
	if n == 0 {
		fmt.Fprintln(w, "Errors: none (every call was checked for a hex result with its own id).")
		return
	}
	fmt.Fprintf(w, "Errors: %d failed calls.\n", n)
	for _, s := range r.samples {
		if s.Errors > 0 {
			fmt.Fprintf(w, "- round %d %s c=%d: %d errors: %s\n", s.Round, s.Target, s.Conc, s.Errors, strings.Join(s.ErrText, " | "))
		}
	}
}

func verdict(pass bool, v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case pass:
		return "PASS"
	default:
		return "FAIL"
	}
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// us formats d in microseconds for progress lines; "—" when not measured.
func us(d time.Duration) string {
	if d < 0 {
		return "—"
	}
	return fmt.Sprintf("%.1fµs", micros(d))
}

// benchReport is what a bench prints and how many of its calls failed.
type benchReport interface {
	write(w io.Writer, env string)
	errors() int
}

// finish prints rep with the machine and its load before and now, and
// fails the run when calls failed.
func finish(stdout io.Writer, rep benchReport, env, loadBefore string) error {
	rep.write(stdout, fmt.Sprintf("%s; load average %s before, %s after", env, loadBefore, loadAvg()))
	if n := rep.errors(); n > 0 {
		return fmt.Errorf("%d calls failed; the numbers above are not trustworthy", n)
	}
	return nil
}

func mib(v float64) float64 { return v / (1 << 20) }

// ms formats seconds as milliseconds; "—" for NaN.
func ms(sec float64) string {
	if math.IsNaN(sec) {
		return "—"
	}
	return fmt.Sprintf("%.2f", sec*1000)
}
