package wire

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/venn-gateway/venn/tracing"
)

// TestHTTPTransportTraceparent: with propagate_upstream, each traced send
// carries its own span's traceparent, though the transport reuses the
// header maps of finished requests for later ones; an untraced send
// carries none, and the template's headers never get one.
func TestHTTPTransportTraceparent(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := tracing.FromTracer(tp.Tracer("test"), true)
	var (
		mu  sync.Mutex
		got []string
	)
	ht, _ := tpNewHTTP(t, Options{Tracer: tr, MaxResponseBytes: 1 << 20}, func(w http.ResponseWriter, r *http.Request) {
		var req tpRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("decode request: %v", err)
		}
		mu.Lock()
		got = append(got, r.Header.Get("Traceparent"))
		mu.Unlock()
		w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":"0x1"}`))
	})
	var want []string
	for range 4 {
		ctx, sp := tr.StartRoot(context.Background(), "call", trace.SpanKindServer, nil)
		if _, status, err := ht.Call(ctx, "eth_blockNumber", nil); err != nil || status != http.StatusOK {
			t.Fatalf("call = %d, %v", status, err)
		}
		sc := sp.SpanContext()
		want = append(want, "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-01")
		sp.End()
	}
	if _, _, err := ht.Call(context.Background(), "eth_blockNumber", nil); err != nil {
		t.Fatal(err)
	}
	want = append(want, "")
	mu.Lock()
	defer mu.Unlock()
	for i := range want {
		if i >= len(got) || got[i] != want[i] {
			t.Fatalf("traceparents upstream %q, want %q", got, want)
		}
	}
	if v := ht.tmpl.Header.Get("Traceparent"); v != "" {
		t.Errorf("the template's headers got traceparent %q", v)
	}
}
