package tracing

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/venn-gateway/venn/jrpc"
)

// upstream stands for a remote's request headers, a map per request in
// flight.
var upstream = sync.Pool{New: func() any { return http.Header{"Content-Type": {"application/json"}} }}

// callServer serves chain eth through jrpc with tr's hook (nil: none); its
// handler sends one upstream attempt under a client span and notes that
// the remotes answered, as the router and the pool do.
func callServer(tr *Tracer) http.Handler {
	srv := jrpc.NewServer(jrpc.Options{Hook: tr.CallHook(), MethodLabel: func(m string) string { return m }})
	srv.Handle("eth", jrpc.HandlerFunc(func(ctx context.Context, req *jrpc.Request) (json.RawMessage, error) {
		sctx, sp := tr.Start(ctx, req.Method, trace.SpanKindClient)
		if tr.Carries(sctx) { // as remotes' HTTP transport does, its header map reused
			h := upstream.Get().(http.Header)
			InjectInto(sctx, h)
			upstream.Put(h)
		}
		if sp.IsRecording() { // as remotes' judge annotates a send
			a := NewAttrs()
			a.Add(KeyRemote.String("a"))
			a.Add(KeyAttempt.Int(1))
			a.Add(KeyMeaning.String("answer"))
			a.Add(KeyHTTPStatus.Int(http.StatusOK))
			a.Set(sp)
		}
		sp.End()
		n := jrpc.NoteOf(ctx)
		n.Answered("remotes")
		n.Upstream("a", 2)
		return json.RawMessage(`"0x1"`), nil
	}))
	return srv.Handler()
}

func post(h http.Handler) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/eth", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":[]}`))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	return rec
}

// TestCallSpanReadsNote: the call's span takes its source from the call's
// jrpc.Note at its end, and its child is the handler's send, which alone
// names the remote.
func TestCallSpanReadsNote(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	if rec := post(callServer(FromTracer(tp.Tracer("test"), true))); rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want the send and the call", len(spans))
	}
	send, call := spans[0], spans[1]
	if send.Parent.SpanID() != call.SpanContext.SpanID() || call.SpanKind != trace.SpanKindServer || send.SpanKind != trace.SpanKindClient {
		t.Errorf("send %v under %v, kinds %v and %v", send.Parent.SpanID(), call.SpanContext.SpanID(), send.SpanKind, call.SpanKind)
	}
	want := map[attribute.Key]string{KeySource: "remotes", KeyOutcome: "ok", KeyChain: "eth", KeyRPCMethod: "eth_getBalance"}
	got := map[attribute.Key]string{}
	for _, kv := range call.Attributes {
		got[kv.Key] = kv.Value.Emit()
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("call span %s = %q, want %q", k, got[k], v)
		}
	}
	if len(send.Attributes) != 4 || send.Attributes[3] != KeyHTTPStatus.Int(http.StatusOK) {
		t.Errorf("send span attributes %v, want three and the status", send.Attributes)
	}
	if len(call.Attributes) != 5 {
		t.Errorf("call span attributes %v, want 5: method, chain, request id, outcome, source", call.Attributes)
	}
}

// BenchmarkCallHook is one call through jrpc (in process, no network) and
// a handler that makes one upstream span, with tracing off (no hook, nil
// tracer) and at ratio 1 with the spans dropped: what the hook, the two
// spans, their attributes and the traceparent cost, without the rest of
// venn's stack.
func BenchmarkCallHook(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	defer tp.Shutdown(context.Background())
	for _, tc := range []struct {
		name string
		tr   *Tracer
	}{{"off", nil}, {"on", FromTracer(tp.Tracer("bench"), true)}} {
		h := callServer(tc.tr)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				post(h)
			}
		})
	}
}
