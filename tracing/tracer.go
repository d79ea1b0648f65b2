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

// Start starts a child of the span in ctx, when that span records: under a
// call the sampler dropped, or outside any traced work, it returns ctx as
// it is and a span that records nothing. End the span in every case.
func (t *Tracer) Start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if t == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, noSpan
	}
	return t.t.Start(ctx, name, trace.WithSpanKind(kind))
}

// StartRoot starts the span of a unit of work of its own (a client call, a
// stalker fetch): a new trace, the sampler's to keep or drop, or, when
// header holds a W3C traceparent, a child in the caller's trace.
func (t *Tracer) StartRoot(ctx context.Context, name string, kind trace.SpanKind, header http.Header) (context.Context, trace.Span) {
	if t == nil {
		return ctx, noSpan
	}
	if header != nil && header.Get("Traceparent") != "" {
		ctx = w3c.Extract(ctx, propagation.HeaderCarrier(header))
	}
	return t.t.Start(ctx, name, trace.WithSpanKind(kind))
}

// Propagates reports whether upstream requests carry the trace context
// (PropagateUpstream).
func (t *Tracer) Propagates() bool { return t != nil && t.propagate }

// Inject returns h with the W3C trace context of ctx's span added, in a
// copy, when the tracer propagates and ctx holds a valid span; else h
// itself.
func (t *Tracer) Inject(ctx context.Context, h http.Header) http.Header {
	if !t.Propagates() || !trace.SpanContextFromContext(ctx).IsValid() {
		return h
	}
	out := h.Clone()
	w3c.Inject(ctx, propagation.HeaderCarrier(out))
	return out
}
