package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/reqlog"
	"github.com/venn-gateway/venn/router"
)

// BenchmarkObserve measures what the request log and the diagnostic
// headers cost a pass-through call: the same eth_getBalance calls at
// concurrency 1 over loopback HTTP, straight to the fake upstream
// (direct: the floor of client and upstream) and through venn's stack
// (jrpc with metrics, router, remotes pool) with neither, with the
// headers, with the log (to a file) and with both. Besides ns/op it reports
// the process's CPU per call (cpu-ns/op, from getrusage), of which venn's
// own share is a target's figure less direct's.
func BenchmarkObserve(b *testing.B) {
	node := fakenode.New(fakenode.Options{ChainID: 1})
	up := httptest.NewServer(node.Handler())
	defer up.Close()
	pool, err := remotes.NewPool(remotes.PoolConfig{Chain: "eth", ChainID: 1, BlockTime: time.Hour},
		[]remotes.Config{{Name: "a", URL: up.URL}}, nil, remotes.NewMetrics(prometheus.NewRegistry()))
	if err != nil {
		b.Fatal(err)
	}
	if err := pool.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = pool.Stop(context.Background()) }()
	rt := router.New(router.Config{Chain: "eth", ChainID: 1}, nil, pool, nil)

	serve := func(headers, log bool) string {
		reg := prometheus.NewRegistry()
		opts := jrpc.Options{Registerer: reg, MethodLabel: evm.MethodLabel, DiagnosticHeaders: headers}
		if log {
			l := reqlog.New(reqlog.Config{Enabled: true, Output: filepath.Join(b.TempDir(), "requests.log")}.WithDefaults(), nil, nil, reg)
			if err := l.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = l.Stop(context.Background()) })
			opts.OnCall = l.Record
		}
		srv := jrpc.NewServer(opts)
		srv.Handle("eth", rt)
		ts := httptest.NewServer(srv.Handler())
		b.Cleanup(ts.Close)
		return ts.URL + "/eth"
	}
	targets := []struct{ name, url string }{
		{"direct", up.URL},
		{"venn", serve(false, false)},
		{"venn+headers", serve(true, false)},
		{"venn+log", serve(false, true)},
		{"venn+both", serve(true, true)},
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	for _, tc := range targets {
		b.Run(tc.name, func(b *testing.B) {
			i, cpu0 := 0, cpuTime(b)
			for b.Loop() {
				i++ // a fresh address per call: nothing can be shared
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_getBalance","params":["0x%040x","latest"]}`, i, i)
				resp, err := client.Post(tc.url, "application/json", bytes.NewReader([]byte(body)))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d, %v", resp.StatusCode, err)
				}
				resp.Body.Close()
			}
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(i), "cpu-ns/op")
		})
	}
}

// cpuTime is the CPU the process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
