package wire

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"
)

// wsBenchServer answers every call with result, finding the id with
// scanID and reusing its buffers, so that the benchmark measures the
// transport more than the server.
func wsBenchServer(b *testing.B, result string) (url string, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(1 << 20)
		var in, out []byte
		for {
			_, rd, err := c.Reader(ctx)
			if err != nil {
				return
			}
			in = in[:0]
			for {
				if len(in) == cap(in) {
					in = append(in, 0)[:len(in)]
				}
				n, err := rd.Read(in[len(in):cap(in)])
				in = in[:len(in)+n]
				if err != nil {
					break
				}
			}
			out = append(out[:0], `{"jsonrpc":"2.0","id":`...)
			out = append(out, scanID(in)...)
			out = append(out, `,"result":`...)
			out = append(out, result...)
			out = append(out, '}')
			if c.Write(ctx, websocket.MessageText, out) != nil {
				return
			}
		}
	}))
	return "ws" + strings.TrimPrefix(srv.URL, "http"), func() { cancel(); srv.Close() }
}

// BenchmarkWSTransportCall is a call over one WebSocket connection: one
// caller at a time (serial), and many multiplexed (parallel).
func BenchmarkWSTransportCall(b *testing.B) {
	params := json.RawMessage(`["0x5b38da6a701c568545dcfcb03fcb875f56beddc4","latest"]`)
	for _, parallel := range []bool{false, true} {
		name := "serial"
		if parallel {
			name = "parallel"
		}
		b.Run(name, func(b *testing.B) {
			url, stop := wsBenchServer(b, `"0x1234567"`)
			defer stop()
			tr, err := New(Options{Name: "bench", URL: url})
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			call := func() bool {
				if _, _, err := tr.Call(context.Background(), "eth_getBalance", params); err != nil {
					b.Error(err)
					return false
				}
				return true
			}
			call() // dial outside the timing
			b.ReportAllocs()
			b.ResetTimer()
			if !parallel {
				for b.Loop() {
					if !call() {
						return
					}
				}
				return
			}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() && call() {
				}
			})
		})
	}
}
