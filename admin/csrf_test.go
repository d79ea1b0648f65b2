package admin

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
)

// TestOpenAPIRefusesOtherSites: without tokens, a browser on this host
// cannot be made to act by another site's page (Origin, Sec-Fetch-Site, a
// form's body) or to read through a rebound name (Host).
func TestOpenAPIRefusesOtherSites(t *testing.T) {
	nodes := []*fakenode.Node{fakenode.Start(t, fakenode.Options{Head: 100}), fakenode.Start(t, fakenode.Options{Head: 100})}
	var drained atomic.Int32
	r := startReplica(t, "open", "solo", nodes, nil, &clock{now: time.Now()}, func(o *Options) {
		o.Config.Tokens = nil
		o.Drain = func(context.Context) DrainReport { drained.Add(1); return DrainReport{Draining: true} }
	})
	cordon := "/admin/chains/open/remotes/n0/cordon"
	tests := []struct {
		name, method, path, body string
		header                   map[string]string
		host                     string
		want                     int
	}{
		{name: "another origin", method: "POST", path: "/admin/drain", header: map[string]string{"Origin": "http://evil.example"}, want: http.StatusForbidden},
		{name: "cross-site fetch", method: "POST", path: "/admin/drain", header: map[string]string{"Sec-Fetch-Site": "cross-site"}, want: http.StatusForbidden},
		{name: "a form's body", method: "POST", path: cordon, body: "reason=x", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, want: http.StatusUnsupportedMediaType},
		{name: "text/plain", method: "POST", path: cordon, body: `{}`, header: map[string]string{"Content-Type": "text/plain"}, want: http.StatusUnsupportedMediaType},
		{name: "a rebound name reads", method: "GET", path: "/admin/config", host: "evil.example", want: http.StatusForbidden},
		{name: "a rebound name acts", method: "POST", path: "/admin/drain", host: "evil.example:80", want: http.StatusForbidden},
		{name: "the page under a rebound name", method: "GET", path: "/status", host: "evil.example", want: http.StatusForbidden},
		{name: "localhost", method: "GET", path: "/admin/status", host: "localhost", want: http.StatusOK},
		{name: "JSON from curl", method: "POST", path: cordon, body: `{"reason":"x"}`, header: map[string]string{"Content-Type": "application/json; charset=utf-8"}, want: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, r.srv.URL+tt.path, strings.NewReader(tt.body))
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("%s %s = %d, want %d", tt.method, tt.path, resp.StatusCode, tt.want)
			}
		})
	}
	if drained.Load() != 0 {
		t.Error("a refused drain ran")
	}
}
