package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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
// that reads and drops each export, the whole pipeline. Besides ns/op it
// reports cpu-ns/call, the process's CPU time (user+sys) over the loop per
// call, which counts the client, the fake upstream, the exporter's
// goroutines and the sink too; "direct" (the upstream alone) is the part
// that is not venn's.
func BenchmarkTracingHop(b *testing.B) {
	node := fakenode.New(fakenode.Options{ChainID: 1})
	up := httptest.NewServer(node.Handler())
	defer up.Close()
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer sink.Close()

	one := 1.0
	cfg := tracing.Config{Enabled: true, SamplingRatio: &one, PropagateUpstream: true}
	exp, err := otlp.Open(tracing.Config{Enabled: true, SamplingRatio: &one, PropagateUpstream: true,
		Endpoint: sink.URL, Protocol: tracing.ProtocolHTTP})
	if err != nil {
		b.Fatal(err)
	}
	discard := otlp.NewProvider(cfg, sdktrace.WithBatcher(dropSpans{}))
	defer func() {
		_ = exp.Shutdown(context.Background())
		_ = discard.Shutdown(context.Background())
	}()
	targets := []struct {
		name string
		tr   *tracing.Tracer
	}{{"off", nil}, {"discard", discard.Tracer()}, {"otlp", exp.Tracer()}}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	b.Run("direct", func(b *testing.B) { driveHop(b, client, up.URL) })
	for _, tc := range targets {
		url, stop := tracedVenn(b, up.URL, tc.tr)
		b.Run(tc.name, func(b *testing.B) { driveHop(b, client, url) })
		stop()
	}
}

// tracedVenn serves venn's stack (jrpc with metrics, router, pool) in
// front of upstream, traced by tr (nil: off).
func tracedVenn(b *testing.B, upstream string, tr *tracing.Tracer) (url string, stop func()) {
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
	srv.Handle("eth", router.New(router.Config{Chain: "eth", ChainID: 1, Tracer: tr}, nil, pool, nil))
	venn := httptest.NewServer(srv.Handler())
	return venn.URL + "/eth", func() {
		venn.Close()
		_ = pool.Stop(context.Background())
	}
}

// driveHop calls eth_getBalance at url, a fresh address each time, and
// reports the process's CPU per call.
func driveHop(b *testing.B, client *http.Client, url string) {
	i := 0
	cpu0 := processCPU(b)
	for b.Loop() {
		i++
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
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/call")
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
