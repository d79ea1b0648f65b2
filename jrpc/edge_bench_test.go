package jrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
)

// BenchmarkServeHTTPEdge is BenchmarkServeHTTP/single with the edge on: a
// key checked, and key and address limits in memory (never reached).
func BenchmarkServeHTTPEdge(b *testing.B) {
	s := NewServer(Options{Edge: Edge{
		Keys:   []APIKey{{Name: "alice", Secret: aliceSecret}},
		IPRate: Rate{PerSecond: 1e9, Burst: 1e9}, KeyRate: Rate{PerSecond: 1e9, Burst: 1e9},
	}})
	s.Handle("eth", HandlerFunc(func(context.Context, *Request) (json.RawMessage, error) {
		return benchResult, nil
	}))
	h := s.Handler()
	body := []byte(benchCall)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		req := httptest.NewRequest("POST", "/eth", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Api-Key", aliceSecret)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}
