package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/router"
	"github.com/venn-gateway/venn/tracing"
	"github.com/venn-gateway/venn/tracing/otlp"
)

// BenchmarkTracingHop is BenchmarkHop's venn target with tracing off and
// on at ratio 1 (every call recorded: its span, its upstream send's and
// the traceparent sent upstream), in one process: "off" is venn as it
// ships; "discard" batches spans to an exporter that drops them, the cost
// of making them; "otlp" batches them over OTLP/HTTP to an in-process sink
// that reads and drops each export, the whole pipeline; "local" is discard
// without the traceparent sent upstream, propagate_upstream's default. Besides ns/op it
// reports cpu-ns/call, the process's CPU time (user+sys) over the loop per
// call, which counts the client, the fake upstream, the exporter's
// goroutines and the sink too; "direct" (the upstream alone) is the part
// that is not venn's.
func BenchmarkTracingHop(b *testing.B) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	for _, tg := range tracingTargets(b) {
		b.Run(tg.name, func(b *testing.B) { driveHop(b, client, tg.url) })
	}
}

// BenchmarkTracingCost is BenchmarkTracingHop's targets interleaved: each
// iteration is a round of hopSegment calls to each target in turn, the
// first target another each round, so that the load other work puts on
// the machine falls on every target alike. It reports each target's
// process CPU per call (the median over rounds) and the medians of the
// per-round ratios to off: of the process's CPU, and of venn's own (the
// process's less direct's, the client and upstream). A segment is 512
// calls, 1024 spans, two full batches of the Batcher (otlp), so no
// target's spans are exported in another's segment.
func BenchmarkTracingCost(b *testing.B) {
	const hopSegment = 512
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	targets := tracingTargets(b)
	cpu := make([][]float64, len(targets)) // [target][round]: ns per call
	id, round := 0, 0
	for b.Loop() {
		for k := range targets {
			t := (k + round) % len(targets)
			c0 := processCPU(b)
			for range hopSegment {
				id++
				hop(b, client, targets[t].url, id)
			}
			cpu[t] = append(cpu[t], float64(processCPU(b)-c0)/hopSegment)
		}
		round++
	}
	for t, tg := range targets {
		b.ReportMetric(median(cpu[t]), tg.name+"-cpu-ns/call")
		if t < 2 { // direct, off
			continue
		}
		proc, own := make([]float64, round), make([]float64, round)
		for r := range round {
			proc[r] = cpu[t][r] / cpu[1][r]
			own[r] = (cpu[t][r] - cpu[0][r]) / (cpu[1][r] - cpu[0][r])
		}
		b.ReportMetric(median(proc), tg.name+"/off")
		b.ReportMetric(median(own), tg.name+"/off-own")
	}
}

// hopTarget is one URL BenchmarkTracingHop and BenchmarkTracingCost call.
type hopTarget struct{ name, url string }

// tracingTargets serves the fake node (direct) and venn in front of it
// four ways: off, discard and otlp (both sending the traceparent
// upstream), and local (discard with propagate_upstream at its default,
// off). All stop at the end of b.
func tracingTargets(b *testing.B) []hopTarget {
	node := fakenode.New(fakenode.Options{ChainID: 1})
	up := httptest.NewServer(node.Handler())
	b.Cleanup(up.Close)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(sink.Close)

	one := 1.0
	cfg := tracing.Config{Enabled: true, SamplingRatio: &one, PropagateUpstream: true}
	exp, err := otlp.Open(tracing.Config{Enabled: true, SamplingRatio: &one, PropagateUpstream: true,
		Endpoint: sink.URL, Protocol: tracing.ProtocolHTTP})
	if err != nil {
		b.Fatal(err)
	}
	discard := otlp.NewBatchedProvider(cfg, dropSpans{})
	// As shipped at ratio 1: the traceparent stays in venn (propagate_upstream
	// is off by default).
	local := otlp.NewBatchedProvider(tracing.Config{Enabled: true, SamplingRatio: &one}, dropSpans{})
	b.Cleanup(func() {
		_ = exp.Shutdown(context.Background())
		_ = discard.Shutdown(context.Background())
		_ = local.Shutdown(context.Background())
	})
	targets := []hopTarget{{"direct", up.URL}}
	for _, tc := range []struct {
		name string
		tr   *tracing.Tracer
	}{{"off", nil}, {"discard", discard.Tracer()}, {"otlp", exp.Tracer()}, {"local", local.Tracer()}} {
		targets = append(targets, hopTarget{tc.name, tracedVenn(b, up.URL, tc.tr)})
	}
	return targets
}

// tracedVenn serves venn's stack (jrpc with metrics, router, pool) in
// front of upstream, traced by tr (nil: off), until the end of b.
func tracedVenn(b *testing.B, upstream string, tr *tracing.Tracer) string {
	reg := prometheus.NewRegistry()
	pool, err := remotes.NewPool(remotes.PoolConfig{Chain: "eth", ChainID: 1, BlockTime: time.Hour, Tracer: tr},
		[]remotes.Config{{Name: "a", URL: upstream}}, nil, remotes.NewMetrics(reg))
	if err != nil {
		b.Fatal(err)
	}
	if err := pool.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	srv := jrpc.NewServer(jrpc.Options{Registerer: reg, MethodLabel: evm.MethodLabel, Hook: tr.CallHook()})
	srv.Handle("eth", router.New(router.Config{Chain: "eth", ChainID: 1, Tracer: tr}, nil, router.UpstreamOf(pool, pool.Heads()), nil))
	venn := httptest.NewServer(srv.Handler())
	b.Cleanup(func() {
		venn.Close()
		_ = pool.Stop(context.Background())
	})
	return venn.URL + "/eth"
}

// driveHop calls url b.N times and reports the process's CPU per call.
func driveHop(b *testing.B, client *http.Client, url string) {
	i := 0
	cpu0 := processCPU(b)
	for b.Loop() {
		i++
		hop(b, client, url, i)
	}
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/call")
}

// hop calls eth_getBalance at url for the i-th address.
func hop(b *testing.B, client *http.Client, url string, i int) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_getBalance","params":["0x%040x","latest"]}`, i, i)
	resp, err := client.Post(url, "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("status %d, %v", resp.StatusCode, err)
	}
	resp.Body.Close()
}

// median is the middle of xs (the mean of the two middle ones).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// processCPU is the process's user+system CPU time so far, in ns.
func processCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// dropSpans is an exporter that drops every span.
type dropSpans struct{}

func (dropSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (dropSpans) Shutdown(context.Context) error                             { return nil }

// BenchmarkTracingFloor is BenchmarkTracingHop's direct, off and local
// targets (local: ratio 1, the traceparent kept in venn), each set up in
// its own sub-benchmark, so that one selected alone runs in a process of
// its own, for instruction counts (callgrind) that the other targets'
// setup and background work do not blur. "batch" is local as shipped,
// with otlp's Batcher; "sdk" is local with the SDK's batch span processor
// in its place; "drop" has a processor that drops each span as it ends,
// the least any processor can cost: the floor of venn's spans with the
// SDK.
func BenchmarkTracingFloor(b *testing.B) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	one := 1.0
	cfg := tracing.Config{Enabled: true, SamplingRatio: &one}
	for _, tc := range []struct {
		name     string
		provider func() *otlp.Provider // nil: tracing off
	}{
		{"direct", nil},
		{"off", nil},
		{"batch", func() *otlp.Provider { return otlp.NewBatchedProvider(cfg, dropSpans{}) }},
		{"sdk", func() *otlp.Provider { return otlp.NewProvider(cfg, sdktrace.WithBatcher(dropSpans{})) }},
		{"drop", func() *otlp.Provider { return otlp.NewProvider(cfg, sdktrace.WithSpanProcessor(dropAtEnd{})) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			node := fakenode.New(fakenode.Options{ChainID: 1})
			up := httptest.NewServer(node.Handler())
			b.Cleanup(up.Close)
			url := up.URL
			if tc.name != "direct" {
				var tr *tracing.Tracer
				if tc.provider != nil {
					p := tc.provider()
					b.Cleanup(func() { _ = p.Shutdown(context.Background()) })
					tr = p.Tracer()
				}
				url = tracedVenn(b, up.URL, tr)
			}
			driveHop(b, client, url)
		})
	}
}

// dropAtEnd is a span processor that drops every span as it ends.
type dropAtEnd struct{}

func (dropAtEnd) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (dropAtEnd) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (dropAtEnd) Shutdown(context.Context) error                  { return nil }
func (dropAtEnd) ForceFlush(context.Context) error                { return nil }
