package tracing

import (
	"context"
	"net/http"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// sdkTracer is a Tracer on an SDK provider that records every span and
// drops it (the provider and its exporters are tracing/otlp's).
func sdkTracer(t *testing.T, propagate bool) *Tracer {
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return FromTracer(tp.Tracer("test"), propagate)
}

func ratio(r float64) *float64 { return &r }

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		give Config
		want string // "" for valid
	}{
		{"empty", Config{}, ""},
		{"full", Config{Enabled: true, Endpoint: "https://otel.example:4318", Protocol: "http",
			SamplingRatio: ratio(0.1), Headers: map[string]string{"x-api-key": "k"}}, ""},
		{"host port", Config{Endpoint: "collector:4317", Protocol: "grpc"}, ""},
		{"protocol", Config{Protocol: "thrift"}, "protocol: must be grpc or http"},
		{"scheme", Config{Endpoint: "ftp://x"}, "endpoint: scheme must be http or https"},
		{"no host", Config{Endpoint: "http://"}, "endpoint: URL has no host"},
		{"ratio", Config{SamplingRatio: ratio(1.5)}, "sampling_ratio: must be between 0 and 1"},
		{"header", Config{Headers: map[string]string{"a b": "x"}}, "headers: \"a b\" is not a header name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestConfigOn(t *testing.T) {
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if (Config{Enabled: true}).On() {
		t.Error("OTEL_SDK_DISABLED=true: tracing on")
	}
	t.Setenv("OTEL_SDK_DISABLED", "")
	if !(Config{Enabled: true}).On() || (Config{}).On() {
		t.Error("On does not follow enabled")
	}
}

// TestOffCostsNothing: a nil Tracer starts nothing and allocates nothing,
// nor does a child under a span that does not record.
func TestOffCostsNothing(t *testing.T) {
	var off *Tracer
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		c, sp := off.Start(ctx, "x", trace.SpanKindInternal)
		if sp.IsRecording() {
			sp.SetAttributes(KeyRemote.String("a"))
		}
		sp.End()
		c, sp = off.StartRoot(c, "y", trace.SpanKindServer, nil)
		sp.End()
		_ = off.Carries(c)
		_ = off.CallHook()
	})
	if allocs != 0 {
		t.Errorf("off: %v allocations per call, want 0", allocs)
	}
	if off.CallHook() != nil {
		t.Error("a nil Tracer's CallHook is not nil: jrpc would call it")
	}

	tr := sdkTracer(t, false)
	allocs = testing.AllocsPerRun(100, func() {
		c, sp := tr.Start(ctx, "x", trace.SpanKindInternal) // no recording parent
		_ = tr.Carries(c)
		sp.End()
	})
	if allocs != 0 {
		t.Errorf("on, no parent: %v allocations per child, want 0", allocs)
	}
}

// TestInject: the trace context goes upstream only when propagating, and
// a header map used before for another span says the new span's alone.
func TestInject(t *testing.T) {
	tr := sdkTracer(t, true)
	ctx, sp := tr.StartRoot(context.Background(), "call", trace.SpanKindServer, nil)
	defer sp.End()
	if !tr.Carries(ctx) {
		t.Fatal("propagating, under a span: Carries is false")
	}
	h := http.Header{"Content-Type": {"application/json"}, "Tracestate": {"old=1"}}
	InjectInto(ctx, h)
	want := "00-" + sp.SpanContext().TraceID().String() + "-" + sp.SpanContext().SpanID().String() + "-01"
	if h.Get("Traceparent") != want || h.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v, want traceparent %q and the rest as they were", h, want)
	}
	if _, ok := h["Tracestate"]; ok {
		t.Error("an earlier span's tracestate stayed")
	}
	if tr.Carries(context.Background()) {
		t.Error("no span: Carries all the same")
	}
	if sdkTracer(t, false).Carries(ctx) {
		t.Error("propagate_upstream off: Carries all the same")
	}
}

// TestStartRootJoins: a root started under a request's traceparent and
// tracestate (as http.Header holds them, under canonical names) is a child
// in the caller's trace, and one without a traceparent starts a trace.
func TestStartRootJoins(t *testing.T) {
	tr := sdkTracer(t, true)
	const trace1, span1 = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	h := http.Header{}
	h.Set("Traceparent", "00-"+trace1+"-"+span1+"-01")
	h.Set("Tracestate", "vendor=1")
	_, sp := tr.StartRoot(context.Background(), "call", trace.SpanKindServer, h)
	sc := sp.SpanContext()
	sp.End()
	if sc.TraceID().String() != trace1 || sc.SpanID().String() == span1 || sc.TraceState().Get("vendor") != "1" {
		t.Errorf("span %v in trace %v, state %q: want a child in the caller's trace %s, its state kept",
			sc.SpanID(), sc.TraceID(), sc.TraceState(), trace1)
	}
	if ro, ok := sp.(sdktrace.ReadOnlySpan); !ok || ro.Parent().SpanID().String() != span1 || !ro.Parent().IsRemote() {
		t.Errorf("parent %v, want the caller's span %s", sp, span1)
	}

	_, sp = tr.StartRoot(context.Background(), "call", trace.SpanKindServer, http.Header{"Content-Type": {"application/json"}})
	defer sp.End()
	if sp.SpanContext().TraceID().String() == trace1 || !sp.SpanContext().IsValid() {
		t.Errorf("no traceparent: span context %v, want a new trace", sp.SpanContext())
	}
}
