package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/venn-gateway/venn/internal/fakenode"
)

// The raw client reads every reply shape net/http's server sends, and
// says so when it is not a 200.
func TestRawPoster(t *testing.T) {
	big := strings.Repeat("x", 10_000)
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    string
		wantErr string
	}{
		{
			name:    "content length",
			handler: func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"ok":1}`)) },
			want:    `{"ok":1}`,
		},
		{
			name: "chunked",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte(`{"a":`))
				w.(http.Flusher).Flush()
				w.Write([]byte(`"` + big + `"}`))
			},
			want: `{"a":"` + big + `"}`,
		},
		{
			name: "connection close",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Connection", "close")
				w.Write([]byte(`closing`))
			},
			want: "closing",
		},
		{
			name: "echo",
			handler: func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Content-Type") != "application/json" || r.URL.Path != "/chain" {
					http.Error(w, "bad request line or headers", http.StatusBadRequest)
					return
				}
				io.Copy(w, r.Body)
			},
			want: `{"id":1}`,
		},
		{
			name:    "not ok",
			handler: func(w http.ResponseWriter, r *http.Request) { http.Error(w, "nope", http.StatusServiceUnavailable) },
			wantErr: "HTTP 503: nope",
		},
		{
			name: "header too long",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Big", strings.Repeat("h", maxHeaderLine))
				w.Write([]byte(`{}`))
			},
			wantErr: "header line too long",
		},
		{
			name: "too long",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Write(bytes.Repeat([]byte("y"), maxReplyBytes+1))
			},
			wantErr: "too long",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := serve(t, tt.handler)
			p, err := newRawPoster(u + "chain")
			if err != nil {
				t.Fatal(err)
			}
			defer p.close()
			// Three calls: keep-alive (or a fresh dial after a close) works.
			for range 3 {
				var reply bytes.Buffer
				err := p.post(context.Background(), []byte(`{"id":1}`), &reply)
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("err = %v, want %q", err, tt.wantErr)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if reply.String() != tt.want {
					t.Fatalf("reply %.80q, want %.80q", reply.String(), tt.want)
				}
			}
		})
	}
}

func TestRawPosterRefusesOtherURLs(t *testing.T) {
	for _, give := range []string{"https://127.0.0.1:1/", "127.0.0.1:1", "ws://127.0.0.1:1/"} {
		if _, err := newRawPoster(give); err == nil {
			t.Errorf("%q: no error", give)
		}
		var reply bytes.Buffer
		if err := rawPosters(give)().post(context.Background(), nil, &reply); err == nil {
			t.Errorf("%q: the factory's poster did not fail", give)
		}
	}
}

// An interrupt ends a call stuck on a target that never answers.
func TestRawPosterInterrupted(t *testing.T) {
	release := make(chan struct{})
	u := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer close(release)
	p, err := newRawPoster(u)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	var reply bytes.Buffer
	if err := p.post(ctx, []byte(`{}`), &reply); err == nil {
		t.Fatal("no error")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("interrupt took %v", took)
	}
}

// The raw client drives a real hop, every answer checked, like the
// standard one.
func TestLoaderRawThroughPlainProxy(t *testing.T) {
	node := fakenode.New(fakenode.Options{ChainID: benchChainID})
	t.Cleanup(node.Close)
	upURL := serve(t, node.Handler())
	target, err := url.Parse(upURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newPlainProxy(target)
	t.Cleanup(proxy.Transport.(*http.Transport).CloseIdleConnections)
	proxyURL := serve(t, proxy)
	l, err := newLoader()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.close)
	for _, call := range headCalls {
		res := l.runWith(context.Background(), 4, 200*time.Millisecond, call, rawPosters(proxyURL))
		if res.Errors != 0 || res.OK == 0 {
			t.Fatalf("%s: ok %d errors %d: %v", call.name, res.OK, res.Errors, res.ErrSample)
		}
	}
}
