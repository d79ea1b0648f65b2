package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/venn-gateway/venn/evm"
	"github.com/venn-gateway/venn/internal/fakenode"
	"github.com/venn-gateway/venn/jrpc"
	"github.com/venn-gateway/venn/remotes"
	"github.com/venn-gateway/venn/router"
)

// BenchmarkHop measures one client call at concurrency 1 through three
// targets in one process, over real loopback HTTP: the fake upstream
// directly, a plain httputil.ReverseProxy in front of it, and venn's own
// stack (jrpc server with metrics, router, remotes pool) in front of it.
// One process removes the scheduling noise of cmd/vennbench's three, so
// the difference of the last two is venn's code against the floor cost of
// a Go HTTP hop.
func BenchmarkHop(b *testing.B) {
	node := fakenode.New(fakenode.Options{ChainID: 1})
	up := httptest.NewServer(node.Handler())
	defer up.Close()
	target, err := url.Parse(up.URL)
	if err != nil {
		b.Fatal(err)
	}
	proxy := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: http.DefaultTransport.(*http.Transport).Clone(),
	})
	defer proxy.Close()

	reg := prometheus.NewRegistry()
	pool, err := remotes.NewPool(remotes.PoolConfig{Chain: "eth", ChainID: 1, BlockTime: time.Hour},
		[]remotes.Config{{Name: "a", URL: up.URL}}, nil, remotes.NewMetrics(reg))
	if err != nil {
		b.Fatal(err)
	}
	if err := pool.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = pool.Stop(context.Background()) }()
	srv := jrpc.NewServer(jrpc.Options{Registerer: reg, MethodLabel: evm.MethodLabel})
	srv.Handle("eth", router.New(router.Config{Chain: "eth", ChainID: 1}, nil, pool, nil))
	venn := httptest.NewServer(srv.Handler())
	defer venn.Close()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	for _, tc := range []struct{ name, url string }{{"direct", up.URL}, {"proxy", proxy.URL}, {"venn", venn.URL + "/eth"}} {
		b.Run(tc.name, func(b *testing.B) {
			i := 0
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
		})
	}
}
