package jrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// The benchmarks compare jrpc's own cost per call with a plain
// httputil.ReverseProxy forwarding the same bytes; the upstream side is a
// canned answer in both, so only the front differs.

var benchResult = json.RawMessage(`{"number":"0x1b4","hash":"0x` + strings.Repeat("ab", 32) +
	`","transactions":[` + strings.Repeat(`"0x`+strings.Repeat("cd", 32)+`",`, 15) + `"0x00"]}`)

const benchCall = `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x1b4",false]}`

func benchBatch(n int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = strings.Replace(benchCall, `"id":1`, `"id":`+strconv.Itoa(i), 1)
	}
	return "[" + strings.Join(items, ",") + "]"
}

func BenchmarkServeHTTP(b *testing.B) {
	for _, bc := range []struct {
		name string
		body string
		opts Options
	}{
		{name: "single", body: benchCall},
		{name: "single+headers", body: benchCall, opts: Options{DiagnosticHeaders: true}},
		{name: "single+oncall", body: benchCall, opts: Options{OnCall: func(Call) {}}},
		{name: "batch10", body: benchBatch(10)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := NewServer(bc.opts)
			s.Handle("eth", HandlerFunc(func(context.Context, *Request) (json.RawMessage, error) {
				return benchResult, nil
			}))
			h := s.Handler()
			body := []byte(bc.body)
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				req := httptest.NewRequest("POST", "/eth", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatal(w.Code)
				}
			}
		})
	}
}

// cannedTransport answers every request with the same body, as an upstream
// would.
type cannedTransport struct{ body []byte }

func (c cannedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, req.Body)
	_ = req.Body.Close()
	return &http.Response{
		StatusCode:    200,
		Header:        http.Header{"Content-Type": {"application/json"}},
		Body:          io.NopCloser(bytes.NewReader(c.body)),
		ContentLength: int64(len(c.body)),
		Request:       req,
	}, nil
}

func BenchmarkReverseProxyBaseline(b *testing.B) {
	answer := appendResult(nil, []byte("1"), benchResult)
	target, _ := url.Parse("http://upstream.invalid")
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = cannedTransport{body: answer}
	body := []byte(benchCall)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		req := httptest.NewRequest("POST", "/eth", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		rp.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	body := []byte(benchBatch(10))
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, _, err := decode(body, DefaultMaxBatchItems); err != nil {
			b.Fatal(err)
		}
	}
}
