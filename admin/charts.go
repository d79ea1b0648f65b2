package admin

import (
	"context"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// The status page's charts: what happened to each chain over the last
// chartSteps steps (15 minutes at the default step), kept in memory on
// every replica. A sampler reads the registry's counters every step into
// a bounded ring per chain; a page turns consecutive samples, and one
// taken as it renders, into per-step figures, so every figure of a card
// is over one window: from the oldest sample kept to now.

// chartSteps is how many steps the ring keeps.
const chartSteps = 90

// chartSources are the parts that answer calls as the charts name them;
// "venn" gathers what venn answers itself (local, forger).
var chartSources = [...]string{"head", "history", "cache", "remotes", "venn"}

// chartSource maps venn_answers_total's source label to chartSources.
func chartSource(s string) int {
	switch s {
	case "head":
		return 0
	case "history":
		return 1
	case "cache":
		return 2
	case "remotes":
		return 3
	default:
		return 4
	}
}

// bucket is a histogram bucket, cumulative: calls that took at most le
// seconds.
type bucket struct{ le, n float64 }

// remoteSample is one remote's counters at a sample.
type remoteSample struct {
	calls   float64
	buckets []bucket // ascending le, cumulative counts
}

// chainSample is one chain's counters at a sample.
type chainSample struct {
	at               time.Time
	answers          [len(chartSources)]float64
	requests, errors float64
	headAge          float64 // seconds; NaN before the first head
	remotes          map[string]remoteSample
}

// chartRing holds each chain's samples, oldest first: at most
// chartSteps+1 of them, so chartSteps steps.
type chartRing struct {
	mu      sync.Mutex
	byChain map[string][]chainSample
}

// add keeps the samples taken at one step; chains without one are
// dropped (removed by a reload).
func (r *chartRing) add(ss map[string]chainSample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byChain == nil {
		r.byChain = map[string][]chainSample{}
	}
	for c := range r.byChain {
		if _, ok := ss[c]; !ok {
			delete(r.byChain, c)
		}
	}
	for c, s := range ss {
		ring := r.byChain[c]
		if n := len(ring); n > 0 && s.requests < ring[n-1].requests {
			ring = nil // the counters started again: the chain was rebuilt
		}
		if len(ring) > chartSteps {
			ring = slices.Delete(ring, 0, len(ring)-chartSteps)
		}
		r.byChain[c] = append(ring, s)
	}
}

// samples returns chain's samples and live after them, when it is newer.
func (r *chartRing) samples(chain string, live chainSample) []chainSample {
	r.mu.Lock()
	ring := slices.Clone(r.byChain[chain])
	r.mu.Unlock()
	if n := len(ring); n == 0 || live.at.After(ring[n-1].at) && live.requests >= ring[n-1].requests {
		ring = append(ring, live)
	}
	return ring
}

// sampleCharts reads every chain's counters now from the gathered mfs and
// the pools.
func sampleCharts(mfs []*dto.MetricFamily, cs []Chain, now time.Time) map[string]chainSample {
	out := make(map[string]chainSample, len(cs))
	for _, c := range cs {
		s := chainSample{at: now, headAge: math.NaN(), remotes: map[string]remoteSample{}}
		if hs := c.Heads.HeadStatus(); !hs.Time.IsZero() {
			s.headAge = max(now.Sub(hs.Time), 0).Seconds()
		}
		for _, rs := range c.Pool.Status() {
			s.remotes[rs.Name] = remoteSample{}
		}
		out[c.Name] = s
	}
	for _, mf := range mfs {
		name := mf.GetName()
		for _, m := range mf.GetMetric() {
			s, ok := out[label(m, "chain")]
			if !ok {
				continue
			}
			switch name {
			case "venn_answers_total":
				s.answers[chartSource(label(m, "source"))] += m.GetCounter().GetValue()
			case "venn_requests_total":
				v := m.GetCounter().GetValue()
				s.requests += v
				if label(m, "outcome") != "ok" {
					s.errors += v
				}
			case "venn_remote_calls_total":
				r, ok := s.remotes[label(m, "remote")]
				if !ok {
					continue
				}
				r.calls += m.GetCounter().GetValue()
				s.remotes[label(m, "remote")] = r
			case "venn_remote_call_duration_seconds":
				r, ok := s.remotes[label(m, "remote")]
				if !ok {
					continue
				}
				h := m.GetHistogram()
				r.buckets = make([]bucket, 0, len(h.GetBucket())+1)
				for _, b := range h.GetBucket() {
					r.buckets = append(r.buckets, bucket{le: b.GetUpperBound(), n: float64(b.GetCumulativeCount())})
				}
				r.buckets = append(r.buckets, bucket{le: math.Inf(1), n: float64(h.GetSampleCount())})
				s.remotes[label(m, "remote")] = r
			}
			out[label(m, "chain")] = s
		}
	}
	return out
}

// runCharts samples every step until ctx ends, the first at once.
func (a *Admin) runCharts(ctx context.Context) {
	step := a.opts.Config.ChartStep
	t := time.NewTicker(step)
	defer t.Stop()
	for {
		a.charts.add(sampleCharts(gather(a.opts.Gatherer), a.chainList(), a.now()))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ChartView is one chain's figures over one window, from the oldest
// sample kept to now: totals and per-step charts.
type ChartView struct {
	WindowSeconds float64 `json:"window_seconds"`
	Calls         float64 `json:"calls"`
	Errors        float64 `json:"errors"`
	ErrorShare    float64 `json:"error_share"`
	// Answers by source (chartSources) over the window.
	Answers []SourceCount `json:"answers"`
	// Charts: calls by source (per second), error share (%), head age
	// (s), each remote's latency p50 and p99 (ms), each remote's share of
	// the calls sent upstream (%).
	CallsChart   Chart   `json:"-"`
	ErrorsChart  Chart   `json:"-"`
	HeadAgeChart Chart   `json:"-"`
	Latency      []Chart `json:"-"`
	ShareChart   Chart   `json:"-"`
}

// SourceCount is the calls one source answered.
type SourceCount struct {
	Source string  `json:"source"`
	Calls  float64 `json:"calls"`
}

// Chart is lines over the window; each point at the end of its step,
// at X seconds from the window's start.
type Chart struct {
	Title string    `json:"title"`
	Unit  string    `json:"unit"`
	X     []float64 `json:"-"`
	Lines []Line    `json:"lines"`
}

// Line is one series of a chart; NaN (null in JSON) where it has no
// value.
type Line struct {
	Name   string    `json:"name"`
	Points []float64 `json:"-"`
	Last   float64   `json:"last"`
}

// chartView turns chain's samples into its figures.
func chartView(ss []chainSample) ChartView {
	v := ChartView{}
	if len(ss) == 0 {
		return v
	}
	first, last := ss[0], ss[len(ss)-1]
	v.WindowSeconds = last.at.Sub(first.at).Seconds()
	v.Calls, v.Errors = last.requests-first.requests, last.errors-first.errors
	if v.Calls > 0 {
		v.ErrorShare = v.Errors / v.Calls
	}
	for i, src := range chartSources {
		v.Answers = append(v.Answers, SourceCount{Source: src, Calls: last.answers[i] - first.answers[i]})
	}
	names := remoteNames(last)
	v.CallsChart = Chart{Title: "calls by source", Unit: "/s"}
	v.ErrorsChart = Chart{Title: "errors", Unit: "%", Lines: []Line{{Name: "errors"}}}
	v.HeadAgeChart = Chart{Title: "head age", Unit: "s", Lines: []Line{{Name: "head age"}}}
	v.ShareChart = Chart{Title: "share of upstream calls", Unit: "%"}
	for _, src := range chartSources {
		v.CallsChart.Lines = append(v.CallsChart.Lines, Line{Name: src})
	}
	latency := make([]Chart, len(names))
	for i, n := range names {
		latency[i] = Chart{Title: n + " latency", Unit: "ms", Lines: []Line{{Name: "p50"}, {Name: "p99"}}}
		v.ShareChart.Lines = append(v.ShareChart.Lines, Line{Name: n})
	}
	for i := 1; i < len(ss); i++ {
		a, b := ss[i-1], ss[i]
		secs := b.at.Sub(a.at).Seconds()
		if secs <= 0 {
			continue
		}
		x := b.at.Sub(first.at).Seconds()
		v.CallsChart.X = append(v.CallsChart.X, x)
		for k := range chartSources {
			v.CallsChart.Lines[k].Points = append(v.CallsChart.Lines[k].Points, (b.answers[k]-a.answers[k])/secs)
		}
		v.ErrorsChart.X = append(v.ErrorsChart.X, x)
		share := math.NaN()
		if n := b.requests - a.requests; n > 0 {
			share = 100 * (b.errors - a.errors) / n
		}
		v.ErrorsChart.Lines[0].Points = append(v.ErrorsChart.Lines[0].Points, share)
		v.HeadAgeChart.X = append(v.HeadAgeChart.X, x)
		v.HeadAgeChart.Lines[0].Points = append(v.HeadAgeChart.Lines[0].Points, b.headAge)
		v.ShareChart.X = append(v.ShareChart.X, x)
		var upstream float64
		for _, n := range names {
			upstream += b.remotes[n].calls - a.remotes[n].calls
		}
		for j, n := range names {
			ra, rb := a.remotes[n], b.remotes[n]
			sh := math.NaN()
			if upstream > 0 {
				sh = 100 * (rb.calls - ra.calls) / upstream
			}
			v.ShareChart.Lines[j].Points = append(v.ShareChart.Lines[j].Points, sh)
			latency[j].X = append(latency[j].X, x)
			d := bucketDelta(ra.buckets, rb.buckets)
			latency[j].Lines[0].Points = append(latency[j].Lines[0].Points, 1000*quantile(0.5, d))
			latency[j].Lines[1].Points = append(latency[j].Lines[1].Points, 1000*quantile(0.99, d))
		}
	}
	v.Latency = latency
	for _, c := range append([]*Chart{&v.CallsChart, &v.ErrorsChart, &v.HeadAgeChart, &v.ShareChart}, chartPtrs(v.Latency)...) {
		for i := range c.Lines {
			c.Lines[i].Last = lastOf(c.Lines[i].Points)
		}
	}
	return v
}

func chartPtrs(cs []Chart) []*Chart {
	out := make([]*Chart, len(cs))
	for i := range cs {
		out[i] = &cs[i]
	}
	return out
}

// lastOf is the last value of ps that is a number; NaN when none is.
func lastOf(ps []float64) float64 {
	for i := len(ps) - 1; i >= 0; i-- {
		if !math.IsNaN(ps[i]) {
			return ps[i]
		}
	}
	return math.NaN()
}

// remoteNames are the remotes of s, sorted.
func remoteNames(s chainSample) []string {
	out := make([]string, 0, len(s.remotes))
	for n := range s.remotes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// bucketDelta is the calls of each bucket between two samples; nil when
// they cannot be compared.
func bucketDelta(a, b []bucket) []bucket {
	if len(b) == 0 {
		return nil
	}
	out := slices.Clone(b)
	if len(a) == len(b) {
		for i := range out {
			out[i].n -= a[i].n
		}
	}
	return out
}

// quantile estimates the q-quantile of cumulative buckets bs as
// Prometheus's histogram_quantile does: linearly within the bucket it
// falls in; NaN without calls.
func quantile(q float64, bs []bucket) float64 {
	if len(bs) == 0 {
		return math.NaN()
	}
	total := bs[len(bs)-1].n
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range bs {
		if b.n >= rank {
			if math.IsInf(b.le, 1) {
				return lower // above the highest bound: that bound
			}
			if b.n == below {
				return b.le
			}
			return lower + (b.le-lower)*(rank-below)/(b.n-below)
		}
		lower, below = b.le, b.n
	}
	return lower
}
