package tracing

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Tracer starts venn's spans. A nil *Tracer is tracing off: it starts
// nothing and allocates nothing, so components hold one unconditionally.
type Tracer struct {
	t         trace.Tracer
	propagate bool // PropagateUpstream
}

// FromTracer wraps an OpenTelemetry tracer (tests, benchmarks); nil: off.
func FromTracer(t trace.Tracer, propagateUpstream bool) *Tracer {
	if t == nil {
		return nil
	}
	return &Tracer{t: t, propagate: propagateUpstream}
}

// w3c is the W3C trace context (traceparent, tracestate), the one format
// venn reads from clients and sends to upstreams.
var w3c propagation.TraceContext

// noSpan is what a Start that starts nothing returns: the API's no-op span,
// a value that costs no allocation.
var noSpan = trace.SpanFromContext(context.Background())

// kindOptions holds each span kind's start option, built once: an option
// made per span is an interface value, one allocation each time.
var kindOptions = func() (o [trace.SpanKindConsumer + 1][]trace.SpanStartOption) {
	for k := range o {
		o[k] = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKind(k))}
	}
	return o
}()

func startOptions(kind trace.SpanKind) []trace.SpanStartOption {
	if kind < 0 || int(kind) >= len(kindOptions) {
		kind = trace.SpanKindInternal
	}
	return kindOptions[kind]
}

// Start starts a child of the span in ctx, when that span records: under a
// call the sampler dropped, or outside any traced work, it returns ctx as
// it is and a span that records nothing. End the span in every case.
func (t *Tracer) Start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if t == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, noSpan
	}
	return t.t.Start(ctx, name, startOptions(kind)...)
}

// StartRoot starts the span of a unit of work of its own (a client call, a
// stalker fetch): a new trace, the sampler's to keep or drop, or, when
// header holds a W3C traceparent, a child in the caller's trace.
func (t *Tracer) StartRoot(ctx context.Context, name string, kind trace.SpanKind, header http.Header) (context.Context, trace.Span) {
	if t == nil {
		return ctx, noSpan
	}
	// Indexed under the canonical name, not Get: Get canonicalises its
	// argument on every call, and this runs on every traced call.
	if len(header["Traceparent"]) > 0 {
		ctx = w3c.Extract(ctx, canonical(header))
	}
	return t.t.Start(ctx, name, startOptions(kind)...)
}

// Propagates reports whether upstream requests carry the trace context
// (PropagateUpstream).
func (t *Tracer) Propagates() bool { return t != nil && t.propagate }

// Carries reports whether a request sent under ctx carries the W3C trace
// context: the tracer propagates and ctx holds a valid span.
func (t *Tracer) Carries(ctx context.Context) bool {
	return t.Propagates() && trace.SpanContextFromContext(ctx).IsValid()
}

// InjectInto writes the W3C trace context of ctx's span into h, which is
// the caller's own (never a template other requests share): traceparent,
// and tracestate, or its removal when the span has none, so that a header
// map reused from an earlier request says this span's alone.
func InjectInto(ctx context.Context, h http.Header) {
	delete(h, "Tracestate")
	w3c.Inject(ctx, canonical(h))
}

// canonical is a carrier that reads and writes the two W3C headers under
// their canonical names without http.Header's canonicalising (which scans
// the name on every Get, and allocates in Set for names outside its table,
// as traceparent is).
type canonical http.Header

func (c canonical) Get(key string) string {
	if v := c[canonicalName(key)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c canonical) Keys() []string { return propagation.HeaderCarrier(c).Keys() }

func (c canonical) Set(key, value string) { c[canonicalName(key)] = []string{value} }

// canonicalName is key as http.Header stores it, the W3C names without
// scanning them.
func canonicalName(key string) string {
	switch key {
	case "traceparent":
		return "Traceparent"
	case "tracestate":
		return "Tracestate"
	}
	return http.CanonicalHeaderKey(key)
}
