package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
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
// the process's CPU per call (from getrusage), of which venn's own share is
// a target's figure less direct's; and what the headers and the log add,
// as a share of venn's own CPU per call (venn less direct). b.N is the
// calls per target and round:
//
//	go test -run '^$' -bench BenchmarkObserve -benchtime 250x -cpu 1 -count 5 ./e2e
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
	rt := router.New(router.Config{Chain: "eth", ChainID: 1}, nil, router.UpstreamOf(pool, pool.Heads()), nil)

	serve := func(headers, log bool) string {
		reg := prometheus.NewRegistry()
		opts := jrpc.Options{Registerer: reg, MethodLabel: evm.MethodLabel, DiagnosticHeaders: headers}
		if log {
			l := reqlog.New(reqlog.Config{Enabled: true, Output: filepath.Join(b.TempDir(), "requests.log")}.WithDefaults(), nil, nil, reg, nil)
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
	n := 0
	run := func(url string, calls int) time.Duration {
		cpu0 := processCPU(b)
		for range calls {
			n++ // a fresh address per call: nothing can be shared
			hop(b, client, url, n)
		}
		return time.Duration(processCPU(b)-cpu0) / time.Duration(calls)
	}
	for _, tc := range targets {
		run(tc.url, 200) // warm connections and pools
	}
	// Many short rounds interleave the targets, so the machine's noise
	// (other processes on its cores) hits all of them alike.
	// Each round starts at another target, so none always runs after the
	// same one (whose garbage it would collect).
	total := make([]time.Duration, len(targets))
	for r := range observeRounds {
		for i := range targets {
			k := (r + i) % len(targets)
			total[k] += run(targets[k].url, b.N)
		}
	}
	perCall := func(k int) float64 { return float64(total[k]) / observeRounds }
	own := perCall(1) - perCall(0) // venn's own CPU per call, nothing on
	for k, tc := range targets {
		b.ReportMetric(perCall(k), tc.name+"-cpu-ns/call")
	}
	b.ReportMetric(100*(perCall(2)-perCall(1))/own, "headers-%")
	b.ReportMetric(100*(perCall(3)-perCall(1))/own, "log-%")
	b.ReportMetric(100*(perCall(4)-perCall(1))/own, "both-%")
	b.ReportMetric(0, "ns/op")
}

// observeRounds is how often BenchmarkObserve runs every target, b.N
// calls each.
const observeRounds = 40
