package e2e

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/venn-gateway/venn/internal/fakenode"
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

	venn := tracedVenn(b, up.URL, nil) // tracing off: venn as it ships

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	defer client.CloseIdleConnections()
	for _, tc := range []struct{ name, url string }{{"direct", up.URL}, {"proxy", proxy.URL}, {"venn", venn}} {
		b.Run(tc.name, func(b *testing.B) { driveHop(b, client, tc.url) })
	}
}
