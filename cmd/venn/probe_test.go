package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/internal/testkit"
)

func TestProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}))
	defer srv.Close()
	tests := []struct {
		name       string
		give       []string
		wantCode   int
		wantStderr string
	}{
		{name: "2xx", give: []string{"probe", srv.URL + "/healthz"}, wantCode: exitOK},
		{name: "503", give: []string{"probe", srv.URL + "/readyz"}, wantCode: exitError, wantStderr: "503"},
		{name: "refused", give: []string{"probe", "--timeout", "1s", "http://" + testkit.ClosedAddr(t) + "/healthz"}, wantCode: exitError, wantStderr: "refused"},
		{name: "no url", give: []string{"probe"}, wantCode: exitUsage, wantStderr: "usage"},
		{name: "not http", give: []string{"probe", "redis://127.0.0.1:6379"}, wantCode: exitUsage, wantStderr: "http://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := run(tt.give, &stdout, &stderr); got != tt.wantCode {
				t.Fatalf("exit %d, want %d; stderr %q", got, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr %q, want it to contain %q", stderr.String(), tt.wantStderr)
			}
		})
	}
	http.DefaultClient.CloseIdleConnections()
}
