package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/venn-gateway/venn/jrpc"
)

// The call and answer of jrpc's BenchmarkServeHTTP/single.
var benchResult = json.RawMessage(`{"number":"0x1b4","hash":"0x` + strings.Repeat("ab", 32) +
	`","transactions":[` + strings.Repeat(`"0x`+strings.Repeat("cd", 32)+`",`, 15) + `"0x00"]}`)

const benchCall = `{"jsonrpc":"2.0","id":1,"method":"eth_getBlockByNumber","params":["0x1b4",false]}`

// BenchmarkServeHTTPEdge is jrpc's BenchmarkServeHTTP/single with the
// edge on: a key checked, and key and address limits in memory (never
// reached).
func BenchmarkServeHTTPEdge(b *testing.B) {
	e := New(Config{
		Auth:       AuthConfig{Keys: []APIKey{{Name: "alice", Key: aliceSecret}}},
		RateLimits: RateLimits{IP: Rate{RPS: 1e9, Burst: 1e9}, Key: Rate{RPS: 1e9, Burst: 1e9}},
	}, Options{})
	s := jrpc.NewServer(jrpc.Options{Gate: e})
	s.Handle("eth", jrpc.HandlerFunc(func(context.Context, *jrpc.Request) (json.RawMessage, error) {
		return benchResult, nil
	}))
	h := e.Wrap(s.Handler())
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
